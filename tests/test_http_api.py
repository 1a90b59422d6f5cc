"""Every HTTP endpoint against a real redis-server: each answer equals the Python API's
``model_dump()`` for the same query (and, for the boards, an independent computation from
the events); every error path gives ``{"error", "message", "details"}`` with its status."""

from __future__ import annotations

import json
import logging
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, seed

from seasons import Seasons, catalog
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

LOOPBACK = ("127.0.0.1", 50000)
REMOTE = ("10.1.2.3", 5000)
ClientFactory = Callable[..., TestClient]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def base(tmp_path: Path) -> dict[str, Any]:
    """The tests' settings, with archive files under the test's own directory."""
    return {**SETTINGS, "archive": {"dir": str(tmp_path / "archive")}}


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], base: dict[str, Any]) -> Settings:
    return settings_factory(**base)


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    """The Python API on the same Redis and clock: what every HTTP answer is compared with."""
    with Seasons(settings, clock=clock) as s:
        yield s


@pytest.fixture
def make_client(
    settings_factory: Callable[..., Settings], clock: ManualClock, base: dict[str, Any]
) -> Iterator[ClientFactory]:
    opened: list[TestClient] = []

    def make(client: tuple[str, int] = LOOPBACK, **overrides: Any) -> TestClient:
        settings = settings_factory(**{**base, **overrides})
        # Host: localhost, as a local client sends it (empty tokens need a local Host).
        tc = TestClient(
            create_app(settings, clock=clock), client=client, base_url="http://localhost"
        )
        tc.__enter__()
        opened.append(tc)
        return tc

    yield make
    for tc in opened:
        tc.__exit__(None, None, None)


@pytest.fixture
def http(make_client: ClientFactory) -> TestClient:
    return make_client()


@pytest.fixture
def events(app: Seasons) -> list[dict[str, Any]]:
    return seed(app)


