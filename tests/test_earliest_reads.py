"""``ties = "earliest"``, the read side: every read of a board whose equal scores rank by the
time each member reached its score, against the reference model (tests/reference.py).

The boards and their reach sets are written straight into Redis (ZADD of the board key and of
its reach set, ``Keys.reached``), so that the reach times (many equal ones among them) are the
test's and not the write path's. Every read that ranks (page, around a rank, around a member,
entry and its extras, lookup, history over several periods, climb) is compared with the
model's ranking for both orders; also an archived season's read, a snapshot's, the archive
file's order, the export, the restore check and the reach set a restore writes, runs of equal
scores longer than the scripts' chunks, and one run on a Redis Cluster.
"""

from __future__ import annotations

import gzip
import random
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import around_start, climb_targets, gap_up, percentile, ranked

from seasons import Seasons, standings
from seasons.archives import Archives
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.config.settings import BoardSettings
from seasons.errors import ArchiveRejected
from seasons.http.app import create_app
from seasons.keys import Keys
from seasons.restore import Restorer
from seasons.standings import Row, line, read_rows

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "ex"
NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # season S3 = 2035-06-11 .. 06-17
TODAY = date(2035, 6, 13)
SEASON = "S3"
ENDED = "S2"  # 2035-06-04 .. 06-10
SNAPSHOT = "S3@20350613T085900Z"
BOARDS: dict[str, dict[str, Any]] = {
    "hi": {"aggregate": "max", "order": "desc", "ties": "earliest"},
    "lo": {"aggregate": "min", "order": "asc", "ties": "earliest"},
}
NAMES = [f"p{i:02d}" for i in range(30)] + ["Zed", "ann", "é", "ab", "a/b", "x y", "a\\b"]
# Few values and few reach times, so that most scores are shared and many reach times equal;
# -0.0 and 0 are one score to Redis.
VALUES = st.sampled_from([-2.5, -1, -0.0, 0, 1, 1, 2, 3, 7.25, 100])
TIMES = st.sampled_from([1.0e9, 1.0e9, 1.0e9 + 0.25, 1.5e9, 1.5e9, 2.0e9 + 0.5, 1.7e9])
Scores = dict[str, float]
Reached = dict[str, float]
Triple = tuple[int, str, float]


def read_checked(file: Path, cfg: BoardSettings) -> list[Row]:
    """The checked rows of an archive file, as restore reads them (no count to stop at)."""
    with file.open("rb") as f:
        return standings.read_checked(f, file, cfg, count=10**9)[0]


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        namespace=NS,
        boards=BOARDS,
        seasons={"length_days": 7, "anchor": "2035-05-28"},
        archive={"dir": str(tmp_path / "archive")},
    )


@pytest.fixture
def app(settings: Settings) -> Iterator[Seasons]:
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        yield s


def put(r: Any, key: str, reach_key: str, scores: Scores, reached: Reached, meta_key: str) -> None:
    """A board and its reach set, as the writes keep them; metadata for every third member.
    A member missing from ``reached`` gets no reach time."""
    r.delete(key, reach_key)
    if scores:
        r.zadd(key, scores)
    times = {m: t for m, t in reached.items() if m in scores}
    if times:
        r.zadd(reach_key, times)
    for i, member in enumerate(sorted(scores)):
        if i % 3 == 0:
            r.hset(meta_key, member, f'{{"n":{i}}}')


def put_window(
    r: Any, keys: Keys, board: str, window: str, pid: str, scores: Scores, reached: Reached
) -> None:
    put(r, keys.window(board, window, pid), keys.reached(board, window, pid), scores, reached,
        keys.meta(board))  # fmt: skip


def put_archive(
    r: Any, keys: Keys, board: str, archive_id: str, scores: Scores, reached: Reached
) -> None:
    put(r, keys.archive(board, archive_id), keys.reached(board, "archive", archive_id), scores,
        reached, keys.meta(board))  # fmt: skip


