"""The month window over HTTP and the CLI: each answer equals the Python API's, and the boards
equal the reference model (tests/reference.py); ``GET /v1/boards`` describes the windows from
the one table; a board that does not keep ``month`` answers ``bad_window``."""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from reference import Model

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.jobs.rollup import Rollup

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

# A Wednesday far ahead (EXPIREAT from the manual clock must lie in Redis's real future), in
# season S3 of 14-day seasons from 2035-05-14; the data set spans May and June.
START = datetime(2035, 6, 13, 12, tzinfo=UTC)
MONTH_WEIGHTS = [2, 0, 1, 0.5, 3]  # the 1st .. the 5th; later days weigh 1
SETTINGS: dict[str, Any] = {
    "timezone": "America/New_York",
    "retention": "P60D",  # May's days are still kept on 2035-06-13, so May can be rebuilt
    "seasons": {"length_days": 14, "anchor": "2035-05-14"},
    "boards": {
        "kills": {
            "aggregate": "sum",
            "windows": ["day", "week", "month", "season"],
            "month_weights": MONTH_WEIGHTS,
            "max_entries": 25,
        },
        "laps": {"aggregate": "min", "order": "asc", "ties": "shared"},  # no month
    },
}
PLAYERS = [f"p{i:03d}" for i in range(30)]
MONTHS = ("2035-05", "2035-06")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(**SETTINGS, archive={"dir": str(tmp_path / "archive")})


@pytest.fixture
def model(settings: Settings) -> Model:
    return Model(settings)


@pytest.fixture
def app(settings: Settings, clock: ManualClock, model: Model) -> Iterator[Seasons]:
    """The Python API, with 25 days of events (from 2035-05-20) on both boards; the month
    boards are recomputed from the days, so that the reads here do not depend on the write
    path writing months through (tests/test_month.py proves that)."""
    rng = random.Random(5)
    events: list[dict[str, Any]] = []
    for back in range(25):
        day_noon = START - timedelta(days=back)
        for player in PLAYERS:
            if rng.random() < 0.4:
                continue
            ts = day_noon - timedelta(minutes=rng.randint(0, 600))
            events.append({"board": "kills", "member": player, "value": rng.randint(0, 20),
                           "ts": ts, "metadata": {"name": player.upper()}})  # fmt: skip
            events.append({"board": "laps", "member": player, "ts": ts,
                           "value": round(rng.uniform(60, 70), 1)})  # fmt: skip
    model.submit(events, START, backfill=True)
    with Seasons(settings, clock=clock) as s:
        s.submit_many([{**e, "ts": e["ts"].isoformat()} for e in events], backfill=True)
        rollup = Rollup(s.client, s.scripts, settings, s.keys)
        for month in MONTHS:
            rollup.rebuild(START, window="month", period=month)
        yield s


@pytest.fixture
def http(settings: Settings, clock: ManualClock, app: Seasons) -> Iterator[TestClient]:
    tc = TestClient(create_app(settings, clock=clock), base_url="http://localhost")
    with tc:
        yield tc


def assert_error(resp: Any, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error", "message", "details"} and body["error"] == code, body
    return body


def test_the_month_boards_are_the_models(app: Seasons, model: Model) -> None:
    """The data set is what the tests below think it is: both months full, weighted."""
    for month in MONTHS:
        want = model.ranked("kills", "month", month)
        assert len(want) == 25  # trimmed to max_entries
        page = app.top("kills", "month", period=month, limit=1000)
        assert [(e.rank, e.member, e.score) for e in page.entries] == want
    # The 1st of June weighs 2, the 2nd nothing: the month is not the plain sum of its days.
    june = model.formula("kills", "month", "2035-06")
    plain: dict[str, float] = {}
    for day in model.cal.period_days("month", "2035-06"):
        for member, score in model.days["kills"].get(day, {}).items():
            plain[member] = plain.get(member, 0) + score
    assert june != plain


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"limit": 5, "offset": 3},
        {"period": "2035-05", "limit": 1000},
        {"period": "2035-05-31", "limit": 7},  # any day of the month names it
        {"period": "2035-06-01"},
        {"period": "previous", "offset": 20},
        {"period": "current", "limit": 1000},
    ],
)
def test_month_page_equals_python_api_and_model(
    http: TestClient, app: Seasons, model: Model, query: dict[str, Any]
) -> None:
    resp = http.get("/v1/boards/kills/month", params=query)
    assert resp.status_code == 200, resp.text
    period, limit, offset = (query.get(k, d) for k, d in (("period", "current"), ("limit", 10),
                                                          ("offset", 0)))  # fmt: skip
    expected = app.top("kills", "month", period=period, limit=limit, offset=offset)
    assert resp.json() == expected.model_dump()
    month = "2035-05" if period in ("previous", "2035-05", "2035-05-31") else "2035-06"
    assert resp.json()["period"] == month and resp.json()["window"] == "month"
    want = model.ranked("kills", "month", month)[offset : offset + limit]
    assert [(e["rank"], e["member"], e["score"]) for e in resp.json()["entries"]] == want
    for e in resp.json()["entries"]:
        assert e["metadata"] == {"name": e["member"].upper()}


