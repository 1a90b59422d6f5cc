"""The rollup job: reconcile rolled-up boards (week, month, season, alltime: every window
whose ``rolled_up`` is set in ``seasons.windows.SPECS``) with their day keys.

The write path keeps those boards fresh; this job recomputes them from the day keys
with the board's weights and aggregate (``seasons.jobs.reconcile``: one atomic Lua call for small
boards, atomic slices for large ones), then trims them to ``max_entries``. It is the repair
path, and the only path when weights change.

Which periods: the rolled-up periods of every day that still takes events (from the day of
``now - late_grace`` to the day of ``now + 5 minutes``). A season that is closing or archived
is left alone unless its close asks for the final rollup (``force``).

Each board recomputed takes its twin with it (hidden and banned members' entries,
``Keys.twin_of``): the twin board from the twin days (and the twin base) by the same
formula, never trimmed; a board with no twin key pays one EXISTS for it. A day's fold folds
its twin into the twin base in the same atomic call.

A board can only be recomputed while all of its day keys still exist: a day key expires at
its day's end + ``retention``. A period with a day past that point is refused
(:class:`DaysExpired`) rather than rebuilt from part of its days.

The alltime board outlives its days: it is recomputed from its *base* (every closed day
folded in, once, by the day close: :func:`fold_day`) and the days after the last one folded
(up to the last that may hold events), base first. Reading that day and recomputing happen
under the lock :func:`fold_lock`, which each fold takes as well, so a day is never counted
both in the base and as an open day. A day that expired before it was folded is a gap
(``STATE_GAP``): the base lacks it for good, and the board is no longer recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable
from datetime import date, datetime, timedelta

from seasons import calendar, shards, ties
from seasons import windows as win
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import RedisClient, text
from seasons.errors import BadPeriod, Conflict, InvalidInput, UnknownBoard
from seasons.jobs.locks import Lock, locked
from seasons.jobs.reconcile import Outcome, Plan, reconcile
from seasons.keys import STATE_FOLDED, STATE_GAP, STATE_SEASON, Keys
from seasons.scripts import Scripts

log = logging.getLogger(__name__)

ALL = "all"  # a rebuild of every rolled-up window
REBUILDS = (*(name for name, spec in win.SPECS.items() if spec.rolled_up), ALL)


def _fingerprint(cfg: BoardSettings, plan: Plan) -> str:
    """What a board's formula depends on besides the day keys' contents."""
    text = repr((
        cfg.aggregate, cfg.order, cfg.max_entries, list(plan.days), list(plan.weights),
        plan.reached,  # a board switched to earliest ties needs its reach set recomputed
        plan.distinct,  # and one switched to dense ties its distinct set
    ))  # fmt: skip
    return hashlib.sha1(text.encode()).hexdigest()[:16]


class DaysExpired(Conflict):
    """A rolled-up board cannot be recomputed: some of its day keys are past retention."""

    code = "days_expired"


class FoldBusy(Conflict):
    """The base of a board's alltime window is being folded or its board recomputed by
    another run right now."""

    code = "fold_busy"


def fold_lock(board: str, window: str) -> str:
    """The lock (``seasons.jobs.locks``) that a fold into ``board``'s ``window`` base and a
    recomputation of that board hold: each must see the other's work whole."""
    return f"{window}:{board}"


def folded_through(client: RedisClient, keys: Keys, board: str, window: str) -> tuple[
    date | None, date | None
]:  # fmt: skip
    """(the last day folded into the base, the first gap) of ``board``'s ``window`` (or of
    one store of a sharded board: ``board`` is then the store's name)."""
    through, gap = client.hmget(keys.state(board), [STATE_FOLDED + window, STATE_GAP + window])
    return (
        date.fromisoformat(text(through)) if through else None,
        date.fromisoformat(text(gap)) if gap else None,
    )


def fold_day(
    client: RedisClient, scripts: Scripts, keys: Keys, settings: Settings, board: str,
    window: str, day: date, store: str | None = None,
) -> bool:  # fmt: skip
    """Fold ``day``'s key into the base of ``board``'s ``window`` (of its shard ``store`` on
    a sharded board), unless it is folded already (one atomic call: the check and the record
    go together), and its twin into the twin base with it. True if folded now."""
    cfg = settings.boards[board]
    at = board if store is None else store
    base, day_key = keys.base(at, window), keys.day(at, day)
    done = scripts.fold_day(
        keys=[base, day_key, keys.state(at), keys.tmp(at, "union"), keys.twin_of(base),
              keys.twin_of(day_key)],
        args=[day.isoformat(), cfg.aggregate, STATE_FOLDED + window],
    )  # fmt: skip
    return bool(int(done))