def want(app: Seasons, board: str, scores: Scores, reached: Reached) -> list[Triple]:
    return ranked(scores, app.settings.boards[board].order, "earliest", reached)


def triples(entries: list[Any]) -> list[Triple]:
    return [(e.rank, e.member, e.score) for e in entries]


def check_reads(
    app: Seasons, board: str, window: str, period: str, scores: Scores, reached: Reached
) -> None:
    """Every read of ``board`` against the model's earliest ranking of ``scores``."""
    order = app.settings.boards[board].order
    rows = want(app, board, scores, reached)
    total = len(rows)
    assert [r for r, _, _ in rows] == list(range(1, total + 1))
    # Every offset with short pages cuts each run of equal scores at both of its ends.
    pages = [(0, 1000), (total, 2)] + [(o, n) for n in (1, 2, 5) for o in range(total)]
    for offset, limit in pages:
        page = app.top(board, window, period=period, offset=offset, limit=limit)
        assert triples(page.entries) == rows[offset : offset + limit], (offset, limit)
        assert page.total == total
    for rank in (1, 2, total // 2 + 1, total, total + 3):
        for size in (1, 4):
            page = app.around_rank(board, rank, window, period=period, size=size)
            start = around_start(rank - 1, size, total)
            assert triples(page.entries) == rows[start : start + size], (rank, size)
    for position, (rank, member, score) in enumerate(rows):
        entry = app.rank(board, member, window, period=period)
        assert entry is not None
        assert (entry.rank, entry.member, entry.score) == (rank, member, score)
        assert entry.percentile == percentile(scores, order, member)
        assert entry.gap_up == gap_up(scores, order, member)
        assert entry.total == total
        size = 1 + position % 5
        around = app.around(board, member, window, period=period, size=size)
        assert around is not None
        start = around_start(position, size, total)
        assert triples(around.entries) == rows[start : start + size], (member, size)
        to = [1, 2, rank, max(1, rank - 1), rank + 1, total, total + 1]
        climbed = app.climb(board, member, window, to=to, period=period)
        assert climbed is not None
        assert (climbed.member, climbed.rank, climbed.score) == (member, rank, score)
        got = [t.model_dump() for t in climbed.targets]
        assert got == climb_targets(scores, order, "earliest", member, to, reached)
    assert app.rank(board, "nobody", window, period=period) is None
    assert app.around(board, "nobody", window, period=period) is None
    rng = random.Random(total)
    friends = rng.sample(list(scores), min(len(scores), 15)) + ["nobody"]
    rng.shuffle(friends)
    chosen = set(friends)
    assert triples(app.lookup(board, friends, window, period=period)) == [
        row for row in rows if row[1] in chosen
    ]


boards_st = st.dictionaries(st.sampled_from(NAMES), st.tuples(VALUES, TIMES), max_size=30)


def split(board: dict[str, tuple[float, float]]) -> tuple[Scores, Reached]:
    return {m: s for m, (s, _) in board.items()}, {m: t for m, (_, t) in board.items()}


# --- every read, boards of many equal scores and equal reach times ------------------------------


@given(board=boards_st.filter(bool))
@example(board={"solo": (5, 1.0e9)})
@example(board={"c": (1, 3.0), "b": (1, 2.0), "a": (1, 2.0)})  # equal times: member bytes
@example(board={f"m{i:02d}": (float(i % 3), float(10 - i % 4)) for i in range(20)})
@example(board={"a": (-0.0, 2.0), "b": (0, 1.0), "c": (-0.0, 1.0), "d": (1, 5.0), "e": (-1, 0.0)})
@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_read_ranks_as_the_model(
    app: Seasons, r: redis.Redis, board: dict[str, tuple[float, float]]
) -> None:
    r.flushdb()
    scores, reached = split(board)
    for name in BOARDS:
        put_window(r, app.keys, name, "day", TODAY.isoformat(), scores, reached)
        check_reads(app, name, "day", "current", scores, reached)


def test_a_member_without_a_reach_time_ranks_after_its_equals(app: Seasons, r: redis.Redis) -> None:
    """The writes keep a reach time for every member; one missing (never left by them) is
    read as reached last among its equal scores, not as an error."""
    scores = {"a": 5.0, "b": 5.0, "c": 5.0, "d": 9.0, "e": 1.0}
    reached = {"a": 30.0, "c": 10.0, "d": 1.0, "e": 1.0}
    for name in BOARDS:
        put_window(r, app.keys, name, "day", TODAY.isoformat(), scores, reached)
        rows = want(app, name, scores, reached)
        assert [m for _, m, _ in rows if scores[m] == 5.0] == ["c", "a", "b"]
        check_reads(app, name, "day", "current", scores, reached)


@given(
    days=st.lists(boards_st, min_size=1, max_size=4),
    # Non-empty: an empty archive is no key, and the live key would be read instead.
    seasons=st.lists(boards_st.filter(bool), min_size=3, max_size=3),
)
@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=15)
def test_history_over_several_periods(
    app: Seasons,
    r: redis.Redis,
    days: list[dict[str, tuple[float, float]]],
    seasons: list[dict[str, tuple[float, float]]],
) -> None:
    """Each period ranked by its own reach set; an ended season by its archive's (its live
    key, still there, holds other standings); null where the member is not on the board."""
    r.flushdb()
    day_boards = [split(b) for b in days]
    day_ids = [(TODAY - timedelta(days=len(days) - 1 - i)).isoformat() for i in range(len(days))]
    s1, s2, s3 = (split(b) for b in seasons)
    for name in BOARDS:
        for pid, (scores, reached) in zip(day_ids, day_boards, strict=True):
            put_window(r, app.keys, name, "day", pid, scores, reached)
        put_archive(r, app.keys, name, "S1", *s1)
        put_window(r, app.keys, name, "season", "S2", *s1)  # not read: S2's archive is
        put_archive(r, app.keys, name, "S2", *s2)
        put_window(r, app.keys, name, "season", "S3", *s3)
        everyone = set(NAMES) & (set().union(*(s for s, _ in day_boards)) | set(s2[0]))
        for member in sorted(everyone)[:8]:
            points = app.history(name, member, "day", last=len(days) + 1)
            expected: list[tuple[int | None, float | None]] = [(None, None)]
            for scores, reached in day_boards:
                rows = {m: (rk, sc) for rk, m, sc in want(app, name, scores, reached)}
                expected.append(rows.get(member, (None, None)))
            assert [(p.rank, p.score) for p in points] == expected, member
            points = app.history(name, member, "season", last=3)
            assert [p.period for p in points] == ["S1", "S2", "S3"]
            expected = []
            for scores, reached in (s1, s2, s3):
                rows = {m: (rk, sc) for rk, m, sc in want(app, name, scores, reached)}
                expected.append(rows.get(member, (None, None)))
            assert [(p.rank, p.score) for p in points] == expected, member


