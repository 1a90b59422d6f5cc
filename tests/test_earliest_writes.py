"""``ties = "earliest"``, the write side: the reach sets beside every board (member -> the
time it reached its score there) against a real redis-server and the reference model
(tests/reference.py, ``Model.reach``).

- Random streams (hypothesis) on boards of all four aggregates: equal values, late events
  for yesterday, several days, weeks, months and seasons. Every reach set (day, week, month,
  season) equals the model's, with its board's TTL, after the writes (write-through), after a
  forced rollup of every period (one atomic call each), after more writes, and after a
  sliced reconcile of drifted boards and reach sets.
- By hand: which event's time a reach keeps for each aggregate; an archived season's reach
  set is copied beside the archive without TTL; forget removes the member's reach times; a
  cleared day takes its reach set with it and the rolled-up reach sets are recomputed; the
  sweep gives a reach set without TTL its board's; the settings refuse the combinations whose
  reach times could not be kept exact.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import Model, key, names, zset
from streams import play, rebuild_all, step_of

from seasons import Seasons
from seasons.archives import Archives
from seasons.clock import ManualClock
from seasons.config import ConfigError, Settings
from seasons.events import validate_batch
from seasons.jobs.rollup import Rollup
from seasons.jobs.sweep import Sweeper
from seasons.keys import Keys
from seasons.write_script import script_args

NS = "earl"
Make = Callable[..., Settings]
WINDOWS = ["day", "week", "month", "season"]
MEMBERS = ("a", "b", "B", "é")
BOARDS = ("sum", "max", "min", "set")
# Far in the future (EXPIREAT from the manual clock must lie ahead of Redis's real clock).
STARTS = (
    datetime(2035, 3, 9, 12, tzinfo=UTC),  # New York springs forward on 2035-03-11
    datetime(2035, 8, 29, 20, tzinfo=UTC),  # a month rolls over
)


def reached(board: str, window: str, pid: str) -> str:
    """A reach set's name, spelled here rather than taken from seasons.keys."""
    return f"{NS}:{{{board}}}:reached:{window}:{pid}"


# --- random streams -------------------------------------------------------------------------


def board_settings(aggregate: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "aggregate": st.just(aggregate),
            "order": st.sampled_from(["desc", "asc"]),
            "ties": st.just("earliest"),
            "windows": st.just(WINDOWS),
            # No zero weight: the settings refuse one with earliest ties.
            "week_weights": st.lists(st.sampled_from([1, 2, 0.5]), min_size=7, max_size=7),
            "month_weights": st.lists(st.sampled_from([1, 2, 3]), max_size=31),
            "season_weights": st.lists(st.sampled_from([1, 2]), max_size=3),
        }
    )


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict[str, Any], datetime]:
    start = draw(st.sampled_from(STARTS)) + timedelta(hours=draw(st.integers(0, 30)))
    anchor = start.date() + timedelta(days=draw(st.integers(-8, 2)))
    overrides = {
        "namespace": NS,
        "timezone": draw(st.sampled_from(["UTC", "America/New_York", "Asia/Kolkata"])),
        "week_start": draw(st.sampled_from(["monday", "thursday"])),
        "late_grace": draw(st.sampled_from(["PT1H", "PT12H"])),
        # Long enough that a forced rollup still finds every day of the stream.
        "retention": "P120D",
        "seasons": {"length_days": draw(st.sampled_from([5, 9])), "anchor": anchor.isoformat()},
        "boards": {b: draw(board_settings(b)) for b in BOARDS},
    }
    return overrides, start


event = st.fixed_dictionaries(
    {
        "board": st.sampled_from(BOARDS),
        "member": st.sampled_from(MEMBERS),
        # Few values: equal scores (and sums that do not change, with 0) are common.
        "value": st.one_of(st.integers(-2, 2), st.sampled_from([0, 5, 10])),
        # seconds before now: late events for an earlier time, and for yesterday
        "back": st.one_of(st.integers(0, 600), st.integers(0, 14 * 3600)),
    },
    optional={"event_id": st.sampled_from(["e0", "e1"])},
)
step = step_of(event, 6)


