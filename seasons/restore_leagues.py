"""League periods back after a data loss (docs/leagues.md#restore): ``restore --all`` checks
and loads every league archive a close wrote (:mod:`seasons.jobs.league_close`), ``restore
FILE`` one of them.

Each ``<archive.dir>/<ns>/<B>/league/<window>-<P>.jsonl.gz`` of a board whose league keeps
that ``window`` is checked before anything is written: its manifest (present, of board B and
period P), the file against it (sha256, count, score sum), P a period of the window that has
ended, every line an outcome (``seasons.leagues.Outcome``: the fields, their types, member ids
by the write path's rule, sorted by member bytes, each once), and the claims log
``league-<P>.claims.jsonl`` in the folder above ``league/`` (claims of this board and period
whose reward and rank are the member's outcome). Any problem is :class:`ArchiveRejected` (or
:class:`ArchiveExists`: other outcomes of P in Redis) and nothing is written.

Loading, per board: each period's ``outcome`` hash (when still within retention, with the
EXPIREAT the close gave it: its end + retention), its claims (HSETNX: a claim in Redis stands),
the tier hash from the latest period's ``tier_after`` (unless a later period is closed in
Redis), ``first``/``first_start`` (the earliest period, unless an earlier one is set), and
last ``closed:<P>`` (the close's counts), which is what makes P's claims answer and P+1's
joins go ahead: they never see a half-restored period. Run again, it writes the same.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import zlib
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Literal

from seasons import calendar, claimlog, restore_claims
from seasons import windows as win
from seasons.archives import DATA_SUFFIX, MANIFEST_SUFFIX, TMP_TTL
from seasons.catalog import archive_dir
from seasons.claimlog import LoggedClaim
from seasons.config.settings import Settings
from seasons.connection import RedisClient, text
from seasons.errors import ArchiveError, ArchiveExists, ArchiveRejected, BadPeriod
from seasons.events import check_member
from seasons.jobs.league_close import (
    LEAGUE_FOLDER,
    STATE_CLOSED,
    STATE_FIRST,
    STATE_FIRST_START,
)
from seasons.keys import Keys
from seasons.league_rewards import log_name
from seasons.leagues import Outcome, Zone, counts
from seasons.manifest import Manifest
from seasons.standings import (
    CHUNK,
    MAX_LINE,
    STOP_AFTER,
    lines_rejected,
    open_verified,
    rejected,
)

# "expired": the period's outcome keys would have expired by now (its end + retention): only
# its counts (closed:<P>) and its claims come back.
LeagueAction = Literal["restored", "replaced", "unchanged", "expired"]

_LINE_FIELDS = ("member", "tier_before", "tier_after", "cohort", "rank", "score", "zone", "reward")


@dataclass(frozen=True, slots=True)
class LeagueChecked:
    """A league archive that passed every check, ready to load."""

    file: Path
    manifest: Manifest
    period: win.Period
    outcomes: list[Outcome]  # in file order (member bytes)
    claims: list[LoggedClaim]  # the period's claims log: one claim per member
    action: LeagueAction
    expire_at: int  # the outcome keys' EXPIREAT: the period's end + retention
    # Members of the file missing from the period's outcome hash in Redis, where it holds the
    # others ("unchanged"): forgotten since (a forget leaves the file). Not given a tier again.
    absent: frozenset[str] = frozenset()

    @property
    def board(self) -> str:
        return self.manifest.board

    def closed(self) -> str:
        """``closed:<P>`` as the close's finish step writes it (``LeagueClose.summary``):
        the outcomes' counts, the period and its number of cohorts (the highest cohort id
        of the file: cohorts are numbered 1, 2, ...)."""
        cohorts = max((o.cohort for o in self.outcomes if o.cohort is not None), default=0)
        summary = {**counts(self.outcomes), "period": self.period.id, "cohorts": cohorts}
        return json.dumps(summary, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class LeagueRestored:
    """What a restore did with one league archive."""

    board: str
    window: str
    period: str
    count: int
    claims: int
    action: LeagueAction
    file: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board, "window": self.window, "period": self.period,
            "count": self.count, "claims": self.claims, "action": self.action, "file": self.file,
        }  # fmt: skip


class LeagueRestorer:
    """Checks and loads the league archives of one namespace."""

    def __init__(self, client: RedisClient, settings: Settings, keys: Keys):
        self.client = client
        self.settings = settings
        self.keys = keys

    def files(self) -> tuple[list[tuple[str, Path]], list[str]]:
        """((board, data file) of each league archive of a configured league, sorted), and
        the league folders or files left aside: of a board without a league, or of another
        window than its league's (a league whose window was changed since)."""
        found: list[tuple[str, Path]] = []
        skipped: list[str] = []
        for board in sorted(self.settings.boards):
            league = self.settings.boards[board].league
            folder = archive_dir(self.settings, board) / LEAGUE_FOLDER
            if not folder.is_dir():
                continue
            if league is None:
                skipped.append(str(folder))
                continue
            for path in sorted(folder.glob(f"*{DATA_SUFFIX}")):
                if path.name.startswith(f"{league.window}-"):
                    found.append((board, path))
                else:
                    skipped.append(str(path))
        return found, skipped

    # --- checks ---------------------------------------------------------------------------

    def check(
        self, board: str, file: Path, now: datetime, *, force: bool = False,
        inside: Path | None = None,
    ) -> LeagueChecked:  # fmt: skip
        """Every check of the module docstring; writes nothing."""
        league = self.settings.boards[board].league
        if league is None:
            raise rejected(file, f"board {board!r} has no league")
        stem = file.name[: -len(DATA_SUFFIX)]
        window, _, pid = stem.partition("-")
        if window != league.window or not file.name.endswith(DATA_SUFFIX):
            raise rejected(file, f"a league archive of board {board!r} is named "
                                 f"{league.window}-<period>{DATA_SUFFIX}")  # fmt: skip
        try:
            manifest = Manifest.load(file.with_name(stem + MANIFEST_SUFFIX), inside=inside)
        except ArchiveError as exc:
            raise ArchiveRejected(f"{exc.message}; nothing restored", exc.details) from None
        if (manifest.board, manifest.season) != (board, pid):
            raise rejected(
                file, f"its manifest is of board {manifest.board!r} period "
                f"{manifest.season!r}, but the file is board {board!r}'s {stem}",
            )  # fmt: skip
        period = self._period(file, league.window, pid, now)
        with open_verified(file, manifest.sha256, inside=inside) as data:
            outcomes = _read_outcomes(data, file, manifest.count)
        total = math.fsum(o.score for o in outcomes if o.score is not None)
        if len(outcomes) != manifest.count or total != manifest.score_sum:
            raise rejected(
                file, f"holds {len(outcomes)} outcomes with score sum {total}; its manifest "
                f"says {manifest.count} and {manifest.score_sum}",
            )  # fmt: skip
        had = {o.member: {(o.rank or 0, o.reward)} for o in outcomes}
        # Beside the board's files: the folder above the league's (a copy restored from
        # elsewhere keeps that layout).
        log = file.parent.parent / f"{log_name(pid)}{claimlog.CLAIMS_SUFFIX}"
        as_logged = replace(manifest, season=log_name(pid))  # the log's "season"
        claims = restore_claims.logged(log, as_logged, had, inside, first=True)
        expire_at = win.expire_at(period, self.settings)
        assert expire_at is not None  # league windows end
        action, absent = self._compare(file, board, pid, outcomes, force)
        if action == "restored" and expire_at <= now.timestamp():
            action = "expired"
        return LeagueChecked(file, manifest, period, outcomes, claims, action, expire_at, absent)

    def _period(self, file: Path, window: str, pid: str, now: datetime) -> win.Period:
        try:
            period = win.explicit_period(win.spec(window), pid, self.settings)
        except BadPeriod as exc:
            raise rejected(file, exc.message) from None
        if period.id != pid:
            raise rejected(file, f"{pid!r} is not a {window} id (the {window} holding it is "
                                 f"{period.id})")  # fmt: skip
        end = win.period_end(period, self.settings.zone)
        if end is None or now < end:
            raise rejected(file, f"{window} {pid} has not ended: only closed periods have "
                                 "outcomes to restore")  # fmt: skip
        return period

    def _compare(
        self, file: Path, board: str, pid: str, outcomes: list[Outcome], force: bool
    ) -> tuple[LeagueAction, frozenset[str]]:
        """``unchanged`` when the outcome hash in Redis holds the file's outcomes (less the
        members forgotten since: the file keeps them; they are returned), ``restored`` when
        it is empty; anything else is other outcomes of the period: :class:`ArchiveExists`
        (outcomes are written once), or ``replaced`` with ``force``."""
        key = self.keys.league(board, pid, "outcome")
        stored = {text(m): v for m, v in self.client.hgetall(key).items()}
        if not stored:
            return "restored", frozenset()
        wanted = {o.member: o for o in outcomes}
        diff = next(
            (m for m in sorted(stored) if m not in wanted
             or Outcome.from_json(m, stored[m]) != wanted[m]),
            None,
        )  # fmt: skip
        if diff is None:
            return "unchanged", frozenset(wanted) - frozenset(stored)
        if force:
            return "replaced", frozenset()
        raise ArchiveExists(
            f"league outcome hash {key} holds other outcomes than {file} (e.g. member "
            f"{diff!r}); outcomes are written once: restore with --force to replace them",
            {"file": str(file), "key": key},
        )

    # --- loading --------------------------------------------------------------------------

    def load(self, checked: list[LeagueChecked]) -> list[LeagueRestored]:
        """Write checked archives, board by board (see the module docstring)."""
        done: list[LeagueRestored] = []
        for board, group in itertools.groupby(checked, key=lambda c: c.board):
            periods = sorted(group, key=lambda c: c.period.first)
            for c in periods:
                self._outcomes(c)
                restore_claims.store(
                    self.client, self.keys.league(board, c.period.id, "claims"), c.claims,
                    upgrade=False,
                )  # fmt: skip
            if not self._later_closed(board, periods[-1].period):
                self._tiers(board, periods[-1])
            self._first(board, periods[0].period)
            state = self.keys.league_state(board)
            pipe = self.client.pipeline(transaction=False)
            for c in periods:
                field = STATE_CLOSED + c.period.id
                if c.action == "replaced":
                    pipe.hset(state, field, c.closed())
                else:
                    pipe.hsetnx(state, field, c.closed())
            pipe.execute()
            done += [
                LeagueRestored(board, c.period.window, c.period.id, len(c.outcomes),
                               len(c.claims), c.action, str(c.file))
                for c in periods
            ]  # fmt: skip
        return done

    def _outcomes(self, c: LeagueChecked) -> None:
        """The outcome hash, built in a scratch key renamed into place: a restore cut off
        leaves it absent or whole, never part of it."""
        if c.action in ("unchanged", "expired"):
            return
        key = self.keys.league(c.board, c.period.id, "outcome")
        tmp = self.keys.tmp(c.board, f"restore-league:{c.period.id}")
        self.client.delete(tmp)
        for i in range(0, len(c.outcomes), CHUNK):
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(tmp, mapping={o.member: o.to_json() for o in c.outcomes[i : i + CHUNK]})
            pipe.expire(tmp, TMP_TTL)
            pipe.execute()
        pipe = self.client.pipeline(transaction=True)
        if c.outcomes:
            # A raw command: redis-py's cluster pipeline refuses rename() by name; every key
            # here is in the board's slot.
            pipe.execute_command("RENAME", tmp, key)
            pipe.expireat(key, c.expire_at)
        else:
            pipe.delete(key)
        pipe.execute()

    def _later_closed(self, board: str, period: win.Period) -> bool:
        """Whether the league state has a later period closed than ``period`` (a restore of
        one older file): then the tier hash is that period's, not to be set back."""
        for name in self.client.hkeys(self.keys.league_state(board)):
            field = text(name)
            if not field.startswith(STATE_CLOSED):
                continue
            try:
                other = win.explicit_period(
                    win.spec(period.window), field[len(STATE_CLOSED) :], self.settings
                )
            except BadPeriod:
                continue  # of another window (a league whose window changed)
            if other.first > period.first:
                return True
        return False

    def _tiers(self, board: str, latest: LeagueChecked) -> None:
        """Each member's ``tier_after`` of the latest period into the tier hash, as the
        close's tiers step wrote them (the next period's joins read them)."""
        key = self.keys.league_tier(board)
        kept = [o for o in latest.outcomes if o.member not in latest.absent]
        for i in range(0, len(kept), CHUNK):
            self.client.hset(key, mapping={o.member: o.tier_after for o in kept[i : i + CHUNK]})

    def _first(self, board: str, earliest: win.Period) -> None:
        """``first``/``first_start`` of the league state: the earliest archived period,
        unless a period as early or earlier is set already."""
        state = self.keys.league_state(board)
        start = int(calendar.day_start(earliest.first, self.settings.zone).timestamp())
        _, found = self.client.hmget(state, [STATE_FIRST, STATE_FIRST_START])
        if found is None or float(text(found)) > start:
            self.client.hset(state, mapping={STATE_FIRST: earliest.id, STATE_FIRST_START: start})