def test_long_runs_of_equal_scores(
    app: Seasons, settings: Settings, r: redis.Redis, tmp_path: Path
) -> None:
    """Runs of equal scores longer than a reach lookup's chunk and than the archive rows'
    chunk, at the top, in the middle and at the bottom of the board; pages cut them at both
    ends, a lookup asks for many members of one run."""
    rng = random.Random(7)
    scores: Scores = {}
    reached: Reached = {}
    for i in range(2300):
        scores[f"top{i:04d}"] = 50.0
        reached[f"top{i:04d}"] = float(rng.randrange(40))
    for i in range(400):
        scores[f"d{i:03d}"] = float(i)
        reached[f"d{i:03d}"] = float(rng.randrange(3))
    for i in range(1200):
        scores[f"mid{i:04d}"] = 20.0
        reached[f"mid{i:04d}"] = float(rng.randrange(1000))
    for i in range(1500):
        scores[f"low{i:04d}"] = -5.0
        reached[f"low{i:04d}"] = 7.0  # all equal: member bytes order
    for name in BOARDS:
        put_window(r, app.keys, name, "day", TODAY.isoformat(), scores, reached)
        rows = want(app, name, scores, reached)
        total = len(rows)
        for offset in (
            0,
            5,
            990,
            1000,
            2290,
            2299,
            2300,
            2690,
            3000,
            3499,
            total - 1010,
            total - 3,
        ):
            page = app.top(name, "day", offset=offset, limit=1000 if offset % 2 == 0 else 17)
            assert triples(page.entries) == rows[offset : offset + len(page.entries)], offset
            assert page.entries, offset
        by_member = {m: (rk, m, s) for rk, m, s in rows}
        for member in [rows[i][1] for i in range(0, total, 251)]:
            entry = app.rank(name, member, "day")
            assert entry is not None
            assert (entry.rank, entry.member, entry.score) == by_member[member]
        friends = rng.sample([m for m in scores if m.startswith("top")], 900) + ["d007", "low0001"]
        assert triples(app.lookup(name, friends, "day")) == sorted(by_member[m] for m in friends)
        # The export reads the board in chunks: runs go on from one chunk into the next.
        out = tmp_path / f"{name}.jsonl"
        archives = Archives(app.client, app.scripts, settings, app.keys)
        assert archives.export(name, "day", "current", out, NOW) == total
        assert [row[:3] for row in read_rows(out)] == rows


