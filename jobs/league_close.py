"""The close of a league period (docs/leagues.md#the-close-of-a-period): at the end of
period P of a league board's window, after P's final rollup, every member's outcome is
written once and the next period's tiers come from it.

It runs inside the day close of P's last day (:mod:`seasons.jobs.closes`), as steps of that
run, each idempotent, so a run killed anywhere and started again ends as a fault-free one:

1. ``open``: ``close:<P>`` in the league state hash (joins of P stop);
2. ``cohorts``: each cohort's standings (:func:`seasons.leagues.standings`, the function the
   reads use) and outcomes, :data:`COHORTS_PER_CALL` cohorts per round trip, written by
   ``league_outcome.lua`` once per cohort (the ``done`` set); a checkpoint after each chunk;
3. ``idle``: members of the tier hash without a cohort in P get their idle outcome (HSETNX),
   the HSCAN cursor kept in the run after each page;
4. ``archive``: the outcomes as a file and its manifest, write-once, verified;
5. ``tiers``: each member's ``tier_after`` into the tier hash;
6. ``finish``: :func:`seasons.league_joins.join_waiting` (P+1's waiting joins and
   ``closed:<P>``);
7. ``event``: the ``league_closed`` lifecycle event (its stable id makes a redo a no-op).
"""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import replace as replace_fields
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import IO, Any, cast

from redis.typing import EncodableT

from seasons import calendar, claimlog
from seasons import windows as win
from seasons.archives import DATA_SUFFIX, MANIFEST_SUFFIX, _place, _place_bytes, _tmp_path
from seasons.catalog import archive_dir
from seasons.clock import utc_text
from seasons.config.league import LeagueSettings
from seasons.config.settings import Settings
from seasons.connection import RedisClient, text
from seasons.errors import ArchiveError, ArchiveExists
from seasons.files import atomic_write
from seasons.jobs.state import Run
from seasons.keys import Keys
from seasons.league_joins import join_waiting
from seasons.leagues import (
    COHORT_SPAN,
    Outcome,
    cohort_outcomes,
    counts,
    current_tier,
    idle_outcome,
    standings,
)
from seasons.lifecycle import EventType, Lifecycle, event_id
from seasons.manifest import Manifest, sha256_of
from seasons.scripts import Scripts
from seasons.ties import of as tie_rule_of

COHORTS_PER_CALL = 25  # ~750 members of cohorts of 30: one read and one write per chunk
SCAN_COUNT = 500  # HSCAN COUNT of the tier and outcome hashes
LEAGUE_FOLDER = "league"  # beside a board's season archives, which listings glob

# The league state hash's fields (seasons.keys.Keys.league_state).
STATE_FIRST, STATE_FIRST_START = "first", "first_start"
STATE_CLOSE, STATE_CLOSED = "close:", "closed:"


def archive_paths(settings: Settings, board: str, window: str, period: str) -> tuple[Path, Path]:
    """(data file, manifest) of a league period's outcomes:
    ``<archive.dir>/<ns>/<B>/league/<window>-<P>.jsonl.gz`` and ``.manifest.json``. In a
    folder of their own: the season archives' listings, checks and restore glob the
    board's folder and would take them for seasons."""
    folder = archive_dir(settings, board) / LEAGUE_FOLDER
    stem = f"{window}-{period}"
    return folder / f"{stem}{DATA_SUFFIX}", folder / f"{stem}{MANIFEST_SUFFIX}"


def archive_line(outcome: Outcome) -> str:
    """One line of the archive: ``{"member", "tier_before", "tier_after", "cohort", "rank",
    "score", "zone", "reward"}``."""
    row = {"member": outcome.member, **outcome.fields()}
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def _member_bytes(member: str) -> bytes:
    return member.encode("utf-8", "surrogatepass")