def _read_outcomes(data: IO[bytes], file: Path, count: int) -> list[Outcome]:
    """The outcomes of the gzip ``data``, each line checked; raises :class:`ArchiveRejected`
    listing the problems. Bounded as season archives are: at most ``count`` + 1 lines of at
    most :data:`MAX_LINE` bytes are read."""
    out: list[Outcome] = []
    problems: list[tuple[int, str]] = []
    prev: bytes | None = None
    try:
        with gzip.GzipFile(fileobj=data, mode="rb") as f:
            for n in itertools.count(1):
                raw = f.readline(MAX_LINE + 1)
                if not raw:
                    break
                if n > count:
                    problems.append((n, f"is past the end: its manifest says {count} members"))
                    break
                if len(raw) > MAX_LINE:
                    problems.append((n, f"is longer than {MAX_LINE} bytes"))
                    break
                try:
                    outcome = _outcome(raw)
                except ValueError as exc:
                    problems.append((n, str(exc)))
                else:
                    key = outcome.member.encode("utf-8", "surrogatepass")
                    if prev is not None and key <= prev:
                        problems.append((n, f"member {outcome.member!r} is not after the line "
                                            "before's (lines are sorted by member bytes, each "
                                            "member once)"))  # fmt: skip
                    prev = key
                    out.append(outcome)
                if len(problems) >= STOP_AFTER:
                    break
    except (OSError, EOFError, zlib.error) as exc:
        raise rejected(file, f"is not a readable gzip file: {exc}") from None
    if problems:
        raise lines_rejected(file, problems)
    return out


