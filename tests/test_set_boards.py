"""``aggregate = "set"``: the latest value wins, against a real redis-server and the reference
model (tests/reference.py).

- Random streams (hypothesis) on set boards, trimmed and not: values that drop as often as
  they rise, late events for yesterday while today already has the member, several days,
  weeks, months and seasons. Every day, week, month and season board is compared with the
  model after the writes (write-through), after a forced rollup of every period (one atomic
  call each), after more writes, and after a sliced reconcile of a drifted board.
- By hand: a value that drops on a full trimmed board leaves exact scores.
- the write protocol: a rollup without ``expire_at`` never expires; a rollup's ``base``
  takes the events of days already folded into it (and a set board refuses them), and a
  trimmed board with a base is recomputed from the base and the days after it; a set board's
  rollup must list its days, its group's own day among them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from redis.exceptions import ResponseError
from reference import Model, combine, key, names, zset
from streams import play, rebuild_all, step_of

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BatchRejected
from seasons.events import validate_batch
from seasons.jobs.rollup import Rollup
from seasons.keys import Keys
from seasons.scripts import Scripts
from seasons.write_script import parse_reply, script_args

NS = "setb"
Make = Callable[..., Settings]
WINDOWS = ["day", "week", "month", "season"]
MEMBERS = ("a", "b", "B", "ab", "é")
BOARDS = ("last", "top", "low")
# Far in the future (EXPIREAT from the manual clock must lie ahead of Redis's real clock).
STARTS = (
    datetime(2035, 3, 9, 12, tzinfo=UTC),  # New York springs forward on 2035-03-11
    datetime(2035, 8, 29, 20, tzinfo=UTC),  # a month rolls over
    datetime(2035, 12, 30, 12, tzinfo=UTC),  # and a year
)


# --- random streams -------------------------------------------------------------------------


def board_settings(order: str, max_entries: list[int]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "aggregate": st.just("set"),
            "order": st.just(order),
            "windows": st.just(WINDOWS),
            "week_weights": st.lists(st.sampled_from([0, 1, 2, 3]), min_size=7, max_size=7),
            "month_weights": st.lists(st.sampled_from([0, 1, 2, 3]), max_size=31),
            "season_weights": st.lists(st.sampled_from([0, 1, 2]), max_size=3),
            "max_entries": st.sampled_from(max_entries),
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
        # A long grace makes late events for yesterday common.
        "late_grace": draw(st.sampled_from(["PT1H", "PT12H"])),
        # Long enough that a forced rollup still finds every day of the stream.
        "retention": "P120D",
        "seasons": {"length_days": draw(st.sampled_from([5, 9])), "anchor": anchor.isoformat()},
        "boards": {
            "last": draw(board_settings(draw(st.sampled_from(["desc", "asc"])), [0])),
            "top": draw(board_settings("desc", [1, 2, 3])),
            "low": draw(board_settings("asc", [2, 3])),
        },
    }
    return overrides, start


event = st.fixed_dictionaries(
    {
        "board": st.sampled_from(BOARDS),
        "member": st.sampled_from(MEMBERS),
        # small values collide (ties at the trimming edge), large ones drop and rise a lot
        "value": st.one_of(st.integers(-3, 3), st.integers(-1000, 1000)),
        # seconds before now: up to 14 hours, past a day's end and often past its grace
        "back": st.one_of(st.integers(0, 600), st.integers(0, 14 * 3600)),
    },
    optional={"event_id": st.sampled_from(["e0", "e1", "e2"])},
)
step = step_of(event, 5)


def assert_boards(r: Any, model: Model, settings: Settings, *, exact_edges: bool = True) -> None:
    """Every board the model has, raw from Redis, with its TTL; and no other sorted set
    (no scratch key left behind). ``exact_edges`` False (after a sliced reconcile): on a
    trimmed board, which of the members tied at the trimming edge is kept may differ; the
    scores kept, and each member's score, may not."""
    for board in BOARDS:
        cfg = settings.boards[board]
        periods = model.periods(board)
        for window, pid in sorted(periods):
            name = key(NS, board, window, pid)
            got, want = zset(r, name), model.board(board, window, pid)
            if exact_edges or window == "day" or not cfg.max_entries or got == want:
                assert got == want, (board, window, pid)
            else:
                formula = model.formula(board, window, pid)
                assert sorted(got.values()) == sorted(want.values()), (board, window, pid)
                assert all(formula[m] == score for m, score in got.items()), (board, window)
            assert r.expiretime(name) == model.cal.expire_at(window, pid), (board, window, pid)
        stored = names(r, f"{NS}:{{{board}}}:*")
        boards = {
            n for n in stored if r.type(n) == b"zset" and not n.endswith((":events", ":batches"))
        }
        assert boards == {key(NS, board, w, p) for w, p in periods}