def test_month_member_routes_equal_python_api(http: TestClient, app: Seasons, model: Model) -> None:
    for month in MONTHS:
        ranked = {m: (rank, score) for rank, m, score in model.ranked("kills", "month", month)}
        for member in (*PLAYERS[:12], "nobody"):
            resp = http.get(f"/v1/boards/kills/month/members/{member}", params={"period": month})
            expected = app.rank("kills", member, "month", period=month)
            if member not in ranked:  # never played, or trimmed off the month's board
                assert expected is None
                assert_error(resp, 404, "not_ranked")
                continue
            assert expected is not None and resp.json() == expected.model_dump()
            assert (resp.json()["rank"], resp.json()["score"]) == ranked[member]
            around = http.get(
                f"/v1/boards/kills/month/members/{quote(member)}/around",
                params={"period": month, "size": 5},
            )
            expected_around = app.around("kills", member, "month", period=month, size=5)
            assert expected_around is not None and around.json() == expected_around.model_dump()
        for rank in (1, 12, 25, 30):
            resp = http.get(f"/v1/boards/kills/month/ranks/{rank}/around",
                            params={"period": month, "size": 3})  # fmt: skip
            assert (
                resp.json()
                == app.around_rank("kills", rank, "month", period=month, size=3).model_dump()
            )
        members = ["p003", "nobody", *PLAYERS[::4]]
        resp = http.post("/v1/boards/kills/month/lookup", params={"period": month},
                         json={"members": members})  # fmt: skip
        assert resp.status_code == 200, resp.text
        assert resp.json() == [e.model_dump() for e in app.lookup("kills", members, "month",
                                                                  period=month)]  # fmt: skip
        assert [(e["member"], e["rank"], e["score"]) for e in resp.json()] == sorted(
            ((m, *ranked[m]) for m in set(members) if m in ranked), key=lambda t: t[1]
        )


def test_month_history_equals_python_api_and_model(
    http: TestClient, app: Seasons, model: Model
) -> None:
    for member in PLAYERS[:8]:
        resp = http.get(f"/v1/boards/kills/members/{member}/history",
                        params={"window": "month", "last": 3})  # fmt: skip
        assert resp.status_code == 200, resp.text
        expected = app.run(app.reads.history("kills", member, "month", last=3))
        assert resp.json() == expected.model_dump()
        want = []
        for month in ("2035-04", *MONTHS):
            row = next((t for t in model.ranked("kills", "month", month) if t[1] == member), None)
            want.append({"period": month, "rank": row and row[0], "score": row and row[2]})
        assert resp.json()["history"] == want


