"""seasons.jobs.reconcile: both modes give exactly ZUNIONSTORE of the day keys (for a ``set``
board: each member's weighted score of the latest day that has it), under writes too."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seasons import Seasons, calendar
from seasons import windows as win
from seasons.clock import ManualClock
from seasons.config.settings import BoardSettings
from seasons.jobs.reconcile import Plan, reconcile
from seasons.scripts import Scripts

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

TAG = "t:{b}"


def union_reference(
    client: redis.Redis, plan: Plan, board: BoardSettings
) -> list[tuple[str, float]]:
    """ZUNIONSTORE into a scratch key of the same slot, trimmed like the board. A set board
    (which ZUNIONSTORE cannot compute) in Python: the days read in order, a later day's
    weighted score replacing an earlier one's."""
    if board.aggregate == "set":
        latest: dict[str, float] = {}
        for day, weight in zip(plan.days, plan.weights, strict=True):
            for member, score in client.zrange(day, 0, -1, withscores=True):
                latest[member] = weight * score
        rows = sorted(((m, s) for m, s in latest.items()), key=lambda kv: (kv[1], kv[0]))
        if board.order == "desc":
            rows.reverse()
    else:
        scratch = f"{TAG}:scratch"
        client.zunionstore(
            scratch,
            dict(zip(plan.days, plan.weights, strict=True)),
            aggregate=board.aggregate.upper(),
        )
        rows = client.zrange(scratch, 0, -1, withscores=True, desc=board.order == "desc")
        client.delete(scratch)
    if board.max_entries:
        rows = rows[: board.max_entries]
    return sorted(rows)


def board_rows(client: redis.Redis, key: str) -> list[tuple[str, float]]:
    return sorted(client.zrange(key, 0, -1, withscores=True))


@pytest.fixture
def client(connect: Callable[..., redis.Redis]) -> redis.Redis:
    return connect(decode_responses=True)


day_scores = st.dictionaries(
    st.sampled_from([f"m{i:03d}" for i in range(60)]), st.integers(-50, 50), max_size=40
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    days=st.lists(day_scores, min_size=1, max_size=6),
    weights=st.lists(st.sampled_from([0, 0.5, 1, 2, 3]), min_size=6, max_size=6),
    aggregate=st.sampled_from(["sum", "max", "min", "set"]),
    order=st.sampled_from(["desc", "asc"]),
    max_entries=st.sampled_from([0, 1, 5, 25]),
    junk=day_scores,
    sliced=st.booleans(),
)
def test_reconcile_equals_zunionstore(
    client: redis.Redis, days, weights, aggregate, order, max_entries, junk, sliced
) -> None:
    client.flushall()
    board = BoardSettings(aggregate=aggregate, order=order, max_entries=max_entries)
    keys = [f"{TAG}:day:{i}" for i in range(len(days))]
    for key, scores in zip(keys, days, strict=True):
        if scores:
            client.zadd(key, scores)
    target = f"{TAG}:week"
    if junk:  # a board that drifted: wrong scores, members on no day
        client.zadd(target, {m: s * 7 + 1 for m, s in junk.items()})
    plan = Plan(target, keys, weights[: len(keys)], 4_000_000_000, f"{TAG}:union")
    outcome = reconcile(
        client, Scripts(client), board, plan, atomic_limit=0 if sliced else 10**9, slice_size=7
    )
    assert outcome.mode == ("sliced" if sliced and any(days) else "atomic")
    want = union_reference(client, plan, board)
    got = board_rows(client, target)
    if max_entries and len(want) == max_entries:
        # Ties at the trimming edge may keep a different member; scores must still agree.
        assert sorted(s for _, s in got) == sorted(s for _, s in want)
        formula = dict(union_reference(client, plan, BoardSettings(aggregate=aggregate)))
        assert all(formula[m] == s for m, s in got)
    else:
        assert got == want
    if got:
        assert client.expiretime(target) == 4_000_000_000
    assert client.exists(plan.scratch) == 0


