"""Closing days and seasons, and snapshots (docs/operations.md#the-worker; the archives they
write: docs/contract.md#archives).

- **close day** ``d`` (due at the end of ``d`` + ``late_grace``): mark ``closed:<d>`` in each
  board's state hash (the write script rejects later events for it); on a board keeping
  alltime, fold ``d`` into that window's base (each day once, in order: see
  :meth:`Closes._fold`); then the final rollup of each rolled-up period holding it (its week,
  month, season and alltime, as the board keeps them); when ``d`` ends a period of a board's
  league window, that period's league close (:mod:`seasons.jobs.league_close`).
- **close season** ``S`` (due once its last day is closed), per board: mark it ``closing``
  (writes for it are rejected from then on) → final rollup of the season board → copy it to
  the archive key (hidden and banned members' standings, on the season's twin, to the twin
  of the archive key: Redis only, the files hold the public board) → its results (each
  member's rank, score and reward: :mod:`seasons.results`) → write the archive files (their
  lines carry the rewards) → verify → mark it ``archived``; then rebuild
  the boards of the current periods. The live keys already carry EXPIREAT; they simply run
  out after the archive exists.

Every close is one run (``seasons.jobs.state.Run``) under one lock (``seasons.jobs.locks``):
each step is recorded when done and is idempotent, so a run killed anywhere and started again
completes with the same result, and two workers never close the same thing twice. Closes run
strictly in order; after downtime :meth:`Closes.catch_up` runs every one that fell due.
Each catch-up first finishes what a crash cut off elsewhere: moderation follow-ups
(:meth:`seasons.moderation.Moderator.recover`) and amendments (:meth:`Amender.resume`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any

from seasons import calendar, shards
from seasons import windows as win
from seasons.amend import Amender
from seasons.archives import Archives, snapshot_id
from seasons.audit import Audit
from seasons.config.settings import SeasonSpan, Settings
from seasons.connection import RedisClient
from seasons.errors import ArchiveError, Conflict, DataLoss, InvalidInput
from seasons.jobs.integrity import read_safe_mode
from seasons.jobs.league_close import LeagueClose
from seasons.jobs.locks import Lock, locked
from seasons.jobs.rollup import DaysExpired, FoldBusy, Rollup, fold_day, fold_lock, folded_through
from seasons.jobs.state import Checkpoint, JobState, Run
from seasons.keys import (
    SEASON_ARCHIVED,
    SEASON_CLOSING,
    STATE_CLOSED_DAY,
    STATE_GAP,
    STATE_SEASON,
    Keys,
)
from seasons.lifecycle import EventType, Lifecycle, event_id
from seasons.manifest import Manifest
from seasons.moderation import Moderation, Moderator
from seasons.results import Results
from seasons.scripts import Scripts

log = logging.getLogger(__name__)

CLOSE_DAY = "close_day"
CLOSE_SEASON = "close_season"


class SeasonExpired(ArchiveError):
    """A season's live board expired before it was archived: its standings are lost."""

    code = "season_expired"


@dataclass(frozen=True, slots=True)
class SnapshotResult:
    board: str
    season: str  # the archive id: S, or S@<timestamp> for a running season
    action: str  # snapshot | archived | already_archived
    manifest: Manifest | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board, "season": self.season, "action": self.action,
            "manifest": asdict(self.manifest) if self.manifest else None,
        }  # fmt: skip