class LeagueClose:
    """The league closes of one namespace (see the module docstring)."""

    def __init__(
        self, client: RedisClient, scripts: Scripts, settings: Settings, keys: Keys,
        lifecycle: Lifecycle, clock: Callable[[], datetime],
    ):  # fmt: skip
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys
        self.lifecycle = lifecycle
        self.clock = clock

    def due(self, board: str, period: win.Period) -> bool:
        """Whether ``period`` (of any window, ending on the day being closed) is a period of
        ``board``'s league to close: the league's window, and not before the league's first
        period (``first_start``; a league nobody joined closes nothing)."""
        league = self.settings.boards[board].league
        if league is None or period.window != league.window or period.endless:
            return False
        first, start = self.client.hmget(
            self.keys.league_state(board), [STATE_FIRST, STATE_FIRST_START]
        )
        if first is None or start is None:
            return False
        begins = calendar.day_start(period.first, self.settings.zone).timestamp()
        return begins >= float(text(start))

    def close(self, run: Run, board: str, period: win.Period, now: datetime) -> None:
        """Close ``period`` of ``board``'s league as steps of ``run`` (the day close's)."""
        league = self.settings.boards[board].league
        assert league is not None
        step = f"league:{board}:{period.id}"
        state = self.keys.league_state(board)
        if not run.done(f"{step}:open") and self.client.hexists(state, STATE_CLOSED + period.id):
            # Closed by a run whose record is gone: restored after a data loss
            # (seasons.restore_leagues). Its close emitted the event; running its steps again
            # would add idle outcomes of members who came later and set older tiers.
            return
        run.step(f"{step}:open", lambda: self.client.hset(
            state, STATE_CLOSE + period.id, self.clock().isoformat()
        ))  # fmt: skip
        run.step(f"{step}:cohorts", lambda: self.cohorts(board, league, period, run))
        run.step(f"{step}:idle", lambda: self.idle(board, league, period, run))
        run.step(f"{step}:archive", lambda: self.archive(board, period, now))
        run.step(f"{step}:tiers", lambda: self.tiers(board, period))
        run.step(f"{step}:finish", lambda: self.finish(board, period))
        run.step(f"{step}:event", lambda: self.emit(board, period))

    # --- 2. cohorts ---------------------------------------------------------------------

    def cohorts(
        self, board: str, league: LeagueSettings, period: win.Period, run: Run | None = None
    ) -> int:
        """Write the outcome of every cohort of ``period`` not written yet; returns how many
        were written now."""
        part = partial_keys(self.keys, board, period.id)
        total = int(self.client.hlen(part["cohorts"]))
        expire = win.expire_at(period, self.settings) or 0
        written = 0
        for first in range(1, total + 1, COHORTS_PER_CALL):
            ids = list(range(first, min(first + COHORTS_PER_CALL, total + 1)))
            done = self.client.smismember(part["done"], [str(i) for i in ids])
            todo = [i for i, d in zip(ids, done, strict=True) if not d]
            if not todo:
                continue
            args: list[EncodableT] = [expire]
            for cohort, outcomes in self._chunk(board, league, period, todo):
                args += [cohort, len(outcomes)]
                for o in outcomes:
                    args += [o.member, o.to_json()]
            written += int(
                self.scripts.league_outcome(keys=[part["outcome"], part["done"]], args=args)
            )
            if run is not None:
                run.checkpoint(f"{run.name}/league:{board}:{period.id}:cohorts:{ids[-1]}")
        return written

    def _chunk(
        self, board: str, league: LeagueSettings, period: win.Period, ids: list[int]
    ) -> list[tuple[int, list[Outcome]]]:
        """The outcomes of cohorts ``ids`` (ascending): two round trips, whatever their
        number (their members are one range of the joined set)."""
        cfg = self.settings.boards[board]
        part = partial_keys(self.keys, board, period.id)
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(part["cohorts"], ids)
        pipe.zrangebyscore(
            part["joined"], ids[0] * COHORT_SPAN, ids[-1] * COHORT_SPAN + COHORT_SPAN - 1,
            withscores=True,
        )  # fmt: skip
        raw_cohorts, joined = pipe.execute()
        wanted = set(ids)
        members: dict[int, list[bytes]] = {i: [] for i in ids}
        for raw, place in joined:  # in score order: cohort, then join order
            cohort = int(place) // COHORT_SPAN
            if cohort in wanted:  # UTF-8, as Redis holds it (a cluster client decodes)
                members[cohort].append(raw if isinstance(raw, bytes) else raw.encode())
        names: list[Any] = [m for i in ids for m in members[i]]  # (redis-py types them str)
        scores: list[Any] = []
        reached: list[Any] = []
        flags: list[Any] = []
        if names:
            reach = tie_rule_of(cfg).reach_set
            pipe = self.client.pipeline(transaction=False)
            pipe.zmscore(self.keys.window(board, period.window, period.id), names)
            pipe.hmget(self.keys.moderation(board), names)
            if reach:
                pipe.zmscore(self.keys.reached(board, period.window, period.id), names)
            found = pipe.execute()
            scores, flags = found[0], found[1]
            reached = found[2] if reach else [None] * len(names)
        at = 0
        out = []
        for cohort, raw in zip(ids, raw_cohorts, strict=True):
            tier = current_tier(league, json.loads(text(raw))["tier"] if raw else None)
            end = at + len(members[cohort])
            table = standings(
                members[cohort], scores[at:end], tier, league, cfg, reached=reached[at:end],
                hidden={i for i, flag in enumerate(flags[at:end]) if flag is not None},
            )  # fmt: skip
            out.append((cohort, cohort_outcomes(cohort, table, league)))
            at = end
        return out

    # --- 3. idle members ------------------------------------------------------------------

    def idle(self, board: str, league: LeagueSettings, period: win.Period, run: Run) -> int:
        """The idle outcome (HSETNX) of each member of the tier hash with no cohort in
        ``period``; the HSCAN cursor is kept in ``run`` after each page. Returns how many
        were written now."""
        part = partial_keys(self.keys, board, period.id)
        tiers = self.keys.league_tier(board)
        field = f"league:{board}:{period.id}:idle_cursor"
        cursor = int(run.fields.get(field, "0"))
        expire = win.expire_at(period, self.settings)
        written = 0
        while True:
            cursor, page = self.client.hscan(tiers, cursor, count=SCAN_COUNT)
            found = {text(m): text(t) for m, t in cast(dict[Any, Any], page).items()}
            names = list(found)
            if names:
                places = self.client.zmscore(part["joined"], names)
                # No cohort of P: not joined, or still waiting (a negative place).
                idle = [n for n, p in zip(names, places, strict=True) if (p or -1) < COHORT_SPAN]
                if idle:
                    pipe = self.client.pipeline(transaction=False)
                    for name in idle:
                        outcome = idle_outcome(name, current_tier(league, found[name]), league)
                        pipe.hsetnx(part["outcome"], name, outcome.to_json())
                    if expire is not None:
                        pipe.expireat(part["outcome"], expire)
                    written += sum(1 for x in pipe.execute()[: len(idle)] if x)
            run.set(field, str(cursor))
            run.checkpoint(f"{run.name}/league:{board}:{period.id}:idle:{cursor}")
            if cursor == 0:
                return written

    # --- 4. the archive -------------------------------------------------------------------

    def outcomes(self, board: str, period_id: str) -> Iterator[Outcome]:
        """Every outcome of a period (HSCAN: any order, each once)."""
        key = self.keys.league(board, period_id, "outcome")
        seen: set[str] = set()
        for raw_member, raw in self.client.hscan_iter(key, count=SCAN_COUNT):
            member = text(raw_member)
            if member not in seen:  # HSCAN may give a field twice
                seen.add(member)
                yield Outcome.from_json(member, raw)

    def archive(self, board: str, period: win.Period, now: datetime) -> Manifest:
        """Write the period's outcomes to its archive file and manifest (write-once: files
        already there are kept when they hold the same outcomes, else
        :class:`ArchiveExists`), then verify them against Redis."""
        rows = sorted(self.outcomes(board, period.id), key=lambda o: _member_bytes(o.member))
        body = "".join(archive_line(o) for o in rows).encode()
        data, manifest_path = archive_paths(self.settings, board, period.window, period.id)
        data.parent.mkdir(parents=True, exist_ok=True)
        scores = [o.score for o in rows if o.score is not None]
        tmp = _tmp_path(data)
        try:
            _write_gz(tmp, body)
            fresh = Manifest(
                board=board, season=period.id, count=len(rows), score_sum=math.fsum(scores),
                sha256=sha256_of(tmp), created_at=utc_text(now, "seconds"),
            )  # fmt: skip
            if data.exists():
                if sha256_of(data) != fresh.sha256:
                    raise ArchiveExists(
                        f"league archive {data} already exists with other outcomes (sha256 "
                        f"{sha256_of(data)}); this close would write {fresh.count} members "
                        f"(sha256 {fresh.sha256}). Archives are write-once: nothing was written",
                        {"file": str(data), "would_write": fresh.sha256},
                    )
            else:
                _place(tmp, data)
        finally:
            tmp.unlink(missing_ok=True)
        if manifest_path.exists():
            found = Manifest.load(manifest_path)
            if _figures(found) != _figures(fresh):
                raise ArchiveExists(
                    f"league manifest {manifest_path} already exists with other content "
                    f"(count {found.count}, sha256 {found.sha256}); this close would write "
                    f"count {fresh.count}, sha256 {fresh.sha256}. Archives are write-once",
                    {"file": str(manifest_path), "would_write": fresh.sha256},
                )
        else:
            _place_bytes(manifest_path, fresh.to_json().encode())
        return self.verify(board, period, body)

    def verify(self, board: str, period: win.Period, body: bytes) -> Manifest:
        """The files on disk: the manifest's sha256, count and score sum are the data file's,
        and its lines are ``body`` (the outcomes in Redis)."""
        data, manifest_path = archive_paths(self.settings, board, period.window, period.id)
        manifest = Manifest.load(manifest_path)
        digest = sha256_of(data)
        with gzip.open(data, "rb") as f:
            lines = f.read()
        rows = [json.loads(line) for line in lines.splitlines()]
        total = math.fsum(r["score"] for r in rows if r["score"] is not None)
        if digest != manifest.sha256 or len(rows) != manifest.count or total != manifest.score_sum:
            raise ArchiveError(
                f"league archive {data} does not match its manifest {manifest_path}",
                {"file": str(data)},
            )
        if lines != body:
            raise ArchiveError(
                f"league archive {data} differs from the outcomes in Redis", {"file": str(data)}
            )
        return manifest

    # --- 5. tiers, 6. finish, 7. the event -------------------------------------------------

    def tiers(self, board: str, period: win.Period) -> None:
        """Each member's tier after the close, from its outcome (chunked HSET)."""
        key = self.keys.league_tier(board)
        chunk: dict[EncodableT, EncodableT] = {}
        for o in self.outcomes(board, period.id):
            chunk[o.member] = o.tier_after
            if len(chunk) >= SCAN_COUNT:
                self.client.hset(key, mapping=chunk)
                chunk = {}
        if chunk:
            self.client.hset(key, mapping=chunk)

    def summary(self, board: str, period: win.Period) -> dict[str, Any]:
        """What ``closed:<P>`` and the event carry: the counts, the period and its number
        of cohorts."""
        found = counts(self.outcomes(board, period.id))
        cohorts = int(self.client.hlen(self.keys.league(board, period.id, "cohorts")))
        return {**found, "period": period.id, "cohorts": cohorts}

    def finish(self, board: str, period: win.Period) -> None:
        following = win.period_of_day(period.window, period.last + timedelta(days=1), self.settings)
        closed = json.dumps(self.summary(board, period), sort_keys=True, separators=(",", ":"))
        if following is None:
            # No period follows at once (a gap between listed seasons): nobody can be waiting
            # for this one, whose events came before the next began.
            self.client.hset(self.keys.league_state(board), STATE_CLOSED + period.id, closed)
            return
        join_waiting(
            self.client, self.scripts, self.settings, self.keys, board, period, following, closed
        )

    def emit(self, board: str, period: win.Period) -> None:
        raw = self.client.hget(self.keys.league_state(board), STATE_CLOSED + period.id)
        if raw is None:  # set by the finish step a moment ago
            raise ArchiveError(f"league period {period.id} of board {board!r} is not closed")
        summary = json.loads(text(raw))
        kind = EventType.LEAGUE_CLOSED
        data = {"board": board, "window": period.window, **summary}
        self.lifecycle.emit(kind, event_id(kind, board=board, period=period.id), data, self.clock())