def test_sliced_reconcile_under_concurrent_writes(redis_url: str, settings_factory) -> None:
    """A writer keeps submitting while the week board is repaired slice by slice: afterwards
    the board equals ZUNIONSTORE of its days (nothing lost or counted twice)."""
    settings = settings_factory(
        boards={"b": {"aggregate": "sum", "week_weights": [1, 2, 1, 3, 1, 1, 2]}}
    )
    # Key TTLs are absolute (EXPIREAT), so the clock stays near the real now.
    clock = ManualClock(datetime.now(UTC))
    app = Seasons(settings, clock=clock)
    rng = random.Random(5)
    week = win.period_of_day("week", calendar.local_day(clock(), settings.zone), settings)
    assert week is not None
    # Past days of the week by backfill, then drift the week board on purpose.
    for day in week.days():
        if day <= calendar.local_day(clock(), settings.zone):
            ts = min(datetime(day.year, day.month, day.day, 10, tzinfo=UTC), clock()).isoformat()
            app.submit_many(
                [
                    {
                        "board": "b",
                        "member": f"p{rng.randrange(3000)}",
                        "value": rng.randint(1, 9),
                        "ts": ts,
                    }
                    for _ in range(2000)
                ],
                backfill=True,
            )
    target = app.keys.week("b", week.id)
    app.client.zincrby(target, 1000, "p1")
    app.client.zadd(target, {"ghost": 5})

    stop = threading.Event()
    written = [0]

    def writer() -> None:
        w = Seasons(settings, clock=clock)
        while not stop.is_set():
            w.submit_many(
                [{"board": "b", "member": f"p{rng.randrange(3000)}", "value": 1} for _ in range(50)]
            )
            written[0] += 50
        w.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        days = [app.keys.day("b", d) for d in week.days()]
        weights = [
            settings.boards["b"].week_weights[calendar.weekday_index(d, 0)] for d in week.days()
        ]
        plan = Plan(target, days, weights, win.expire_at(week, settings), app.keys.tmp("b", "u"))
        outcome = reconcile(
            app.client, app.scripts, settings.boards["b"], plan, atomic_limit=0, slice_size=100
        )
    finally:
        stop.set()
        thread.join()
    assert outcome.mode == "sliced" and outcome.changed >= 2
    assert written[0] > 0
    assert board_rows(app.client, target) == union_reference(app.client, plan, settings.boards["b"])
    app.close()


def test_routine_rollup_repairs_large_boards_when_their_plan_changes(settings_factory) -> None:
    """Large boards: the scheduled rollup repairs in slices once, then skips them until the
    full-reconcile interval passes or the weights change; small boards always recompute."""
    from seasons.jobs.rollup import Rollup

    base = {"aggregate": "sum", "week_weights": [1, 1, 1, 1, 1, 1, 1]}
    settings = settings_factory(boards={"b": base}, worker={"atomic_union_limit": 10})
    clock = ManualClock(datetime.now(UTC).replace(hour=10, minute=0))  # +1 h stays in the day
    app = Seasons(settings, clock=clock)
    app.submit_many([{"board": "b", "member": f"p{i}", "value": i} for i in range(50)])
    rollup = Rollup(app.client, app.scripts, settings, app.keys)
    modes = {o.target: o.mode for o in rollup.run(clock(), routine=True)}
    assert set(modes.values()) == {"sliced"}
    week_key = next(k for k in modes if ":week:" in k)
    app.client.zadd(week_key, {"drift": 1})  # not repaired by a skipped routine run
    assert {o.mode for o in rollup.run(clock(), routine=True)} == {"skipped"}
    assert app.client.zscore(week_key, "drift") == 1.0
    # a manual rollup (CLI, HTTP admin, after a close) always repairs
    assert {o.mode for o in rollup.run(clock())} == {"sliced"}
    assert app.client.zscore(week_key, "drift") is None
    app.client.zadd(week_key, {"drift": 1})
    assert {o.mode for o in rollup.run(clock(), routine=True)} == {"skipped"}
    clock.now += settings.worker.full_reconcile_interval  # the interval passed: repaired
    assert {o.mode for o in rollup.run(clock(), routine=True)} == {"sliced"}
    assert app.client.zscore(week_key, "drift") is None

    heavier = settings_factory(
        boards={"b": {**base, "week_weights": [3, 3, 3, 3, 3, 3, 3]}},
        worker={"atomic_union_limit": 10},
    )
    reweighted = Rollup(app.client, app.scripts, heavier, app.keys)
    modes = [o.mode for o in reweighted.run(clock(), routine=True)]
    assert "sliced" in modes  # the week's weights changed: repaired at once
    expected = sorted((f"p{i}", 3.0 * i) for i in range(50))
    assert board_rows(app.client, week_key) == expected
    app.close()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    days=st.lists(day_scores, min_size=1, max_size=4),
    weights=st.lists(st.sampled_from([0.5, 1, 2]), min_size=4, max_size=4),
)
def test_a_set_union_may_store_into_its_first_day(
    client: redis.Redis, days: list[dict[str, int]], weights: list[float]
) -> None:
    """A base that the next days are folded into is the target and the first day at once:
    the later days' values replace its own, which it keeps for the members they lack."""
    client.flushall()
    keys = [f"{TAG}:base", *(f"{TAG}:day:{i}" for i in range(1, len(days)))]
    for name, scores in zip(keys, days, strict=True):
        if scores:
            client.zadd(name, scores)
    want: dict[str, float] = {}
    for scores, weight in zip(days, weights, strict=False):
        want.update({m: weight * s for m, s in scores.items()})
    args = ["set", "desc", "0", "0", *(repr(float(w)) for w in weights[: len(keys)])]
    size = Scripts(client).union_store(keys=[keys[0], f"{TAG}:union", *keys], args=args)
    assert dict(client.zrange(keys[0], 0, -1, withscores=True)) == want
    assert size == len(want) and client.exists(f"{TAG}:union") == 0
    assert client.ttl(keys[0]) in (-1, -2)  # expireat 0: never expires