def assert_reach(r: Any, model: Model, boards: tuple[str, ...] = BOARDS) -> None:
    """Every board and reach set the model has, raw from Redis, with their TTLs; and no
    other reach set."""
    for board in boards:
        periods = model.periods(board)
        for window, pid in sorted(periods):
            name = key(NS, board, window, pid)
            assert zset(r, name) == model.board(board, window, pid), (board, window, pid)
            reach = reached(board, window, pid)
            assert zset(r, reach) == model.reach(board, window, pid), (board, window, pid)
            assert r.expiretime(reach) == r.expiretime(name) == model.cal.expire_at(window, pid)
        stored = {n for n in names(r, f"{NS}:{{{board}}}:reached:*")}
        assert stored == {reached(board, w, p) for w, p in periods}


@pytest.mark.both_backends
@hsettings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=configs(), steps=st.lists(step, min_size=8, max_size=40))
def test_reach_sets_match_the_model_through_writes_rollups_and_repairs(
    config: tuple[dict[str, Any], datetime],
    steps: list[tuple[str, Any]],
    settings_factory: Make,
    r: redis.Redis,
) -> None:
    overrides, start = config
    r.flushall()
    settings = settings_factory(**overrides)
    clock = ManualClock(start)
    model = Model(settings)
    half = len(steps) // 2
    with Seasons(settings, clock=clock) as s:
        play(s, r, model, clock, steps[:half])
        assert_reach(r, model)  # write-through
        for board in BOARDS:  # drift, for the rollup to undo
            for window, pid in model.periods(board):
                if window != "day":
                    r.zadd(reached(board, window, pid), {"a": 1.5, "ghost": 2})
        rebuild_all(s, model, BOARDS, clock(), atomic=True)
        assert_reach(r, model)  # the rollup gives the same reach sets
        play(s, r, model, clock, steps[half:])
        assert_reach(r, model)
        for board in BOARDS:
            for window, pid in model.periods(board):
                if window != "day":
                    r.zadd(key(NS, board, window, pid), {"ghost": 5})
                    r.zadd(reached(board, window, pid), {"a": 1.5, "ghost": 2, "other": 3})
        rebuild_all(s, model, BOARDS, clock(), atomic=False)
        assert_reach(r, model)


# --- by hand --------------------------------------------------------------------------------

NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # a Wednesday
ANCHOR = date(2035, 6, 11)  # S1 is 2035-06-11 .. 2035-06-24
MON, TUE, WED = "2035-06-11", "2035-06-12", "2035-06-13"
WEEK = MON


def one_board(make: Make, **board: Any) -> Settings:
    return make(
        namespace=NS,
        timezone="UTC",
        week_start="monday",
        late_grace="PT12H",
        seasons={"length_days": 14, "anchor": ANCHOR.isoformat()},
        boards={"b": {"ties": "earliest", "week_weights": [1, 2, 3, 1, 1, 1, 2], **board}},
    )


def at(day: str, hour: int = 8, minute: int = 0) -> datetime:
    return datetime.fromisoformat(f"{day}T{hour:02d}:{minute:02d}:00+00:00")


def ev(member: str, value: float, day: str, hour: int = 8, minute: int = 0) -> dict[str, Any]:
    return {"board": "b", "member": member, "value": value, "ts": at(day, hour, minute)}


def both(s: Seasons, model: Model, events: list[dict[str, Any]], **kw: Any) -> None:
    """One batch through Seasons and the model (backfill: days before NOW's are open); both
    must accept all of it."""
    kw.setdefault("backfill", True)
    want = model.submit(events, s.clock(), **kw)
    api = [{**e, "ts": e["ts"].isoformat()} for e in events]
    got = s.submit_many(api, **kw)
    assert (got.applied, got.duplicates) == want


def epoch(day: str, hour: int = 8, minute: int = 0) -> float:
    return at(day, hour, minute).timestamp()