def _outcome(raw: bytes) -> Outcome:
    """One archive line as an :class:`Outcome`; ValueError with a sentence."""
    d = claimlog.json_object(raw, _LINE_FIELDS)
    if (why := check_member(d["member"])) is not None:
        raise ValueError(why)
    for name in ("tier_before", "tier_after"):
        if not (isinstance(d[name], str) and d[name]):
            raise ValueError(f"{name} must be a non-empty text")
    for name in ("cohort", "rank"):
        v = d[name]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{name} {v!r} is not a positive integer or null")
    score = d["score"]
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score)
    ):
        raise ValueError(f"score {score!r} is not a finite number or null")
    if d["zone"] is not None and d["zone"] not in {z.value for z in Zone}:
        raise ValueError(f"zone {d['zone']!r} is not one of {', '.join(z.value for z in Zone)}")
    reward = d["reward"]
    if reward is not None and not (isinstance(reward, str) and reward):
        raise ValueError("reward must be a non-empty text or null")
    if reward is not None and d["rank"] is None:
        raise ValueError("has a reward without a rank")
    member = d.pop("member")
    return Outcome.from_json(member, json.dumps(d))


def league_board(settings: Settings, file: Path) -> str | None:
    """The board whose league archive ``file`` is, by where it lies
    (``.../<board>/league/<name>``), or None: a board's league folder, of a board with a
    league."""
    if file.parent.name != LEAGUE_FOLDER:
        return None
    board = file.parent.parent.name
    cfg = settings.boards.get(board)
    return board if cfg is not None and cfg.league is not None else None
