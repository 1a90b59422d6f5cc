"""Random event streams through :class:`seasons.Seasons`, compared with the reference model.

Hypothesis draws a configuration (zone, week start, short seasons as a cycle or a list with a
gap, four boards with random windows, weights, ties (member, shared, dense, earliest) and
``max_entries``; one of them of a random
aggregate, ``set`` included) and a stream of steps:
the clock moving on (sometimes to just past a local midnight), and batches of
events at or a little before the clock's now (some late, some in the future, some repeating an
event id, some with metadata). The model (tests/reference.py) decides what is accepted and what
every board of the windows each board keeps (day, week, month, season) must hold; the test reads
the boards raw from Redis and through the API and compares everything: members, scores, ranks
under both tie rules, totals, metadata, TTLs and the set of keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import Model, Rejected, key, names, ranked, snapshot, zset

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BadPeriod, BadWindow, BatchRejected
from seasons.windows import WINDOWS

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

NS = "prop"
# A small pool, so members collide; byte order differs from naive expectations ("B" < "a",
# "é" is two bytes after every ASCII letter).
MEMBERS = ("a", "b", "ab", "B", "c", "é", "zz")
BOARDS = ("kills", "best", "fastest", "mixed")
META_NAMES = tuple(f"f{i}" for i in range(20))
# Far in the future, so that EXPIREAT computed from the manual clock never lies in the past.
STARTS = (
    datetime(2035, 3, 9, 12, tzinfo=UTC),  # New York springs forward on 2035-03-11
    datetime(2035, 3, 23, 20, tzinfo=UTC),  # Istanbul has no DST; a plain stretch elsewhere
    datetime(2035, 11, 1, 3, tzinfo=UTC),  # New York falls back on 2035-11-04
    datetime(2036, 2, 26, 22, tzinfo=UTC),  # across a leap day
    datetime(2035, 8, 31, 12, tzinfo=UTC),  # Santiago skips 00:00-01:00 on 2035-09-02
    datetime(2035, 12, 30, 12, tzinfo=UTC),  # across the year end: a month rolls over
)
# Zones with DST (New York at 02:00, Santiago at midnight), none (Istanbul) and odd offsets.
ZONES = (
    "UTC",
    "Europe/Istanbul",
    "America/New_York",
    "America/Santiago",
    "Asia/Kolkata",
    "Pacific/Chatham",
)
# What a board keeps: day and season always; week and month or not.
KEPT = (
    ("day", "week", "season"),
    ("day", "week", "month", "season"),
    ("day", "month", "season"),
    ("day", "season"),
)


def _possible(cfg: dict[str, Any]) -> dict[str, Any]:
    """Earliest ties take no trimming and no zero weight (the settings refuse them)."""
    if cfg["ties"] != "earliest":
        return cfg
    nonzero = {k: [w or 1 for w in cfg[k]] for k in WEIGHTS}
    return {**cfg, **nonzero, "max_entries": 0}


WEIGHTS = ("week_weights", "season_weights", "month_weights")


def board_settings(aggregate: str, order: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "aggregate": st.just(aggregate),
            "order": st.just(order),
            "ties": st.sampled_from(["member", "shared", "dense", "earliest"]),
            "week_weights": st.lists(st.sampled_from([0, 1, 2]), min_size=7, max_size=7),
            "season_weights": st.lists(st.sampled_from([0, 1, 2]), max_size=3),
            "windows": st.sampled_from(KEPT),
            # by day of the month from the 1st; days past the list weigh 1
            "month_weights": st.lists(st.sampled_from([0, 1, 2, 3]), max_size=31),
            "max_entries": st.sampled_from([0, 2, 3, 3]),
        }
    ).map(_possible)


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict[str, Any], datetime]:
    start = draw(st.sampled_from(STARTS)) + timedelta(hours=draw(st.integers(0, 47)))
    length = draw(st.sampled_from([7, 10]))
    anchor = start.date() + timedelta(days=draw(st.integers(-12, 3)))
    seasons: dict[str, Any] = {"length_days": length, "anchor": anchor.isoformat()}
    if draw(st.booleans()):  # an explicit list, with a gap between its seasons
        gap = draw(st.integers(1, 4))
        second = anchor + timedelta(days=length + gap)
        seasons = {
            "list": [
                {
                    "id": "alpha",
                    "start": anchor.isoformat(),
                    "end": (anchor + timedelta(days=length - 1)).isoformat(),
                },
                {
                    "id": "beta-2",
                    "start": second.isoformat(),
                    "end": (second + timedelta(days=16)).isoformat(),
                },
            ]
        }
    boards = {
        "kills": draw(board_settings("sum", "desc")),
        "best": draw(board_settings("max", "desc")),
        "fastest": draw(board_settings("min", "asc")),
        "mixed": draw(
            board_settings(
                # set twice: the only board that may draw it
                draw(st.sampled_from(["sum", "max", "min", "set", "set"])),
                draw(st.sampled_from(["desc", "asc"])),
            )
        ),
    }
    overrides = {
        "namespace": NS,
        "timezone": draw(st.sampled_from(ZONES)),
        "week_start": draw(st.sampled_from(["monday", "wednesday", "sunday"])),
        "seasons": seasons,
        "boards": boards,
    }
    return overrides, start


metadata = st.dictionaries(
    st.sampled_from(META_NAMES),
    st.one_of(st.none(), st.integers(-5, 5), st.booleans(), st.sampled_from(["x", "yé", ""])),
    max_size=7,
)

event = st.fixed_dictionaries(
    {
        "board": st.sampled_from(BOARDS),
        "member": st.sampled_from(MEMBERS),
        # A few common values, so that equal scores (and the tie rules) come up often.
        "value": st.one_of(st.integers(-1000, 1000), st.sampled_from([0, 5, 10])),
        # seconds before now: negative is the future (beyond -300 it is too far ahead);
        # up to two hours back, which is late just after a day's grace has run out
        "back": st.one_of(st.integers(-400, 7200), st.integers(0, 120)),
    },
    optional={
        "event_id": st.sampled_from([f"e{i}" for i in range(4)]),
        "metadata": metadata,
        "as_epoch": st.booleans(),
    },
)

batch = st.tuples(st.just("batch"), st.lists(event, min_size=1, max_size=4))
step = st.one_of(
    # minutes: mostly within a day, sometimes a jump over a few days
    st.tuples(st.just("advance"), st.one_of(st.integers(10, 12 * 60), st.integers(10, 72 * 60))),
    # to a few minutes after the next local midnight: batches then straddle two days
    st.tuples(st.just("midnight"), st.integers(1, 50)),
    batch,
    batch,
)


def to_api(ev: dict[str, Any], ts: datetime) -> dict[str, Any]:
    out: dict[str, Any] = {
        k: ev[k] for k in ("board", "member", "value", "event_id", "metadata") if k in ev
    }
    out["ts"] = int(ts.timestamp()) if ev.get("as_epoch") else ts.isoformat()
    return out


def check_board(
    s: Seasons, r: redis.Redis, model: Model, board: str, window: str, pid: str
) -> None:
    """The live key (raw) and the API's full page, rank and lookup, against the model."""
    expected = model.board(board, window, pid)
    assert zset(r, key(NS, board, window, pid)) == expected, (board, window, pid)
    want = model.ranked(board, window, pid)
    page = s.top(board, window, period=pid, limit=1000)
    assert (page.period, page.total) == (pid, len(expected))
    assert [(e.rank, e.member, e.score) for e in page.entries] == want
    for e in page.entries:
        assert e.metadata == model.metadata(board, e.member)
    found = s.lookup(board, [*MEMBERS, "nobody", "a"], window, period=pid)
    by_rank = sorted(want, key=lambda t: (t[0], t[1]))
    assert sorted((e.rank, e.member, e.score) for e in found) == by_rank
    assert [e.rank for e in found] == sorted(e.rank for e in found)
    for member in MEMBERS[: 2 if window == "day" else len(MEMBERS)]:
        entry = s.rank(board, member, window, period=pid)
        row = next(((rk, m, sc) for rk, m, sc in want if m == member), None)
        assert (entry and (entry.rank, entry.member, entry.score)) == (row or None)