# --- archives: an archived season's read, the archive file, the export, the restore --------------


def test_archives_export_and_restore(
    app: Seasons, settings: Settings, r: redis.Redis, tmp_path: Path
) -> None:
    rng = random.Random(5)
    scores = {m: float(rng.choice([1, 2, 2, 5, 5, 5, 9])) for m in NAMES}
    reached = {m: float(rng.choice([3, 3, 4, 8])) for m in NAMES}
    snap_reached = {m: float(rng.choice([1, 2])) for m in NAMES}
    live_reached = {m: 100 - t for m, t in reached.items()}
    archives = Archives(app.client, app.scripts, settings, app.keys)
    restorer = Restorer(app.client, settings, app.keys)
    meta = {m: ({"n": i} if i % 3 == 0 else {}) for i, m in enumerate(sorted(NAMES))}
    for name in BOARDS:
        put_archive(r, app.keys, name, ENDED, scores, reached)
        put_window(r, app.keys, name, "season", ENDED, scores, live_reached)  # not read
        put_archive(r, app.keys, name, SNAPSHOT, scores, snap_reached)
        put_window(r, app.keys, name, "season", SEASON, scores, live_reached)
        check_reads(app, name, "season", ENDED, scores, reached)
        check_reads(app, name, "season", SNAPSHOT, scores, snap_reached)
        check_reads(app, name, "season", "current", scores, live_reached)
        for archive_id, times in ((ENDED, reached), (SNAPSHOT, snap_reached)):
            # The file: every line in the earliest order, ranked by position; restore's check
            # takes it.
            archives.write_files(name, archive_id, NOW)
            data, _ = archives.paths(name, archive_id)
            expected = [(rk, m, s, meta[m]) for rk, m, s in want(app, name, scores, times)]
            assert read_rows(data) == expected
            checked = restorer.check(data, NOW)
            assert checked.action == "unchanged"
            assert [row[:3] for row in checked.rows] == [row[:3] for row in expected]
        # The export of the live season (its reach set), then of the ended one (its archive's);
        # no scratch key is left.
        for period, times in (("current", live_reached), (ENDED, reached)):
            out = tmp_path / f"{name}-{period}.jsonl"
            assert archives.export(name, "season", period, out, NOW) == len(scores)
            assert read_rows(out) == [
                (rk, m, s, meta[m]) for rk, m, s in want(app, name, scores, times)
            ]
        assert not list(r.scan_iter(match=f"{NS}:*:tmp:*"))
        # A restore after the archive key and its reach set are lost: the reach set is
        # rebuilt from the line numbers, and the season reads in the file's order again.
        data, _ = archives.paths(name, ENDED)
        reach_key = app.keys.reached(name, "archive", ENDED)
        r.delete(app.keys.archive(name, ENDED), reach_key)
        done = restorer.restore(data, NOW)
        assert (done.action, done.count) == ("restored", len(scores))
        in_file = read_rows(data)
        stored = {m.decode(): t for m, t in r.zrange(reach_key, 0, -1, withscores=True)}
        assert stored == {m: float(n) for n, (_, m, _, _) in enumerate(in_file, start=1)}
        assert r.ttl(reach_key) == -1  # no TTL, like its archive
        page = app.top(name, "season", period=ENDED, limit=1000)
        assert triples(page.entries) == [row[:3] for row in in_file]
        # Restored again: unchanged; a reach set lost alone is filled in.
        r.delete(reach_key)
        assert restorer.restore(data, NOW).action == "unchanged"
        assert {m.decode(): t for m, t in r.zrange(reach_key, 0, -1, withscores=True)} == stored
        assert not list(r.scan_iter(match=f"{NS}:*:tmp:*"))