class Rollup:
    """Recompute the rolled-up boards of every (or one) board."""

    def __init__(
        self, client: RedisClient, scripts: Scripts, settings: Settings, keys: Keys, *,
        atomic_limit: int | None = None,
    ):  # fmt: skip
        # Larger boards are reconciled in atomic slices.
        self.atomic_limit = (
            settings.worker.atomic_union_limit if atomic_limit is None else atomic_limit
        )
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys

    # --- what to recompute ----------------------------------------------------------------

    def open_periods(self, board: str, now: datetime) -> list[win.Period]:
        """The rolled-up periods of ``board`` holding a day that still takes events at
        ``now``."""
        zone = self.settings.zone
        first = calendar.local_day(now - self.settings.late_grace, zone)
        last = calendar.local_day(now + calendar.FUTURE_TOLERANCE, zone)
        out: list[win.Period] = []
        day = first
        while day <= last:
            for window in win.rolled_up(self.settings.boards[board]):
                p = window.period_of_day(day, self.settings)
                if p is not None and p not in out:
                    out.append(p)
            day += timedelta(days=1)
        return out

    def plan(self, board: str, period: win.Period, now: datetime, store: str | None = None) -> Plan:
        """The day keys and weights of ``period``'s board, up to the last day that may hold
        events. Raises :class:`DaysExpired` if one of those days is past retention.
        ``store``: the shard of a sharded board whose keys are recomputed (seasons.shards).

        The alltime period: its base, then the days after the last one folded into it (all
        weighing 1); read under :func:`fold_lock`, which the caller holds."""
        if period.endless:
            return self._endless_plan(board, period, now, store)
        cfg = self.settings.boards[board]
        horizon = calendar.local_day(now + calendar.FUTURE_TOLERANCE, self.settings.zone)
        days = [d for d in period.days() if d <= horizon]
        stamp = now.timestamp()
        for d in days:
            if stamp >= win.day_expire_at(d, self.settings):
                raise DaysExpired(
                    f"cannot recompute {period.window} {period.id} of board {board!r} from its "
                    f"day keys: day {d} is past its retention ({self.settings.retention}) and "
                    "its key may be gone; the board is kept as the write path left it",
                    {"board": board, "window": period.window, "period": period.id},
                )
        window = win.SPECS[period.window]
        weights = [window.weight(cfg, d, self.settings) for d in days]
        # ties = "earliest" (never with a base: the settings refuse alltime): the reach set
        # is recomputed from the days' reach sets with the board.
        earliest = ties.of(cfg).reach_set
        at = board if store is None else store
        return Plan(
            target=self.keys.window(at, period.window, period.id),
            days=[self.keys.day(at, d) for d in days],
            weights=weights,
            expireat=win.expire_at(period, self.settings) or 0,
            scratch=self.keys.tmp(at, "union"),
            reached=self.keys.reached(at, period.window, period.id) if earliest else None,
            reached_days=[self.keys.reached(at, "day", d.isoformat()) for d in days]
            if earliest
            else (),
            distinct=self._distinct(board, period),
        )

    def _distinct(self, board: str, period: win.Period) -> str | None:
        """ties = "dense": the distinct set of ``period``'s board, rebuilt with it."""
        if not ties.of(self.settings.boards[board]).distinct_set:
            return None
        return self.keys.distinct(board, period.window, period.id)

    def _endless_plan(
        self, board: str, period: win.Period, now: datetime, store: str | None = None
    ) -> Plan:
        at = board if store is None else store
        through, gap = folded_through(self.client, self.keys, at, period.window)
        what = f"cannot recompute {period.window} of board {board!r}"
        if gap is not None:
            raise DaysExpired(
                f"{what}: day {gap} expired before it was folded into its base (the worker was "
                f"away longer than retention, {self.settings.retention}); the board is kept as "
                "the write path left it",
                {"board": board, "window": period.window, "period": period.id, "gap": str(gap)},
            )
        first = (
            through + timedelta(days=1)
            if through is not None
            else win.oldest_kept_day(now, self.settings)
        )
        horizon = calendar.local_day(now + calendar.FUTURE_TOLERANCE, self.settings.zone)
        days = [first + timedelta(days=i) for i in range((horizon - first).days + 1)]
        stamp = now.timestamp()
        for d in days:
            if stamp >= win.day_expire_at(d, self.settings):
                raise DaysExpired(
                    f"{what}: day {d} is past its retention ({self.settings.retention}) and not "
                    "folded into its base yet (its day close has not run); the board is kept as "
                    "the write path left it",
                    {"board": board, "window": period.window, "period": period.id},
                )
        sources = [self.keys.base(at, period.window), *(self.keys.day(at, d) for d in days)]
        return Plan(
            target=self.keys.window(at, period.window, period.id),
            days=sources,  # the base first: on a set board a later day's value wins
            weights=[1.0] * len(sources),
            expireat=0,  # never expires
            scratch=self.keys.tmp(at, "union"),
            distinct=self._distinct(board, period),  # the base keeps none: it is not read
        )

    # --- recomputing ------------------------------------------------------------------------

    def period(
        self,
        board: str,
        period: win.Period,
        now: datetime,
        *,
        force: bool = False,
        progress: Callable[[int], None] | None = None,
        routine: bool = False,
    ) -> Outcome | None:
        """Recompute one board of one period; None if skipped (a closing or archived season
        without ``force``, or a window the board does not keep).

        ``routine`` (the scheduled rollup): a board too large for one atomic call is repaired
        in slices only if its plan changed or its last full repair is older than
        ``worker.full_reconcile_interval``; between those the write-through keeps it exact.

        The alltime board is recomputed under :func:`fold_lock`: held by another run, it is
        skipped (None), or with ``force`` (a rebuild) :class:`FoldBusy` is raised.
        """
        cfg = self.settings.boards[board]
        if period.window not in cfg.windows:
            return None
        if win.SPECS[period.window].archived and not force:
            state = self.client.hget(self.keys.state(board), STATE_SEASON + period.id)
            if state is not None:
                return None
        if not period.endless:
            return self._stores(board, period, now, progress, routine)
        ttl = self.settings.worker.lock_ttl
        with locked(self.client, self.keys, fold_lock(board, period.window), ttl) as lock:
            if lock is None:
                if force:
                    raise FoldBusy(
                        f"the {period.window} board of {board!r} is being folded or recomputed "
                        "by another run right now; try again",
                        {"board": board, "window": period.window},
                    )
                return None  # the fold's run recomputes it, or the next rollup does
            return self._stores(board, period, now, _extending(lock, progress), routine)

    def _stores(
        self, board: str, period: win.Period, now: datetime,
        progress: Callable[[int], None] | None, routine: bool,
    ) -> Outcome:  # fmt: skip
        """:meth:`_recompute` of the board, or of every store of a sharded board: their
        outcomes summed, named by the board's period as an unsharded key would be."""
        cfg = self.settings.boards[board]
        if not shards.is_sharded(cfg):
            return self._recompute(board, period, now, progress, routine)
        outcomes = [
            self._recompute(board, period, now, progress, routine, store)
            for store in shards.stores(board, cfg)
        ]
        return Outcome(
            self.keys.window(board, period.window, period.id),
            "sliced" if any(o.mode == "sliced" for o in outcomes) else outcomes[0].mode,
            sum(o.size for o in outcomes),
            sum(o.changed for o in outcomes),
        )

    def _recompute(
        self,
        board: str,
        period: win.Period,
        now: datetime,
        progress: Callable[[int], None] | None,
        routine: bool,
        store: str | None = None,
    ) -> Outcome:
        cfg = self.settings.boards[board]
        plan = self.plan(board, period, now, store)
        mark = _fingerprint(cfg, plan)
        wanted = True
        if routine:
            last = self.client.hget(self.keys.job_state("reconciled"), plan.target)
            if last is not None:
                seen_mark, _, at = text(last).partition("|")
                fresh = (
                    now.timestamp() - float(at)
                    < self.settings.worker.full_reconcile_interval.total_seconds()
                )
                wanted = seen_mark != mark or not fresh
        outcome = reconcile(
            self.client, self.scripts, cfg, plan,
            atomic_limit=self.atomic_limit, progress=progress, slices_wanted=wanted,
        )  # fmt: skip
        if outcome.mode == "sliced":
            key = self.keys.job_state("reconciled")
            self.client.hset(key, plan.target, f"{mark}|{now.timestamp()}")
            self.client.expire(key, int(self.settings.retention.total_seconds()))
        self._recompute_twin(cfg, plan)
        return outcome

    def _recompute_twin(self, cfg: BoardSettings, plan: Plan) -> Outcome | None:
        """The twin of ``plan``'s board (hidden and banned members: ``Keys.twin_of``), from
        the twin days as the board is from its days, untrimmed; None when the board has no
        twin key at all (one EXISTS: what a board without hidden members pays)."""
        twin = plan.twin(self.keys)
        if not self.client.exists(twin.target, *twin.days):
            return None
        return reconcile(self.client, self.scripts, cfg, twin, atomic_limit=self.atomic_limit)

    def run(
        self, now: datetime, board: str | None = None, *, routine: bool = False
    ) -> list[Outcome]:
        """Every open rolled-up period of every (or one) board.

        ``routine`` (the scheduled job only): large boards are repaired in slices only when due
        (see :meth:`period`); a manual rollup or a close always recomputes. A period whose days
        are past retention is logged and skipped; the others still run.
        """
        outcomes: list[Outcome] = []
        for name in self._boards(board):
            for p in self.open_periods(name, now):
                try:
                    done = self.period(name, p, now, routine=routine)
                except DaysExpired as exc:
                    log.warning("rollup: %s", exc.message)
                    continue
                if done is not None:
                    outcomes.append(done)
                    if done.mode == "sliced" and done.changed:
                        log.info("rollup: repaired %d entries of %s", done.changed, done.target)
        return outcomes

    def rebuild(
        self,
        now: datetime,
        *,
        board: str | None = None,
        window: str = ALL,
        period: str = "current",
        progress: Callable[[int], None] | None = None,
    ) -> list[Outcome]:
        """Operator rebuild: recompute the named period's rolled-up boards (one window, or
        ``all``) from their day keys, closing or archived seasons included (their archives
        are not touched). Boards without the window are skipped."""
        if window not in REBUILDS:
            raise InvalidInput(f"unknown window {window!r}: use {', '.join(REBUILDS)}")
        periods = self._rebuild_periods(window, period, now)
        outcomes = []
        for name in self._boards(board):
            for p in periods:
                done = self.period(name, p, now, force=True, progress=progress)
                if done is not None:
                    outcomes.append(done)
        return outcomes

    def _rebuild_periods(self, window: str, period: str, now: datetime) -> list[win.Period]:
        """The periods a rebuild recomputes. One window: its period ``period``. ``all``:
        ``current`` / ``previous`` of each rolled-up window (and alltime's one period); for a
        day id, every rolled-up period holding that day; for a month or season id, every
        rolled-up period holding one of its days (a season: its weeks, its months, itself
        and alltime); for ``all``, the alltime period."""
        if window != ALL:
            return [win.resolve_period(window, period, now, self.settings)]
        windows = [w for w in win.SPECS.values() if w.rolled_up]
        if period in ("current", "previous"):
            out = []
            for w in windows:
                # The alltime board holds the previous periods' days too.
                wanted = "current" if not w.expires else period
                with contextlib.suppress(BadPeriod):  # between seasons: no season
                    out.append(win.resolve_period(w.name, wanted, now, self.settings))
            return out
        for w in [win.SPECS["day"], *windows]:
            with contextlib.suppress(BadPeriod):
                return self._holding(windows, win.explicit_period(w, period, self.settings))
        raise BadPeriod(
            f"bad period {period!r}: use a day (YYYY-MM-DD), a month (YYYY-MM), a season id, "
            "current or previous"
        )

    def _holding(self, windows: list[win.WindowSpec], named: win.Period) -> list[win.Period]:
        """Every period of ``windows`` that holds a day of ``named``, in order."""
        if named.endless:
            return [named]
        out: list[win.Period] = []
        for w in windows:
            for d in named.days():
                p = w.period_of_day(d, self.settings)
                if p is not None and p not in out:
                    out.append(p)
        return out

    def _boards(self, board: str | None) -> list[str]:
        if board is None:
            return sorted(self.settings.boards)
        if board not in self.settings.boards:
            raise UnknownBoard(board, list(self.settings.boards))
        return [board]


def _extending(lock: Lock, progress: Callable[[int], None] | None) -> Callable[[int], None]:
    """``progress``, renewing ``lock`` at each slice of a long repair."""

    def tick(n: int) -> None:
        lock.extend()
        if progress is not None:
            progress(n)

    return tick