def check_everything(
    s: Seasons, r: redis.Redis, model: Model, clock: ManualClock, settings: Settings
) -> None:
    for board in BOARDS:
        periods = model.periods(board)
        for window, pid in sorted(periods):
            check_board(s, r, model, board, window, pid)
            ttl = r.expiretime(key(NS, board, window, pid))
            assert ttl == model.cal.expire_at(window, pid), (board, window, pid)
        # Exactly these sorted sets exist: nothing left behind, nothing missing.
        stored = names(r, f"{NS}:{{{board}}}:*")
        boards = {
            n for n in stored if r.type(n) == b"zset" and not n.endswith((":events", ":batches"))
        }
        want_boards = {key(NS, board, w, p) for w, p in periods}
        if settings.boards[board].ties == "earliest":  # and a reach set beside each board
            for w, p in periods:
                reach = f"{NS}:{{{board}}}:reached:{w}:{p}"
                assert zset(r, reach) == model.reach(board, w, p), reach
                assert r.expiretime(reach) == model.cal.expire_at(w, p), reach
                want_boards.add(reach)
        if settings.boards[board].ties == "dense":  # and a distinct set beside each board
            for w, p in periods:
                distinct = f"{NS}:{{{board}}}:distinct:{w}:{p}"
                got = {sc for _, sc in r.zrange(distinct, 0, -1, withscores=True)}
                assert got == model.distinct(board, w, p), distinct
                assert r.expiretime(distinct) == model.cal.expire_at(w, p), distinct
                want_boards.add(distinct)
        assert boards == want_boards
        meta_key = f"{NS}:{{{board}}}:meta"
        assert r.ttl(meta_key) in (-1, -2)
        stored_meta = {
            m.decode(): json.loads(v)
            for m, v in cast(dict[bytes, bytes], r.hgetall(meta_key)).items()
        }
        assert stored_meta == {m: v for m, v in model.meta[board].items() if v}
        # A window the board does not keep is refused; those it keeps are read as the model's
        # calendar says.
        kept = settings.boards[board].windows
        for window in WINDOWS:
            if window not in kept:
                with pytest.raises(BadWindow):
                    s.top(board, window)
                continue
            current = model.cal.current(window, clock())
            if current is None:
                with pytest.raises(BadPeriod):
                    s.top(board, window)
                continue
            page = s.top(board, window, limit=1000)
            assert page.period == current
            want = model.ranked(board, window, current)
            assert [(e.rank, e.member, e.score) for e in page.entries] == want