def assert_error(resp: Any, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error", "message", "details"}, body
    assert body["error"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return body


def day_scores(events: list[dict[str, Any]], board: str) -> dict[date, dict[str, float]]:
    """Independent computation: per day, each member's aggregate (sum for kills, min for laps)."""
    out: dict[date, dict[str, float]] = defaultdict(dict)
    for e in events:
        if e["board"] != board:
            continue
        day = datetime.fromisoformat(e["ts"]).date()
        old = out[day].get(e["member"])
        v = float(e["value"])
        out[day][e["member"]] = v if old is None else (old + v if board == "kills" else min(old, v))
    return out


# --- reads: equal to the Python API and to an independent computation -----------------------


def test_boards_lists_config_and_current_periods(http: TestClient, settings: Settings) -> None:
    body = http.get("/v1/boards").json()
    expected = catalog.boards(settings, START).model_dump(mode="json")
    assert body == expected
    kills = next(b for b in body["boards"] if b["board"] == "kills")
    assert kills["current"]["day"]["period"] == "2035-06-13"
    assert kills["current"]["week"]["period"] == "2035-06-11"  # the Monday
    assert kills["current"]["season"]["period"] == "S3"  # anchor 2035-05-14, 14-day seasons
    assert kills["current"]["day"]["resets_at"].startswith("2035-06-14T00:00:00")
    assert kills["week_weights"] == [1, 1, 1, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("window", "query"),
    [
        ("day", {}),
        ("day", {"limit": 5, "offset": 3}),
        ("week", {"limit": 1000}),
        ("season", {"limit": 7}),
        ("day", {"period": "previous"}),
        ("day", {"period": "2035-06-08", "limit": 3}),
        ("week", {"period": "2035-06-05"}),  # any day of the week names it
        ("season", {"period": "S3", "offset": 30}),
    ],
)
def test_page_equals_python_api(
    http: TestClient, app: Seasons, events: list, window: str, query: dict[str, Any]
) -> None:
    for board in ("kills", "laps"):
        resp = http.get(f"/v1/boards/{board}/{window}", params=query)
        assert resp.status_code == 200, resp.text
        expected = app.top(
            board, window, period=query.get("period", "current"),
            limit=query.get("limit", 10), offset=query.get("offset", 0),
        )  # fmt: skip
        assert resp.json() == expected.model_dump()


def test_hot_reads_answer_awkward_members_and_metadata_as_the_python_api(
    http: TestClient, app: Seasons, clock: ManualClock
) -> None:
    """The page and around routes answer the read script's JSON as is: members and metadata
    that need escaping (quotes, backslashes, slashes, non-ASCII, long numbers) come out as
    the same JSON values as the Python API's models."""
    members = ['quo"te', "back\\slash", "a/b", "ü ñ 🎮", "</script>", "x" * 128]
    for n, member in enumerate(members):
        app.submit(
            "kills", member, n + 0.1, ts=clock(),
            metadata={"name": member, "n": 2**53 - n, "f": 1 / 3, "ok": True, "none": None},
        )  # fmt: skip
    page = http.get("/v1/boards/kills/day", params={"limit": 20})
    assert page.status_code == 200, page.text
    assert page.json() == app.top("kills", "day", limit=20).model_dump()
    for member in members:
        resp = http.get(
            f"/v1/boards/kills/day/members/{quote(member, safe='')}/around", params={"size": 3}
        )
        assert resp.status_code == 200, (member, resp.text)
        expected = app.around("kills", member, "day", size=3)
        assert expected is not None and resp.json() == expected.model_dump()


def test_page_matches_independent_computation(http: TestClient, events: list) -> None:
    today = START.date()
    # The day board: sums of the day's kills, high first.
    kills = day_scores(events, "kills")[today]
    body = http.get("/v1/boards/kills/day", params={"limit": 1000}).json()
    assert body["total"] == len(kills)
    assert {e["member"]: e["score"] for e in body["entries"]} == kills
    assert [e["rank"] for e in body["entries"]] == list(range(1, len(kills) + 1))
    assert [e["score"] for e in body["entries"]] == sorted(kills.values(), reverse=True)
    # The week board: weekday weights (weekend x2) over Monday .. today.
    week: dict[str, float] = defaultdict(float)
    for day, scores in day_scores(events, "kills").items():
        if day >= date(2035, 6, 11):
            weight = SETTINGS["boards"]["kills"]["week_weights"][day.weekday()]
            for m, v in scores.items():
                week[m] += weight * v
    body = http.get("/v1/boards/kills/week", params={"limit": 1000}).json()
    assert {e["member"]: e["score"] for e in body["entries"]} == dict(week)
    # Shared ties on the laps board: 1 + the number of strictly better scores.
    laps = day_scores(events, "laps")[today]
    body = http.get("/v1/boards/laps/day", params={"limit": 1000}).json()
    for e in body["entries"]:
        assert e["rank"] == 1 + sum(1 for v in laps.values() if v < e["score"])
    # Metadata comes with every entry.
    assert body["entries"][0]["metadata"] == {} or "name" in body["entries"][0]["metadata"]
    first = http.get("/v1/boards/kills/day", params={"limit": 1}).json()["entries"][0]
    assert first["metadata"]["name"] == f"Player {int(first['member'][1:])}"


def test_member_entry_equals_python_api(http: TestClient, app: Seasons, events: list) -> None:
    for window in ("day", "week", "season"):
        for member in ("p000", "p017", "p039"):
            expected = app.rank("kills", member, window)
            resp = http.get(f"/v1/boards/kills/{window}/members/{member}")
            if expected is None:
                assert_error(resp, 404, "not_ranked")
            else:
                assert resp.status_code == 200
                assert resp.json() == expected.model_dump()


def test_around_member_and_rank_equal_python_api(
    http: TestClient, app: Seasons, events: list
) -> None:
    top = app.top("kills", "season", limit=1000).entries
    for member in (top[0].member, top[len(top) // 2].member, top[-1].member):
        for size in (1, 5, 10, 101):
            resp = http.get(
                f"/v1/boards/kills/season/members/{member}/around", params={"size": size}
            )
            expected = app.around("kills", member, "season", size=size)
            assert expected is not None
            assert resp.json() == expected.model_dump()
            # Shifted at the ends: still `size` entries while the board has them.
            assert len(resp.json()["entries"]) == min(size, len(top))
    for rank in (1, 2, len(top) // 2, len(top), len(top) + 5):
        resp = http.get(f"/v1/boards/laps/day/ranks/{rank}/around", params={"size": 7})
        assert resp.status_code == 200
        assert resp.json() == app.around_rank("laps", rank, "day", size=7).model_dump()


def test_lookup_equals_python_api(http: TestClient, app: Seasons, events: list) -> None:
    members = ["p003", "p001", "nobody", "p020", "p001"]
    resp = http.post("/v1/boards/kills/week/lookup", json={"members": members})
    assert resp.status_code == 200
    expected = [e.model_dump() for e in app.lookup("kills", members, "week")]
    assert resp.json() == expected
    assert [e["rank"] for e in resp.json()] == sorted(e["rank"] for e in resp.json())
    assert "nobody" not in {e["member"] for e in resp.json()}
    assert http.post("/v1/boards/kills/day/lookup", json={"members": []}).json() == []


def test_history_equals_python_api(http: TestClient, app: Seasons, events: list) -> None:
    for window, last in (("day", 14), ("week", 3), ("season", 4), ("day", 400)):
        resp = http.get(
            "/v1/boards/kills/members/p005/history", params={"window": window, "last": last}
        )
        assert resp.status_code == 200
        expected = app.run(app.reads.history("kills", "p005", window, last=last))
        assert resp.json() == expected.model_dump()
        assert resp.json()["history"][-1]["period"] == app.top("kills", window).period
    # The facade's history() is the same points.
    body = http.get("/v1/boards/kills/members/p005/history").json()
    assert body["history"] == [p.model_dump() for p in app.history("kills", "p005")]
    # Independent: on each day the member played, its rank and score on that day's board.
    scores = day_scores(events, "kills")
    for point in body["history"]:
        day_board = scores.get(date.fromisoformat(point["period"]), {})
        if "p005" not in day_board:
            assert point == {"period": point["period"], "rank": None, "score": None}
        else:
            assert point["score"] == day_board["p005"]


def test_member_ids_with_slashes_and_unicode(http: TestClient, app: Seasons) -> None:
    for member in ("clan/ann", "çiğdem 🚀", "a/b/around"):
        app.submit("kills", member, 5)
    for member in ("clan/ann", "çiğdem 🚀"):
        path = quote(member, safe="")
        resp = http.get(f"/v1/boards/kills/day/members/{path}")
        assert resp.json() == app.rank("kills", member, "day").model_dump()  # type: ignore[union-attr]
        resp = http.get(f"/v1/boards/kills/day/members/{path}/around", params={"size": 3})
        assert resp.json() == app.around("kills", member, "day", size=3).model_dump()  # type: ignore[union-attr]
        resp = http.get(f"/v1/boards/kills/members/{path}/history", params={"last": 2})
        assert resp.json()["member"] == member


def test_http_json_equals_cli_json(
    http: TestClient, settings: Settings, clock: ManualClock, events: list
) -> None:
    runner = CliRunner()
    pairs = [
        (["top", "kills", "--window", "week", "--limit", "5", "--json"],
         "/v1/boards/kills/week?limit=5"),
        (["rank", "laps", "p002", "--window", "day", "--json"], "/v1/boards/laps/day/members/p002"),
        (["around", "kills", "p010", "--size", "3", "--json"],
         "/v1/boards/kills/season/members/p010/around?size=3"),
        (["history", "kills", "p010", "--last", "5", "--json"],
         "/v1/boards/kills/members/p010/history?last=5"),
        (["rank", "kills", "ghost", "--json"], None),
    ]  # fmt: skip
    for args, path in pairs:
        result = runner.invoke(cli, args, obj=CliState(clock=clock, settings=settings))
        if path is None:
            assert result.exit_code == 3
            continue
        assert result.exit_code == 0, result.output
        assert json.loads(result.output) == http.get(path).json()


# --- writes ------------------------------------------------------------------------------------


def test_scores_applies_and_dedupes(http: TestClient, app: Seasons) -> None:
    batch = [
        {"board": "kills", "member": "ann", "value": 3, "event_id": "e1",
         "metadata": {"team": "red"}},
        {"board": "kills", "member": "ann", "value": 4, "event_id": "e2"},
        {"board": "laps", "member": "bob", "value": 61.5,
         "ts": (START - timedelta(hours=1)).isoformat()},
        {"board": "kills", "member": "bob", "value": 1, "ts": int(START.timestamp())},
    ]  # fmt: skip
    resp = http.post("/v1/scores", json={"events": batch})
    assert resp.status_code == 200
    body = resp.json()
    assert len(body.pop("batch_id")) == 32  # generated (no Idempotency-Key): a uuid4 in hex
    assert body == {"applied": 4, "duplicates": 0}
    resp = http.post("/v1/scores", json={"events": batch[:2]})
    assert {k: v for k, v in resp.json().items() if k != "batch_id"} == {
        "applied": 0,
        "duplicates": 2,
    }
    ann = app.rank("kills", "ann", "day")
    assert ann is not None and ann.score == 7 and ann.metadata == {"team": "red"}
    assert http.get("/v1/boards/kills/day/members/ann").json() == ann.model_dump()
    # Fresh week and season boards right after the write.
    assert http.get("/v1/boards/kills/season/members/ann").json()["score"] == 7
    assert http.get("/v1/boards/laps/week/members/bob").json()["score"] == 61.5


def test_scores_rejects_whole_batch_with_a_problem_per_event(
    http: TestClient, app: Seasons
) -> None:
    batch = [
        {"board": "kills", "member": "ok", "value": 1},
        {"board": "nope", "member": "x", "value": 1},
        {"board": "kills", "member": "", "value": "3"},
        {"board": "kills", "member": "late", "value": 1, "ts": "2035-06-01T00:00:00Z"},
        {"board": "kills", "member": "future", "value": 1, "ts": "2035-06-14T00:00:00Z"},
        {"board": "kills", "member": "m", "value": 1, "extra": True},
        "not an object",
        {"board": {"a": 1}, "member": "m", "value": 1},  # found by the fuzz test: was a 500
        {"board": "kills", "member": "m", "value": 1, "ts": {"a": 1}},  # likewise
    ]
    body = assert_error(http.post("/v1/scores", json={"events": batch}), 422, "invalid_events")
    problems = {(p["index"], p["code"]) for p in body["details"]}
    assert {
        (1, "unknown_board"),
        (2, "invalid_member"),
        (2, "invalid_value"),
        (3, "late_event"),
        (4, "future_event"),
        (5, "unknown_field"),
        (6, "invalid_event"),
        (7, "unknown_board"),
        (8, "invalid_ts"),
    } <= problems
    assert app.top("kills", "day").total == 0  # nothing was written


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("GET", "/v1/boards/nope/day", {}, 404, "unknown_board"),
        ("GET", "/v1/boards/nope/day/members/a", {}, 404, "unknown_board"),
        ("GET", "/v1/boards/nope/members/a/history", {}, 404, "unknown_board"),
        ("POST", "/v1/boards/nope/day/lookup", {"json": {"members": []}}, 404, "unknown_board"),
        ("GET", "/v1/boards/kills/month", {}, 422, "bad_window"),
        ("GET", "/v1/boards/kills/month/ranks/1/around", {}, 422, "bad_window"),
        ("GET", "/v1/boards/kills/members/a/history?window=year", {}, 422, "bad_window"),
        ("GET", "/v1/boards/kills/day?period=yesterday", {}, 422, "bad_period"),
        ("GET", "/v1/boards/kills/day?period=2035-02-30", {}, 422, "bad_period"),
        ("GET", "/v1/boards/kills/week?period=S3", {}, 422, "bad_period"),
        ("GET", "/v1/boards/kills/season?period=S0", {}, 422, "bad_period"),
        ("GET", "/v1/boards/kills/season?period=2035-06-13", {}, 422, "bad_period"),
        ("GET", "/v1/boards/kills/day/members/ghost", {}, 404, "not_ranked"),
        ("GET", "/v1/boards/kills/day/members/ghost/around", {}, 404, "not_ranked"),
        ("GET", "/v1/boards/kills/day?limit=1001", {}, 422, "limit_exceeded"),
        ("GET", "/v1/boards/kills/day?limit=0", {}, 422, "limit_exceeded"),
        ("GET", "/v1/boards/kills/day?offset=-1", {}, 422, "limit_exceeded"),
        ("GET", "/v1/boards/kills/day/ranks/1/around?size=102", {}, 422, "limit_exceeded"),
        ("GET", "/v1/boards/kills/day/ranks/0/around", {}, 422, "limit_exceeded"),
        ("GET", "/v1/boards/kills/day/members/a/around?size=102", {}, 422, "limit_exceeded"),
        ("GET", "/v1/boards/kills/members/a/history?last=401", {}, 422, "limit_exceeded"),
        ("GET", "/v1/boards/kills/day?limit=ten", {}, 422, "invalid_input"),
        ("POST", "/v1/boards/kills/day/lookup", {"json": {"members": ["a"] * 1001}}, 422,
         "limit_exceeded"),
        ("POST", "/v1/boards/kills/day/lookup", {"json": {"member": ["a"]}}, 422, "invalid_input"),
        ("POST", "/v1/scores", {"json": {"events": [{"board": "kills", "member": "a", "value": 1}]
                                         * 10_001}}, 422, "limit_exceeded"),
        ("POST", "/v1/scores", {"content": b'{"events": [', "headers":
                                {"content-type": "application/json"}}, 400, "invalid_json"),
        ("POST", "/v1/scores", {"json": {"event": []}}, 422, "invalid_input"),
        ("POST", "/v1/scores", {"json": [1, 2]}, 422, "invalid_input"),
        ("POST", "/v1/admin/rebuild", {"json": {"window": "day"}}, 422, "invalid_input"),
        ("POST", "/v1/admin/rebuild", {"json": {"board": "nope"}}, 404, "unknown_board"),
        ("POST", "/v1/admin/snapshot", {"json": {"season": "S99"}}, 422, "invalid_input"),
        ("POST", "/v1/admin/snapshot", {"json": {"season": "winter"}}, 422, "bad_period"),
        ("GET", "/v1/nothing", {}, 404, "not_found"),
        ("DELETE", "/v1/boards", {}, 405, "method_not_allowed"),
    ],
)  # fmt: skip
def test_error_paths(
    http: TestClient, events: list, method: str, path: str, kwargs: dict, status: int, code: str
) -> None:
    assert_error(http.request(method, path, **kwargs), status, code)


def test_not_ranked_names_the_period(http: TestClient) -> None:
    body = assert_error(http.get("/v1/boards/kills/week/members/ghost"), 404, "not_ranked")
    assert body["details"] == {
        "board": "kills",
        "window": "week",
        "period": "2035-06-11",
        "member": "ghost",
    }


# --- auth ------------------------------------------------------------------------------------

SCORE = {"events": [{"board": "kills", "member": "ann", "value": 1}]}


def _write(c: TestClient, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return c.post("/v1/scores", json=SCORE, headers=headers)


def _admin(c: TestClient, token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return c.post("/v1/admin/rollup", headers=headers)


def test_tokens_required_when_configured(make_client: ClientFactory) -> None:
    api = {"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN}
    for where in (LOOPBACK, REMOTE):
        c = make_client(client=where, api=api)
        assert_error(_write(c), 401, "unauthorized")
        assert _write(c).headers["www-authenticate"] == "Bearer"
        assert_error(_write(c, "wrong"), 401, "unauthorized")
        assert_error(_write(c, WRITE_TOKEN + "x"), 401, "unauthorized")
        assert_error(c.post("/v1/scores", json=SCORE, headers={"Authorization": WRITE_TOKEN}),
                     401, "unauthorized")  # fmt: skip
        assert _write(c, WRITE_TOKEN).status_code == 200
        assert _write(c, ADMIN_TOKEN).status_code == 200  # admin may write too
        assert_error(_admin(c), 401, "unauthorized")
        assert_error(_admin(c, WRITE_TOKEN), 401, "unauthorized")
        assert _admin(c, ADMIN_TOKEN).status_code == 200
        assert c.delete("/v1/admin/members/ann").status_code == 401
        assert c.get("/v1/boards/kills/day").status_code == 200  # reads are public


def test_without_tokens_only_loopback_may_write(make_client: ClientFactory) -> None:
    for host in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
        c = make_client(client=(host, 4000))
        assert _write(c).status_code == 200, host
        assert _admin(c).status_code == 200, host
    # Only those three: a reverse proxy may listen on the rest of 127.0.0.0/8.
    for host in ("10.1.2.3", "192.168.1.5", "::ffff:10.0.0.1", "testclient", "127.8.9.10",
                 "127.0.0.2", "::ffff:127.0.0.2"):  # fmt: skip
        c = make_client(client=(host, 4000))
        body = assert_error(_write(c), 403, "forbidden")
        assert body["details"] == {"setting": "api.write_token", "reason": "remote"}
        assert_error(_write(c, "anything"), 403, "forbidden")
        assert_error(_admin(c), 403, "forbidden")
        assert c.get("/v1/boards/kills/day").status_code == 200
    # Only the write token configured: admin is loopback-only, writes need the token anywhere.
    c = make_client(client=REMOTE, api={"write_token": WRITE_TOKEN})
    assert _write(c, WRITE_TOKEN).status_code == 200
    assert_error(_admin(c, WRITE_TOKEN), 403, "forbidden")


def test_tokens_never_in_responses_or_logs(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api = {"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN}
    texts = []
    for where in (LOOPBACK, REMOTE):
        c = make_client(client=where, api=api)
        for token in (None, "wrong", WRITE_TOKEN, ADMIN_TOKEN, WRITE_TOKEN[:-1], ADMIN_TOKEN + "!"):
            for resp in (_write(c, token), _admin(c, token)):
                texts.append(resp.text)
                texts.append(json.dumps(dict(resp.headers)))
        texts += [c.get(p).text for p in ("/v1/boards", "/v1/jobs", "/metrics", "/openapi.json")]
        texts.append(c.post("/v1/scores", json={"events": [{"board": "kills", "member": "a",
                                                            "value": WRITE_TOKEN}]},
                            headers={"Authorization": f"Bearer {WRITE_TOKEN}"}).text)  # fmt: skip
    out, err = capsys.readouterr()
    texts += [out, err, caplog.text]
    for token in (WRITE_TOKEN, ADMIN_TOKEN):
        leaked = [t for t in texts[:-4] if token in t]
        assert not leaked
        assert token not in out + err + caplog.text


# --- seasons, jobs, health, metrics ----------------------------------------------------------


def test_seasons_lists_status(http: TestClient, settings: Settings, app: Seasons) -> None:
    body = http.get("/v1/seasons").json()
    assert body == catalog.seasons(app.client, settings, app.keys, START).model_dump(mode="json")
    assert body["current"] == "S3"
    by_id = {s["season"]: s for s in body["seasons"]}
    assert by_id["S1"]["status"] == "ended" and by_id["S3"]["status"] == "running"
    assert by_id["S4"]["status"] == "upcoming"
    assert by_id["S3"]["boards"]["kills"] == {"state": "live", "archive": None, "snapshots": []}


def test_jobs_and_readyz_follow_the_heartbeat(
    http: TestClient, app: Seasons, settings: Settings, clock: ManualClock
) -> None:
    body = http.get("/v1/jobs").json()
    assert body["worker"] is None
    assert set(body["jobs"]) >= {"rollup", "closes", "sweep", "heartbeat"}
    assert_error(http.get("/readyz"), 503, "not_ready")
    beat = {"worker": "w1", "pid": 1, "host": "h", "at": START.isoformat(), "interval_seconds": 10}
    app.client.set(app.keys.heartbeat(), json.dumps(beat), ex=30)
    app.client.hset(app.keys.job_state("rollup"), mapping={
        "last_start": "2035-06-13T11:59:00+00:00", "last_end": "2035-06-13T11:59:02.5+00:00",
        "last_status": "ok", "next_run": "2035-06-13T12:00:00+00:00", "runs": "7",
        "total_duration": "3.5",
    })  # fmt: skip
    body = http.get("/v1/jobs").json()
    assert body["worker"]["worker"] == "w1" and body["worker"]["age_seconds"] == 0
    assert body["jobs"]["rollup"]["last_status"] == "ok"
    # The same JSON as `seasons status --json`, less its seasons (GET /v1/seasons has them).
    result = CliRunner().invoke(
        cli, ["status", "--json"], obj=CliState(clock=clock, settings=settings)
    )
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status.pop("seasons") == http.get("/v1/seasons").json()
    for report in (status, body):  # the fields that move with Redis's own clock and memory
        assert 0 < report["worker"].pop("expires_in_seconds") <= 30
        assert report.pop("redis")["policy"] == "noeviction"
    assert status == body
    ready = http.get("/readyz").json()
    assert {k: ready[k] for k in ("status", "redis", "worker", "problems", "warnings")} == {
        "status": "ok", "redis": "ok", "worker": "ok", "problems": {}, "warnings": {},
    }  # fmt: skip
    assert ready["memory"]["policy"] == "noeviction"
    assert http.get("/healthz").json() == {"status": "ok"}
    metrics = http.get("/metrics").text
    assert 'seasons_job_last_duration_seconds{job="rollup"} 2.5' in metrics
    assert 'seasons_job_last_success{job="rollup"} 1.0' in metrics
    assert 'seasons_job_runs_total{job="rollup"} 7.0' in metrics
    assert 'seasons_job_duration_seconds_total{job="rollup"} 3.5' in metrics
    assert "seasons_job_state_up 1.0" in metrics


def test_metrics_count_requests_and_events(http: TestClient) -> None:
    http.get("/v1/boards/kills/day")
    http.get("/v1/boards/kills/day")
    http.get("/v1/boards/nope/day")
    http.post("/v1/scores", json={"events": [{"board": "kills", "member": "a", "value": 1,
                                              "event_id": "x"}] * 1})  # fmt: skip
    http.post("/v1/scores", json={"events": [{"board": "kills", "member": "a", "value": 1,
                                              "event_id": "x"}]})  # fmt: skip
    http.post("/v1/scores", json={"events": [{"board": "x", "member": "a", "value": 1}] * 3})
    resp = http.get("/metrics")
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    route = "/v1/boards/{board}/{window}"
    assert f'seasons_http_requests_total{{method="GET",route="{route}",status="200"}} 2.0' in text
    assert f'seasons_http_requests_total{{method="GET",route="{route}",status="404"}} 1.0' in text
    assert (
        f'seasons_http_request_duration_seconds_count{{method="GET",route="{route}"}} 3.0' in text
    )
    assert 'seasons_events_total{outcome="applied"} 1.0' in text
    assert 'seasons_events_total{outcome="duplicate"} 1.0' in text
    assert 'seasons_events_total{outcome="rejected"} 3.0' in text


# --- admin -------------------------------------------------------------------------------------


def test_rollup_and_rebuild_repair_week_and_season(
    http: TestClient, app: Seasons, events: list, settings: Settings, clock: ManualClock
) -> None:
    before = {w: app.top("kills", w, limit=1000).model_dump() for w in ("week", "season")}
    week_key = app.keys.week("kills", "2035-06-11")
    season_key = app.keys.season("kills", "S3")
    app.client.zadd(week_key, {"p001": 99999, "intruder": 5})
    app.client.zadd(season_key, {"p002": -1})
    resp = http.post("/v1/admin/rollup")
    assert resp.status_code == 200
    assert week_key in {r["target"] for r in resp.json()["rollups"]}
    assert app.top("kills", "week", limit=1000).model_dump() == before["week"]
    assert app.top("kills", "season", limit=1000).model_dump() == before["season"]
    # Nothing left to repair: the CLI's `rollup --json` now says exactly what HTTP says.
    again = http.post("/v1/admin/rollup", json={"board": "kills"}).json()
    runner = CliRunner()
    result = runner.invoke(
        cli, ["rollup", "--board", "kills", "--json"], obj=CliState(clock=clock, settings=settings)
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == again
    app.client.zadd(season_key, {"p003": 123456})
    resp = http.post("/v1/admin/rebuild", json={"board": "kills", "window": "season"})
    assert resp.status_code == 200
    assert [r["target"] for r in resp.json()["rebuilt"]] == [season_key]
    assert app.top("kills", "season", limit=1000).model_dump() == before["season"]
    result = runner.invoke(
        cli, ["rebuild", "--board", "kills", "--window", "season", "--json"],
        obj=CliState(clock=clock, settings=settings),
    )  # fmt: skip
    assert json.loads(result.output) == resp.json()


def test_snapshot_of_a_running_season(
    http: TestClient, app: Seasons, settings: Settings, events: list
) -> None:
    resp = http.post("/v1/admin/snapshot", json={"season": "S3"})
    assert resp.status_code == 200, resp.text
    snaps = resp.json()["snapshots"]
    assert {s["board"] for s in snaps} == {"kills", "laps"}
    sid = snaps[0]["season"]
    assert sid.startswith("S3@") and {s["action"] for s in snaps} == {"snapshot"}
    kills = next(s for s in snaps if s["board"] == "kills")
    assert kills["manifest"]["count"] == app.top("kills", "season").total
    # The snapshot reads like a season, and /v1/seasons lists it.
    live = app.top("kills", "season", limit=1000)
    snap = http.get("/v1/boards/kills/season", params={"period": sid, "limit": 1000}).json()
    assert snap["entries"] == live.model_dump()["entries"]
    seasons = {s["season"]: s for s in http.get("/v1/seasons").json()["seasons"]}
    assert [a["season"] for a in seasons["S3"]["boards"]["kills"]["snapshots"]] == [sid]
    assert seasons["S3"]["boards"]["kills"]["state"] == "live"


def test_forget_member_everywhere(http: TestClient, app: Seasons, events: list) -> None:
    assert app.rank("kills", "p001", "season") is not None
    resp = http.delete("/v1/admin/members/p001")
    assert resp.status_code == 200
    body = resp.json()
    assert body["member"] == "p001" and set(body["boards"]) == {"kills", "laps"}
    for board in ("kills", "laps"):
        for window in ("day", "week", "season"):
            assert app.rank(board, "p001", window) is None
            assert_error(http.get(f"/v1/boards/{board}/{window}/members/p001"), 404, "not_ranked")
    nothing = {"member": "p001", "boards": {}, "lifecycle": 0}
    assert http.delete("/v1/admin/members/p001").json() == nothing


def test_demo_reset_reseeds_a_demo_namespace(
    make_client: ClientFactory, clock: ManualClock, base: dict[str, Any]
) -> None:
    c = make_client(namespace="demo-test")
    c.post("/v1/scores", json={"events": [{"board": "kills", "member": "stray", "value": 1}]})
    # A claims log of an earlier demo season: its claims go with Redis's, or a restore would
    # bring them back over the new data set.
    log = Path(base["archive"]["dir"]) / "demo-test" / "kills" / "S1.claims.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("{}\n")
    resp = c.post("/v1/admin/demo/reset", json={"days": 3, "players": 20})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["deleted_keys"] > 0 and body["seeded"]["applied"] > 0
    assert not log.exists() and body["deleted_files"] >= 1
    top = c.get("/v1/boards/kills/day", params={"limit": 1000}).json()
    assert top["total"] > 0 and "stray" not in {e["member"] for e in top["entries"]}
    # Seeded again: the same data set (deterministic), so the same standings.
    again = c.post("/v1/admin/demo/reset", json={"days": 3, "players": 20}).json()
    assert again["seeded"] == body["seeded"]
    assert c.get("/v1/boards/kills/day", params={"limit": 1000}).json() == top


def test_demo_reset_refused_outside_demo_namespaces(http: TestClient) -> None:
    body = assert_error(http.post("/v1/admin/demo/reset"), 409, "conflict")
    assert body["details"] == {"namespace": "seasons"}


# --- the page and the schema -----------------------------------------------------------------


def test_web_page_and_static_files(http: TestClient) -> None:
    resp = http.get("/")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in resp.headers["content-security-policy"]
    assert '<script src="/static/app.js"' in resp.text
    etag = resp.headers["etag"]
    assert http.get("/", headers={"If-None-Match": etag}).status_code == 304
    assert http.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert http.get("/static/style.css").headers["content-type"].startswith("text/css")
    assert_error(http.get("/static/../../config/settings.py"), 404, "not_found")
    assert_error(http.get("/static/secret.txt"), 404, "not_found")


def test_openapi_and_docs(http: TestClient) -> None:
    schema = http.get("/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/v1/boards", "/v1/boards/{board}/{window}", "/v1/boards/{board}/{window}/members/{member}",
        "/v1/boards/{board}/{window}/members/{member}/around",
        "/v1/boards/{board}/{window}/ranks/{rank}/around", "/v1/boards/{board}/{window}/lookup",
        "/v1/boards/{board}/members/{member}/history", "/v1/scores", "/v1/seasons",
        "/v1/admin/rollup", "/v1/admin/snapshot", "/v1/admin/rebuild",
        "/v1/admin/members/{member}", "/v1/admin/demo/reset", "/v1/jobs", "/healthz", "/readyz",
        "/metrics",
    ):  # fmt: skip
        assert path in paths, path
    page = paths["/v1/boards/{board}/{window}"]["get"]
    assert page["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorBody"
    )
    limit = next(p for p in page["parameters"] if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 1000
    assert http.get("/docs").status_code == 200


def test_a_server_app_freezes_its_startup_objects_out_of_the_collector(
    settings: Settings,
) -> None:
    """``seasons serve`` builds the app with ``freeze_gc``: at startup everything loaded is
    moved out of the collector's sight (a full collection would otherwise stall requests)."""
    import gc

    gc.unfreeze()
    try:
        with TestClient(create_app(settings, clock=ManualClock(START))):
            assert gc.get_freeze_count() == 0  # the default (tests build many apps)
        with TestClient(create_app(settings, clock=ManualClock(START), freeze_gc=True)):
            assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