def _gz(path: Path, rows: list[Triple]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for rank, member, score in rows:
            f.write(line(rank, member, score, {}))
    return path


@pytest.mark.parametrize("board", list(BOARDS))
def test_restore_checks_earliest_ranks(settings: Settings, board: str, tmp_path: Path) -> None:
    """Ranks are line numbers; equal scores may come in any member order (the reach times
    that ordered them are not in the file); shared or dense ranks, and a score out of the
    board's order, are refused naming their lines."""
    cfg = settings.boards[board]
    scores = {f"m{i:02d}": float(v) for i, v in enumerate([4, 4, 7, 1, 1, 1, 9, 4, 2, 2])}
    rng = random.Random(3)
    for attempt in range(5):
        reached = {m: float(rng.randrange(3)) for m in scores}
        rows = ranked(scores, cfg.order, "earliest", reached)
        good = read_checked(_gz(tmp_path / f"good{attempt}.jsonl.gz", rows), cfg)
        assert [row[:3] for row in good] == rows
    for other in ("shared", "dense"):
        wrong = ranked(scores, cfg.order, other)
        differ = [n for n, (rk, _, _) in enumerate(wrong, 1) if rk != n]
        assert differ
        with pytest.raises(ArchiveRejected) as info:
            read_checked(_gz(tmp_path / f"{other}.jsonl.gz", wrong), cfg)
        assert [p["line"] for p in info.value.details["first"]] == differ, other
        assert "(ties='earliest')" in info.value.message
    rows = ranked(scores, cfg.order, "earliest", {})
    swapped = [rows[1], rows[0], *rows[2:]]  # 4 and 9 (or 1 and 1 ...): line 2 out of order
    swapped = [(n, m, s) for n, (_, m, s) in enumerate(swapped, 1)]
    if swapped[0][2] != swapped[1][2]:
        with pytest.raises(ArchiveRejected) as info:
            read_checked(_gz(tmp_path / "order.jsonl.gz", swapped), cfg)
        assert [p["line"] for p in info.value.details["first"]] == [2]
    else:
        assert [
            row[:3] for row in read_checked(_gz(tmp_path / "o.jsonl.gz", swapped), cfg)
        ] == swapped


# --- HTTP ---------------------------------------------------------------------------------------


def test_http_reads_rank_earliest(settings: Settings, app: Seasons, r: redis.Redis) -> None:
    """The HTTP routes (the fast path and the FastAPI route alike) answer what the model ranks."""
    scores = {"ann": 10, "bob": 10, "cid": 10, "a/b": 7, "dan": 7, "é": 1}
    reached = {"ann": 5.0, "bob": 2.0, "cid": 5.0, "a/b": 9.0, "dan": 1.0, "é": 0.0}
    for name in BOARDS:
        put_window(r, app.keys, name, "day", TODAY.isoformat(), scores, reached)
    with TestClient(
        create_app(settings, clock=ManualClock(NOW)), client=("127.0.0.1", 5000),
        base_url="http://localhost",
    ) as http:  # fmt: skip
        for name in BOARDS:
            rows = want(app, name, scores, reached)
            for query in ("period=current", "period=%63urrent"):  # fast path, then the route
                page = http.get(f"/v1/boards/{name}/day?{query}&limit=4&offset=1").json()
                got = [(e["rank"], e["member"], e["score"]) for e in page["entries"]]
                assert got == rows[1:5], query
                for rank, member, score in rows:
                    path = f"/v1/boards/{name}/day/members/{quote(member, safe='/')}"
                    body = http.get(f"{path}?{query}").json()
                    assert (body["rank"], body["member"], body["score"]) == (rank, member, score)
            found = http.post(f"/v1/boards/{name}/day/lookup", json={"members": ["dan", "cid"]})
            assert [(e["rank"], e["member"]) for e in found.json()] == sorted(
                (rk, m) for rk, m, _ in rows if m in ("dan", "cid")
            )


# --- the same on a Redis Cluster ---------------------------------------------------------------


@pytest.mark.both_backends
def test_earliest_reads_on_both_backends(
    settings_factory: Callable[..., Settings], backend: str, r: Any, tmp_path: Path
) -> None:
    settings = settings_factory(
        namespace=NS,
        boards=BOARDS,
        seasons={"length_days": 7, "anchor": "2035-05-28"},
        archive={"dir": str(tmp_path / "archive")},
    )
    rng = random.Random(11)
    scores = {m: float(rng.choice([0, 1, 1, 4, 4, 4, 6])) for m in NAMES}
    reached = {m: float(rng.choice([5, 5, 6, 9])) for m in NAMES}
    old = {m: float(rng.choice([1, 2])) for m in NAMES}
    with Seasons(settings, clock=ManualClock(NOW)) as app:
        for name in BOARDS:
            order = settings.boards[name].order
            put_window(r, app.keys, name, "season", SEASON, scores, reached)
            put_archive(r, app.keys, name, ENDED, scores, old)
            rows = ranked(scores, order, "earliest", reached)
            assert triples(app.top(name, "season", limit=1000).entries) == rows
            assert triples(app.top(name, "season", offset=7, limit=9).entries) == rows[7:16]
            member = rows[len(rows) // 2][1]
            around = app.around(name, member, "season", size=5)
            assert around is not None
            start = around_start(len(rows) // 2, 5, len(rows))
            assert triples(around.entries) == rows[start : start + 5]
            entry = app.rank(name, member, "season")
            assert entry is not None and (entry.rank, entry.score) == rows[len(rows) // 2][::2]
            climbed = app.climb(name, member, "season", to=[1, 5, 40])
            assert climbed is not None and climbed.rank == rows[len(rows) // 2][0]
            expected = climb_targets(scores, order, "earliest", member, [1, 5, 40], reached)
            assert [t.model_dump() for t in climbed.targets] == expected
            friends = NAMES[::3]
            assert triples(app.lookup(name, friends, "season")) == [
                row for row in rows if row[1] in friends
            ]
            archived = ranked(scores, order, "earliest", old)
            points = app.history(name, member, "season", last=2)
            assert [(p.rank, p.score) for p in points] == [
                next((rk, s) for rk, m, s in archived if m == member),
                next((rk, s) for rk, m, s in rows if m == member),
            ]
