"""``ties = "dense"``: the distinct set beside each board (one member per distinct score, the
score's text as Redis writes it, scored by it), against a real redis-server and the reference
model (tests/reference.py).

- Random streams (hypothesis) on dense boards of every aggregate (sum, max, min, set), trimmed
  and not, with late events and negative values (scores go down as well as up): every
  distinct set holds exactly the scores of its board, each as the text ZSCORE answers, with
  its board's TTL, and no distinct set is left beside no board: after the writes
  (write-through), after a forced rollup of every period (atomic), after more writes, and
  after a sliced reconcile of drifted boards and drifted distinct sets.
- By hand: reads count the distinct set (a score planted in it moves the ranks; a missing one
  is walked, and the next write builds it again); an archive copy and a restore write the
  archive's distinct set, without TTL; forget drops a score no member has any more; clear
  deletes the day's distinct set and the rebuild recomputes the others; the sweep gives a
  distinct set without TTL its board's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import Model, key, names, ranked, zset
from streams import play, rebuild_all, step_of

from seasons import Seasons
from seasons.archives import Archives
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.jobs import registry
from seasons.restore import Restorer

NS = "ddx"
Make = Callable[..., Settings]
WINDOWS = ["day", "week", "month", "season"]
MEMBERS = ("a", "b", "B", "ab", "é", "z")
BOARDS = ("sum", "top", "low", "last")
STARTS = (
    datetime(2035, 3, 9, 12, tzinfo=UTC),  # New York springs forward on 2035-03-11
    datetime(2035, 8, 29, 20, tzinfo=UTC),  # a month rolls over
)
# Returns the text ZSCORE answers for each member of a sorted set (what a distinct set holds).
SCORE_TEXTS = """
local out = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  out[#out + 1] = redis.call('ZSCORE', KEYS[1], m)
end
return out
"""


def dkey(board: str, window: str, pid: str) -> str:
    """The distinct set of a board, spelled as the key table names it."""
    return f"{NS}:{{{board}}}:distinct:{window}:{pid}"


# --- random streams -------------------------------------------------------------------------


def board_settings(
    aggregate: str, order: str, max_entries: list[int]
) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "aggregate": st.just(aggregate),
            "order": st.just(order),
            "ties": st.just("dense"),
            "windows": st.just(WINDOWS),
            "week_weights": st.lists(st.sampled_from([0, 1, 2, 3]), min_size=7, max_size=7),
            "month_weights": st.lists(st.sampled_from([1, 2]), max_size=31),
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
        "late_grace": draw(st.sampled_from(["PT1H", "PT12H"])),
        "retention": "P120D",
        "seasons": {"length_days": draw(st.sampled_from([5, 9])), "anchor": anchor.isoformat()},
        "boards": {
            "sum": draw(board_settings("sum", draw(st.sampled_from(["desc", "asc"])), [0, 3])),
            "top": draw(board_settings("max", "desc", [0, 1, 2, 3])),
            "low": draw(board_settings("min", "asc", [0, 2, 3])),
            "last": draw(board_settings("set", draw(st.sampled_from(["desc", "asc"])), [0, 2])),
        },
    }
    return overrides, start


event = st.fixed_dictionaries(
    {
        "board": st.sampled_from(BOARDS),
        "member": st.sampled_from(MEMBERS),
        # small values collide (many equal scores), negative ones take sums down
        "value": st.one_of(st.integers(-3, 3), st.integers(-1000, 1000)),
        "back": st.one_of(st.integers(0, 600), st.integers(0, 14 * 3600)),
    },
    optional={"event_id": st.sampled_from(["e0", "e1", "e2"])},
)
step = step_of(event, 6)


def assert_distinct(r: Any, board: str, name: str, distinct: str, want: set[float]) -> None:
    """``distinct`` holds exactly ``want``, each member the text ZSCORE answers for that score
    on ``name`` and scored by it, with the TTL of ``name``."""
    rows = r.zrange(distinct, 0, -1, withscores=True)
    assert {s for _, s in rows} == want, (name, rows)
    assert all(float(m) == s for m, s in rows), rows
    # -0 and 0 are one score: its member is "0" whichever a board's members hold.
    texts = {b"0" if t == b"-0" else t for t in r.eval(SCORE_TEXTS, 1, name)}
    assert {m for m, _ in rows} == texts, name
    assert r.expiretime(distinct) == r.expiretime(name), name


def assert_all(r: Any, model: Model, *, exact_edges: bool = True) -> None:
    """Every board the model has: the board as the model has it (``exact_edges`` False after
    a sliced reconcile: which member tied at a trimmed board's edge is kept may differ, not
    the scores kept) and its distinct set; and no distinct set beside no board."""
    for board in BOARDS:
        periods = model.periods(board)
        for window, pid in sorted(periods):
            name = key(NS, board, window, pid)
            want = model.board(board, window, pid)
            if exact_edges:
                assert zset(r, name) == want, (board, window, pid)
            else:
                assert sorted(zset(r, name).values()) == sorted(want.values()), (board, window)
            assert_distinct(
                r, board, name, dkey(board, window, pid), model.distinct(board, window, pid)
            )
        stored = names(r, f"{NS}:{{{board}}}:distinct:*")
        assert stored == {dkey(board, w, p) for w, p in periods}, board


@pytest.mark.both_backends
@hsettings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=configs(), steps=st.lists(step, min_size=8, max_size=40))
def test_distinct_sets_hold_the_scores_of_their_boards(
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
        assert_all(r, model)  # write-through
        rebuild_all(s, model, BOARDS, clock(), atomic=True)
        assert_all(r, model)  # the atomic rollup rebuilds them
        play(s, r, model, clock, steps[half:])
        assert_all(r, model)
        for board in BOARDS:  # drift, for the repair to undo
            for window, pid in model.periods(board):
                if window != "day":
                    r.zadd(key(NS, board, window, pid), {"ghost": 5, "a": 12345})
                    r.zadd(dkey(board, window, pid), {"4242": 4242})
                    first = r.zrange(dkey(board, window, pid), 0, 0)
                    r.zrem(dkey(board, window, pid), *first)
        rebuild_all(s, model, BOARDS, clock(), atomic=False)
        assert_all(r, model, exact_edges=False)


# --- by hand --------------------------------------------------------------------------------

NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # a Wednesday; season S3 = 2035-06-11 .. 06-17
SEASON = "S3"
SNAPSHOT = "S3@20350613T085900Z"
TODAY, YESTERDAY = "2035-06-13", "2035-06-12"
HAND = {
    "hi": {"aggregate": "sum", "order": "desc", "ties": "dense"},
    "lo": {"aggregate": "min", "order": "asc", "ties": "dense", "max_entries": 4},
}
SCORES = {"a": 5.0, "b": 5.0, "c": 3.5, "d": -2.0, "e": 0.0, "f": 7.0, "g": 3.5}


@pytest.fixture
def hand(settings_factory: Make, tmp_path: Path) -> Settings:
    return settings_factory(
        namespace=NS,
        timezone="UTC",
        late_grace="PT12H",
        boards=HAND,
        seasons={"length_days": 7, "anchor": "2035-05-28"},
        archive={"dir": str(tmp_path / "archive")},
    )


@pytest.fixture
def app(hand: Settings, r: redis.Redis) -> Iterator[Seasons]:
    r.flushall()
    with Seasons(hand, clock=ManualClock(NOW)) as s:
        yield s


def fill(app: Seasons, scores: dict[str, float], ts: str | None = None) -> None:
    extra = {"ts": ts} if ts else {}
    app.submit_many(
        [{"board": b, "member": m, "value": v, **extra} for b in HAND for m, v in scores.items()]
    )


def scores_of(r: Any, name: str) -> set[float]:
    return {s + 0.0 for s in zset(r, name).values()}


def ranks(
    app: Seasons, board: str, window: str, period: str = "current", offset: int = 0
) -> list[Any]:
    return [
        (e.rank, e.member, e.score)
        for e in app.top(board, window, period=period, limit=100, offset=offset).entries
    ]


@pytest.mark.both_backends
def test_reads_count_the_distinct_set_and_a_missing_one_is_walked_then_rebuilt(
    app: Seasons, r: redis.Redis
) -> None:
    fill(app, SCORES)
    day = key(NS, "hi", "day", TODAY)
    want = ranked(SCORES, "desc", "dense")
    assert ranks(app, "hi", "day") == want
    # A score planted in the distinct set, better than all: every rank a read counts moves
    # down by one, so the reads count the set (not the board). A page from the first row
    # counts nothing: its first rank is 1 (seasons.plans.PagePlan).
    r.zadd(dkey("hi", "day", TODAY), {"99": 99})
    assert ranks(app, "hi", "day", offset=1) == [(k + 1, m, s) for k, m, s in want[1:]]
    entry = app.rank("hi", "c", "day")
    assert entry is not None and entry.rank == 1 + dict((m, k) for k, m, _ in want)["c"]
    climbed = app.climb("hi", "c", "day", to=[1])
    assert climbed is not None and climbed.targets[0].score == 99
    # A board without its distinct set (written before distinct sets existed) is walked.
    r.delete(dkey("hi", "day", TODAY))
    assert ranks(app, "hi", "day") == want
    found = app.lookup("hi", ["g", "a", "d"], "day")
    assert [(e.rank, e.member) for e in found] == [
        (k, m) for k, m, _ in want if m in ("g", "a", "d")
    ]
    # The next write builds it whole from the board, then keeps it.
    app.submit_many([{"board": "hi", "member": "a", "value": 1}])
    later = {**SCORES, "a": 6.0}
    assert_distinct(r, "hi", day, dkey("hi", "day", TODAY), set(later.values()))
    assert ranks(app, "hi", "day") == ranked(later, "desc", "dense")


@pytest.mark.both_backends
def test_a_score_that_goes_down_and_a_trimmed_board_keep_their_distinct_sets(
    app: Seasons, r: redis.Redis
) -> None:
    fill(app, SCORES)
    # hi (sum): a goes from 5 to -1 (b keeps 5), f from 7 to 3.5 (7 goes).
    app.submit_many(
        [{"board": "hi", "member": "a", "value": -6}, {"board": "hi", "member": "f", "value": -3.5}]
    )
    hi = {**SCORES, "a": -1.0, "f": 3.5}
    for window, pid in (("day", TODAY), ("week", "2035-06-11"), ("season", SEASON)):
        name = key(NS, "hi", window, pid)
        assert scores_of(r, name) == set(hi.values())
        assert_distinct(r, "hi", name, dkey("hi", window, pid), set(hi.values()))
    # lo (min, max_entries 4): the week keeps the 4 lowest; the day keeps everyone.
    week = key(NS, "lo", "week", "2035-06-11")
    kept = sorted(SCORES.values())[:4]
    assert sorted(zset(r, week).values()) == kept
    assert_distinct(r, "lo", week, dkey("lo", "week", "2035-06-11"), set(kept))
    # A late, lower value for yesterday enters the trimmed week and pushes out its worst.
    app.submit_many(
        [{"board": "lo", "member": "y", "value": -50, "ts": f"{YESTERDAY}T10:00:00+00:00"}]
    )
    kept = sorted([*SCORES.values(), -50.0])[:4]
    assert sorted(zset(r, week).values()) == kept
    assert_distinct(r, "lo", week, dkey("lo", "week", "2035-06-11"), set(kept))
    ranked_week = ranked(zset(r, week), "asc", "dense")
    assert ranks(app, "lo", "week") == ranked_week


@pytest.mark.both_backends
def test_archive_copy_and_restore_write_the_archives_distinct_set(
    app: Seasons, hand: Settings, r: redis.Redis
) -> None:
    fill(app, SCORES)
    archives = Archives(app.client, app.scripts, hand, app.keys)
    archive = app.keys.archive("hi", SNAPSHOT)
    live = app.keys.window("hi", "season", SEASON)
    assert archives.copy("hi", live, SNAPSHOT) == len(SCORES)
    assert_distinct(r, "hi", archive, dkey("hi", "archive", SNAPSHOT), set(SCORES.values()))
    assert r.ttl(dkey("hi", "archive", SNAPSHOT)) == -1
    # A live board without its distinct set: the archive's is built from the archive.
    r.delete(dkey("lo", "season", SEASON))
    lo_live = app.keys.window("lo", "season", SEASON)
    archives.copy("lo", lo_live, SNAPSHOT)
    lo_archive = app.keys.archive("lo", SNAPSHOT)
    assert_distinct(r, "lo", lo_archive, dkey("lo", "archive", SNAPSHOT), scores_of(r, lo_archive))
    # The live board moves on; the snapshot reads as itself.
    fill(app, {"late": 11.0})
    want = ranked(SCORES, "desc", "dense")
    assert ranks(app, "hi", "season", SNAPSHOT) == want
    # Restore: the file's scores, again beside the archive, without TTL.
    archives.write_files("hi", SNAPSHOT, NOW)
    data, _ = archives.paths("hi", SNAPSHOT)
    r.delete(archive, dkey("hi", "archive", SNAPSHOT))
    Restorer(app.client, hand, app.keys).restore(data, NOW)
    assert_distinct(r, "hi", archive, dkey("hi", "archive", SNAPSHOT), set(SCORES.values()))
    assert r.ttl(dkey("hi", "archive", SNAPSHOT)) == -1
    assert ranks(app, "hi", "season", SNAPSHOT) == want
    # A restore over a stale distinct set replaces it.
    r.zadd(dkey("hi", "archive", SNAPSHOT), {"4242": 4242})
    Restorer(app.client, hand, app.keys).restore(data, NOW, force=True)
    assert_distinct(r, "hi", archive, dkey("hi", "archive", SNAPSHOT), set(SCORES.values()))


@pytest.mark.both_backends
def test_forget_drops_a_score_no_member_has_any_more(app: Seasons, r: redis.Redis) -> None:
    fill(app, SCORES)
    archives = Archives(app.client, app.scripts, app.settings, app.keys)
    archives.copy("hi", app.keys.window("hi", "season", SEASON), SNAPSHOT)
    app.forget("f")  # 7.0: its own score
    app.forget("a")  # 5.0: b keeps it
    left = {m: v for m, v in SCORES.items() if m not in ("f", "a")}
    for board, window, pid in (
        ("hi", "day", TODAY),
        ("hi", "season", SEASON),
        ("hi", "archive", SNAPSHOT),
        ("lo", "week", "2035-06-11"),
    ):
        name = app.keys.archive(board, pid) if window == "archive" else key(NS, board, window, pid)
        got = scores_of(r, name)
        if board == "hi":
            assert got == set(left.values())
        assert_distinct(r, board, name, dkey(board, window, pid), got)
    assert ranks(app, "hi", "day") == ranked(left, "desc", "dense")


@pytest.mark.both_backends
def test_clear_deletes_the_days_distinct_set_and_rebuilds_the_others(
    app: Seasons, r: redis.Redis
) -> None:
    fill(app, SCORES, ts=f"{YESTERDAY}T08:00:00+00:00")
    fill(app, {"a": 1.0, "z": 100.0})
    app.clear("hi", "day", TODAY)
    assert not r.exists(dkey("hi", "day", TODAY))
    assert not r.exists(key(NS, "hi", "day", TODAY))
    for window, pid in (("day", YESTERDAY), ("week", "2035-06-11"), ("season", SEASON)):
        name = key(NS, "hi", window, pid)
        assert zset(r, name) == SCORES
        assert_distinct(r, "hi", name, dkey("hi", window, pid), set(SCORES.values()))


def test_the_sweep_gives_a_distinct_set_its_boards_ttl(app: Seasons, r: redis.Redis) -> None:
    fill(app, SCORES)
    name, distinct = key(NS, "hi", "week", "2035-06-11"), dkey("hi", "week", "2035-06-11")
    r.persist(distinct)
    r.zadd(dkey("hi", "archive", SNAPSHOT), {"1": 1})  # an archive's keeps none
    registry.sweeper_of(app.backend).run(NOW)
    assert r.expiretime(distinct) == r.expiretime(name) > 0
    assert r.ttl(dkey("hi", "archive", SNAPSHOT)) == -1
    # Its members are scores, not members: metadata goes by the boards only.
    assert app.rank("hi", "a", "week") is not None


@pytest.mark.both_backends
def test_minus_zero_and_zero_are_one_score(settings_factory: Make, r: redis.Redis) -> None:
    """A day weighing 0 in its week makes a negative value -0 there, and ZINCRBY answers a
    member new at -0 with "-0" (ZSCORE with "0"): one score with another member's 0, one
    member "0" of the distinct set, one dense rank."""
    settings = settings_factory(
        namespace=NS,
        timezone="UTC",
        week_start="monday",
        late_grace="PT12H",
        boards={"hi": {"ties": "dense", "week_weights": [1, 1, 0, 1, 1, 1, 1]}},  # Wed: 0
    )
    r.flushall()
    week = key(NS, "hi", "week", "2035-06-11")
    distinct = dkey("hi", "week", "2035-06-11")
    tuesday = f"{YESTERDAY}T10:00:00+00:00"
    with Seasons(settings, clock=ManualClock(NOW)) as s:

        def write(events: list[tuple[str, float, str | None]]) -> None:
            s.submit_many(
                [
                    {"board": "hi", "member": m, "value": v, **({"ts": ts} if ts else {})}
                    for m, v, ts in events
                ]
            )

        write([("a", -3, None), ("b", 4, None), ("d", 2, tuesday)])
        assert zset(r, week) == {"a": 0.0, "b": 0.0, "d": 2.0}
        assert r.zrange(distinct, 0, -1, withscores=True) == [(b"0", 0.0), (b"2", 2.0)]
        assert ranks(s, "hi", "week") == [(1, "d", 2.0), (2, "b", 0.0), (2, "a", 0.0)]
        climbed = s.climb("hi", "a", "week", to=[1, 2, 3])
        assert climbed is not None and [t.score for t in climbed.targets] == [2.0, 0.0, None]
        write([("a", 5, tuesday)])  # a leaves 0; b keeps it
        assert r.zrange(distinct, 0, -1) == [b"0", b"2", b"5"]
        write([("e", -1, None)])  # -0 again
        write([("b", 1, tuesday)])  # e keeps the score 0
        assert r.zrange(distinct, 0, -1) == [b"0", b"1", b"2", b"5"]
        write([("e", 3, tuesday)])  # no member has 0 any more
        assert r.zrange(distinct, 0, -1) == [b"1", b"2", b"3", b"5"]
        assert ranks(s, "hi", "week") == [
            (1, "a", 5.0),
            (2, "e", 3.0),
            (3, "d", 2.0),
            (4, "b", 1.0),
        ]
        assert r.expiretime(distinct) == r.expiretime(week)