def partial_keys(keys: Keys, board: str, period_id: str) -> dict[str, str]:
    """The keys of one league period (``Keys.league``)."""
    return {p: keys.league(board, period_id, p) for p in ("joined", "cohorts", "outcome", "done")}


def _figures(m: Manifest) -> tuple[str, str, int, float, str]:
    return m.board, m.season, m.count, m.score_sum, m.sha256


def forget_in_files(settings: Settings, board: str, member: str) -> list[str]:
    """Erasure of ``member`` from ``board``'s league files: its line leaves every league
    archive that has one (the file rewritten, its manifest's count, score sum and sha256 with
    it, ``created_at`` kept: the others keep their outcomes), and its claims leave the league
    claims logs. The files rewritten, by name. Erasure is the one change of an archive."""
    rewritten: list[str] = []
    folder = archive_dir(settings, board) / LEAGUE_FOLDER
    for data in sorted(folder.glob(f"*{DATA_SUFFIX}")) if folder.is_dir() else []:
        with gzip.open(data, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        kept = [ln for ln in lines if json.loads(ln)["member"] != member]
        if len(kept) == len(lines):
            continue
        body = b"".join(kept)
        manifest_path = data.with_name(data.name[: -len(DATA_SUFFIX)] + MANIFEST_SUFFIX)
        before = Manifest.load(manifest_path)
        atomic_write(data, partial(_gz_into, body=body))
        scores = [r["score"] for r in map(json.loads, kept) if r["score"] is not None]
        after = replace_fields(
            before, count=len(kept), score_sum=math.fsum(scores), sha256=sha256_of(data)
        )
        atomic_write(manifest_path, partial(_bytes_into, body=after.to_json().encode()))
        rewritten.append(str(data))
    for log in sorted(archive_dir(settings, board).glob(f"league-*{claimlog.CLAIMS_SUFFIX}")):
        if claimlog.without_member(log, member):
            rewritten.append(str(log))
    return rewritten


def _gz_into(f: IO[bytes], body: bytes) -> None:
    with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
        gz.write(body)


def _bytes_into(f: IO[bytes], body: bytes) -> None:
    f.write(body)


def _write_gz(path: Path, body: bytes) -> None:
    """``body`` gzipped without a time stamp (the same outcomes, the same bytes), fsynced."""
    with path.open("wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
            gz.write(body)
        f.flush()
        os.fsync(f.fileno())
