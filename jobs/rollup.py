"""The rollup job: reconcile rolled-up boards (week, month, season: every window whose
``rolled_up`` is set in ``seasons.windows.SPECS``) with their day keys (SPEC sections 4, 7).

The write path keeps those boards fresh; this job recomputes them from the day keys
with the board's weights and aggregate (``seasons.jobs.reconcile``: one atomic Lua call for small
boards, atomic slices for large ones), then trims them to ``max_entries``. It is the repair
path, and the only path when weights change.

Which periods: the rolled-up periods of every day that still takes events (from the day of
``now - late_grace`` to the day of ``now + 5 minutes``). A season that is closing or archived
is left alone unless its close asks for the final rollup (``force``).

A board can only be recomputed while all of its day keys still exist: a day key expires at
its day's end + ``retention``. A period with a day past that point is refused
(:class:`DaysExpired`) rather than rebuilt from part of its days.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from seasons import timewindows as tw
from seasons import windows as win
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import RedisClient, text
from seasons.errors import BadPeriod, Conflict, InvalidInput, UnknownBoard
from seasons.jobs.reconcile import Outcome, Plan, reconcile
from seasons.keys import STATE_SEASON, Keys
from seasons.scripts import Scripts

log = logging.getLogger(__name__)

ALL = "all"  # a rebuild of every rolled-up window
REBUILDS = (*(name for name, spec in win.SPECS.items() if spec.rolled_up), ALL)


def _fingerprint(cfg: BoardSettings, plan: Plan) -> str:
    """What a board's formula depends on besides the day keys' contents."""
    text = repr((cfg.aggregate, cfg.order, cfg.max_entries, list(plan.days), list(plan.weights)))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


class DaysExpired(Conflict):
    """A rolled-up board cannot be recomputed: some of its day keys are past retention."""

    code = "days_expired"


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
        first = tw.local_day(now - self.settings.late_grace, zone)
        last = tw.local_day(now + tw.FUTURE_TOLERANCE, zone)
        out: list[win.Period] = []
        day = first
        while day <= last:
            for window in win.rolled_up(self.settings.boards[board]):
                p = window.period_of_day(day, self.settings)
                if p is not None and p not in out:
                    out.append(p)
            day += timedelta(days=1)
        return out

    def plan(self, board: str, period: win.Period, now: datetime) -> Plan:
        """The day keys and weights of ``period``'s board, up to the last day that may hold
        events. Raises :class:`DaysExpired` if one of those days is past retention."""
        cfg = self.settings.boards[board]
        horizon = tw.local_day(now + tw.FUTURE_TOLERANCE, self.settings.zone)
        days = [d for d in period.days() if d <= horizon]
        stamp = now.timestamp()
        for d in days:
            if stamp >= win.expire_at(win.Period("day", d.isoformat(), d, d), self.settings):
                raise DaysExpired(
                    f"cannot recompute {period.window} {period.id} of board {board!r} from its "
                    f"day keys: day {d} is past its retention ({self.settings.retention}) and "
                    "its key may be gone; the board is kept as the write path left it",
                    {"board": board, "window": period.window, "period": period.id},
                )
        window = win.SPECS[period.window]
        weights = [window.weight(cfg, d, self.settings) for d in days]
        return Plan(
            target=self.keys.window(board, period.window, period.id),
            days=[self.keys.day(board, d) for d in days],
            weights=weights,
            expireat=win.expire_at(period, self.settings),
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
        """
        cfg = self.settings.boards[board]
        if period.window not in cfg.windows:
            return None
        if win.SPECS[period.window].archived and not force:
            state = self.client.hget(self.keys.state(board), STATE_SEASON + period.id)
            if state is not None:
                return None
        plan = self.plan(board, period, now)
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
        return outcome

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
        ``current`` / ``previous`` of each rolled-up window; for a day id, every rolled-up
        period holding that day; for a month or season id, every rolled-up period holding
        one of its days (a season: its weeks, its months and itself)."""
        if window != ALL:
            return [win.resolve_period(window, period, now, self.settings)]
        windows = [w for w in win.SPECS.values() if w.rolled_up]
        if period in ("current", "previous"):
            out = []
            for w in windows:
                with contextlib.suppress(BadPeriod):  # between seasons: no season
                    out.append(win.resolve_period(w.name, period, now, self.settings))
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
