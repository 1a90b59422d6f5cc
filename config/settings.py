"""Seasons settings: environment over a TOML file over defaults (README.md#configuration).

Settings are built once at the edge of a process (CLI, HTTP server, worker) with
:func:`seasons.config.load_settings` and passed down; nothing here reads the environment at
import time. The sources are pydantic-settings' own (:meth:`Settings.settings_customise_sources`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import date, timedelta
from ipaddress import ip_network
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.sources.utils import parse_env_vars
from redis.connection import parse_url

from seasons.composite import CompositeScore
from seasons.config.durations import Duration, PositiveDuration
from seasons.config.league import LeagueSettings
from seasons.config.rewards import RewardTier
from seasons.vocabulary import MAX_EXACT, WINDOWS, EventType, Ties, overlap, parse_ranks

# At most this many shards per board (seasons.shards): a read of a sharded board asks
# every shard, so its cost grows with the count.
MAX_SHARDS = 256
# Why dense ties are refused on sharded boards (docs/sharding.md#what-a-sharded-board-keeps).
SHARDED_TIES = (
    "a dense rank counts distinct scores, which shards cannot sum (two shards may hold "
    'the same score); use ties = "member", "shared" or "earliest"'
)

# A cap on weights, so that no weighted aggregate of values within ±2^53 can overflow a double
# (with room to spare: 2^53 x 10^6 x 3660 days is about 3e25); no board needs more.
MAX_WEIGHT = 1_000_000.0
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
NAME_RE = r"^[A-Za-z0-9_-]{1,64}$"
NAMESPACE_RE = r"^[a-z0-9_-]{1,32}$"
HOOK_NAME_RE = r"^[a-z0-9_-]{1,32}$"
ENV_PREFIX = "SEASONS_"
ENV_NESTED_DELIMITER = "__"
# The longest calendar month; month_weights has one weight per day of the month at most.
MONTH_DAYS = 31


def _exact_before(value: Any) -> Any:
    """An integer past 2^53 (or text of one, from the environment) would be rounded to a
    neighbouring double silently by the float it becomes: refused as it was written."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    whole = value
    if isinstance(value, str):
        try:
            whole = int(value.strip(), 10)
        except ValueError:
            return value  # a float's text, or not a number: the float type decides
    if isinstance(whole, int) and abs(whole) > MAX_EXACT:
        bits = whole.bit_length()
        size = str(whole) if bits <= 64 else f"<an integer of {bits} bits>"
        raise ValueError(f"{size} is outside ±2^53 (values must stay exact in a double)")
    return value


