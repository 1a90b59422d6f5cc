"""What ``seasons/lua/write.lua`` is sent and what it answers: the batch of one board as KEYS
and one JSON argument (:func:`script_args`; its fields are described in the script's header),
and the reply as a result or a refusal (:func:`parse_reply`). :mod:`seasons.writes` runs it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from typing import Any, NamedTuple

from redis.exceptions import ResponseError

from seasons import calendar, ties
from seasons import windows as win
from seasons.config.settings import BoardSettings, Settings
from seasons.errors import BatchIdReused, BatchRejected
from seasons.events import META_MAX_BYTES, META_MAX_FIELDS, ValidEvent
from seasons.keys import STATE_FOLDED, Keys
from seasons.league_joins import batch_league, group_league, league_keys
from seasons.models import HeldRef, Standing, WriteResult

# How long the script keeps each board's result of a batch id, and each event id it applied:
# a resend within it answers the original result.
DEDUPE_WINDOW = timedelta(hours=48)
# The shape of write.lua's argument (its header), which the script checks: a batch of
# another version, or with other columns of events, is refused before anything is done.
PROTOCOL = 9
EVENT_FIELDS = ("group", "index", "member", "value", "event_id", "metadata", "ts")
# How long held records outlive retention (a day: the keys' EXPIREAT), and rate counters
# their interval (a minute: a batch whose `now` is a little behind still finds its counter).
HELD_SLACK = 86_400
RATE_SLACK = 60
# How write.lua's refusals of a malformed batch begin.
REFUSAL = "write.lua: "
# What write.lua answers, having written nothing, when a hidden member's events need the
# twin keys and the call did not name them: the call is sent again with `twins`.
TWINS = "twins"


class RollupTarget(NamedTuple):
    """A board that an event of one local day is written through to, besides its day board."""

    window: str  # named in the batch for whoever reads it; write.lua treats every one alike
    key: str
    weight: float  # the weight of that day's scores in the period
    expire_at: int | None  # EXPIREAT of the key; None: it never expires (alltime)
    # What a trimmed board (max_entries > 0) recomputes a member new to it from, and what a
    # set board looks for a later value in: each (day key, weight, day) of the period up to the
    # horizon, in order; empty for a board that is neither.
    days: list[tuple[str, float, str]]
    # A window that never ends (alltime): its base, {"key", "through"}: the sorted set every
    # closed day is folded into, and the state field naming the last day folded (an event
    # of a day up to that one is applied to the base too). None for the other windows.
    base: dict[str, str] | None = None
    # ties = "earliest": the board's reach set (member -> when it reached its score), written
    # with the board; None for a board that keeps none.
    reached: str | None = None
    # ties = "dense": the board's distinct set (one member per distinct score), kept with the
    # board; None for a board that keeps none.
    distinct: str | None = None


def rollup_targets(
    board: str,
    day: date,
    settings: Settings,
    keys: Keys,
    horizon: date | None,
    store: str | None = None,
) -> list[RollupTarget]:
    """The boards that events of ``day`` write through to: the period holding ``day`` of each
    rolled-up window the board keeps (``seasons.windows.SPECS``), if there is one (a day
    between seasons has no season). ``horizon`` is the last day a trimmed or set board
    recomputes from (the later of today and ``day``, plus one); None for a board that is
    neither.

    The days of the alltime window are those whose keys may still exist (from the day of
    ``horizon - retention`` on), and ``day``: the board is its base plus the days after the
    last one folded into it. ``store``: the shard whose keys are named (seasons.shards);
    None: the board's own."""
    cfg = settings.boards[board]
    rule = ties.of(cfg)
    at = board if store is None else store
    targets = []
    for window in win.rolled_up(cfg):
        period = window.period_of_day(day, settings)
        if period is None:
            continue
        if horizon is None:
            span: list[date] = []
        elif period.endless:
            # The day before the horizon is today (or a day of the future tolerance): one
            # more day back covers a key that is still there a little past its expiry.
            oldest = horizon - timedelta(days=settings.retention.days + 2)
            span = sorted({day, *_days(oldest, horizon)})
        else:
            span = [d for d in period.days() if d <= horizon]
        targets.append(
            RollupTarget(
                window.name,
                keys.window(at, window.name, period.id),
                window.weight(cfg, day, settings),
                win.expire_at(period, settings),
                [(keys.day(at, d), window.weight(cfg, d, settings), d.isoformat()) for d in span],
                {"key": keys.base(at, window.name), "through": STATE_FOLDED + window.name}
                if period.endless
                else None,
                keys.reached(at, window.name, period.id) if rule.reach_set else None,
                keys.distinct(at, window.name, period.id) if rule.distinct_set else None,
            )
        )
    return targets