@pytest.mark.both_backends
@hsettings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=configs(), steps=st.lists(step, min_size=8, max_size=40))
def test_set_boards_match_the_model_through_writes_rollups_and_repairs(
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
        assert_boards(r, model, settings)  # write-through
        rebuild_all(s, model, BOARDS, clock(), atomic=True)
        assert_boards(r, model, settings)  # the rollup gives the same boards
        play(s, r, model, clock, steps[half:])
        assert_boards(r, model, settings)
        for board in BOARDS:  # drift, for the repair to undo
            for window, pid in model.periods(board):
                if window != "day":
                    r.zadd(key(NS, board, window, pid), {"ghost": 5, "a": 12345})
        rebuild_all(s, model, BOARDS, clock(), atomic=False)
        assert_boards(r, model, settings, exact_edges=False)


# --- by hand --------------------------------------------------------------------------------

NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # a Wednesday
WEEK_WEIGHTS = [1, 2, 3, 1, 1, 1, 2]  # monday first
ANCHOR = date(2035, 6, 11)  # S1 is 2035-06-11 .. 2035-06-24
MON, TUE, WED = "2035-06-11", "2035-06-12", "2035-06-13"


def one_board(make: Make, **board: Any) -> Settings:
    return make(
        namespace=NS,
        timezone="UTC",
        week_start="monday",
        late_grace="PT12H",
        seasons={"length_days": 14, "anchor": ANCHOR.isoformat()},
        boards={"b": {"aggregate": "set", "week_weights": WEEK_WEIGHTS, **board}},
    )


def at(day: str, hour: int = 8) -> datetime:
    return datetime.fromisoformat(f"{day}T{hour:02d}:00:00+00:00")


def ev(member: str, value: float, day: str, hour: int = 8, **extra: Any) -> dict[str, Any]:
    return {"board": "b", "member": member, "value": value, "ts": at(day, hour), **extra}


def both(s: Seasons, model: Model, events: list[dict[str, Any]], **kw: Any) -> None:
    """One batch through Seasons and the model; both must accept all of it."""
    want = model.submit(events, s.clock(), **kw)
    api = [{**e, "ts": e["ts"].isoformat()} for e in events]
    got = s.submit_many(api, **kw)
    assert (got.applied, got.duplicates) == want


def boards_of(r: Any, model: Model) -> None:
    for window, pid in sorted(model.periods("b")):
        assert zset(r, key(NS, "b", window, pid)) == model.board("b", window, pid), (window, pid)


@pytest.mark.both_backends
@pytest.mark.parametrize("max_entries", [0, 2])
def test_the_latest_value_wins_and_a_late_event_leaves_a_later_day_standing(
    settings_factory: Make, r: redis.Redis, max_entries: int
) -> None:
    settings = one_board(settings_factory, max_entries=max_entries)
    clock = ManualClock(at(TUE, 2))  # Monday takes late events until Tuesday 12:00
    model = Model(settings)
    with Seasons(settings, clock=clock) as s:
        both(s, model, [ev("a", 10, MON), ev("a", 3, MON, 9), ev("b", 5, MON)])
        both(s, model, [ev("a", 7, TUE, 1), ev("b", 1, MON, 10)])
        boards_of(r, model)
        week = model.board("b", "week", MON)
        assert week["a"] == 2 * 7  # Tuesday's value, by Tuesday's weight
        # Monday's value changes Monday's board, not the week's: Tuesday has a value already.
        both(s, model, [ev("a", 100, MON, 11), ev("b", -4, MON, 11)])
        assert zset(r, key(NS, "b", "day", MON))["a"] == 100
        assert model.board("b", "week", MON)["a"] == week["a"]
        boards_of(r, model)
        # A batch whose events go back and forth between the days, in its own order.
        both(s, model, [ev("b", 9, TUE, 1), ev("b", 2, MON, 11), ev("a", -1, TUE, 1)])
        boards_of(r, model)
        rebuild_all_of(s, settings, clock())
        boards_of(r, model)


def rebuild_all_of(s: Seasons, settings: Settings, now: datetime) -> None:
    for outcome in Rollup(s.client, s.scripts, settings, s.keys).rebuild(now, board="b"):
        assert outcome.mode == "atomic"


@pytest.mark.both_backends
@pytest.mark.parametrize("order", ["desc", "asc"])
def test_a_value_drop_on_a_full_trimmed_board_leaves_exact_scores(
    settings_factory: Make, r: redis.Redis, order: str
) -> None:
    """A member whose new value is worse than its old one on a full board may fall below a
    member trimmed away earlier: that one must come back, with its exact score."""
    settings = one_board(settings_factory, max_entries=2, order=order)
    sign = 1 if order == "desc" else -1
    clock = ManualClock(at(WED, 9))
    model = Model(settings)
    with Seasons(settings, clock=clock) as s:
        both(s, model, [ev(m, sign * v, TUE) for m, v in (("a", 10), ("b", 9), ("c", 8))])
        assert set(zset(r, key(NS, "b", "week", MON))) == {"a", "b"}  # c trimmed away
        both(s, model, [ev("a", sign * 1, TUE, 9)])  # a drops below c, same day
        assert set(model.board("b", "week", MON)) == {"b", "c"}
        boards_of(r, model)
        # A later day's lower value: the week takes it (by that day's weight).
        both(s, model, [ev("b", sign * 2, WED, 8), ev("a", sign * 50, TUE, 10)])
        boards_of(r, model)
        both(s, model, [ev("c", sign * 0.5, WED, 8), ev("d", sign * 4, MON)], backfill=True)
        boards_of(r, model)


# --- the write protocol: set boards and bases ----------------------------------------------------


def batch_of(
    settings: Settings, events: list[dict[str, Any]], batch_id: str = "x"
) -> tuple[list[str], dict[str, Any]]:
    """KEYS and the decoded batch that script_args builds for ``events`` (backfill)."""
    api = [{**e, "ts": e["ts"].isoformat()} for e in events]
    valid = validate_batch(api, settings, NOW, backfill=True)
    keys, argv = script_args(
        "b", valid, settings, Keys(NS), NOW, batch_id=batch_id, digest=batch_id, backfill=True
    )
    return keys, json.loads(argv[0])


def run(scripts: Scripts, keys: list[str], batch: dict[str, Any]) -> Any:
    return parse_reply(scripts.write(keys=keys, args=[json.dumps(batch)]))


def state_of(r: redis.Redis) -> tuple[Any, int]:
    return r.execute_command("DEBUG", "DIGEST"), r.dbsize()


def rollups(batch: dict[str, Any], window: str) -> list[dict[str, Any]]:
    return [ru for g in batch["groups"] for ru in g["rollups"] if ru["window"] == window]


@pytest.mark.parametrize(("aggregate", "max_entries"), [("sum", 0), ("max", 2), ("set", 2)])
def test_a_rollup_without_expire_at_never_expires(
    settings_factory: Make, r: redis.Redis, aggregate: str, max_entries: int
) -> None:
    """Also when a trimmed board is rebuilt from its days (a member's score got worse on a
    full board), which stores the key anew."""
    settings = one_board(settings_factory, aggregate=aggregate, max_entries=max_entries)
    scripts = Scripts(r)
    model = Model(settings)
    week, season = key(NS, "b", "week", MON), key(NS, "b", "season", "S1")
    first = [ev("a", 10, TUE), ev("b", 9, TUE), ev("c", 8, TUE)]
    drop = [ev("a", -5, TUE, 9)]  # worse for sum and set; max keeps 10
    for n, events in enumerate((first, drop)):
        keys, batch = batch_of(settings, events, f"batch-{n}")
        for ru in rollups(batch, "week"):
            ru["expire_at"] = None
        assert run(scripts, keys, batch).applied == len(events)
        model.submit(events, NOW, backfill=True)
        assert r.ttl(week) == -1
        assert r.expiretime(season) == model.cal.expire_at("season", "S1")
        assert zset(r, week) == model.board("b", "week", MON)
        assert zset(r, season) == model.board("b", "season", "S1")


FOLDED = "folded:test"  # the state field naming the last day folded into the base
BASE = f"{NS}:{{b}}:base:test"


def with_base(batch: dict[str, Any], through: str = FOLDED) -> None:
    for ru in rollups(batch, "week"):
        ru["base"] = {"key": BASE, "through": through}


@pytest.mark.parametrize("aggregate", ["sum", "max", "min"])
@pytest.mark.parametrize("folded", [TUE, None])
def test_a_base_takes_the_events_of_the_days_folded_into_it(
    settings_factory: Make, r: redis.Redis, aggregate: str, folded: str | None
) -> None:
    settings = one_board(settings_factory, aggregate=aggregate)
    scripts = Scripts(r)
    state = Keys(NS).state("b")
    if folded:
        r.hset(state, FOLDED, folded)
    r.zadd(BASE, {"a": 5, "z": 1})
    events = [ev("a", 3, MON), ev("b", 4, WED), ev("a", 7, TUE), ev("c", -2, MON), ev("a", 2, TUE)]
    keys, batch = batch_of(settings, events)
    with_base(batch)
    assert run(scripts, keys + [BASE], batch).applied == len(events)
    # The base: what it held, then each event of a day up to the folded one, weighted.
    want: dict[str, float] = {"a": 5, "z": 1}
    for e in events:
        day = e["ts"].date()
        if folded and day <= date.fromisoformat(folded):
            weighted = WEEK_WEIGHTS[day.weekday()] * e["value"]
            want[e["member"]] = combine(aggregate, want.get(e["member"]), weighted)
    assert zset(r, BASE) == want
    assert r.ttl(BASE) == -1
    # The boards themselves are written as without a base.
    model = Model(settings)
    model.submit(events, NOW, backfill=True)
    boards_of(r, model)


def test_a_set_board_refuses_events_of_a_folded_day(settings_factory: Make, r: redis.Redis) -> None:
    settings = one_board(settings_factory, max_entries=0)
    scripts = Scripts(r)
    r.hset(Keys(NS).state("b"), FOLDED, TUE)
    r.zadd(BASE, {"a": 5})
    events = [ev("a", 3, MON), ev("b", 4, WED), ev("a", 7, TUE)]
    keys, batch = batch_of(settings, events)
    with_base(batch)
    before = state_of(r)
    with pytest.raises(BatchRejected) as refused:
        run(scripts, keys + [BASE], batch)
    details = refused.value.details
    assert [(p["index"], p["field"], p["code"]) for p in details] == [
        (0, "ts", "day_folded"),
        (2, "ts", "day_folded"),
    ]
    assert "folded into the week base already" in details[0]["message"]
    assert "does not keep which day each value came from" in details[0]["message"]
    assert state_of(r) == before
    # Wednesday is not folded: alone, it is applied (and not to the base).
    keys, batch = batch_of(settings, [events[1]])
    with_base(batch)
    assert run(scripts, keys + [BASE], batch).applied == 1
    assert zset(r, BASE) == {"a": 5}


@pytest.mark.parametrize("aggregate", ["sum", "set"])
def test_a_trimmed_board_with_a_base_is_recomputed_from_it(
    settings_factory: Make, r: redis.Redis, aggregate: str
) -> None:
    """A board with a base is the base, then the days after the last one folded into it:
    a member new to the trimmed board, and the board rebuilt after a score got worse, are
    computed from exactly that (a folded day's key, still there, is not counted again)."""
    settings = one_board(settings_factory, aggregate=aggregate, max_entries=2)
    scripts = Scripts(r)
    week = key(NS, "b", "week", MON)
    r.hset(Keys(NS).state("b"), FOLDED, TUE)
    base = {"a": 100.0, "b": 50.0, "c": 40.0}
    r.zadd(BASE, base)
    r.zadd(key(NS, "b", "day", MON), {"a": 70, "c": 5})  # folded: in the base already
    r.zadd(week, {"a": 100, "b": 50})  # c was trimmed away
    after: dict[str, dict[str, float]] = {}  # the days after the base: {day: {member: value}}
    for n, events in enumerate(
        (
            [ev("c", 30, WED)],  # new to the board: base 40 and Wednesday's 3 x 30
            [ev("a", -60, WED), ev("b", 8, TUE, 9)],  # a worse on a full board: rebuilt
        )
    ):
        keys, batch = batch_of(settings, events, f"batch-{n}")
        for ru in rollups(batch, "week"):
            ru["base"] = {"key": BASE, "through": FOLDED}
            ru["expire_at"] = None
        if aggregate == "set" and any(e["ts"].date() <= date(2035, 6, 12) for e in events):
            with pytest.raises(BatchRejected):
                run(scripts, [*keys, BASE], batch)
            events = [e for e in events if e["ts"].date() > date(2035, 6, 12)]
            keys, batch = batch_of(settings, events, f"batch-{n}-again")
            for ru in rollups(batch, "week"):
                ru["base"] = {"key": BASE, "through": FOLDED}
                ru["expire_at"] = None
        assert run(scripts, [*keys, BASE], batch).applied == len(events)
        for e in events:
            day = e["ts"].date()
            weighted = WEEK_WEIGHTS[day.weekday()] * e["value"]
            if day <= date(2035, 6, 12):
                base[e["member"]] = combine(aggregate, base.get(e["member"]), weighted)
            else:
                scores = after.setdefault(day.isoformat(), {})
                scores[e["member"]] = combine(aggregate, scores.get(e["member"]), weighted)
        assert zset(r, BASE) == base
        board = dict(base)
        for day in sorted(after):
            for member, score in after[day].items():
                board[member] = combine(aggregate, board.get(member), score)
        best = sorted(board.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:2]
        assert zset(r, week) == dict(best), n
        assert r.ttl(week) == -1


def test_a_rollup_with_a_base_needs_dated_days(settings_factory: Make, r: redis.Redis) -> None:
    settings = one_board(settings_factory, aggregate="sum", max_entries=2)
    scripts = Scripts(r)
    keys, batch = batch_of(settings, [ev("a", 3, MON)])
    batch["groups"][0]["rollups"][0]["base"] = {"key": BASE, "through": FOLDED}
    batch["groups"][0]["rollups"][0]["days"].append([BASE, 1])
    n = len(batch["groups"][0]["rollups"][0]["days"]) - 1
    refused(
        r,
        scripts,
        [*keys, BASE],
        batch,
        f"groups[0].rollups[0].days[{n}]: must be [day key, weight, day], got an array",
    )


def refused(r: redis.Redis, scripts: Scripts, keys: list[str], batch: Any, message: str) -> None:
    before = state_of(r)
    with pytest.raises(ResponseError) as err:
        scripts.write(keys=keys, args=[json.dumps(batch)])
    assert str(err.value).startswith(f"write.lua: {message}"), str(err.value)
    assert state_of(r) == before


def test_a_set_board_needs_days_holding_its_own(settings_factory: Make, r: redis.Redis) -> None:
    settings = one_board(settings_factory, max_entries=0)
    scripts = Scripts(r)
    assert run(scripts, *batch_of(settings, [ev("a", 1, MON)], "first")).applied == 1
    keys, batch = batch_of(settings, [ev("a", 3, MON), ev("b", 4, TUE)])
    assert all(ru["days"] for g in batch["groups"] for ru in g["rollups"])
    no_days = copy.deepcopy(batch)
    del no_days["groups"][0]["rollups"][0]["days"]
    refused(r, scripts, keys, no_days, "groups[0].rollups[0].days: must be an array, got nothing")
    without_own = copy.deepcopy(batch)
    days = without_own["groups"][1]["rollups"][1]["days"]
    without_own["groups"][1]["rollups"][1]["days"] = [d for d in days if not d[0].endswith(TUE)]
    own = key(NS, "b", "day", TUE)
    refused(
        r,
        scripts,
        keys,
        without_own,
        f'groups[1].rollups[1].days: must hold the day key of its group, "{own}"',
    )
    assert run(scripts, keys, batch).applied == 2


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ("x", 'groups[0].rollups[0].base: must be an object, got the string "x"'),
        ({"key": BASE}, "groups[0].rollups[0].base.through: must be a string, got nothing"),
        (
            {"key": "elsewhere", "through": FOLDED},
            'groups[0].rollups[0].base.key: "elsewhere" is not declared in KEYS',
        ),
        ({"key": BASE, "through": FOLDED, "day": MON}, "groups[0].rollups[0].base.day: unknown"),
    ],
)
def test_a_malformed_base_is_refused(
    settings_factory: Make, r: redis.Redis, base: Any, message: str
) -> None:
    settings = one_board(settings_factory, aggregate="sum")
    scripts = Scripts(r)
    assert run(scripts, *batch_of(settings, [ev("a", 1, MON)], "first")).applied == 1
    keys, batch = batch_of(settings, [ev("a", 3, MON)])
    bad = copy.deepcopy(batch)
    bad["groups"][0]["rollups"][0]["base"] = base
    refused(r, scripts, [*keys, BASE], bad, message)
    batch["groups"][0]["rollups"][0]["base"] = None  # null: no base
    assert run(scripts, keys, batch).applied == 1
