"""``ties = "dense"``, the extras of one member's entry (percentile, gap_up, total) and the
climb read, against the reference model (tests/reference.py).

Boards of many equal scores are written through the API; every read that ranks (page, around a
rank, around a member, entry, lookup, history, climb; an archived season's read, the archive
file, the export file and the restore check of its lines) is compared with the model's
ranking, for both orders and every tie rule. Also the HTTP routes (the fast path and the
FastAPI route alike), OpenAPI, the CLI's exit statuses and ``--json``, and one run on a Redis
Cluster.
"""

from __future__ import annotations

import gzip
import json
import random
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import around_start, climb_targets, gap_up, percentile, ranked

from seasons import Seasons, standings
from seasons.archives import Archives
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.config.settings import BoardSettings
from seasons.errors import ArchiveRejected, InvalidInput, LimitExceeded
from seasons.http.app import create_app
from seasons.restore import Restorer
from seasons.standings import Row, line, read_rows

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "dx"
# Far in the future, so that no key's EXPIREAT (from the manual clock) lies in the past.
NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # season S3 = 2035-06-11 .. 06-17
SEASON = "S3"
SNAPSHOT = "S3@20350613T085900Z"
BOARDS: dict[str, dict[str, Any]] = {
    "hi": {"aggregate": "max", "order": "desc", "ties": "dense"},
    "lo": {"aggregate": "min", "order": "asc", "ties": "dense"},
    "hi_member": {"aggregate": "max", "order": "desc", "ties": "member"},
    "lo_shared": {"aggregate": "min", "order": "asc", "ties": "shared"},
}
DENSE = ("hi", "lo")
NAMES = [f"p{i:02d}" for i in range(30)] + ["Zed", "ann", "é", "ab", "a/b", "x y"]
# Few values, so that most scores are shared; -0.0 and 0 are one score to Redis.
VALUES = st.sampled_from([-2.5, -1, -0.0, 0, 1, 1, 2, 3, 7.25, 100])
Scores = dict[str, float]
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
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as s:
        yield s


def fill(app: Seasons, scores: Scores, boards: tuple[str, ...] = tuple(BOARDS)) -> None:
    """One event per member and board (max and min boards: the score is the value), with
    metadata for some members."""
    events = []
    for i, (member, value) in enumerate(scores.items()):
        for board in boards:
            event: dict[str, Any] = {"board": board, "member": member, "value": value}
            if i % 3 == 0:
                event["metadata"] = {"n": i}
            events.append(event)
    app.submit_many(events)


def want(app: Seasons, board: str, scores: Scores) -> list[Triple]:
    cfg = app.settings.boards[board]
    return ranked(scores, cfg.order, cfg.ties)


def triples(entries: list[Any]) -> list[Triple]:
    return [(e.rank, e.member, e.score) for e in entries]


