"""Clearing one period of one board (a test event, an incident): ``seasons clear``,
``POST /v1/admin/boards/{board}/clear`` and :meth:`seasons.Seasons.clear`.

- A **day**: its key (and on a board with ``ties = "earliest"`` its reach set, with
  ``ties = "dense"`` its distinct set) is deleted,
  then every rolled-up board holding the day (each window of ``seasons.windows.rolled_up``:
  its week, month, season, all-time) is recomputed from the day keys it still has (reach
  sets with them), so that no board keeps the day's scores.
- A **rolled-up period** (week, month, season, all-time): recomputed from its days; with
  ``with_days`` its days are cleared first, each as above (for a window with a base, the
  base and its fold mark too).
- Each key deleted takes its twin with it (hidden and banned members' entries,
  ``Keys.twin_of``), and each board recomputed its twin (:mod:`seasons.jobs.rollup`): a
  cleared period holds no score of any member, visible or not.

A rolled-up board that is left with no day at all (every day of it up to now is cleared) is
deleted in the same transaction as the days rather than recomputed: its days past retention
may be gone, and a write after the transaction starts it afresh from that write alone, as
it starts its day key.

On a sharded board (``boards.<b>.shards`` > 1) every store's keys of the period are deleted,
one transaction per store (each marks itself done in the store's state hash), and every
store's boards recomputed.

Refused, changing nothing (:class:`~seasons.errors.Conflict`): a day of a closing or archived
season, and such a season itself (its standings are, or are being, archived); a day already
folded into a base (a base holds no days, so a day cannot be taken out of it: clear the
base's window with its days to drop it); a board to recompute with a day past retention
(:class:`~seasons.jobs.rollup.DaysExpired`); a clear of a day past retention. Metadata is
left alone: the sweep removes members that are on no key any more.

A clear is one run (:class:`seasons.jobs.state.Run`) with an id, under the lock
``clear:<board>`` and the close locks of the seasons it touches (so a season is not closed
between the checks and the deletion). Its plan is recorded when it starts and each step when
done. The deletion also marks itself done in the board's state hash, in the transaction that
deletes, so a run killed anywhere and called again with the same id never deletes twice
(events written after the first deletion stay) and finishes the recomputes it has left. A
finished run answers its result again for 48 hours.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from typing import Any, cast

from seasons import calendar, shards, ties
from seasons import windows as win
from seasons.audit import Audit, Note
from seasons.config.settings import Settings
from seasons.connection import RedisClient, decoded
from seasons.erasure import Cleared, Recomputed
from seasons.errors import Conflict, DayFolded, SeasonClosed, UnknownBoard
from seasons.jobs.closes import CLOSE_SEASON
from seasons.jobs.locks import Lock, locked
from seasons.jobs.rollup import DaysExpired, Rollup, fold_lock
from seasons.jobs.state import Checkpoint, JobState, Run, no_checkpoint
from seasons.keys import (
    SEASON_ARCHIVED,
    SEASON_CLOSING,
    STATE_CLEARING,
    STATE_FOLDED,
    STATE_GAP,
    STATE_SEASON,
    Keys,
)
from seasons.write_script import DEDUPE_WINDOW
from seasons.writes import check_batch_id, new_batch_id

log = logging.getLogger(__name__)

CLEAR = "clear"  # the job's runs: <ns>:job:clear:<run id>; its lock: clear:<board>
# STATE_CLEARING + run id is written by the transaction that deletes (the board's slot),
# which the run's own record (another slot) cannot be: it says the deletion is done.
ONE_DAY = timedelta(days=1)


class RunIdReused(Conflict):
    """A clear id already names a clear of another board, window, period or ``with_days``."""

    code = "run_id_reused"


@dataclass(frozen=True, slots=True)
class ClearPlan:
    """What one clear does, decided when its run starts (and recorded with it)."""

    board: str
    target: win.Period
    with_days: bool
    days: tuple[date, ...]  # day keys deleted
    emptied: tuple[win.Period, ...]  # rolled-up boards left with no day: deleted with them
    rebuilt: tuple[win.Period, ...]  # rolled-up boards recomputed from their remaining days
    base: bool  # the target window's base and fold mark are dropped
    existing: tuple[str, ...]  # the keys deleted that existed when the plan was made

    @property
    def seasons(self) -> list[str]:
        """The seasons whose boards the clear changes (not closed while it runs)."""
        return sorted(
            {p.id for p in (*self.emptied, *self.rebuilt) if win.SPECS[p.window].archived}
        )

    def request(self) -> dict[str, Any]:
        return {
            "board": self.board, "window": self.target.window, "period": self.target.id,
            "with_days": self.with_days,
        }  # fmt: skip

    def describe(self) -> str:
        """One line per thing done, for the confirmation prompt."""
        name = f"{self.target.window} {self.target.id} of board {self.board!r}"
        lines = [f"clear {name}" + (" with its days" if self.with_days else "") + ":"]
        if self.days:
            span = f"{self.days[0]}" + (f" .. {self.days[-1]}" if len(self.days) > 1 else "")
            lines.append(f"  delete the day keys of {len(self.days)} day(s): {span}")
        if self.emptied:
            listed = ", ".join(f"{p.window} {p.id}" for p in self.emptied)
            lines.append(f"  delete (no day of them is left): {listed}")
        if self.base:
            lines.append(f"  drop the base of the {self.target.window} window")
        if self.rebuilt:
            listed = ", ".join(f"{p.window} {p.id}" for p in self.rebuilt)
            lines.append(f"  recompute from their day keys: {listed}")
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({
            **self.request(), "first": self.target.first.isoformat(),
            "last": self.target.last.isoformat(), "days": [d.isoformat() for d in self.days],
            "emptied": [_period_json(p) for p in self.emptied],
            "rebuilt": [_period_json(p) for p in self.rebuilt], "base": self.base,
            "existing": list(self.existing),
        })  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> ClearPlan:
        data = json.loads(text)
        target = win.Period(
            cast(win.Window, data["window"]), data["period"], date.fromisoformat(data["first"]),
            date.fromisoformat(data["last"]),
        )  # fmt: skip
        return cls(
            data["board"], target, data["with_days"],
            tuple(date.fromisoformat(d) for d in data["days"]),
            tuple(_period_of(p) for p in data["emptied"]),
            tuple(_period_of(p) for p in data["rebuilt"]), data["base"], tuple(data["existing"]),
        )  # fmt: skip


def _period_json(p: win.Period) -> list[str]:
    return [p.window, p.id, p.first.isoformat(), p.last.isoformat()]


def _period_of(data: list[str]) -> win.Period:
    window, ident, first, last = data
    return win.Period(cast(win.Window, window), ident, date.fromisoformat(first),
                      date.fromisoformat(last))  # fmt: skip


class Clear:
    """Clears of one namespace (built by ``seasons.jobs.registry.clear_of``)."""

    def __init__(
        self, client: RedisClient, settings: Settings, keys: Keys, *, state: JobState,
        rollup: Rollup, checkpoint: Checkpoint = no_checkpoint,
        clock: Callable[[], datetime],
    ):  # fmt: skip
        self.client = client
        self.settings = settings
        self.keys = keys
        self.state = state
        self.rollup = rollup
        self.checkpoint = checkpoint  # tests' hook between the steps of a run
        self.clock = clock
        self.audit = Audit(client, keys, settings)

    # --- what a clear does ------------------------------------------------------------------

    def target(self, board: str, window: str, period: str, now: datetime) -> win.Period:
        """The period a clear names: :class:`UnknownBoard`, :class:`BadWindow` (a window the
        board does not keep) or :class:`BadPeriod` if there is none."""
        if board not in self.settings.boards:
            raise UnknownBoard(board, list(self.settings.boards))
        win.board_window(board, self.settings.boards[board], window)
        return win.resolve_period(window, period, now, self.settings)

    def plan(
        self, board: str, window: str, period: str, now: datetime, *, with_days: bool = False
    ) -> ClearPlan:
        """What clearing ``window`` ``period`` of ``board`` would do at ``now``; raises
        what would refuse it (see the module's docstring), having changed nothing."""
        target = self.target(board, window, period, now)
        cfg = self.settings.boards[board]
        rolled = win.rolled_up(cfg)
        state = self._state(board)
        horizon = calendar.local_day(now + calendar.FUTURE_TOLERANCE, self.settings.zone)
        is_day = not win.SPECS[target.window].rolled_up
        with_days = with_days and not is_day  # a day's only day is itself
        days: list[date] = []
        periods: list[win.Period] = [] if is_day else [target]
        if not self._live(target, now):
            raise DaysExpired(
                f"cannot clear {target.window} {target.id} of board {board!r}: it is past its "
                f"retention ({self.settings.retention}) and its keys may be gone",
                {"board": board, "window": target.window, "period": target.id},
            )
        if is_day or with_days:
            self._check_folded(board, target, state, rolled, with_days)
            # Later days cannot hold events yet; alltime's days before the oldest kept have
            # expired, and so has every board holding only such days.
            day = target.first
            if target.endless:
                day = win.oldest_kept_day(now, self.settings)
            last = target.last if is_day else min(target.last, horizon)
            while day <= last:
                days.append(day)
                for w in rolled:
                    p = w.period_of_day(day, self.settings)
                    if p is not None and p not in periods:
                        periods.append(p)
                day += ONE_DAY
        periods = [p for p in periods if self._live(p, now)]  # the others' keys are gone
        emptied = [p for p in periods if (is_day or with_days) and _holds(target, p, horizon)]
        rebuilt = [p for p in periods if p not in emptied]
        for p in periods:
            self._check_season(board, p, state)
        for p in rebuilt:
            self.rollup.plan(board, p, now)  # DaysExpired: nothing is deleted
        base = with_days and target.endless
        doomed = self._doomed(board, days, emptied, target if base else None)
        pipe = self.client.pipeline(transaction=False)
        for key in doomed:
            pipe.exists(key)
        existing = tuple(k for k, n in zip(doomed, pipe.execute(), strict=True) if n)
        return ClearPlan(
            board, target, with_days, tuple(days), tuple(emptied), tuple(rebuilt), base, existing
        )

    def _state(self, board: str) -> dict[str, str]:
        """The board's state hash; on a sharded board with its stores' fold marks (each
        store folds its own base), the latest of each."""
        state = decoded(self.client.hgetall(self.keys.state(board)))
        cfg = self.settings.boards[board]
        if shards.is_sharded(cfg):
            for store in shards.stores(board, cfg):
                for field, value in decoded(self.client.hgetall(self.keys.state(store))).items():
                    if field.startswith((STATE_FOLDED, STATE_GAP)):
                        state[field] = max(state.get(field, value), value)
        return state

    def _live(self, p: win.Period, now: datetime) -> bool:
        """Whether ``p``'s key may still exist at ``now``."""
        at = win.expire_at(p, self.settings)
        return at is None or now.timestamp() < at

    def _check_folded(
        self, board: str, target: win.Period, state: dict[str, str],
        rolled: tuple[win.WindowSpec, ...], with_days: bool,
    ) -> None:  # fmt: skip
        for w in rolled:
            through = state.get(STATE_FOLDED + w.name)
            if through is None or (with_days and target.window == w.name):
                continue
            if target.first <= date.fromisoformat(through):
                raise DayFolded(
                    f"cannot clear {target.window} {target.id} of board {board!r}: its days "
                    f"through {through} are folded into the {w.name} base, which holds their "
                    f"aggregate and not the days; clear {w.name} with its days to drop the base",
                    {"board": board, "window": target.window, "period": target.id,
                     "folded": w.name, "through": through},
                )  # fmt: skip

    def _check_season(self, board: str, p: win.Period, state: dict[str, str]) -> None:
        if not win.SPECS[p.window].archived:
            return
        found = state.get(STATE_SEASON + p.id)
        if found in (SEASON_CLOSING, SEASON_ARCHIVED):
            raise SeasonClosed(
                f"cannot clear: season {p.id} of board {board!r} is {found}, and its standings "
                "are kept as archived (restore or export the archive instead)",
                {"board": board, "season": p.id, "state": found},
            )

    def _doomed(
        self, board: str, days: list[date], emptied: list[win.Period], base: win.Period | None
    ) -> list[str]:
        """The boards a clear deletes, each followed by its twin (hidden and banned members'
        entries, ``Keys.twin_of``): a period cleared is cleared for them too; on a sharded
        board every store's."""
        out = []
        for store in shards.stores(board, self.settings.boards[board]):
            out += [self.keys.day(store, d) for d in days]
            out += [self.keys.window(store, p.window, p.id) for p in emptied]
            if base is not None:
                out.append(self.keys.base(store, base.window))
        return [k for key in out for k in (key, self.keys.twin_of(key))]

    # --- running one ------------------------------------------------------------------------

    def run(
        self, board: str, window: str, period: str, now: datetime, *, with_days: bool = False,
        run_id: str | None = None, note: Note | None = None,
    ) -> Cleared:  # fmt: skip
        """Clear ``window`` ``period`` of ``board`` as run ``run_id`` (generated if None; a
        clear id is 1-128 bytes of UTF-8 without control characters). The same id again
        resumes the run or, once it finished, answers its result; with another request it
        raises :class:`RunIdReused`. Another clear of the board running, or a close of a
        season it touches, raises :class:`~seasons.errors.Conflict` (try again).

        The clear's audit entry (``note``: who and why) is appended once per clear id, when
        the clear finishes: a resumed run or an answer given again appends nothing more."""
        note = note if note is not None else Note()
        run_id = new_batch_id() if run_id is None else check_batch_id(run_id, "clear id")
        target = self.target(board, window, period, now)
        with_days = with_days and win.SPECS[target.window].rolled_up
        asked = {"board": board, "window": target.window, "period": target.id,
                 "with_days": with_days}  # fmt: skip
        found = self.state.run(CLEAR, run_id, no_checkpoint, self.clock)
        if found.finished:
            return self._answer(found, asked, run_id)
        busy = f"another clear of board {board!r} is running"
        with self._locked(f"{CLEAR}:{board}", busy) as lock, ExitStack() as stack:
            run = self.state.run(CLEAR, run_id, self._checkpoint([lock]), self.clock)
            if run.finished:
                return self._answer(run, asked, run_id)
            stored = run.fields.get("plan")
            if stored:
                self._same(ClearPlan.from_json(stored).request(), asked, run_id)
            marker = STATE_CLEARING + run_id
            deleted = bool(stored) and (run.done("delete") or self._marked(board, marker))
            # Before its deletion nothing is changed yet: a run stopped then plans again.
            plan = (
                ClearPlan.from_json(stored) if stored and deleted
                else self.plan(board, window, period, now, with_days=with_days)
            )  # fmt: skip
            held = [lock]
            for season in plan.seasons:
                held.append(stack.enter_context(self._locked(
                    f"{CLOSE_SEASON}:{season}", f"season {season} is being closed right now"
                )))  # fmt: skip
            run.checkpoint = self._checkpoint(held)
            if deleted:
                log.info("clear %s: resuming after its deletion", run_id)
            else:
                self._plan_and_delete(run, run_id, (board, window, period, with_days), now, held)
                plan = ClearPlan.from_json(run.fields["plan"])
            return self._finish(run, plan, run_id, held, note)

    def _plan_and_delete(
        self, run: Run, run_id: str, asked: tuple[str, str, str, bool], now: datetime,
        held: list[Lock],
    ) -> None:  # fmt: skip
        """Plan under the locks of every fold into the board's bases (a day checked as not
        folded stays so until it is deleted), record the plan, delete."""
        board, window, period, with_days = asked
        cfg = self.settings.boards[board]
        with ExitStack() as stack:
            folds = [
                stack.enter_context(
                    self._locked(
                        fold_lock(board, w.name),
                        f"the {w.name} board of {board!r} is being folded or recomputed right now",
                    )
                )  # fmt: skip
                for w in win.rolled_up(cfg)
                if not w.expires
            ]
            run.checkpoint = self._checkpoint([*held, *folds])
            # Checked again now that no close of its seasons and no fold can start.
            plan = self.plan(board, window, period, now, with_days=with_days)
            run.set("plan", plan.to_json())
            run.step("delete", lambda: self._delete(plan, run_id))
        run.checkpoint = self._checkpoint(held)

    def _finish(
        self, run: Run, plan: ClearPlan, run_id: str, held: list[Lock], note: Note
    ) -> Cleared:
        """The recomputes left, then the result."""
        board = plan.board
        rebuilt: list[Recomputed] = []
        for p in plan.rebuilt:
            field = f"outcome:{p.window}:{p.id}"

            def recompute(p: win.Period = p, field: str = field) -> None:
                outcome = self.rollup.period(
                    board, p, self.clock(), force=True, progress=lambda _: _extend(held)
                )
                run.set(field, json.dumps(asdict(outcome) if outcome is not None else None))

            run.step(f"rebuild:{p.window}:{p.id}", recompute)
            found = json.loads(run.fields.get(field) or "null")
            if found is not None:
                rebuilt.append(Recomputed.model_validate(found))
        run.step("unmark", lambda: self._unmark(board, STATE_CLEARING + run_id))
        result = Cleared(
            run_id=run_id, board=board, window=plan.target.window, period=plan.target.id,
            with_days=plan.with_days, deleted=list(plan.existing), rebuilt=rebuilt,
        )  # fmt: skip
        run.set("result", result.model_dump_json())
        # A step before the run is marked finished, under the clear id: a run stopped after
        # the append, before the step is marked done, appends nothing when it is resumed.
        run.step("audit", lambda: self.audit.append(
            "clear", note, self.clock(), boards=[board], once=f"clear:{run_id}",
            after=result.model_dump(mode="json", exclude={"board"}),
        ))  # fmt: skip
        run.finish(keep=DEDUPE_WINDOW)
        log.info("clear %s: %s", run_id, plan.describe().replace("\n", " "))
        return result

    def _delete(self, plan: ClearPlan, run_id: str) -> None:
        doomed = self._doomed(
            plan.board, list(plan.days), list(plan.emptied), plan.target if plan.base else None
        )
        rule = ties.of(self.settings.boards[plan.board])
        beside = rule.beside(self.keys)
        if beside is not None:
            # The reach sets or distinct sets go with their boards (the rebuilt boards' are
            # recomputed with them); the result names the boards deleted.
            sets = []
            for store in shards.stores(plan.board, self.settings.boards[plan.board]):
                sets += [beside(store, "day", d.isoformat()) for d in plan.days]
                sets += [beside(store, p.window, p.id) for p in plan.emptied]
            # Reach sets have twins; distinct sets describe public scores only.
            doomed += [*sets, *(self.keys.twin_of(k) for k in sets if rule.reach_set)]
        # One transaction in each store's slot (the board's own, unsharded): the days, the
        # boards they leave empty and the mark that they are gone, at one instant for every
        # reader and writer of that store. A store already marked by an earlier try of this
        # run (killed between stores) is not deleted again: events written since then stay.
        by_store: dict[str, list[str]] = {}
        for key in doomed:
            parsed = self.keys.parse(key)
            by_store.setdefault(parsed.board if parsed and parsed.board else plan.board,
                                []).append(key)  # fmt: skip
        marker = STATE_CLEARING + run_id
        for store in shards.stores(plan.board, self.settings.boards[plan.board]):
            state_key = self.keys.state(store)
            if store != plan.board and self.client.hexists(state_key, marker):
                continue
            pipe = self.client.pipeline(transaction=True)
            for key in by_store.get(store, []):
                pipe.delete(key)
            if plan.base:  # the board starts again from the days after the clear
                window = plan.target.window
                pipe.hdel(state_key, STATE_FOLDED + window, STATE_GAP + window)
            pipe.hset(state_key, marker, self.clock().isoformat())
            pipe.execute()

    def _marked(self, board: str, marker: str) -> bool:
        """Whether every store of ``board`` (the board itself, unsharded) is marked
        ``marker``: the deletion of that clear is done."""
        stores = shards.stores(board, self.settings.boards[board])
        return all(self.client.hexists(self.keys.state(s), marker) for s in stores)

    def _unmark(self, board: str, marker: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        for store in shards.stores(board, self.settings.boards[board]):
            pipe.hdel(self.keys.state(store), marker)
        pipe.execute()

    def _answer(self, run: Run, asked: dict[str, Any], run_id: str) -> Cleared:
        result = Cleared.model_validate_json(run.fields["result"])
        self._same(
            {"board": result.board, "window": result.window, "period": result.period,
             "with_days": result.with_days},
            asked, run_id,
        )  # fmt: skip
        return result

    def _same(self, recorded: dict[str, Any], asked: dict[str, Any], run_id: str) -> None:
        if recorded != asked:
            raise RunIdReused(
                f"clear id {run_id!r} names a clear of {_request_text(recorded)}, not of "
                f"{_request_text(asked)}; use another id for another clear",
                {"run_id": run_id, "recorded": recorded},
            )

    @contextmanager
    def _locked(self, name: str, busy: str) -> Iterator[Lock]:
        with locked(self.client, self.keys, name, self.settings.worker.lock_ttl) as lock:
            if lock is None:
                raise Conflict(f"{busy} (lock {name!r}); try again", {"lock": name})
            yield lock

    def _checkpoint(self, held: list[Lock]) -> Checkpoint:
        def checkpoint(name: str) -> None:
            self.checkpoint(name)
            _extend(held)

        return checkpoint


def _extend(held: list[Lock]) -> None:
    for lock in held:
        lock.extend()


def _holds(target: win.Period, p: win.Period, horizon: date) -> bool:
    """Whether every day of ``p`` that may hold events by ``horizon`` is a day of ``target``."""
    return target.first <= p.first and min(p.last, horizon) <= target.last


def _request_text(request: dict[str, Any]) -> str:
    days = " with its days" if request["with_days"] else ""
    return f"{request['window']} {request['period']} of board {request['board']!r}{days}"