def test_boards_describe_the_windows_and_each_boards_windows(
    http: TestClient, model: Model
) -> None:
    body = http.get("/v1/boards").json()
    table = {w["window"]: w for w in body["windows"]}
    assert list(table) == ["day", "week", "month", "season", "alltime"]
    flags = {w: (t["rolled_up"], t["archived"], t["history_last"]) for w, t in table.items()}
    assert flags == {
        "day": (False, False, 14),
        "week": (True, False, 12),
        "month": (True, False, 12),
        "season": (True, True, 12),
        "alltime": (True, False, 1),
    }
    assert [p["period"] for p in table.pop("alltime")["recent"]] == ["all"]
    assert "YYYY-MM" in table["month"]["ids"] and "YYYY-MM-DD" in table["day"]["ids"]
    cal = model.cal
    for window, info in table.items():
        # Newest first: the current period, then those before it.
        ids = cal.recent(window, START, info["history_last"])[::-1]
        assert [p["period"] for p in info["recent"]] == ids, window
        for p in info["recent"]:
            days = cal.period_days(window, p["period"])
            assert (p["first_day"], p["last_day"]) == (str(days[0]), str(days[-1]))
            assert datetime.fromisoformat(p["starts_at"]) == cal.day_start(days[0])
            assert datetime.fromisoformat(p["resets_at"]) == cal.day_end(days[-1])
    assert table["month"]["recent"][0]["period"] == "2035-06"
    assert table["month"]["recent"][0]["resets_at"].startswith("2035-07-01T04:00:00")  # EDT
    assert [p["period"] for p in table["season"]["recent"]] == ["S3", "S2", "S1"]
    boards = {b["board"]: b for b in body["boards"]}
    assert boards["kills"]["windows"] == ["day", "week", "month", "season"]
    assert boards["laps"]["windows"] == ["day", "week", "season"]
    assert boards["kills"]["month_weights"] == MONTH_WEIGHTS
    assert boards["laps"]["month_weights"] == []
    assert set(boards["kills"]["current"]) == {"day", "week", "month", "season"}
    assert set(boards["laps"]["current"]) == {"day", "week", "season"}
    assert boards["kills"]["current"]["month"]["period"] == "2035-06"


@pytest.mark.parametrize(
    ("method", "path", "params"),
    [
        ("GET", "/v1/boards/laps/month", {}),
        ("GET", "/v1/boards/laps/month", {"period": "2035-06"}),
        ("GET", "/v1/boards/laps/month/members/p001", {}),
        ("GET", "/v1/boards/laps/month/members/p001/around", {"size": 3}),
        ("GET", "/v1/boards/laps/month/ranks/1/around", {}),
        ("POST", "/v1/boards/laps/month/lookup", {}),
        ("GET", "/v1/boards/laps/members/p001/history", {"window": "month"}),
    ],
)
def test_a_board_without_month_answers_bad_window(
    http: TestClient, method: str, path: str, params: dict[str, Any]
) -> None:
    body = {"members": ["p001"]} if method == "POST" else None
    resp = http.request(method, path, params=params, json=body)
    err = assert_error(resp, 422, "bad_window")
    assert "its windows: day, week, season" in err["message"], err
    assert "boards.laps.windows" in err["message"]


def test_cli_month_json_equals_http_json(
    http: TestClient, settings: Settings, clock: ManualClock
) -> None:
    runner = CliRunner()
    pairs = [
        (["top", "kills", "-w", "month", "--json"], "/v1/boards/kills/month"),
        (["top", "kills", "-w", "month", "-p", "2035-05", "--limit", "30", "--json"],
         "/v1/boards/kills/month?period=2035-05&limit=30"),
        (["top", "kills", "-w", "month", "-p", "2035-05-09", "--json"],
         "/v1/boards/kills/month?period=2035-05-09"),
        (["rank", "kills", "p003", "-w", "month", "-p", "2035-06", "--json"],
         "/v1/boards/kills/month/members/p003?period=2035-06"),
        (["around", "kills", "p003", "-w", "month", "--size", "3", "--json"],
         "/v1/boards/kills/month/members/p003/around?size=3"),
        (["history", "kills", "p003", "-w", "month", "--last", "4", "--json"],
         "/v1/boards/kills/members/p003/history?window=month&last=4"),
    ]  # fmt: skip
    for args, path in pairs:
        result = runner.invoke(cli, args, obj=CliState(clock=clock, settings=settings))
        resp = http.get(path)
        if resp.status_code == 404:  # p003 trimmed off a month: the CLI says so too
            assert result.exit_code == 3, result.output
            continue
        assert result.exit_code == 0, result.output
        assert json.loads(result.output) == resp.json()
    # A board without month: usage error naming its windows.
    result = runner.invoke(cli, ["top", "laps", "-w", "month", "--json"],
                           obj=CliState(clock=clock, settings=settings))  # fmt: skip
    assert result.exit_code == 2
    assert "its windows: day, week, season" in result.output