def check_reads(app: Seasons, board: str, window: str, period: str, scores: Scores) -> None:
    """Every read of ``board`` against the model's ranking of ``scores``."""
    order = app.settings.boards[board].order
    rows = want(app, board, scores)
    total = len(rows)
    for offset, limit in [(0, 1000), (0, 3), (1, 2), (total // 2, 5), (total - 1, 3), (total, 2)]:
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
        size = 1 + position % 4
        around = app.around(board, member, window, period=period, size=size)
        assert around is not None
        start = around_start(position, size, total)
        assert triples(around.entries) == rows[start : start + size], (member, size)
        to = [1, 2, rank, max(1, rank - 1), total, total + 1, 10**9]
        climbed = app.climb(board, member, window, to=to, period=period)
        assert climbed is not None
        assert (climbed.member, climbed.rank, climbed.score) == (member, rank, score)
        assert climbed.board == board and climbed.window == window
        got = [t.model_dump() for t in climbed.targets]
        assert got == climb_targets(scores, order, app.settings.boards[board].ties, member, to)
    rng = random.Random(total)
    friends = rng.sample(list(scores), min(len(scores), 12)) + ["nobody"]
    rng.shuffle(friends)
    by_member = {m: (r, m, s) for r, m, s in rows}
    asked = {m: i for i, m in reversed(list(enumerate(friends)))}
    expected = sorted(
        (by_member[m] for m in asked if m in by_member), key=lambda t: (t[0], asked[t[1]])
    )
    assert triples(app.lookup(board, friends, window, period=period)) == expected


# --- every read, boards of many equal scores --------------------------------------------------


@given(scores=st.dictionaries(st.sampled_from(NAMES), VALUES, min_size=1, max_size=30))
@example(scores={"solo": 5})
@example(scores={"a": 1, "b": 1, "c": 1})
@example(scores={f"m{i}": float(i % 3) for i in range(20)})
@example(scores={m: float(i % 7) for i, m in enumerate(NAMES)})  # more than a chunk better
@example(scores={"a": -0.0, "b": 0, "c": -0.0, "d": 1, "e": -1})
@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_read_ranks_as_the_model(app: Seasons, r: redis.Redis, scores: Scores) -> None:
    r.flushdb()
    fill(app, scores)
    for board in BOARDS:
        check_reads(app, board, "day", "current", scores)
        # History: today ranked as the entry, yesterday (nothing written) null.
        rows = {m: (rk, sc) for rk, m, sc in want(app, board, scores)}
        for member in list(scores)[:5]:
            points = app.history(board, member, "day", last=2)
            assert [(p.rank, p.score) for p in points] == [(None, None), rows[member]]


@pytest.mark.parametrize("distinct", ["kept", "walked", "rebuilt"])
def test_dense_ranks_long_runs_and_many_distinct_scores(
    app: Seasons, r: redis.Redis, distinct: str
) -> None:
    """Runs of equal scores longer than a chunk of the distinct set's rebuild (which reads the
    board 1 000 entries at a time), between stretches of all-distinct scores, at both ends of
    the board: ranked from the distinct set the writes keep, walked when it is missing (a
    board written before distinct sets existed), and from the one the next write rebuilds."""
    scores: Scores = {}
    for i in range(1300):
        scores[f"d{i:04d}"] = float(i)
    for g in range(12):
        for j in range(60):
            scores[f"g{g:02d}-{j:02d}"] = 2000.0 + g
            scores[f"h{g:02d}-{j:02d}"] = -100.0 - g
    fill(app, scores, DENSE)
    if distinct != "kept":
        for board in DENSE:
            assert r.delete(app.keys.distinct(board, "day", NOW.date().isoformat())) == 1
    if distinct == "rebuilt":  # a write that changes no score builds the set from the board
        app.submit_many(
            [
                {"board": "hi", "member": "d0000", "value": -1000},
                {"board": "lo", "member": "d0000", "value": 1000},
            ]
        )
        for board in DENSE:
            assert r.exists(app.keys.distinct(board, "day", NOW.date().isoformat()))
    for board in DENSE:
        rows = want(app, board, scores)
        total = len(rows)
        for offset in (0, 59, 60, 700, 1000, 1500, 2000, total - 70, total - 1):
            page = app.top(board, "day", offset=offset, limit=40)
            assert triples(page.entries) == rows[offset : offset + 40], offset
        by_member = {m: (rk, m, s) for rk, m, s in rows}
        sample = [rows[i][1] for i in range(0, total, 97)]
        for member in sample[:12]:
            entry = app.rank(board, member, "day")
            assert (
                entry is not None and (entry.rank, entry.member, entry.score) == by_member[member]
            )
        found = app.lookup(board, sample, "day")
        assert sorted(triples(found)) == sorted(by_member[m] for m in sample)


# --- archives: an archived season's read, the archive file, the export, the restore check ---


def test_archives_and_export_rank_dense(
    app: Seasons, settings: Settings, r: redis.Redis, tmp_path: Path
) -> None:
    rng = random.Random(5)
    scores = {m: float(rng.choice([1, 2, 2, 5, 5, 5, 9])) for m in NAMES}
    fill(app, scores)
    archives = Archives(app.client, app.scripts, settings, app.keys)
    restorer = Restorer(app.client, settings, app.keys)
    for board in BOARDS:
        live = app.keys.window(board, "season", SEASON)
        assert archives.copy(board, live, SNAPSHOT) == len(scores)
    later = {**scores, "late": 3.0}
    fill(app, {"late": 3.0})  # the live board moves on; the snapshot does not
    for board in BOARDS:
        meta = {m: ({"n": i} if i % 3 == 0 else {}) for i, m in enumerate(scores)}
        meta["late"] = {"n": 0}
        # The snapshot reads as itself, the live season with the later write.
        check_reads(app, board, "season", SNAPSHOT, scores)
        check_reads(app, board, "season", "current", later)
        # The archive file: every line ranked as the model ranks, and restore's check agrees.
        archives.write_files(board, SNAPSHOT, NOW)
        data, _ = archives.paths(board, SNAPSHOT)
        expected = [(rk, m, s, meta[m]) for rk, m, s in want(app, board, scores)]
        assert read_rows(data) == expected
        checked = restorer.check(data, NOW)
        assert [row[:3] for row in checked.rows] == [row[:3] for row in expected]
        # The export of the live season.
        out = tmp_path / f"{board}.jsonl"
        assert archives.export(board, "season", "current", out, NOW) == len(later)
        assert read_rows(out) == [(rk, m, s, meta[m]) for rk, m, s in want(app, board, later)]


def _gz(path: Path, rows: list[tuple[int, str, float]], bad: dict[int, str] | None = None) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for n, (rank, member, score) in enumerate(rows, start=1):
            f.write((bad or {}).get(n) or line(rank, member, score, {}))
    return path


@pytest.mark.parametrize("board", DENSE)
def test_restore_checks_dense_ranks(settings: Settings, board: str, tmp_path: Path) -> None:
    cfg = settings.boards[board]
    scores = {f"m{i:02d}": float(v) for i, v in enumerate([4, 4, 7, 1, 1, 1, 9, 4, 2, 2])}
    rows = ranked(scores, cfg.order, "dense")
    good = read_checked(_gz(tmp_path / "good.jsonl.gz", rows), cfg)
    assert [row[:3] for row in good] == rows
    # Ranked as shared or as positions: each line whose rank differs is named.
    for other in ("shared", "member"):
        wrong = ranked(scores, cfg.order, other)
        differ = [n for n, (a, b) in enumerate(zip(rows, wrong, strict=True), 1) if a[0] != b[0]]
        assert differ
        with pytest.raises(ArchiveRejected) as info:
            read_checked(_gz(tmp_path / f"{other}.jsonl.gz", wrong), cfg)
        lines = [p["line"] for p in info.value.details["first"]]
        assert lines == differ, other
        assert "(ties='dense')" in info.value.message
    # A line that does not parse is the only one named: the ranks after it are not all
    # counted from its line number.
    with pytest.raises(ArchiveRejected) as info:
        read_checked(_gz(tmp_path / "bad.jsonl.gz", rows, {3: "not json\n"}), cfg)
    assert [p["line"] for p in info.value.details["first"]] == [3]


# --- HTTP, OpenAPI, CLI -------------------------------------------------------------------------


@pytest.fixture
def http(settings: Settings, clock: ManualClock, app: Seasons) -> Iterator[TestClient]:
    with TestClient(
        create_app(settings, clock=clock), client=("127.0.0.1", 5000), base_url="http://localhost"
    ) as tc:
        yield tc


HTTP_SCORES: Scores = {"ann": 10, "bob": 10, "cid": 7, "a/b": 7, "dan": 3, "é": 1, "eve": 1}


def _both(http: TestClient, path: str, query: str) -> Any:
    """The fast path's answer and the FastAPI route's (reached by percent-encoding the query's
    first character, which the fast path leaves to the route): the same status and JSON."""
    name, _, value = query.partition("=")
    routed = f"{name}=%{ord(value[0]):02X}{value[1:]}" if value else query
    fast, slow = http.get(f"{path}?{query}"), http.get(f"{path}?{routed}")
    assert (fast.status_code, fast.json()) == (slow.status_code, slow.json()), (path, query)
    return fast


def test_http_member_and_climb_equal_the_python_api(http: TestClient, app: Seasons) -> None:
    fill(app, HTTP_SCORES)
    for board in BOARDS:
        for member in HTTP_SCORES:
            path = f"/v1/boards/{board}/day/members/{quote(member, safe='/')}"
            entry = app.rank(board, member, "day")
            assert entry is not None
            body = _both(http, path, "period=current").json()
            assert body == entry.model_dump()
            assert list(body) == [
                "rank", "member", "score", "metadata", "percentile", "gap_up", "total"
            ]  # fmt: skip
            climbed = app.climb(board, member, "day", to=[1, 3, 5, 8])
            assert climbed is not None
            assert _both(http, f"{path}/climb", "to=1,3,5,8").json() == climbed.model_dump()
            default = app.climb(board, member, "day")
            assert default is not None
            assert http.get(f"{path}/climb").json() == default.model_dump()
            assert [t.rank for t in default.targets] == [10, 100]
    # Pages, around and lookup keep the plain entry.
    page = http.get("/v1/boards/hi/day").json()
    assert all(list(e) == ["rank", "member", "score", "metadata"] for e in page["entries"])
    around = http.get("/v1/boards/hi/day/members/ann/around").json()
    assert all(list(e) == ["rank", "member", "score", "metadata"] for e in around["entries"])
    found = http.post("/v1/boards/hi/day/lookup", json={"members": ["ann", "eve"]}).json()
    assert [list(e) for e in found] == [["rank", "member", "score", "metadata"]] * 2
    assert [(e["rank"], e["member"]) for e in page["entries"][:4]] == [
        (1, "bob"), (1, "ann"), (2, "cid"), (2, "a/b")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("to=0", "limit_exceeded"),
        ("to=1000000001", "limit_exceeded"),
        ("to=99999999999999999999999999", "limit_exceeded"),
        ("to=" + ",".join(["1"] * 1001), "limit_exceeded"),
        ("to=abc", "invalid_input"),
        ("to=1,,2", "invalid_input"),
        ("to=1,-2", "invalid_input"),
        ("to=1.5", "invalid_input"),
        ("to=", "invalid_input"),
    ],
)
def test_http_bad_to_is_422_naming_to(
    http: TestClient, app: Seasons, query: str, code: str
) -> None:
    fill(app, HTTP_SCORES)
    resp = _both(http, "/v1/boards/hi/day/members/ann/climb", query)
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == code and "to" in body["details"], body
    assert "to" in body["message"]


def test_http_climb_errors(http: TestClient, app: Seasons) -> None:
    fill(app, HTTP_SCORES)
    for path, status, code in [
        ("/v1/boards/hi/day/members/nobody/climb", 404, "not_ranked"),
        ("/v1/boards/nope/day/members/ann/climb", 404, "unknown_board"),
        ("/v1/boards/hi/month/members/ann/climb", 422, "bad_window"),
    ]:
        resp = _both(http, path, "to=1")
        assert (resp.status_code, resp.json()["error"]) == (status, code), resp.text
    body = http.get("/v1/boards/hi/day/members/ann/climb?to=1&size=3").json()
    assert body["error"] == "unknown_parameter"
    # 1000 ranks are taken (as many as fit in the guard's URL limit), and the largest rank.
    top = http.get("/v1/boards/hi/day/members/eve/climb?to=" + ",".join(["99999"] * 1000))
    assert top.status_code == 200 and len(top.json()["targets"]) == 1000
    top = http.get("/v1/boards/hi/day/members/eve/climb?to=1000000000")
    assert top.json()["targets"] == [{"rank": 10**9, "score": None, "gap": 0}]


def test_openapi_documents_climb_and_the_entry_extras(http: TestClient) -> None:
    schema = http.get("/openapi.json").json()
    climb = schema["paths"]["/v1/boards/{board}/{window}/members/{member}/climb"]["get"]
    ok = climb["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/Climb")
    assert {p["name"] for p in climb["parameters"]} >= {"to", "period", "member"}
    member = schema["paths"]["/v1/boards/{board}/{window}/members/{member}"]["get"]
    ok = member["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/EntryDetail")
    detail = schema["components"]["schemas"]["EntryDetail"]["properties"]
    assert {"percentile", "gap_up", "total", "rank"} <= set(detail)
    assert "strictly worse" in detail["percentile"]["description"]
    targets = schema["components"]["schemas"]["ClimbTarget"]["properties"]
    assert set(targets) == {"rank", "score", "parts", "gap"}


def test_cli_rank_and_climb(http: TestClient, app: Seasons, settings: Settings) -> None:
    fill(app, HTTP_SCORES)

    def run(*args: str) -> Any:
        result = CliRunner().invoke(
            cli, list(args), obj=CliState(clock=ManualClock(NOW), settings=settings)
        )
        assert "Traceback" not in result.output
        return result

    for board in DENSE:
        for member in ("ann", "a/b", "eve"):
            path = f"/v1/boards/{board}/day/members/{quote(member, safe='/')}"
            result = run("rank", board, member, "--window", "day", "--json")
            assert result.exit_code == 0, result.output
            assert json.loads(result.output) == http.get(path).json()
            result = run("climb", board, member, "--window", "day", "--to", "1,4,50", "--json")
            assert result.exit_code == 0, result.output
            assert json.loads(result.output) == http.get(f"{path}/climb?to=1,4,50").json()
            result = run("climb", board, member, "--window", "day", "--json")
            assert json.loads(result.output) == http.get(f"{path}/climb").json()
    table = run("climb", "hi", "eve", "--window", "day", "--to", "1,3")
    assert table.exit_code == 0 and "score there" in table.output
    assert "rank 4" in table.output  # 10, 7, 3, 1: eve's dense rank is 4
    standing = run("rank", "hi", "dan", "--window", "day")
    assert standing.exit_code == 0 and "ahead of" in standing.output
    for bad in ("0", "x", "1,,2", "1000000001"):
        result = run("climb", "hi", "ann", "--window", "day", "--to", bad)
        assert result.exit_code == 2, (bad, result.output)
        assert "to" in result.output
    assert run("climb", "hi", "nobody", "--window", "day").exit_code == 3
    assert run("rank", "hi", "nobody", "--window", "day").exit_code == 3


def test_targets_parse_and_limits(app: Seasons) -> None:
    from seasons.read_limits import parse_targets

    assert parse_targets("10,100") == [10, 100]
    assert parse_targets(" 3 , 1,3") == [3, 1, 3]
    for bad in ("", "a", "1;2", "1,", "-1", "٣"):
        with pytest.raises(InvalidInput, match="to"):
            parse_targets(bad)
    for wrong in ([], [0], [10**9 + 1], list(range(1, 1002)), [True], [1.0]):
        with pytest.raises(LimitExceeded, match="to"):
            app.climb("hi", "ann", "day", to=wrong)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="to"):
        app.climb("hi", "ann", "day", to="10")  # type: ignore[arg-type]