class Closes:
    """Day and season closes of one namespace, run by the worker (or ``seasons snapshot``)."""

    def __init__(
        self, client: RedisClient, scripts: Scripts, settings: Settings, keys: Keys, *,
        state: JobState, rollup: Rollup, archives: Archives, checkpoint: Checkpoint,
        clock: Callable[[], datetime],
    ):  # fmt: skip
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys
        self.state = state
        self.rollup = rollup
        self.archives = archives
        self.checkpoint = checkpoint
        self.clock = clock
        self.lifecycle = Lifecycle(client, keys, settings)
        self.leagues = LeagueClose(client, scripts, settings, keys, self.lifecycle, clock)
        self.results = Results(client, archives.standings, keys)
        # Amendments of results and moderation follow-ups cut off by a crash are finished by
        # each catch-up.
        self.amender = Amender(client, archives, keys, self.lifecycle, checkpoint)
        self.moderator = Moderator(
            Moderation(client, scripts, settings, keys), Audit(client, keys, settings),
            self.lifecycle, self.amender,
        )  # fmt: skip

    # --- what is due --------------------------------------------------------------------

    def through(self, now: datetime) -> date:
        """The last day closed; on a first start, the day before the oldest day still kept."""
        found = self.state.get(CLOSE_DAY).get("through")
        if found:
            return date.fromisoformat(found)
        return calendar.local_day(now - self.settings.retention, self.settings.zone) - timedelta(
            days=1
        )

    def due_at(self, day: date) -> datetime:
        return calendar.day_end(day, self.settings.zone) + self.settings.late_grace

    def due_days(self, now: datetime) -> list[date]:
        out = []
        day = self.through(now) + timedelta(days=1)
        while self.due_at(day) <= now:
            out.append(day)
            day += timedelta(days=1)
        return out

    def catch_up(self, now: datetime) -> int:
        """Run every due close in order; stop at one another worker holds. Returns how many
        closes ran (or were found finished)."""
        self.moderator.recover(now)
        for board in sorted(self.settings.boards):
            self.amender.resume(board, now)
        through = self.through(now)
        done = 0
        oldest = calendar.local_day(now - self.settings.retention, self.settings.zone)
        for span in calendar.seasons_between(oldest, through, self.settings):
            if span.end <= through and not self.state.run_finished(CLOSE_SEASON, span.id):
                if not self.close_season(span, now):
                    return done
                done += 1
        for day in self.due_days(now):
            if not self.close_day(day, now):
                return done
            done += 1
            ending = calendar.season_of_day(day, self.settings)
            if ending is not None and ending.end == day:
                if not self.close_season(ending, now):
                    return done
                done += 1
        return done

    # --- close day ----------------------------------------------------------------------

    def close_day(self, day: date, now: datetime) -> bool:
        """Close ``day`` on every board; False if another worker holds its lock, or a base it
        folds into (see :meth:`_fold`): the run resumes from there next time."""
        run_id = day.isoformat()
        if not self.state.run_finished(CLOSE_DAY, run_id):
            with self._locked(f"{CLOSE_DAY}:{run_id}") as lock:
                if lock is None:
                    return False
                run = self.state.run(CLOSE_DAY, run_id, self._checkpoint(lock), self.clock)
                if not run.finished:
                    try:
                        self._close_day(run, day, now)
                    except FoldBusy as exc:
                        log.info("close of day %s waits: %s", day, exc.message)
                        return False
                    # The cursor ("through") is what lasts; the run's record only until the
                    # day's own keys are gone.
                    run.finish(keep=self.settings.retention)
                    log.info("closed day %s", day)
        if day > self.through(now):
            self.state.update(CLOSE_DAY, through=day.isoformat())
        return True

    def _close_day(self, run: Run, day: date, now: datetime) -> None:
        for board, cfg in sorted(self.settings.boards.items()):
            # Every store's writes check their own state (a sharded board: each shard's).
            mark = partial(
                self._mark, board, STATE_CLOSED_DAY + day.isoformat(), self.clock().isoformat()
            )
            run.step(f"mark:{board}", mark)
            for window in win.rolled_up(cfg):
                if not window.expires:
                    fold = partial(self._fold, run, board, window.name, day, now)
                    run.step(f"fold:{window.name}:{board}", fold)
            for window in win.rolled_up(cfg):  # the final rollup of each period holding the day
                p = window.period_of_day(day, self.settings)
                if p is not None:
                    run.step(f"{p.window}:{board}", partial(self._final, board, p, now, quiet=True))
                    # The league's period ends with the day: its close, after its final rollup.
                    if p.last == day and self.leagues.due(board, p):
                        self.leagues.close(run, board, p, now)
        # Its own step, the last: a crash before the step is recorded redoes the emit, which
        # the event's stable id makes a no-op if it was appended (see seasons.lifecycle).
        kind, boards = EventType.DAY_CLOSED, sorted(self.settings.boards)
        run.step("event:day_closed", lambda: self.lifecycle.emit(
            kind, event_id(kind, day=day), {"day": day.isoformat(), "boards": boards},
            self.clock(),
        ))  # fmt: skip

    def _fold(self, run: Run, board: str, window: str, day: date, now: datetime) -> None:
        """Fold every closed day up to ``day`` that is not folded yet into the base of
        ``board``'s ``window``, in order, each in its own atomic call (:func:`fold_day`).
        Nothing folded yet (the window just kept, or a first start): from the oldest day
        still within retention. A day whose key expired before its fold is a gap, recorded
        once (``STATE_GAP``): from then on the board is no longer recomputed.

        Under :func:`fold_lock`, so that no recomputation of the board reads the base between
        two folds; held by another run, :class:`FoldBusy`."""
        with self._locked(fold_lock(board, window)) as lock:
            if lock is None:
                raise FoldBusy(
                    f"the {window} board of {board!r} is being recomputed by another run",
                    {"board": board, "window": window},
                )
            cfg = self.settings.boards[board]
            for store in shards.stores(board, cfg):  # a sharded board: each shard's base
                self._fold_store(run, lock, board, store, window, day, now)

    def _fold_store(
        self, run: Run, lock: Lock, board: str, store: str, window: str, day: date,
        now: datetime,
    ) -> None:  # fmt: skip
        state = self.keys.state(store)
        through, _ = folded_through(self.client, self.keys, store, window)
        first = (
            through + timedelta(days=1)
            if through is not None
            else win.oldest_kept_day(now, self.settings)
        )
        d, stamp = first, now.timestamp()
        while d <= day:
            expired = through is not None and stamp >= win.day_expire_at(d, self.settings)
            if expired and self.client.hsetnx(state, STATE_GAP + window, str(d)):
                log.warning(
                    "%s of board %r: day %s expired before it was folded into its base "
                    "(the worker was away longer than retention, %s); the board keeps "
                    "what the write path gave it and is no longer recomputed",
                    window, board, d, self.settings.retention,
                )  # fmt: skip
            fold_day(self.client, self.scripts, self.keys, self.settings, board, window, d,
                     None if store == board else store)  # fmt: skip
            point = f"{window}:{board}" if store == board else f"{window}:{store}"
            run.checkpoint(f"{run.name}/fold:{point}:{d}")
            lock.extend()
            d += timedelta(days=1)

    def _final(
        self,
        board: str,
        period: win.Period,
        now: datetime,
        *,
        force: bool = False,
        quiet: bool = False,
    ) -> None:
        try:
            self.rollup.period(board, period, now, force=force)
        except DaysExpired as exc:
            # Expected for the oldest weeks on a worker's first start or after long downtime.
            # A period nobody wrote to (no board key) loses nothing: not worth a line.
            if not self.client.exists(self.keys.window(board, period.window, period.id)):
                level = logging.DEBUG
            else:
                level = logging.INFO if quiet else logging.WARNING
            log.log(level, "final rollup skipped: %s", exc.message)

    # --- close season -------------------------------------------------------------------

    def close_season(self, span: SeasonSpan, now: datetime) -> bool:
        """Archive season ``span`` on every board; False if another worker holds its lock."""
        if self.state.run_finished(CLOSE_SEASON, span.id):
            return True
        with self._locked(f"{CLOSE_SEASON}:{span.id}") as lock:
            if lock is None:
                return False
            run = self.state.run(CLOSE_SEASON, span.id, self._checkpoint(lock), self.clock)
            if run.finished:
                return True
            lost = []
            for board in sorted(self.settings.boards):
                try:
                    self._close_board(run, board, span, now)
                except SeasonExpired as exc:
                    log.error("SEASON NOT ARCHIVED: %s", exc.message)
                    run.set(f"expired:{board}", exc.message)
                    lost.append(board)
            run.step("rebuild", lambda: self.rollup.run(now))
            run.finish("expired:" + ",".join(lost) if lost else "ok")
            log.info("closed season %s%s", span.id, f" (lost: {', '.join(lost)})" if lost else "")
        return True

    def _close_board(self, run: Run, board: str, span: SeasonSpan, now: datetime) -> None:
        state_key = self.keys.state(board)
        field = STATE_SEASON + span.id
        live = self.keys.season(board, span.id)
        if run.done(f"archived:{board}") or run.fields.get(f"expired:{board}"):
            return
        if self.client.hget(state_key, field) == SEASON_ARCHIVED:
            return  # by an earlier run that died before recording it, or by `seasons restore`
        # Each event is emitted inside the step that makes it true, before the step is
        # recorded: a crash anywhere redoes the step and so the emit, a no-op once appended.
        run.step(f"closing:{board}", lambda: self._closing(board, span.id, field))
        period = win.Period("season", span.id, span.start, span.end)
        run.step(f"rollup:{board}", lambda: self._final(board, period, now, force=True))
        run.step(f"archive:{board}", lambda: self._copy(board, span, live, now))
        run.step(f"results:{board}", lambda: self._results(board, span.id, now, run))
        run.step(f"files:{board}", lambda: self.archives.write_files(
            board, span.id, now, lambda name: run.checkpoint(f"{run.name}/files:{board}:{name}")
        ))  # fmt: skip
        run.step(f"verify:{board}", lambda: self.archives.verify(board, span.id, live))
        # rewards_ready: the results are final and the archive verified; a step of its own
        # before archived: (a rerun returns early once archived: is recorded, so an emit after
        # it would be lost to a crash in between; emit is idempotent per id).
        run.step(f"rewards:{board}", lambda: self._rewards_ready(board, span.id))
        run.step(f"archived:{board}", lambda: self._archived(board, span.id, field))

    def _rewards_ready(self, board: str, season: str) -> None:
        summary = self.results.summary(board, season)
        if summary is None:  # recorded by the results step a moment ago
            raise ArchiveError(f"season {season} of board {board!r}: no results to announce")
        kind = EventType.REWARDS_READY
        data = {
            "board": board, "season": season, "total": summary["total"],
            "provisional": summary["provisional"], "tiers": summary["tiers"],
        }  # fmt: skip
        self.lifecycle.emit(kind, event_id(kind, board=board, season=season), data, self.clock())

    def _mark(self, board: str, field: str, value: str) -> None:
        """``field`` = ``value`` in the state hash of every store of ``board`` (each shard's
        writes check their own, seasons.shards) and, for a sharded board, of the board itself
        (what its archive's readers and the rollups check)."""
        pipe = self.client.pipeline(transaction=False)
        cfg = self.settings.boards[board]
        for store in dict.fromkeys([*shards.stores(board, cfg), board]):
            pipe.hset(self.keys.state(store), field, value)
        pipe.execute()

    def _closing(self, board: str, season: str, field: str) -> None:
        self._mark(board, field, SEASON_CLOSING)
        kind = EventType.SEASON_CLOSING
        self.lifecycle.emit(
            kind, event_id(kind, board=board, season=season), {"board": board, "season": season},
            self.clock(),
        )  # fmt: skip

    def _archived(self, board: str, season: str, field: str) -> None:
        # The event before the state: a run resumed after the state says archived returns
        # early (see _close_board), so the event must already be in the stream by then.
        manifest = Manifest.load(self.archives.paths(board, season)[1])  # verified: a step ago
        kind = EventType.SEASON_ARCHIVED
        data = {
            "board": board, "season": season, "count": manifest.count,
            "score_sum": manifest.score_sum, "sha256": manifest.sha256,
        }  # fmt: skip
        self.lifecycle.emit(kind, event_id(kind, board=board, season=season), data, self.clock())
        self._mark(board, field, SEASON_ARCHIVED)

    def _results(
        self, board: str, archive_id: str, now: datetime, run: Run | None = None
    ) -> dict[str, Any]:
        """The results of ``archive:<archive_id>`` (a snapshot's: provisional)."""
        checkpoint = None
        if run is not None:
            name = run.name

            def checkpoint(point: str) -> None:
                run.checkpoint(f"{name}/results:{board}:{point}")

        return self.results.write(
            board, archive_id, now, provisional="@" in archive_id, checkpoint=checkpoint
        )

    def _copy(self, board: str, span: SeasonSpan, live: str, now: datetime) -> None:
        source = self.archives.season_source(board, span.id, span.id)
        size = self.archives.copy(board, source, span.id)
        period = win.Period("season", span.id, span.start, span.end)
        expires = win.expire_at(period, self.settings)
        if size < 0 and expires is not None and now.timestamp() >= expires:
            raise SeasonExpired(
                f"season {span.id} of board {board!r}: its live key {live} expired (retention "
                f"{self.settings.retention} after {span.end}) before it was archived; its "
                "standings are lost unless you backfill its days and run `seasons rebuild`",
                {"board": board, "season": span.id},
            )

    # --- snapshots ------------------------------------------------------------------------

    def snapshot(self, season_id: str, now: datetime) -> list[SnapshotResult]:
        """``seasons snapshot --season S``: archive files of a running season under
        ``S@<timestamp>`` (changing nothing else); close an ended season now; leave an
        archived one as it is."""
        span = calendar.season_by_id(season_id, self.settings)
        safe = read_safe_mode(self.client, self.keys)
        if safe is not None:
            raise DataLoss(
                f"the namespace is in safe mode ({safe.get('reason')}: {safe.get('message')}): "
                "no archives are written until it is restored or the loss acknowledged",
                safe,
            )
        if now < calendar.day_start(span.start, self.settings.zone):
            raise InvalidInput(f"season {span.id} has not started yet (first day {span.start})")
        boards = sorted(self.settings.boards)
        if now < calendar.season_end(span, self.settings.zone):
            sid = snapshot_id(span.id, now)
            out = []
            for board in boards:
                self.archives.copy(board, self.archives.season_source(board, span.id, sid), sid)
                self._results(board, sid, now)  # provisional: never claimable
                self.archives.write_files(board, sid, now)
                out.append(SnapshotResult(board, sid, "snapshot", self.archives.verify(board, sid)))
            return out
        finished = self.state.run_finished(CLOSE_SEASON, span.id)
        action = "already_archived" if finished else "archived"
        if not self.close_season(span, now):
            raise Conflict(f"season {span.id} is being closed by a worker right now; try again")
        out = []
        for board in boards:
            try:
                manifest: Manifest | None = self.archives.verify(board, span.id)
            except ArchiveError:
                manifest = None  # lost (see the worker's log) or archived without files
            out.append(SnapshotResult(board, span.id, action, manifest))
        return out

    # --- helpers ----------------------------------------------------------------------------

    def _locked(self, name: str) -> AbstractContextManager[Lock | None]:
        return locked(self.client, self.keys, name, self.settings.worker.lock_ttl)

    def _checkpoint(self, lock: Lock) -> Checkpoint:
        def checkpoint(name: str) -> None:
            self.checkpoint(name)  # the worker's: stop between steps, test faults
            lock.extend()

        return checkpoint