@hsettings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=configs(), steps=st.lists(step, min_size=10, max_size=50))
def test_random_streams_match_the_model(
    config: tuple[dict[str, Any], datetime],
    steps: list[tuple[str, Any]],
    settings_factory: Callable[..., Settings],
    r: redis.Redis,
) -> None:
    overrides, start = config
    r.flushall()
    settings = settings_factory(**overrides)
    clock = ManualClock(start)
    model = Model(settings)
    with Seasons(settings, clock=clock) as s:
        for kind, arg in steps:
            if kind == "advance":
                clock.advance(timedelta(minutes=arg))
                continue
            if kind == "midnight":
                tomorrow = model.cal.local_date(clock()) + timedelta(days=1)
                clock.set(model.cal.day_start(tomorrow) + timedelta(minutes=arg))
                continue
            now = clock()
            stamped = [(ev, now - timedelta(seconds=ev["back"])) for ev in arg]
            events = [to_api(ev, ts) for ev, ts in stamped]
            try:
                timed = [{**e, "ts": ts} for e, (_, ts) in zip(events, stamped, strict=True)]
                want = model.submit(timed, now)
            except Rejected as exc:
                before = snapshot(r)
                with pytest.raises(BatchRejected) as err:
                    s.submit_many(events)
                got = {p["index"] for p in err.value.details}
                assert min(i for i, _ in exc.problems) in got
                if any(c in ("late_event", "future_event") for _, c in exc.problems):
                    assert got == {i for i, _ in exc.problems}
                assert snapshot(r) == before
                continue
            result = s.submit_many(events)
            assert (result.applied, result.duplicates) == want
            touched = {
                (ev["board"], w, model.cal.period_id(w, model.cal.local_date(ts)))
                for ev, ts in stamped
                for w in settings.boards[ev["board"]].windows
            }
            for board, window, pid in touched:
                if pid is not None:
                    assert zset(r, key(NS, board, window, pid)) == model.board(board, window, pid)
        check_everything(s, r, model, clock, settings)


def test_reference_ranks_follow_redis_order() -> None:
    """The model's own tie rules, checked by hand (the model is only as good as this)."""
    scores = {"a": 5.0, "b": 5.0, "B": 7.0, "c": 1.0, "é": 5.0}
    assert ranked(scores, "desc", "member") == [
        (1, "B", 7.0),
        (2, "é", 5.0),
        (3, "b", 5.0),
        (4, "a", 5.0),
        (5, "c", 1.0),
    ]
    assert ranked(scores, "desc", "shared") == [
        (1, "B", 7.0),
        (2, "é", 5.0),
        (2, "b", 5.0),
        (2, "a", 5.0),
        (5, "c", 1.0),
    ]
    assert ranked(scores, "asc", "shared") == [
        (1, "c", 1.0),
        (2, "a", 5.0),
        (2, "b", 5.0),
        (2, "é", 5.0),
        (5, "B", 7.0),
    ]


def test_model_ties_agree_with_redis(r: redis.Redis) -> None:
    """Redis orders equal scores by member bytes; ZREVRANGE is the exact reverse."""
    scores = {"a": 5.0, "b": 5.0, "B": 7.0, "c": 1.0, "é": 5.0, "ab": 5.0}
    r.zadd("ties", scores)
    asc = [m.decode() for m in cast(list[bytes], r.zrange("ties", 0, -1))]
    desc = [m.decode() for m in cast(list[bytes], r.zrange("ties", 0, -1, desc=True))]
    assert asc == [m for _, m, _ in ranked(scores, "asc", "member")]
    assert desc == [m for _, m, _ in ranked(scores, "desc", "member")]