# --- the same on a Redis Cluster ------------------------------------------------------------------


@pytest.mark.both_backends
def test_dense_page_and_climb_on_both_backends(
    settings_factory: Callable[..., Settings], backend: str, tmp_path: Path
) -> None:
    settings = settings_factory(
        namespace=NS,
        boards=BOARDS,
        seasons={"length_days": 7, "anchor": "2035-05-28"},
        archive={"dir": str(tmp_path / "archive")},
    )
    rng = random.Random(11)
    scores = {m: float(rng.choice([0, 1, 1, 4, 4, 4, 6])) for m in NAMES}
    with Seasons(settings, clock=ManualClock(NOW)) as app:
        fill(app, scores)
        for board in BOARDS:
            cfg = settings.boards[board]
            rows = ranked(scores, cfg.order, cfg.ties)
            assert triples(app.top(board, "season", limit=1000).entries) == rows
            assert triples(app.top(board, "season", offset=7, limit=9).entries) == rows[7:16]
            member = rows[len(rows) // 2][1]
            climbed = app.climb(board, member, "season", to=[1, 5, 40])
            assert climbed is not None and climbed.rank == rows[len(rows) // 2][0]
            expected = climb_targets(scores, cfg.order, cfg.ties, member, [1, 5, 40])
            assert [t.model_dump() for t in climbed.targets] == expected
            entry = app.rank(board, member, "season")
            assert entry is not None and entry.percentile == percentile(scores, cfg.order, member)