@pytest.mark.both_backends
def test_what_each_aggregate_keeps_as_the_reach(settings_factory: Make, r: redis.Redis) -> None:
    """Numbers by hand (and the model agreeing): the events' own times, not Seasons' output."""
    for aggregate in ("sum", "max", "min", "set"):
        r.flushall()
        settings = one_board(settings_factory, aggregate=aggregate)
        model = Model(settings)
        with Seasons(settings, clock=ManualClock(NOW)) as s:
            both(s, model, [ev("a", 5, TUE, 3), ev("a", 5, TUE, 1), ev("a", 0, TUE, 6)])
            day = zset(r, reached("b", "day", TUE))
            assert day == model.reach("b", "day", TUE)
            want = {
                "sum": epoch(TUE, 3),  # 5 at 3:00, +5 at 1:00 (earlier), +0 changes nothing
                "max": epoch(TUE, 1),  # 5 twice: the earlier; 0 is worse
                "min": epoch(TUE, 6),  # 0 is better than 5
                "set": epoch(TUE, 6),  # the last event's value stands
            }[aggregate]
            assert day == {"a": want}, aggregate
            assert zset(r, reached("b", "week", WEEK)) == model.reach("b", "week", WEEK)
            # A Monday value weighing 1 against Tuesday's weighing 2.
            both(s, model, [ev("a", 10, MON, 2)])
            assert zset(r, reached("b", "week", WEEK)) == model.reach("b", "week", WEEK)
            week = zset(r, reached("b", "week", WEEK))["a"]
            if aggregate == "max":  # 10 x 1 equals 5 x 2: the earlier reach of the two
                assert week == epoch(MON, 2)
            if aggregate == "set":  # Tuesday has the member: its value stands
                assert week == epoch(TUE, 6)
            Rollup(s.client, s.scripts, settings, s.keys).rebuild(NOW, board="b")
            for window, pid in model.periods("b"):
                assert zset(r, reached("b", window, pid)) == model.reach("b", window, pid)


@pytest.mark.both_backends
def test_an_archived_season_keeps_its_reach_set(settings_factory: Make, r: redis.Redis) -> None:
    settings = one_board(settings_factory, aggregate="max")
    model = Model(settings)
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        both(s, model, [ev("a", 3, MON, 1), ev("b", 3, TUE, 2), ev("c", 1, WED, 3)])
        archives = Archives(s.client, s.scripts, settings, s.keys)
        assert archives.copy("b", key(NS, "b", "season", "S1"), "S1") == 3
        copied = zset(r, reached("b", "archive", "S1"))
        assert copied == model.reach("b", "season", "S1") == {
            "a": epoch(MON, 1), "b": epoch(TUE, 2), "c": epoch(WED, 3)
        }  # fmt: skip
        assert r.ttl(reached("b", "archive", "S1")) == -1
        # A rerun after the live keys expired keeps the archive and its reach set.
        r.delete(key(NS, "b", "season", "S1"), reached("b", "season", "S1"))
        assert archives.copy("b", key(NS, "b", "season", "S1"), "S1") == 3
        assert zset(r, reached("b", "archive", "S1")) == copied


@pytest.mark.both_backends
def test_forget_removes_the_reach_times(settings_factory: Make, r: redis.Redis) -> None:
    settings = one_board(settings_factory)
    model = Model(settings)
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        both(s, model, [ev("a", 3, MON), ev("b", 3, TUE), ev("a", 1, WED)])
        Archives(s.client, s.scripts, settings, s.keys).copy(
            "b", key(NS, "b", "season", "S1"), "S1"
        )
        found = s.forget("a")
        assert key(NS, "b", "week", WEEK) in found.boards["b"].keys
        assert not any(":reached:" in k for k in found.boards["b"].keys)
        # Monday's and Wednesday's had only "a": emptied, they are gone.
        assert names(r, f"{NS}:{{b}}:reached:*") == {
            reached("b", *p) for p in (("day", TUE), ("week", WEEK), ("season", "S1"))
        } | {reached("b", "archive", "S1")}
        for window, pid in (("day", TUE), ("week", WEEK), ("season", "S1"), ("archive", "S1")):
            assert zset(r, reached("b", window, pid)) == {"b": epoch(TUE)}, window


