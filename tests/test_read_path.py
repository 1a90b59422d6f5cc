"""The read path (docs/contract.md: time, boards and scores, reads) against the reference model.

One small world (five boards, days in three seasons, many equal scores) is written through the
API and mirrored in tests/reference.py; every read (top/page, rank, around a member or a rank,
lookup, history) is compared with plain-Python slicing of the model's ranked lists, for both
orders and both tie rules. Also: period resolution, errors that name the bad value, archived
seasons, and one round trip to Redis per read (seen with MONITOR).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import redis
from reference import Model, around_start, ranked, snapshot, zset

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BadPeriod, BadWindow, InvalidInput, LimitExceeded, UnknownBoard
from seasons.keys import Keys

NS = "rp"
# Far in the future, so that no key's EXPIREAT (from the manual clock) lies in the past.
NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # Wednesday; season S3 = 06-11 .. 06-17
BOARDS = {
    "pts": {"aggregate": "sum", "order": "desc", "ties": "member", "season_weights": [1, 2]},
    "pts_shared": {"aggregate": "sum", "order": "desc", "ties": "shared"},
    "time": {"aggregate": "min", "order": "asc", "ties": "member"},
    "time_shared": {"aggregate": "min", "order": "asc", "ties": "shared"},
    "small": {"aggregate": "max", "order": "desc"},
}
MAIN = ("pts", "pts_shared", "time", "time_shared")
WINDOWS = ("day", "week", "season")
# Days written, oldest first: S1, S2 (the previous week too), and three days of S3.
DAYS = (date(2035, 5, 30), date(2035, 6, 5), date(2035, 6, 11), date(2035, 6, 12), NOW.date())
MEMBERS = [f"p{i:02d}" for i in range(40)] + ["Zed", "ann", "é", "ab"]


@dataclass
class World:
    s: Seasons
    model: Model
    clock: ManualClock
    settings: Settings

    def want(self, board: str, window: str, pid: str) -> list[tuple[int, str, float]]:
        return self.model.ranked(board, window, pid)

    def pid(self, window: str) -> str:
        pid = self.model.cal.current(window, self.clock())
        assert pid is not None
        return pid


@pytest.fixture
def world(settings_factory: Callable[..., Settings], r: redis.Redis) -> Iterator[World]:
    settings = settings_factory(
        namespace=NS,
        boards=BOARDS,
        seasons={"length_days": 7, "anchor": "2035-05-28"},
    )
    model = Model(settings)
    clock = ManualClock(NOW)
    rng = random.Random(7)
    with Seasons(settings, clock=clock) as s:
        for day in DAYS:
            clock.set(datetime(day.year, day.month, day.day, 8, tzinfo=UTC))
            for _ in range(3):
                batch: list[dict[str, Any]] = []
                for member in rng.sample(MEMBERS, 30):
                    value = rng.choice([10, 20, 20, 30, 50, -5, 0])  # plenty of equal scores
                    meta = {"lvl": rng.randint(1, 9)} if rng.random() < 0.3 else None
                    for board in MAIN:
                        event = {"board": board, "member": member, "value": value}
                        if meta:
                            event["metadata"] = meta
                        batch.append(event)
                if day == NOW.date():
                    batch += [
                        {"board": "small", "member": m, "value": v}
                        for m, v in (("x", 3), ("y", 9), ("z", 9))
                    ]
                s.submit_many(batch)
                model.submit([{**e, "ts": clock()} for e in batch], clock())
                clock.advance(timedelta(minutes=30))
        clock.set(NOW)
        yield World(s, model, clock, settings)


def triples(entries: list[Any]) -> list[tuple[int, str, float]]:
    return [(e.rank, e.member, e.score) for e in entries]


# --- top / page ---------------------------------------------------------------------------


@pytest.mark.parametrize("board", MAIN)
def test_pages(world: World, board: str) -> None:
    for window in WINDOWS:
        pid = world.pid(window)
        want = world.want(board, window, pid)
        total = len(want)
        assert total >= 30
        for offset, limit in [
            (0, 10),
            (0, 1),
            (5, 7),
            (total - 3, 10),
            (total - 1, 1),
            (total, 5),
            (total + 100, 10),
            (0, 1000),
        ]:
            page = world.s.top(board, window, offset=offset, limit=limit)
            assert (page.board, page.window, page.period, page.total) == (board, window, pid, total)
            assert triples(page.entries) == want[offset : offset + limit], (window, offset, limit)
            for e in page.entries:
                assert e.metadata == world.model.metadata(board, e.member)


def test_tie_rules_really_differ(world: World) -> None:
    """The world has equal scores, so the two tie rules give different ranks."""
    for window in WINDOWS:
        pid = world.pid(window)
        member_ranks = [rk for rk, _, _ in world.want("pts", window, pid)]
        shared_ranks = [rk for rk, _, _ in world.want("pts_shared", window, pid)]
        assert member_ranks == list(range(1, len(member_ranks) + 1))
        assert shared_ranks != member_ranks


# --- rank / lookup ----------------------------------------------------------------------------


@pytest.mark.parametrize("board", MAIN)
def test_rank_of_every_member(world: World, board: str) -> None:
    for window in WINDOWS:
        pid = world.pid(window)
        want = {m: (rk, m, sc) for rk, m, sc in world.want(board, window, pid)}
        for member in [*MEMBERS, "nobody"]:
            entry = world.s.rank(board, member, window)
            if member not in want:
                assert entry is None
                continue
            assert entry is not None
            assert (entry.rank, entry.member, entry.score) == want[member]
            assert entry.metadata == world.model.metadata(board, member)


@pytest.mark.parametrize("board", MAIN)
def test_lookup_friends(world: World, board: str) -> None:
    rng = random.Random(board)
    for window in WINDOWS:
        pid = world.pid(window)
        want = {m: (rk, m, sc) for rk, m, sc in world.want(board, window, pid)}
        friends = rng.sample(MEMBERS, 15) + ["nobody", "ghost"]
        friends += friends[:4]  # duplicates in the input
        rng.shuffle(friends)
        found = world.s.lookup(board, friends, window)
        expected = sorted((want[m] for m in set(friends) if m in want), key=lambda t: t[:2])
        assert sorted(triples(found), key=lambda t: t[:2]) == expected
        assert len(found) == len({e.member for e in found})  # each once
        assert [e.rank for e in found] == sorted(e.rank for e in found)  # by rank
        if world.settings.boards[board].ties == "member":
            assert triples(found) == expected
    assert world.s.lookup(board, [], "day") == []


# --- around -------------------------------------------------------------------------------


@pytest.mark.parametrize("board", MAIN)
def test_around_member(world: World, board: str) -> None:
    for window in WINDOWS:
        pid = world.pid(window)
        want = world.want(board, window, pid)
        total = len(want)
        positions = [0, 1, 2, total // 2, total - 3, total - 2, total - 1]
        for size in (1, 2, 3, 4, 5, 10, 101):
            for pos in positions:
                member = want[pos][1]
                page = world.s.around(board, member, window, size=size)
                assert page is not None
                start = around_start(pos, size, total)
                assert triples(page.entries) == want[start : start + size], (window, size, pos)
                assert len(page.entries) == min(size, total)
                assert member in [e.member for e in page.entries]
                assert (page.period, page.total) == (pid, total)
        assert world.s.around(board, "nobody", window) is None


@pytest.mark.parametrize("board", ["pts", "time", "pts_shared"])
def test_around_rank(world: World, board: str) -> None:
    for window in WINDOWS:
        pid = world.pid(window)
        want = world.want(board, window, pid)
        total = len(want)
        for size in (1, 2, 5, 6, 101):
            for rank in (1, 2, 3, total // 2, total - 1, total, total + 5):
                page = world.s.around_rank(board, rank, window, size=size)
                start = around_start(rank - 1, size, total)
                assert triples(page.entries) == want[start : start + size], (window, size, rank)
                assert page.total == total


def test_around_on_a_small_board_returns_all_it_has(world: World) -> None:
    want = ranked({"x": 3, "y": 9, "z": 9}, "desc", "member")
    assert [m for _, m, _ in want] == ["z", "y", "x"]
    for size in (3, 4, 5, 101):
        for member in ("x", "y", "z"):
            page = world.s.around("small", member, "day", size=size)
            assert page is not None and triples(page.entries) == want
        assert triples(world.s.around_rank("small", 1, "day", size=size).entries) == want
    page = world.s.around("small", "x", "day", size=2)
    assert page is not None and triples(page.entries) == want[1:]
    page = world.s.around("small", "z", "day", size=2)
    assert page is not None and triples(page.entries) == want[:2]


def test_reads_of_an_empty_board(world: World) -> None:
    page = world.s.top("small", "day", period="2035-06-12")
    assert (page.total, page.entries) == (0, [])
    assert world.s.around_rank("small", 1, "day", period="2035-06-12").entries == []
    assert world.s.around("small", "x", "day", period="2035-06-12") is None
    assert world.s.rank("small", "x", "day", period="2035-06-12") is None
    assert world.s.lookup("small", ["x", "y"], "day", period="2035-06-12") == []


# --- history ------------------------------------------------------------------------------


@pytest.mark.parametrize("board", ["pts", "time_shared"])
def test_history(world: World, board: str) -> None:
    cal = world.model.cal
    members = [m for _, m, _ in world.want(board, "season", "S3")][:3] + ["nobody"]
    for window, last in (
        ("day", 14),
        ("day", 1),
        ("week", 3),
        ("week", 30),
        ("season", 2),
        ("season", 10),
        ("day", 400),
    ):
        periods = cal.recent(window, world.clock(), last)
        for member in members:
            points = world.s.history(board, member, window, last=last)
            expected = []
            for pid in periods:
                row = next((t for t in world.want(board, window, pid) if t[1] == member), None)
                expected.append((pid, row[0] if row else None, row[2] if row else None))
            assert [(p.period, p.rank, p.score) for p in points] == expected, (window, last)
    # The history has both ranked and unranked points, oldest first.
    points = world.s.history(board, members[0], "day", last=14)
    assert [p.period for p in points] == sorted(p.period for p in points)
    assert {p.rank is None for p in points} == {True, False}
    assert [p.period for p in world.s.history(board, members[0], "season", last=10)] == [
        "S1",
        "S2",
        "S3",
    ]


def test_a_history_without_last_shows_its_windows_own_number(world: World) -> None:
    """docs/http-api.md: by default a history shows 14 days, 12 weeks or 12 seasons (the
    windows' history_last), through the Python API and the CLI's default alike."""
    cal, s = world.model.cal, world.s
    for window, last in (("day", 14), ("week", 12), ("season", 12)):
        want = cal.recent(window, world.clock(), last)
        assert [p.period for p in s.history("pts", "p01", window)] == want, window


# --- periods ------------------------------------------------------------------------------


def test_periods_current_previous_and_explicit(world: World) -> None:
    s, cal = world.s, world.model.cal
    cases = [
        ("day", "current", NOW.date().isoformat()),
        ("day", "previous", "2035-06-12"),
        ("day", "2035-06-05", "2035-06-05"),
        ("day", "2035-05-30", "2035-05-30"),
        ("week", "current", "2035-06-11"),
        ("week", "previous", "2035-06-04"),
        ("week", "2035-06-07", "2035-06-04"),  # any day of a week names it
        ("week", "2035-06-04", "2035-06-04"),
        ("season", "current", "S3"),
        ("season", "previous", "S2"),
        ("season", "S1", "S1"),
    ]
    for window, period, pid in cases:
        if period in ("current", "previous"):
            assert (cal.current if period == "current" else cal.previous)(window, NOW) == pid
        for board in ("pts", "time_shared"):
            page = s.top(board, window, period=period, limit=1000)
            assert page.period == pid, (window, period)
            assert triples(page.entries) == world.want(board, window, pid), (window, period)
            member = world.want(board, window, pid)[0][1]
            entry = s.rank(board, member, window, period=period)
            assert entry is not None and entry.rank == 1
    # a period with nothing in it is empty, not an error
    assert s.top("pts", "season", period="S9").total == 0
    assert s.top("pts", "day", period="2035-01-01").total == 0


def test_previous_season_before_any_has_ended(world: World) -> None:
    world.clock.set(datetime(2035, 6, 1, tzinfo=UTC))  # in S1
    with pytest.raises(BadPeriod, match="no season"):
        world.s.top("pts", "season", period="previous")
    world.clock.set(datetime(2035, 5, 1, tzinfo=UTC))  # before the anchor: no current season
    with pytest.raises(BadPeriod):
        world.s.top("pts", "season")
    assert world.s.history("pts", "p01", "season", last=5) == []


# --- errors -------------------------------------------------------------------------------


def test_bad_reads_name_what_was_wrong(world: World, r: redis.Redis) -> None:
    s = world.s
    before = snapshot(r)
    cases: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: s.top("nope", "day"), UnknownBoard, "'nope'"),
        (lambda: s.rank("nope", "p01", "day"), UnknownBoard, "'nope'"),
        (lambda: s.around("nope", "p01", "day"), UnknownBoard, "'nope'"),
        (lambda: s.around_rank("nope", 1, "day"), UnknownBoard, "'nope'"),
        (lambda: s.lookup("nope", ["p01"], "day"), UnknownBoard, "'nope'"),
        (lambda: s.history("nope", "p01", "day"), UnknownBoard, "'nope'"),
        (lambda: s.top("pts", "month"), BadWindow, "'month'"),
        (lambda: s.rank("pts", "p01", "month"), BadWindow, "'month'"),
        (lambda: s.around("pts", "p01", "month"), BadWindow, "'month'"),
        (lambda: s.around_rank("pts", 1, "month"), BadWindow, "'month'"),
        (lambda: s.lookup("pts", ["p01"], "month"), BadWindow, "'month'"),
        (lambda: s.history("pts", "p01", "month"), BadWindow, "'month'"),
        (lambda: s.top("pts", "day", period="2035-13-01"), BadPeriod, "'2035-13-01'"),
        (lambda: s.top("pts", "day", period="yesterday"), BadPeriod, "'yesterday'"),
        (lambda: s.top("pts", "week", period="20350613"), BadPeriod, "'20350613'"),
        (lambda: s.top("pts", "season", period="S0"), BadPeriod, "'S0'"),
        (lambda: s.top("pts", "season", period="2035-06-13"), BadPeriod, "'2035-06-13'"),
        (lambda: s.rank("pts", "p01", "season", period="last"), BadPeriod, "'last'"),
        (lambda: s.around("pts", "p01", "day", period="x"), BadPeriod, "'x'"),
        (lambda: s.around_rank("pts", 1, "week", period="x"), BadPeriod, "'x'"),
        (lambda: s.lookup("pts", ["p01"], "season", period="x"), BadPeriod, "'x'"),
        (lambda: s.top("pts", "day", limit=1001), LimitExceeded, "1001"),
        (lambda: s.top("pts", "day", limit=0), LimitExceeded, "limit"),
        (lambda: s.top("pts", "day", offset=-1), LimitExceeded, "-1"),
        (lambda: s.around("pts", "p01", "day", size=102), LimitExceeded, "102"),
        (lambda: s.around("pts", "p01", "day", size=0), LimitExceeded, "size"),
        (lambda: s.around_rank("pts", 1, "day", size=102), LimitExceeded, "102"),
        (lambda: s.around_rank("pts", 0, "day"), LimitExceeded, "rank"),
        (lambda: s.history("pts", "p01", "day", last=401), LimitExceeded, "401"),
        (lambda: s.history("pts", "p01", "day", last=0), LimitExceeded, "last"),
        (lambda: s.lookup("pts", [f"m{i}" for i in range(1001)], "day"), LimitExceeded, "1001"),
    ]
    for call, error, text in cases:
        with pytest.raises(error) as err:
            call()
        assert isinstance(err.value, InvalidInput)
        assert text in err.value.message, (error, err.value.message)
    # the largest allowed values work
    assert len(s.top("pts", "season", limit=1000).entries) == s.top("pts", "season").total
    assert len(s.around_rank("pts", 1, "season", size=101).entries) == min(
        101, s.top("pts", "season").total
    )
    assert len(s.history("pts", "p01", "day", last=400)) == 400
    assert snapshot(r) == before


# --- archives -------------------------------------------------------------------------------


def test_an_archived_season_is_read_from_its_archive(world: World, r: redis.Redis) -> None:
    keys = Keys(NS)
    live = zset(r, keys.season("pts", "S1"))
    assert live  # the live key is still there; reads must prefer the archive
    archived = {"arch1": 500.0, "arch2": 400.0, "p01": 400.0, "ann": -3.0}
    r.zadd(keys.archive("pts", "S1"), archived)
    r.hset(keys.meta("pts"), "arch1", '{"final":true}')
    want = ranked(archived, "desc", "member")
    s = world.s
    page = s.top("pts", "season", period="S1")
    assert (page.period, page.total, triples(page.entries)) == ("S1", 4, want)
    assert page.entries[0].metadata == {"final": True}
    entry = s.rank("pts", "p01", "season", period="S1")
    assert entry is not None and (entry.rank, entry.score) == (2, 400.0)
    assert s.rank("pts", [m for m in live if m not in archived][0], "season", period="S1") is None
    around = s.around("pts", "ann", "season", size=3, period="S1")
    assert around is not None and triples(around.entries) == want[1:]
    assert triples(s.around_rank("pts", 1, "season", size=2, period="S1").entries) == want[:2]
    assert triples(s.lookup("pts", ["ann", "arch1", "zz"], "season", period="S1")) == [
        want[0],
        want[3],
    ]
    history = s.history("pts", "arch2", "season", last=3)
    assert [(p.period, p.rank, p.score) for p in history][0] == ("S1", 3, 400.0)
    # other seasons still read their live keys
    assert triples(s.top("pts", "season", period="S2", limit=1000).entries) == world.want(
        "pts", "season", "S2"
    )


# --- one round trip per read ------------------------------------------------------------------


def _commands_sent(r: redis.Redis, action: Callable[[], Any]) -> list[str]:
    """Commands clients sent to Redis while ``action`` ran (not those run inside scripts)."""
    marker = "end-of-read-marker"
    with r.monitor() as monitor:
        action()
        r.echo(marker)
        seen = []
        while True:
            command = monitor.next_command()
            seen.append(command)
            if marker in command["command"]:
                break
    # Leave out scripts' own commands and the marker's connection (its setup, e.g. HELLO).
    ours = seen[-1]["client_port"]
    return [
        c["command"].split(" ", 1)[0].upper()
        for c in seen[:-1]
        if c["client_type"] != "lua" and c["client_port"] != ours
    ]


def test_each_read_is_one_round_trip(world: World, r: redis.Redis) -> None:
    """Each read is one script call or one transaction of plain commands (its plan), once
    the read has been made before: a plan that needs what it reads first (a member's score,
    its position) guesses it from the last read of that member (the warm-up read here)."""
    s = world.s
    entry = ["ZREVRANK", "ZCOUNT", "ZRANGE", "ZCARD", "HGET"]
    plans: dict[str, tuple[Callable[[], Any], list[str]]] = {
        "top": (lambda: s.top("pts", "week", limit=50, offset=3), ["ZCARD", "ZRANGE", "HMGET"]),
        "top shared": (
            lambda: s.top("pts_shared", "season", limit=50),
            ["EXISTS", "ZCARD", "ZRANGE", "HMGET"],
        ),
        "archived season": (
            lambda: s.top("pts", "season", period="S1"),
            ["EXISTS", "ZCARD", "ZRANGE", "HMGET"],
        ),
        "lookup": (
            lambda: s.lookup("pts", MEMBERS[:2], "season"),
            ["EXISTS", "ZSCORE", "ZREVRANK", "ZSCORE", "ZREVRANK", "HMGET"],
        ),
        "history day": (
            lambda: s.history("pts", "p01", "day", last=2),
            ["ZREVRANK", "ZSCORE", "ZREVRANK", "ZSCORE"],
        ),
        "around rank": (
            lambda: s.around_rank("time", 5, "week", size=9),
            ["ZCARD", "ZRANGE", "HMGET"],
        ),
        "rank": (
            lambda: s.rank("pts", "p01", "day"),
            ["ZSCORE", *entry],
        ),
        "rank shared": (
            lambda: s.rank("time_shared", "p01", "season"),
            ["EXISTS", "ZSCORE", "ZCOUNT", *entry[1:]],
        ),
        # A member not on the board: its field of the moderation hash is read with its score
        # (it may be hidden: docs/boards.md#hidden-and-banned-members).
        "not ranked": (lambda: s.rank("pts", "nobody", "day"), ["ZSCORE", "HGET"]),
        "around": (
            lambda: s.around("pts", "p01", "season", size=9),
            ["EXISTS", "ZREVRANK", "ZCARD", "ZRANGE", "HMGET"],
        ),
        "climb": (
            lambda: s.climb("pts", "p01", "week", to=[1, 5]),
            ["ZREVRANK", "ZSCORE", "ZRANGE", "ZRANGE"],
        ),
    }
    r.zadd(Keys(NS).archive("pts", "S1"), {"a": 1})
    for name, (read, commands) in plans.items():
        read()  # warm up: the connection is set up, the page's members are known
        assert _commands_sent(r, read) == ["MULTI", *commands, "EXEC"], name
    reads: dict[str, Callable[[], Any]] = {
        "top shared, not the first page": lambda: s.top("pts_shared", "season", offset=1),
        "around shared": lambda: s.around("pts_shared", "p01", "season", size=9),
        "climb shared": lambda: s.climb("pts_shared", "p01", "week", to=[1, 5]),
        "around rank shared": lambda: s.around_rank("time_shared", 5, "week", size=9),
        "lookup shared": lambda: s.lookup("pts_shared", MEMBERS, "season"),
        "history shared": lambda: s.history("pts_shared", "p01", "day", last=30),
        "history season": lambda: s.history("pts", "p01", "season", last=3),
    }
    for name, read in reads.items():
        read()  # warm up: the script is loaded, the connection is set up
        assert _commands_sent(r, read) == ["EVALSHA"], name