def _exact_after(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{value} is not a finite number")
    if value is not None and abs(value) > MAX_EXACT:
        raise ValueError(f"{value!r} is outside ±2^53 (values must stay exact in a double)")
    return value


def number_text(value: float) -> str:
    """A bound or value as written: whole numbers without ``.0`` and in full (a packed
    composite score reads as its digits, not as ``9.00719e+15``)."""
    return str(int(value)) if value.is_integer() else repr(value)


# A bound on event values: a finite number within ±2^53, the range of a value itself
# (seasons.events.check_value), so that comparing a value with it is exact.
ExactBound = Annotated[float | None, BeforeValidator(_exact_before), AfterValidator(_exact_after)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RedisSettings(_Section):
    url: str = "redis://127.0.0.1:6379/0"
    password: str | None = None
    cluster: bool = False
    wait_replicas: int = Field(default=0, ge=0, le=16)
    wait_timeout_ms: int = Field(default=1000, ge=1)
    socket_timeout: float = Field(default=10, gt=0)
    # Any maxmemory-policy but noeviction lets Redis drop Seasons' keys (day boards, event ids,
    # job state) without a word: the worker and the server refuse to run on it unless this is
    # set deliberately (they then warn at start and report it in status and /readyz).
    allow_eviction: bool = False

    @field_validator("url")
    @classmethod
    def _scheme(cls, url: str) -> str:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            # The URL is not repeated: it may hold a password.
            raise ValueError(
                "must start with redis://, rediss:// or unix:// (e.g. redis://127.0.0.1:6379/0)"
            )
        try:
            parse_url(url)  # redis-py's own reading of the URL, as the clients will read it
        except ValueError:
            # redis-py's reason is not repeated: it may quote a password typed as a port.
            raise ValueError(
                "is not a URL redis-py can read: check the port (a number), an IPv6 address "
                "in [brackets] and the query parameters' values (e.g. socket_timeout=5)"
            ) from None
        return url


class SeasonSpan(_Section):
    """One explicit season: local days ``start`` .. ``end``, both inclusive."""

    id: str = Field(pattern=NAME_RE)
    start: date
    end: date

    @model_validator(mode="after")
    def _ordered(self) -> SeasonSpan:
        if self.end < self.start:
            raise ValueError(f"season {self.id!r}: end {self.end} is before start {self.start}")
        return self


class SeasonsSettings(_Section):
    length_days: int = Field(default=28, ge=1, le=3660)
    anchor: date = date(2026, 1, 5)
    list: tuple[SeasonSpan, ...] = ()

    @field_validator("list")
    @classmethod
    def _disjoint(cls, spans: tuple[SeasonSpan, ...]) -> tuple[SeasonSpan, ...]:
        ids = [s.id for s in spans]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"season ids must be unique; repeated: {', '.join(dupes)}")
        ordered = sorted(spans, key=lambda s: s.start)
        for a, b in zip(ordered, ordered[1:], strict=False):
            if b.start <= a.end:
                raise ValueError(f"seasons {a.id!r} and {b.id!r} overlap")
        return tuple(ordered)


class CompositePart(_Section):
    """One part of a composite score (:class:`seasons.composite.CompositeScore`): its name
    and its width in decimal digits. The first part, the most significant, may leave out
    ``digits``: it takes the room left under 2^53."""

    name: str
    digits: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _a_table(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            raise ValueError(
                f"each part is a table of its name and digits, such as "
                f'{{ name = "power", digits = 10 }} (the first may leave out digits); got {value!r}'
            )
        return value


class MemberRate(_Section):
    """``boards.<b>.member_rate``: a member's accepted events on the board per interval of
    ``per`` (aligned to the epoch, counted by arrival) beyond ``events`` are held
    (docs/writes.md#held-events)."""

    events: int = Field(ge=1, le=1_000_000_000)
    per: PositiveDuration

    @field_validator("per")
    @classmethod
    def _whole_seconds(cls, per: timedelta) -> timedelta:
        if per.total_seconds() != int(per.total_seconds()):
            raise ValueError(f"must be whole seconds, got {per.total_seconds():g} s")
        return per


class MaxPeriodGain(_Section):
    """``boards.<b>.max_period_gain``: an event that would take a member's score on the
    board of ``window`` (of the event's period) above ``value`` is held (sum boards)."""

    value: float = Field(allow_inf_nan=False)
    window: str

    @field_validator("window")
    @classmethod
    def _known_window(cls, window: str) -> str:
        if window not in WINDOWS:
            raise ValueError(f"unknown window {window!r}: the windows are {', '.join(WINDOWS)}")
        return window


class BoardSettings(_Section):
    # sum, max, min: of the member's scores; set: its latest score replaces the one before.
    aggregate: Literal["sum", "max", "min", "set"] = "sum"
    order: Literal["desc", "asc"] = "desc"
    # member: equal scores in member byte order, ranks 1, 2, 3; shared: 1, 1, 3; dense: 1, 1, 2;
    # earliest: equal scores in the order their members reached them (then member bytes),
    # ranks 1, 2, 3, from a reach set kept beside each board.
    ties: Ties = "member"
    # The windows the board keeps (seasons.windows.SPECS names them all). Every board
    # keeps day (what the others are rolled up from) and season (what is archived); week is
    # kept by default, month on request: each window kept costs one more write per event.
    windows: tuple[str, ...] = ("day", "week", "season")
    week_weights: tuple[float, ...] = (1, 1, 1, 1, 1, 1, 1)
    season_weights: tuple[float, ...] = ()
    # By day of the month: index 0 is the 1st. Days past the list weigh 1.
    month_weights: tuple[float, ...] = ()
    max_entries: int = Field(default=0, ge=0)
    # The parts packed into each score, most significant first (seasons.composite): reads
    # answer them beside each score. Empty: a plain score.
    composite: tuple[CompositePart, ...] = ()
    # Reward tiers, first match wins ([[boards.<b>.rewards]], seasons.results): the season
    # close grants them from the final standings.
    rewards: tuple[RewardTier, ...] = ()
    # Inclusive bounds on each event's value (on a composite board: the packed score); an
    # event outside them is refused with its batch (seasons.events, out_of_bounds). They
    # bound what one event brings, not the aggregated score. None: no bound on that side.
    min_value: ExactBound = None
    max_value: ExactBound = None
    # Per-member limits checked by the write script; an event over one is held for review,
    # not applied (docs/writes.md#held-events). None: no limit.
    member_rate: MemberRate | None = None
    max_period_gain: MaxPeriodGain | None = None
    # Cohorts in tiers, promoted and relegated at each period's end (docs/leagues.md). None:
    # no league.
    league: LeagueSettings | None = None
    # How many hash tags the board's live keys spread over (seasons.shards,
    # docs/sharding.md): 1 keeps every key in the slot {<board>}; S > 1 puts each member's
    # live keys in the slot {<board>#i} of its shard, so that the board's writes run on up
    # to S masters of a Redis Cluster. Changing it is `seasons reshard`.
    shards: int = Field(default=1, ge=1, le=MAX_SHARDS)

    @field_validator("windows")
    @classmethod
    def _known_windows(cls, found: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [w for w in found if w not in WINDOWS]
        if unknown:
            raise ValueError(f"unknown window {unknown[0]!r}: the windows are {', '.join(WINDOWS)}")
        missing = [w for w in ("day", "season") if w not in found]
        if missing:
            raise ValueError(
                f"every board keeps the {missing[0]} window: add {missing[0]!r} to the list"
            )
        return tuple(w for w in WINDOWS if w in found)  # the table's order, once each

    @field_validator("week_weights")
    @classmethod
    def _seven(cls, w: tuple[float, ...]) -> tuple[float, ...]:
        if len(w) != 7:
            raise ValueError(
                f"needs exactly 7 weights, one per day of the week from week_start; got {len(w)}"
            )
        return w

    @field_validator("month_weights")
    @classmethod
    def _at_most_a_month(cls, w: tuple[float, ...]) -> tuple[float, ...]:
        if len(w) > MONTH_DAYS:
            raise ValueError(
                f"takes at most {MONTH_DAYS} weights, one per day of the month from the 1st;"
                f" got {len(w)}"
            )
        return w

    @field_validator("week_weights", "season_weights", "month_weights")
    @classmethod
    def _non_negative(cls, w: tuple[float, ...]) -> tuple[float, ...]:
        for i, x in enumerate(w, start=1):
            if not math.isfinite(x) or x < 0:
                raise ValueError(f"weight {i} is {x}; weights must be finite numbers >= 0")
            if x > MAX_WEIGHT:
                raise ValueError(
                    f"weight {i} is {x:g}; weights must be at most {MAX_WEIGHT:g}, so that a"
                    " weighted score stays a finite, usable double"
                )
        return w

    @field_validator("composite")
    @classmethod
    def _composite_layout(cls, parts: tuple[CompositePart, ...]) -> tuple[CompositePart, ...]:
        if parts:
            CompositeScore([(p.name, p.digits) for p in parts])  # ValueError names the part
        return parts

    @field_validator("rewards")
    @classmethod
    def _tiers_disjoint(cls, tiers: tuple[RewardTier, ...]) -> tuple[RewardTier, ...]:
        """Rank ranges may not share a rank; a top_percent tier after a larger one would
        never match."""
        ranged = [(i, parse_ranks(t.ranks)) for i, t in enumerate(tiers) if t.ranks is not None]
        found = overlap([r for _, r in ranged])
        if found is not None:
            (i, _), (j, _) = ranged[found[0]], ranged[found[1]]
            raise ValueError(
                f"rewards[{j}].ranks {tiers[j].ranks!r} overlaps rewards[{i}].ranks "
                f"{tiers[i].ranks!r}: a rank gets one tier; make the ranges disjoint"
            )
        widest: tuple[int, float] | None = None
        for i, t in enumerate(tiers):
            if t.top_percent is None:
                continue
            if widest is not None and t.top_percent <= widest[1]:
                raise ValueError(
                    f"rewards[{i}].top_percent {t.top_percent:g} never matches: "
                    f"rewards[{widest[0]}].top_percent {widest[1]:g} comes first and holds "
                    "every member it would; list the smaller percent first"
                )
            widest = (i, t.top_percent)
        return tiers

    @field_validator("min_value", "max_value")
    @classmethod
    def _bounds_usable(cls, bound: float | None, info: ValidationInfo) -> float | None:
        """min_value <= max_value; on a composite board, inside the scores its layout builds
        (fields are validated in order: composite and min_value come before)."""
        if bound is None:
            return None
        low = info.data.get("min_value")
        if info.field_name == "max_value" and low is not None and bound < low:
            raise ValueError(
                f"{number_text(bound)} is below min_value {number_text(low)}: no value would "
                "be accepted; make min_value <= max_value"
            )
        parts = info.data.get("composite")
        if parts:
            top = CompositeScore([(p.name, p.digits) for p in parts]).max_score
            if not 0 <= bound <= top:
                raise ValueError(
                    f"{number_text(bound)} is outside the scores of the board's composite "
                    f"layout (0 to {top}): a bound compares the packed score (CompositeScore."
                    "build of the parts at the bound)"
                )
        return bound

    def broken_bound(self, value: float) -> tuple[Literal["min_value", "max_value"], float] | None:
        """The bound an event's ``value`` breaks (its name and value), or None: bounds are
        inclusive. ``value`` is exact (within ±2^53), so an int compares with it exactly."""
        if self.min_value is not None and value < self.min_value:
            return "min_value", self.min_value
        if self.max_value is not None and value > self.max_value:
            return "max_value", self.max_value
        return None

    def composite_score(self) -> CompositeScore | None:
        """The board's composite layout, or None for plain scores."""
        if not self.composite:
            return None
        return CompositeScore([(p.name, p.digits) for p in self.composite])

    @model_validator(mode="after")
    def _composite_weights(self) -> BoardSettings:
        """A weight that is not a whole number makes scores that split into no parts."""
        if not self.composite:
            return self
        for name in ("week_weights", "season_weights", "month_weights"):
            for i, w in enumerate(getattr(self, name), start=1):
                if w != int(w):
                    raise ValueError(
                        f"composite cannot be combined with weight {i} = {w:g} of {name}: a "
                        "weighted score would not split into its parts; use whole weights"
                    )
        return self

    @model_validator(mode="after")
    def _shards_are_possible(self) -> BoardSettings:
        """What a sharded board cannot keep yet is refused, naming the setting."""
        if self.shards == 1:
            return self
        refused = [
            (self.ties == "dense", 'ties = "dense"', SHARDED_TIES),
            (self.league is not None, "a league", "remove [boards.<b>.league]"),
        ]
        for found, what, fix in refused:
            if found:
                raise ValueError(
                    f"shards = {self.shards} cannot be combined with {what} yet "
                    f"(docs/sharding.md#what-a-sharded-board-keeps): {fix}, or set shards = 1"
                )
        return self

    @model_validator(mode="after")
    def _earliest_is_possible(self) -> BoardSettings:
        """Combinations whose reach times could not be kept exact are refused."""
        if self.ties != "earliest":
            return self
        if self.max_entries > 0:
            raise ValueError(
                f'ties = "earliest" cannot be combined with max_entries > 0 (got '
                f"{self.max_entries}): trimming by rank would cut one of equal scores by "
                "member order, not by the time each was reached; set max_entries = 0"
            )
        if "alltime" in self.windows:
            raise ValueError(
                'ties = "earliest" cannot be combined with the alltime window: its base keeps '
                "no reach times; remove 'alltime' from windows"
            )
        for name in ("week_weights", "season_weights", "month_weights"):
            weights = getattr(self, name)
            if 0 in weights:
                raise ValueError(
                    f'ties = "earliest" cannot be combined with a zero weight in {name} '
                    f"(weight {weights.index(0) + 1}): a day weighing 0 ties every value at 0, "
                    "and its reach times could not be recomputed; use weights > 0"
                )
        return self

    @model_validator(mode="after")
    def _gain_is_possible(self) -> BoardSettings:
        """A gain is a sum's: on other boards an event does not add to a score."""
        gain = self.max_period_gain
        if gain is None:
            return self
        if self.aggregate != "sum":
            raise ValueError(
                f'max_period_gain needs aggregate = "sum" (got {self.aggregate!r}): only a sum '
                "board's score grows by each event's value; remove it or use member_rate"
            )
        if gain.window not in self.windows:
            raise ValueError(
                f"max_period_gain.window {gain.window!r} is not a window the board keeps "
                f"({', '.join(self.windows)})"
            )
        return self

    @model_validator(mode="after")
    def _league_is_possible(self) -> BoardSettings:
        """A league ranks its cohorts on one window the board keeps, whole."""
        league = self.league
        if league is None:
            return self
        if league.window not in self.windows:
            raise ValueError(
                f"league.window {league.window!r} is not a window the board keeps "
                f"({', '.join(self.windows)}): add it to windows"
            )
        if self.max_entries > 0:
            raise ValueError(
                f"a league cannot be combined with max_entries > 0 (got {self.max_entries}): "
                "a trimmed board drops members, who would lose their place in their cohort; "
                "set max_entries = 0"
            )
        return self

    def season_weight(self, week_index: int) -> float:
        """Weight of week ``week_index`` (0-based) of a season; weeks past the list weigh 1."""
        return self.season_weights[week_index] if week_index < len(self.season_weights) else 1.0

    def month_weight(self, day_of_month: int) -> float:
        """Weight of day ``day_of_month`` (1-based, as ``date.day``) of a calendar month; days
        past the list weigh 1."""
        if not 1 <= day_of_month <= MONTH_DAYS:
            # Index -1 or 31 would silently read another day's weight, or 1.
            raise ValueError(f"day of month must be 1..{MONTH_DAYS}, got {day_of_month}")
        weights = self.month_weights
        return weights[day_of_month - 1] if day_of_month <= len(weights) else 1.0


class ArchiveSettings(_Section):
    dir: Path = Path("var/archive")


# 10 000 events (the batch limit) of 128-byte members and event ids with 1 KiB of metadata,
# with room for JSON escaping.
DEFAULT_MAX_BODY = 16 * 1024 * 1024


# The actor name of ``api.admin_token``, and the names Seasons gives actors without a token
# (seasons.audit): no named admin token may take one of them.
ADMIN_TOKEN_NAME = "admin"
RESERVED_ACTORS = (ADMIN_TOKEN_NAME, "local", "python")


class AdminToken(_Section):
    """One named admin token (``api.admin_tokens``): its name is the actor of the audit
    entries of the admin calls it authorises."""

    name: str = Field(pattern=NAME_RE)
    token: str

    @field_validator("token")
    @classmethod
    def _not_empty(cls, token: str) -> str:
        if not token:
            raise ValueError("must not be empty")
        return token


class ApiSettings(_Section):
    write_token: str = ""
    admin_token: str = ""
    # More admin tokens, each with the name that audit entries give as their actor
    # (api.admin_token's is "admin").
    admin_tokens: tuple[AdminToken, ...] = ()
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    # Peers (addresses or networks) whose Forwarded / X-Forwarded-For headers name the client;
    # from any other peer those headers are ignored. Default: none.
    trusted_proxies: tuple[str, ...] = ()
    # Request bodies over this many bytes get 413 (by Content-Length, and while streaming).
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY, ge=1024, le=1024 * 1024 * 1024)
    # A request whose headers (or body) have not all arrived this long after they began gets
    # 408 and its connection is closed (`seasons serve`'s protocol, seasons/http/server.py).
    header_timeout: PositiveDuration = timedelta(seconds=10)
    body_timeout: PositiveDuration = timedelta(seconds=30)
    # `seasons serve` on a non-loopback address with an empty write or admin token refuses to
    # start unless this is true (reads for everyone; writes/admin still from loopback only).
    allow_empty_tokens: bool = False
    # One line per request on the "uvicorn.access" logger (off: it costs CPU on every request).
    access_log: bool = False
    # Server processes of `seasons serve` sharing one port (--workers overrides).
    workers: int = Field(default=1, ge=1, le=64)
    # The board the web page opens on (GET /v1/boards names it); empty: the first board
    # ordered high-first, else the first board.
    default_board: str = ""

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, found: tuple[str, ...]) -> tuple[str, ...]:
        for net in found:
            try:
                ip_network(net, strict=False)
            except ValueError:
                raise ValueError(
                    f"{net!r} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/8)"
                ) from None
        return found

    @model_validator(mode="after")
    def _distinct_admin_tokens(self) -> ApiSettings:
        """Names and tokens unique, no reserved name, no token shared with another setting
        (a write token is never an admin's). Messages name the entries, never a token."""
        seen_names: dict[str, int] = {}
        seen_tokens: dict[str, int] = {}
        for i, t in enumerate(self.admin_tokens):
            where = f"api.admin_tokens[{i}]"
            if t.name in RESERVED_ACTORS:
                raise ValueError(
                    f"{where}.name {t.name!r} is reserved ({', '.join(RESERVED_ACTORS)}: "
                    f"{ADMIN_TOKEN_NAME!r} is api.admin_token's); choose another name"
                )
            if t.name in seen_names:
                raise ValueError(
                    f"{where}.name {t.name!r} repeats api.admin_tokens[{seen_names[t.name]}]"
                    ".name; names must be unique"
                )
            if t.token in seen_tokens:
                raise ValueError(
                    f"{where}.token is the same as api.admin_tokens[{seen_tokens[t.token]}]"
                    ".token; tokens must be unique"
                )
            for other in ("admin_token", "write_token"):
                if t.token == getattr(self, other):
                    raise ValueError(
                        f"{where}.token is the same as api.{other}; tokens must be unique"
                    )
            seen_names[t.name] = i
            seen_tokens[t.token] = i
        return self

    @property
    def admin_configured(self) -> bool:
        """Whether admin calls need a token (api.admin_token or any of api.admin_tokens)."""
        return bool(self.admin_token or self.admin_tokens)


class WorkerSettings(_Section):
    rollup_interval: Duration = timedelta(minutes=1)
    sweep_interval: Duration = timedelta(hours=1)
    heartbeat_interval: Duration = timedelta(seconds=10)
    misfire_grace: Duration = timedelta(minutes=5)
    lock_ttl: Duration = timedelta(minutes=5)
    # Redis unreachable: retry the job after backoff_initial, doubling up to backoff_max.
    backoff_initial: Duration = timedelta(seconds=0.5)
    backoff_max: Duration = timedelta(seconds=30)
    # Boards whose day keys hold more than atomic_union_limit entries are reconciled in
    # slices; the scheduled rollup does that at most once per full_reconcile_interval per
    # board, or at once when the board's weights, aggregate, trim or days changed.
    atomic_union_limit: int = Field(default=20_000, ge=0)
    full_reconcile_interval: Duration = timedelta(hours=1)
    # How often the hooks job delivers the lifecycle events to the webhooks ([[hooks]]).
    hooks_interval: Duration = timedelta(seconds=5)

    @field_validator("hooks_interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration")
        return value


class HookSettings(_Section):
    """One webhook (``[[hooks]]``): the lifecycle events POSTed to ``url``, signed with
    ``secret`` (docs/operations.md#webhooks)."""

    name: str = Field(pattern=HOOK_NAME_RE)
    url: str
    secret: str
    # The event types delivered; empty: every type.
    events: tuple[str, ...] = ()
    # How long after its first attempt an event is retried before it counts as failed.
    max_age: Duration = timedelta(days=1)
    # Each delivery's deadline, over the whole request: connecting, sending and the answer,
    # however the receiver spaces its bytes (seasons/hooks.py).
    timeout: Duration = timedelta(seconds=10)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        try:
            parts = urlsplit(url)
            port_ok = parts.port is None or parts.port > 0  # .port raises on a port of text
        except ValueError:
            port_ok = False
        if not port_ok or parts.scheme not in ("http", "https") or not parts.hostname:
            # The URL is not repeated: it may hold a token.
            raise ValueError(
                "must be an http:// or https:// URL with a host (and a numeric port, if any)"
            )
        return url

    @field_validator("events")
    @classmethod
    def _known_types(cls, found: tuple[str, ...]) -> tuple[str, ...]:
        types = [t.value for t in EventType]
        unknown = [t for t in found if t not in types]
        if unknown:
            raise ValueError(f"unknown event type {unknown[0]!r}: the types are {', '.join(types)}")
        return found

    @field_validator("secret")
    @classmethod
    def _secret(cls, secret: str) -> str:
        if not secret:
            raise ValueError("must not be empty: it signs every delivery")
        return secret

    @field_validator("max_age", "timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration")
        return value

    def wants(self, event_type: str) -> bool:
        """Whether this hook delivers events of ``event_type``."""
        return not self.events or event_type in self.events


class LifecycleSettings(_Section):
    # The lifecycle stream keeps about this many events (XADD MAXLEN ~): older ones are
    # trimmed, with their ids (docs/contract.md#lifecycle-events).
    max_len: int = Field(default=100_000, ge=1, le=100_000_000)


class AuditSettings(_Section):
    # The audit stream keeps about this many entries (XADD MAXLEN ~): older ones are trimmed
    # (seasons.audit, docs/security.md#the-audit-trail).
    max_len: int = Field(default=100_000, ge=1, le=100_000_000)


class RewardsSettings(_Section):
    # A season's results are amended (seasons.amend, docs/fair-play.md) when a member is
    # hidden, banned or made visible within this many days of the season's close; later
    # changes leave them as they stand.
    amend_days: int = Field(default=14, ge=0, le=3660)


class Settings(BaseSettings):
    """All of Seasons' configuration. Build it with :func:`load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix="SEASONS_",
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    namespace: str = Field(default="seasons", pattern=NAMESPACE_RE)
    timezone: str = "UTC"
    week_start: Literal[
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"
    ] = "monday"
    late_grace: Duration = timedelta(hours=1)
    retention: Duration = timedelta(days=35)
    redis: RedisSettings = RedisSettings()
    seasons: SeasonsSettings = SeasonsSettings()
    boards: dict[Annotated[str, Field(pattern=NAME_RE)], BoardSettings] = Field(
        default_factory=dict
    )
    archive: ArchiveSettings = ArchiveSettings()
    api: ApiSettings = ApiSettings()
    worker: WorkerSettings = WorkerSettings()
    hooks: tuple[HookSettings, ...] = ()
    lifecycle: LifecycleSettings = LifecycleSettings()
    audit: AuditSettings = AuditSettings()
    rewards: RewardsSettings = RewardsSettings()

    @field_validator("hooks")
    @classmethod
    def _unique_hooks(cls, hooks: tuple[HookSettings, ...]) -> tuple[HookSettings, ...]:
        names = [h.name for h in hooks]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"hook names must be unique; repeated: {', '.join(dupes)}")
        return hooks

    @field_validator("timezone")
    @classmethod
    def _zone(cls, name: str) -> str:
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"{name!r} is not an IANA time zone; use a name such as UTC, Europe/Istanbul"
                " or America/New_York"
            ) from exc
        return name

    @field_validator("week_start", mode="before")
    @classmethod
    def _weekday_lower(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v

    @model_validator(mode="after")
    def _combinations(self) -> Settings:
        if self.late_grace < timedelta(0):
            raise ValueError("late_grace must not be negative")
        if self.retention <= self.late_grace:
            raise ValueError(
                f"retention ({_iso(self.retention)}) must be longer than late_grace"
                f" ({_iso(self.late_grace)}): day keys would expire while their day still"
                " takes events"
            )
        return self

    @model_validator(mode="after")
    def _default_board_exists(self) -> Settings:
        name = self.api.default_board
        if name and name not in self.boards:
            configured = ", ".join(sorted(self.boards)) or "none"
            raise ValueError(
                f"api.default_board {name!r} is not a configured board (configured: {configured})"
            )
        return self

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def week_start_index(self) -> int:
        return WEEKDAYS.index(self.week_start)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Explicit values > ``SEASONS_*`` environment > the TOML file > defaults.

        No ``.env`` file and no secrets directory. Inside :func:`given_sources` (as
        ``load_settings`` does) the environment and file sources are the ones given; otherwise
        they are the process environment and ``$SEASONS_CONFIG`` or ``./seasons.toml``.
        """
        given = _given_sources.get()
        if given is None:
            toml = TomlConfigSettingsSource(settings_cls, toml_file=config_path(os.environ))
            given = (env_settings, toml)
        return (init_settings, *given)


def config_path(environ: Mapping[str, str]) -> Path | None:
    """The TOML file: ``SEASONS_CONFIG`` if set, else ``./seasons.toml`` if present."""
    named = environ.get("SEASONS_CONFIG")
    if named:
        return Path(named)
    default = Path("seasons.toml")
    return default if default.is_file() else None


class EnvironmentSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading ``environ`` instead of ``os.environ``.

    ``EnvSettingsSource`` (pydantic-settings 2.16) has no parameter for a mapping: its
    constructor reads ``os.environ`` into its public attribute ``env_vars``, which is all that
    its lookups read afterwards (the only other way in is the private ``_load_env_vars``).
    Replacing ``env_vars`` with the mapping, normalised by the library's ``parse_env_vars``,
    keeps every rule of the library: prefix, ``__`` nesting, JSON for lists and tables.
    """

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]):
        super().__init__(settings_cls)
        self.env_vars = parse_env_vars(
            environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


# The environment and file sources of the load_settings call running in this thread or task:
# settings_customise_sources is called by pydantic-settings with a fixed signature, so this is
# the one way to hand it sources built for one call.
_given_sources: ContextVar[tuple[PydanticBaseSettingsSource, ...] | None] = ContextVar(
    "seasons_given_sources", default=None
)


@contextmanager
def given_sources(
    environment: PydanticBaseSettingsSource, toml: PydanticBaseSettingsSource
) -> Iterator[None]:
    """Within this block, ``Settings(...)`` reads these sources instead of the process's."""
    token = _given_sources.set((environment, toml))
    try:
        yield
    finally:
        _given_sources.reset(token)


def _iso(d: timedelta) -> str:
    """``d`` as an ISO 8601 duration, the form the settings are written in (``P1DT2H``)."""
    total = d.total_seconds()
    days, rest = divmod(abs(total), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    time = "".join(f"{v:g}{u}" for v, u in ((hours, "H"), (minutes, "M"), (seconds, "S")) if v)
    text = "P" + (f"{days:g}D" if days else "") + (f"T{time}" if time else "")
    return ("-" if total < 0 else "") + (text if text != "P" else "PT0S")
