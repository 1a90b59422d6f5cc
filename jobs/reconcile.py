"""Recompute a week or season board from its day keys without stalling Redis.

The formula (docs/contract.md#boards-and-scores) is ZUNIONSTORE of the day keys with WEIGHTS
and AGGREGATE; for a ``set`` board, each member's weighted score of the latest day that has
it. Run as one command, a union of 7 x 200 000 entries blocks Redis for over a second. So:

- small inputs (at most ``atomic_limit`` entries in all) are recomputed in one Lua call:
  the union (for ``set``: the days laid over each other in order, through ``Plan.scratch``)
  + trim + EXPIREAT, atomic with respect to concurrent writes;
- larger ones are repaired in slices: every member of the board and of each day key is visited
  once (ZSCAN), and ``reconcile_slice.lua`` sets each member of a slice to exactly the formula's
  score (or removes it), atomically per slice. Between slices the write path keeps the board
  fresh (write-through), so no accepted event is lost or counted twice, and no single call
  holds Redis longer than one slice takes.

The board's own members are visited first: on a trimmed board this settles the scores that
decide who is admitted, so the greedy admission of the remaining members keeps exactly the
best ``max_entries``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

from seasons.config.settings import BoardSettings
from seasons.connection import RedisClient
from seasons.keys import Keys
from seasons.scripts import Scripts

ATOMIC_LIMIT = 20_000  # default of settings.worker.atomic_union_limit
# ZSCOREs one slice may run: a slice of m members over d days costs about m * (d + 1) of them,
# a few milliseconds of Redis time at this budget whatever the window's length.
SLICE_BUDGET = 1_500


@dataclass(frozen=True, slots=True)
class Plan:
    """What to recompute: ``target`` = AGG over ``days`` of ``weights[i] * day``. ``days``
    are in chronological order (a set board's latest day wins); ``expireat`` 0: the target
    never expires."""

    target: str
    days: Sequence[str]
    weights: Sequence[float]
    expireat: int
    # A scratch key in the target's slot (a set board's union is built through it).
    scratch: str
    # ties = "earliest": the target's reach set, recomputed with it from ``reached_days``
    # (the reach set of each of ``days``, in their order); None for a board without.
    reached: str | None = None
    reached_days: Sequence[str] = ()
    # ties = "dense": the target's distinct set (one member per distinct score), rebuilt from
    # the target after an atomic union, kept by each slice and made exact after the last.
    distinct: str | None = None
    # A twin (hidden and banned members' entries): never trimmed, since the members on it
    # are not on the public board whose size ``max_entries`` bounds.
    untrimmed: bool = False

    def twin(self, keys: Keys) -> Plan:
        """The same formula over the twin keys (``Keys.twin_of``): the twin board from the
        twin days (and twin base), the twin reach sets alike; twins keep no distinct set."""
        return replace(
            self,
            target=keys.twin_of(self.target),
            days=[keys.twin_of(k) for k in self.days],
            reached=keys.twin_of(self.reached) if self.reached is not None else None,
            reached_days=[keys.twin_of(k) for k in self.reached_days],
            distinct=None,
            untrimmed=True,
        )

    def reach_keys(self) -> list[str]:
        """The KEYS that union_store.lua and reconcile_slice.lua take after the days: the
        reach sets, the distinct set, or none."""
        if self.distinct is not None:
            if self.reached is not None:
                raise ValueError("a plan names both reach sets and a distinct set")
            return [self.distinct]
        if self.reached is None:
            return []
        if len(self.reached_days) != len(self.days):
            raise ValueError(
                f"a plan of {len(self.days)} days names {len(self.reached_days)} reach sets"
            )
        return [self.reached, *self.reached_days]


@dataclass(frozen=True, slots=True)
class Outcome:
    target: str
    mode: str  # "atomic" | "sliced" | "skipped" (large, and the caller said not now)
    size: int
    changed: int  # members whose entry was repaired (sliced mode)


def reconcile(
    client: RedisClient,
    scripts: Scripts,
    board: BoardSettings,
    plan: Plan,
    *,
    atomic_limit: int = ATOMIC_LIMIT,
    slice_size: int | None = None,
    progress: Callable[[int], None] | None = None,
    slices_wanted: bool = True,
) -> Outcome:
    """Make ``plan.target`` equal the formula over ``plan.days`` (then trimmed).

    ``slices_wanted=False``: if the board is too large for one atomic call, leave it as the
    write path keeps it and report ``skipped``.
    """
    max_entries = 0 if plan.untrimmed else board.max_entries
    head = [board.aggregate, board.order, str(max_entries), str(plan.expireat)]
    weights = [repr(float(w)) for w in plan.weights]
    pipe = client.pipeline(transaction=False)
    for key in plan.days:
        pipe.zcard(key)
    inputs = sum(pipe.execute()) if plan.days else 0
    reach = plan.reach_keys()
    if inputs <= atomic_limit:
        if not plan.days:
            client.delete(plan.target, *reach)
            return Outcome(plan.target, "atomic", 0, 0)
        size = scripts.union_store(
            keys=[plan.target, plan.scratch, *plan.days, *reach], args=[*head, *weights]
        )
        return Outcome(plan.target, "atomic", int(size), 0)

    if not slices_wanted:
        return Outcome(plan.target, "skipped", int(client.zcard(plan.target)), 0)
    keys = [plan.target, *plan.days, *reach]
    if slice_size is None:
        slice_size = max(20, SLICE_BUDGET // (len(plan.days) + 1))

    def repair(members: list[str], trim_to: int) -> int:
        args = [
            board.aggregate,
            board.order,
            str(trim_to),
            str(plan.expireat),
            str(len(plan.days)),
            *weights,
            *members,
        ]
        return int(scripts.reconcile_slice(keys=keys, args=args))

    seen: set[str] = set()
    changed = 0
    # The board itself first (see the module docstring), its reach set with it (a member
    # there that is on no day leaves it), then the days.
    own = [plan.target] if plan.reached is None else [plan.target, plan.reached]
    for source in [*own, *plan.days]:
        # While the board's own members are settled, a stale score must not push out a
        # right one: trim only once they all are (the empty call), then after every slice.
        settling = source in own
        if source == plan.days[0]:
            repair([], max_entries)
        cursor = 0
        while True:
            cursor, rows = client.zscan(source, cursor, count=slice_size)
            # Members decoded (decode_responses), which redis-py's types cannot know.
            members = cast(list[tuple[str, float]], rows)
            fresh = [m for m, _ in members if m not in seen]
            seen.update(fresh)
            for i in range(0, len(fresh), slice_size):
                part = fresh[i : i + slice_size]
                changed += repair(part, 0 if settling else max_entries)
                if progress:
                    progress(len(part))
            if cursor == 0:
                break
    if plan.distinct is not None:
        # Every member visited had its score added, and each change dropped the old score
        # when no member kept it; what is left to drop are the scores a drifted distinct set
        # held that no member has: checked and removed atomically per chunk.
        cursor = 0
        while True:
            cursor, rows = client.zscan(plan.distinct, cursor, count=slice_size)
            if rows:
                scripts.reconcile_slice(
                    keys=[plan.target, plan.distinct], args=["prune", *(m for m, _ in rows)]
                )
            if cursor == 0:
                break
    return Outcome(plan.target, "sliced", int(client.zcard(plan.target)), changed)