@pytest.mark.both_backends
def test_a_cleared_day_takes_its_reach_set(settings_factory: Make, r: redis.Redis) -> None:
    settings = one_board(settings_factory, aggregate="sum")
    model = Model(settings)
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        both(s, model, [ev("a", 3, MON), ev("a", 1, TUE, 9), ev("b", 2, WED, 1)])
        cleared = s.clear("b", "day", TUE)
        assert not any(":reached:" in k for k in cleared.deleted)
        assert r.exists(reached("b", "day", TUE)) == 0
        del model.days["b"][date.fromisoformat(TUE)]
        del model.reached["b"][date.fromisoformat(TUE)]
        assert zset(r, reached("b", "week", WEEK)) == model.reach("b", "week", WEEK) == {
            "a": epoch(MON), "b": epoch(WED, 1)
        }  # fmt: skip
        for window, pid in model.periods("b"):
            assert zset(r, reached("b", window, pid)) == model.reach("b", window, pid)
            assert r.expiretime(reached("b", window, pid)) == model.cal.expire_at(window, pid)


def test_the_sweep_gives_a_reach_set_its_boards_ttl(settings_factory: Make, r: redis.Redis) -> None:
    settings = one_board(settings_factory)
    model = Model(settings)
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        both(s, model, [ev("a", 3, MON)])
        Archives(s.client, s.scripts, settings, s.keys).copy(
            "b", key(NS, "b", "season", "S1"), "S1"
        )
        for name in (reached("b", "week", WEEK), reached("b", "day", MON)):
            r.persist(name)
        archives = Archives(s.client, s.scripts, settings, s.keys)
        sweeper = Sweeper(s.client, s.scripts, settings, s.keys, archives)
        result = sweeper.run(NOW)
        assert not result.unknown
        assert r.expiretime(reached("b", "week", WEEK)) == model.cal.expire_at("week", WEEK)
        assert r.expiretime(reached("b", "day", MON)) == model.cal.expire_at("day", MON)
        assert r.ttl(reached("b", "archive", "S1")) == -1
        # The reach sets alone keep no metadata: a member on no board loses it.
        r.hset(f"{NS}:{{b}}:meta", "ghost", '{"x":1}')
        r.zadd(reached("b", "week", WEEK), {"ghost": 1})
        sweeper.run(NOW)
        assert r.hexists(f"{NS}:{{b}}:meta", "ghost") == 0


def test_a_board_without_earliest_ties_keeps_no_reach_set(
    settings_factory: Make, r: redis.Redis
) -> None:
    settings = one_board(settings_factory, ties="member")
    events = validate_batch(
        [{**ev("a", 1, TUE), "ts": at(TUE).isoformat()}], settings, NOW, backfill=True
    )
    keys, argv = script_args("b", events, settings, Keys(NS), NOW, batch_id="x", digest="x")
    batch = json.loads(argv[0])
    assert batch["groups"][0]["reached"] is None
    assert all(rollup["reached"] is None for rollup in batch["groups"][0]["rollups"])
    assert not any(":reached:" in k for k in keys)
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        s.submit_many([{**ev("a", 1, TUE), "ts": at(TUE).isoformat()}])
        assert names(r, f"{NS}:{{b}}:reached:*") == set()


@pytest.mark.parametrize(
    ("board", "named"),
    [
        ({"max_entries": 10}, "max_entries"),
        ({"windows": ["day", "week", "season", "alltime"]}, "alltime"),
        ({"week_weights": [1, 1, 0, 1, 1, 1, 1]}, "week_weights"),
        ({"season_weights": [1, 0]}, "season_weights"),
        ({"month_weights": [0]}, "month_weights"),
    ],
)
def test_the_settings_refuse_what_could_not_keep_reach_times(
    settings_factory: Make, board: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        settings_factory(namespace=NS, boards={"b": {"ties": "earliest", **board}})
    assert 'ties = "earliest" cannot be combined with' in str(info.value)
    assert named in str(info.value)
    # The same board with other ties is fine.
    settings_factory(namespace=NS, boards={"b": {"ties": "member", **board}})