def _days(first: date, last: date) -> list[date]:
    """``first`` .. ``last`` inclusive (empty if ``last`` is before ``first``)."""
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def script_args(
    board: str,
    events: list[ValidEvent],
    settings: Settings,
    keys: Keys,
    now: datetime,
    *,
    batch_id: str,
    digest: str,
    backfill: bool = False,
    check_only: bool = False,
    standing: str | None = None,
    approve: str | None = None,
    twins: bool = False,
    store: str | None = None,
) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of ``write.lua`` for the events of one board: every key the batch
    names, and the batch as one JSON argument (its fields are described in the script's
    header). ``standing``: a window of the board, on which the script answers each event's
    standing after the batch (:func:`resolve_standing_window` picks it). ``approve``: the
    id of the held event this call applies (``events`` is that one event). ``twins``: each
    group also names its twin keys (:func:`twin_group`), where the events of a hidden member
    go; the script asks for them (:data:`TWINS`) when it meets one without. ``store``: the
    shard of a sharded board whose keys the call names (every event's member is in it,
    seasons.shards); None: the board's own keys."""
    cfg: BoardSettings = settings.boards[board]
    at = board if store is None else store
    board_keys = {
        "state": keys.state(at),
        "events": keys.events(at),
        "meta": keys.meta(at),
        "batches": keys.batches(at),
        "batch_results": keys.batch_results(at),
        "scratch": keys.tmp(at, "union"),  # a set board's rebuild builds its union there
        "moderation": keys.moderation(at),
    }
    declared = dict.fromkeys(board_keys.values())  # an ordered set
    league = batch_league(board, settings, keys)
    declared.update(dict.fromkeys(league_keys(league)))
    held, limits = held_args(at, cfg, settings, keys, now, approve is not None)
    if held is not None:
        declared.update(dict.fromkeys((held["record"], held["order"], held["done"])))
    if limits is not None and limits["rate"] is not None:
        declared[limits["rate"]["key"]] = None
    today = calendar.local_day(now, settings.zone)
    days = sorted({ev.day for ev in events})
    groups = []
    for day in days:
        day_p = win.period_of_day("day", day, settings)
        season_p = win.period_of_day("season", day, settings)
        assert day_p is not None
        # A trimmed board recomputes a member new to it from its days; a set board reads
        # whether a later day has the member (then that day's value stands).
        horizon = (
            max(today, day) + timedelta(days=1)
            if cfg.max_entries > 0 or cfg.aggregate == "set"
            else None
        )
        rollups = rollup_targets(board, day, settings, keys, horizon, at)
        day_key = keys.day(at, day)
        day_id, rule = day.isoformat(), ties.of(cfg)
        day_reached = keys.reached(at, "day", day_id) if rule.reach_set else None
        day_distinct = keys.distinct(at, "day", day_id) if rule.distinct_set else None
        declared[day_key] = None
        for extra in (day_reached, day_distinct):
            if extra is not None:
                declared[extra] = None
        for r in rollups:
            declared[r.key] = None
            for extra in (r.reached, r.distinct):
                if extra is not None:
                    declared[extra] = None
            declared.update(dict.fromkeys(k for k, _, _ in r.days))
            if r.base is not None:
                declared[r.base["key"]] = None
        group: dict[str, Any] = {
            "day": day.isoformat(),
            "season": season_p.id if season_p else None,
            "key": day_key,
            "reached": day_reached,
            "distinct": day_distinct,
            "expire_at": win.expire_at(day_p, settings),
            "rollups": [r._asdict() for r in rollups],
        }
        if league is not None:
            group["league"] = group_league(board, day, settings, keys)
            declared.update(dict.fromkeys(league_keys(group["league"])))
        if twins:
            group["twin"] = twin_group(group, keys)
            declared.update(dict.fromkeys(_named(group["twin"])))
        groups.append(group)
    group_of = {day: n for n, day in enumerate(days)}

    def row(ev: ValidEvent) -> list[Any]:  # the columns of EVENT_FIELDS
        ts = ev.ts.timestamp()  # what reach sets record (ties = "earliest")
        return [group_of[ev.day], ev.index, ev.member, ev.value, ev.event_id, ev.metadata, ts]

    stamp = now.timestamp()
    batch = {
        "protocol": PROTOCOL,
        "now": stamp,
        "aggregate": cfg.aggregate,
        "order": cfg.order,
        "max_entries": cfg.max_entries,
        "dedupe_cutoff": stamp - DEDUPE_WINDOW.total_seconds(),
        "events_expire_at": int(stamp + DEDUPE_WINDOW.total_seconds()) + 1,
        "backfill": backfill,
        "check_only": check_only,
        "meta_max_fields": META_MAX_FIELDS,
        "meta_max_bytes": META_MAX_BYTES,
        "batch_id": batch_id,
        "digest": digest,
        "keys": board_keys,
        "groups": groups,
        "event_fields": EVENT_FIELDS,
        "events": [row(ev) for ev in events],  # in batch order
        "standing": None if standing is None else {"window": standing, "ties": cfg.ties},
        "held": held,
        "limits": limits,
        "approve": approve,
        "twins": twins,
        "league": league,
    }
    text = json.dumps(batch, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return list(declared), [text]


def twin_group(group: dict[str, Any], keys: Keys) -> dict[str, Any]:
    """The twin of a batch group: the same day, season, weights and EXPIREATs, each key
    replaced by its twin (:meth:`Keys.hidden`), and no distinct set (twins have none)."""

    def twin(key: str | None) -> str | None:
        return None if key is None else keys.hidden(key)

    out = {
        **group,
        "key": twin(group["key"]),
        "reached": twin(group["reached"]),
        "distinct": None,
        "rollups": [
            {
                **r,
                "key": twin(r["key"]),
                "reached": twin(r["reached"]),
                "distinct": None,
                "days": [(twin(k), w, d) for k, w, d in r["days"]],
                "base": None if r["base"] is None else {**r["base"], "key": twin(r["base"]["key"])},
            }
            for r in group["rollups"]
        ],
    }
    if "league" in group:
        out["league"] = None  # a league's keys have no twins: a hidden member joins the same
    return out


def _named(group: dict[str, Any]) -> Iterator[str]:
    """Every key a (twin) group names."""
    yield group["key"]
    if group["reached"] is not None:
        yield group["reached"]
    for r in group["rollups"]:
        yield r["key"]
        if r["reached"] is not None:
            yield r["reached"]
        yield from (k for k, _, _ in r["days"])
        if r["base"] is not None:
            yield r["base"]["key"]


def held_args(
    board: str, cfg: BoardSettings, settings: Settings, keys: Keys, now: datetime, approving: bool
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The batch's ``held`` and ``limits`` (write.lua's header): None, None on a board
    without limits (unless ``approving`` a held event). The rate counter is the one of the
    interval of ``per`` holding ``now``: events are counted when they arrive."""
    rate, gain = cfg.member_rate, cfg.max_period_gain
    if rate is None and gain is None and not approving:
        return None, None
    stamp = now.timestamp()
    held = {
        "record": keys.held(board),
        "order": keys.held_order(board),
        "done": keys.held_done(board),
        "cutoff": stamp - settings.retention.total_seconds(),
        "expire_at": int(stamp + settings.retention.total_seconds() + HELD_SLACK),
    }
    if rate is None and gain is None:
        return held, None
    rate_args = None
    if rate is not None:
        per = int(rate.per.total_seconds())
        start = int(stamp // per) * per
        rate_args = {
            "key": keys.rate(board, start),
            "events": rate.events,
            "expire_at": start + per + RATE_SLACK,
        }
    gain_args = None if gain is None else {"window": gain.window, "value": gain.value}
    return held, {"rate": rate_args, "gain": gain_args}


def parse_reply(
    reply: list[Any],
    batch_id: str | None = None,
    standing: tuple[str, list[ValidEvent], Settings] | None = None,
) -> WriteResult:
    """Turn the script's reply into a result, or raise :class:`BatchRejected` (a closed day
    or season, metadata too large once merged) or :class:`BatchIdReused`. ``standing``: the
    window the call was asked standings on, its events in batch order and the settings,
    which name each event's period."""
    kind = _text(reply[0])
    if kind == "applied":
        held = int(reply[3])
        rows = reply[5 : 5 + 3 * held]
        result = WriteResult(
            applied=int(reply[1]),
            duplicates=int(reply[2]),
            batch_id=batch_id,
            held=held,
            held_events=[
                HeldRef(index=int(i), event_id=_text(e), reason=_text(r))
                for i, e, r in zip(rows[::3], rows[1::3], rows[2::3], strict=True)
            ]
            or None,
            banned=int(reply[4]),
        )
        if standing is not None:
            result.standings = _standings(reply[5 + 3 * held :], *standing)
        return result
    if kind == "reused":
        raise BatchIdReused(_text(reply[1]), {"batch_id": batch_id})
    if kind == "rejected":
        items = reply[1:]
        raise BatchRejected(
            [
                {
                    "index": int(items[i]),
                    "field": _text(items[i + 1]),
                    "code": _text(items[i + 2]),
                    "message": _text(items[i + 3]),
                }
                for i in range(0, len(items), 4)
            ]
        )
    raise RuntimeError(f"write.lua answered {reply!r}, which is none of its replies")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _standings(
    rows: list[Any], window: str, events: list[ValidEvent], settings: Settings
) -> list[Standing]:
    """The standing of each event from write.lua's (rank, score) pairs, in the same order:
    the score is Redis's text of it (the double it holds, read exactly), nil off the board;
    after them the 1-based events whose standing is an open self-view (``hidden``)."""
    pairs, flagged = rows[: 2 * len(events)], {int(i) for i in rows[2 * len(events) :]}
    if len(pairs) != 2 * len(events):
        raise RuntimeError(f"write.lua answered {len(rows)} values for {len(events)} standings")
    spec = win.spec(window)
    out = []
    for n, (ev, rank, score) in enumerate(zip(events, pairs[::2], pairs[1::2], strict=True)):
        period = spec.period_of_day(ev.day, settings)
        out.append(
            Standing(
                index=ev.index,
                board=ev.board,
                member=ev.member,
                window=window,
                period=None if period is None else period.id,
                rank=None if rank is None else int(rank),
                score=None if score is None else float(score),
                hidden=n + 1 in flagged,
            )
        )
    return out


@contextmanager
def refused() -> Iterator[None]:
    """write.lua's refusal of a batch that does not match its protocol, as RuntimeError: a
    bug of Seasons (script_args and the script disagree), not the caller's input. The
    script checks the whole batch before it reads or writes anything, so nothing of that
    call was written; a multi-board batch meets it in its check-only pass."""
    try:
        yield
    except ResponseError as exc:
        if REFUSAL not in str(exc):
            raise
        raise RuntimeError(
            f"the write script refused the batch, nothing written ({exc}): a bug of Seasons, "
            "its Python and Lua halves disagree"
        ) from exc
