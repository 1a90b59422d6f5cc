"""The fast read path (seasons.http.fast): each read answers as the Python API does, and as
the FastAPI route does for the same query (a percent-encoded query value sends the request
to the route instead), errors included; request metrics count its answers."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from http_support import SETTINGS, START

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.http.fast import parse_query

pytestmark = pytest.mark.both_backends

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

MEMBERS = ['quo"te', "back\\slash", "a/b", "ü ñ 🎮", "</script>", "x" * 128]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(**{**SETTINGS, "archive": {"dir": str(tmp_path / "archive")}})


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as s:
        for n, member in enumerate(MEMBERS):
            s.submit(
                "kills", member, n + 0.25, ts=clock(),
                metadata={"name": member, "n": 2**53 - n, "f": 1 / 3, "ok": True, "no": None},
            )  # fmt: skip
        yield s


@pytest.fixture
def http(settings: Settings, clock: ManualClock, app: Seasons) -> Iterator[TestClient]:
    with TestClient(
        create_app(settings, clock=clock), client=("127.0.0.1", 5000), base_url="http://localhost"
    ) as tc:
        yield tc


def _routed(query: str) -> str:
    """The same query with its first value's first character percent-encoded: the fast path
    leaves such a request to the FastAPI route, which decodes it to the same value."""
    name, _, value = query.partition("=")
    return f"{name}=%{ord(value[0]):02X}{value[1:]}"


def _both(http: TestClient, path: str, query: str) -> Any:
    """The fast answer and the FastAPI route's for one query: the same status and JSON."""
    fast, routed = http.get(f"{path}?{query}"), http.get(f"{path}?{_routed(query)}")
    assert (fast.status_code, fast.json()) == (routed.status_code, routed.json()), path
    return fast


def test_every_fast_read_equals_the_python_api_and_the_route(
    http: TestClient, app: Seasons
) -> None:
    resp = _both(http, "/v1/boards/kills/day", "limit=20")
    assert resp.json() == app.top("kills", "day", limit=20).model_dump()
    resp = _both(http, "/v1/boards/kills/day", "offset=2&limit=3")
    assert resp.json() == app.top("kills", "day", limit=3, offset=2).model_dump()
    resp = _both(http, "/v1/boards/kills/week/ranks/3/around", "size=3")
    assert resp.json() == app.around_rank("kills", 3, "week", size=3).model_dump()
    for member in MEMBERS:
        path = f"/v1/boards/kills/day/members/{quote(member, safe='')}"
        resp = _both(http, f"{path}/around", "size=3")
        expected = app.around("kills", member, "day", size=3)
        assert expected is not None and resp.json() == expected.model_dump()
        resp = _both(http, path, "period=current")
        assert resp.json() == app.rank("kills", member, "day").model_dump()  # type: ignore[union-attr]
        history = f"/v1/boards/kills/members/{quote(member, safe='')}/history"
        resp = _both(http, history, "last=3")
        expected_history = app.history("kills", member, "day", last=3)
        assert resp.json()["history"] == [p.model_dump() for p in expected_history]
        # Without last: the window's own number (12 weeks), on both paths.
        resp = _both(http, history, "window=week")
        assert len(resp.json()["history"]) == 12
        assert resp.json()["member"] == member


@pytest.mark.parametrize(
    ("path", "query", "status", "code"),
    [
        ("/v1/boards/nope/day", "limit=5", 404, "unknown_board"),
        ("/v1/boards/kills/month", "limit=5", 422, "bad_window"),
        ("/v1/boards/kills/day", "limit=1001", 422, "limit_exceeded"),
        ("/v1/boards/kills/day", "limit=0", 422, "limit_exceeded"),
        ("/v1/boards/kills/day", "period=someday", 422, "bad_period"),
        ("/v1/boards/kills/day/ranks/0/around", "size=3", 422, "limit_exceeded"),
        ("/v1/boards/kills/day/members/nobody/around", "size=3", 404, "not_ranked"),
        ("/v1/boards/kills/day/members/nobody", "period=current", 404, "not_ranked"),
        ("/v1/boards/kills/members/nobody/history", "window=month", 422, "bad_window"),
        ("/v1/boards/kills/day/members/%01bad", "period=current", 422, "invalid_member"),
    ],
)
def test_fast_errors_equal_the_routes(
    http: TestClient, path: str, query: str, status: int, code: str
) -> None:
    resp = _both(http, path, query)
    assert resp.status_code == status and resp.json()["error"] == code, resp.text


def test_unusual_queries_go_to_the_route(http: TestClient) -> None:
    """What the fast path does not read itself still gets the route's answer."""
    for query in ("limit=abc", "limit=-1", "limit=", "limit", "limit=5&limit=6", "limit=+5"):
        resp = http.get(f"/v1/boards/kills/day?{query}")
        assert resp.status_code in (200, 422), (query, resp.text)
        assert resp.json().get("error") in (None, "invalid_input", "limit_exceeded"), query
    assert http.get("/v1/boards/kills/day?token=x").json()["error"] == "unknown_parameter"
    assert parse_query(b"limit=5&offset=2", frozenset({"limit", "offset"})) == {
        "limit": "5", "offset": "2"
    }  # fmt: skip
    assert parse_query(b"limit=5&limit=6", frozenset({"limit"})) is None
    assert parse_query(b"limit=%35", frozenset({"limit"})) is None


def test_healthz_is_answered_as_the_route_answers(http: TestClient) -> None:
    resp = http.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}
    assert resp.headers["content-type"] == "application/json"
    assert int(resp.headers["content-length"]) == len(resp.content)


def _sample(text: str, name: str, labels: str) -> float:
    found = re.search(rf"^{re.escape(name + '{' + labels + '}')} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_fast_answers_are_counted_by_route_template_and_status(http: TestClient) -> None:
    page = 'method="GET",route="/v1/boards/{board}/{window}"'
    before = http.get("/metrics").text
    for _ in range(7):
        assert http.get("/v1/boards/kills/day?limit=2").status_code == 200
    for _ in range(3):
        assert http.get("/v1/boards/nope/day?limit=2").status_code == 404
        assert http.get("/healthz").status_code == 200
    after = http.get("/metrics").text
    for status, n in (("200", 7), ("404", 3)):
        name, labels = "seasons_http_requests_total", f'{page},status="{status}"'
        assert _sample(after, name, labels) - _sample(before, name, labels) == n
    health = 'method="GET",route="/healthz",status="200"'
    name = "seasons_http_requests_total"
    assert _sample(after, name, health) - _sample(before, name, health) == 3
    name = "seasons_http_request_duration_seconds_count"
    assert _sample(after, name, page) - _sample(before, name, page) == 10


def _both_post(http: TestClient, path: str, query: str, body: bytes) -> Any:
    """As :func:`_both`, for a POST with a body."""
    headers = {"content-type": "application/json"}
    fast = http.post(f"{path}?{query}", content=body, headers=headers)
    routed = http.post(f"{path}?{_routed(query)}", content=body, headers=headers)
    assert (fast.status_code, fast.json()) == (routed.status_code, routed.json()), body
    return fast


def test_lookup_on_the_fast_path_equals_the_python_api_and_the_route(
    http: TestClient, app: Seasons
) -> None:
    path = "/v1/boards/kills/day/lookup"
    asked = [*MEMBERS[::-1], "nobody", MEMBERS[0]]
    resp = _both_post(http, path, "period=current", json.dumps({"members": asked}).encode())
    assert resp.status_code == 200
    assert resp.json() == [e.model_dump() for e in app.lookup("kills", asked, "day")]
    # Independent of both: the ranked ones, best first (higher score first), once each.
    assert [e["member"] for e in resp.json()] == MEMBERS[::-1]
    assert _both_post(http, path, "period=current", b'{"members": []}').json() == []
    # Bodies the fast path does not take: FastAPI's own 422 (the body was handed on); a body
    # that is not JSON: 400 invalid_json on both paths.
    for body in (b'{"members": "ann"}', b'{"members": [], "x": 1}', b"[]"):
        resp = _both_post(http, path, "period=current", body)
        assert resp.status_code == 422, body
    for body in (b"{nope", b""):
        resp = _both_post(http, path, "period=current", body)
        assert (resp.status_code, resp.json()["error"]) == (400, "invalid_json"), body
    # Errors of the read itself, as the route answers them.
    many = json.dumps({"members": [f"m{i}" for i in range(1001)]}).encode()
    assert _both_post(http, path, "period=current", many).json()["error"] == "limit_exceeded"
    bad = json.dumps({"members": ["ok", "\u0001"]}).encode()
    assert _both_post(http, path, "period=current", bad).json()["error"] == "invalid_member"


def test_writes_on_the_fast_path_answer_as_the_route(
    settings: Settings, clock: ManualClock, app: Seasons, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same requests to an app whose POST /v1/scores is on the fast path and to one
    where FastAPI's route serves it, each on the same data: the same status and JSON, the
    same standings, the same event counts in /metrics."""
    from seasons.http import fast, scores

    ann = {"board": "kills", "member": "ann", "value": 2, "event_id": "e-1"}
    bob = {"board": "laps", "member": "bob", "value": 61.5}
    standing = {"return": "standing"}
    requests: list[tuple[dict[str, str], bytes] | tuple[dict[str, str], bytes, str]] = [
        (
            {},
            json.dumps(
                {"events": [ann, {**ann, "event_id": "e-2", "metadata": {"a": 1}}]}
            ).encode(),
        ),
        ({}, json.dumps({"events": [ann]}).encode()),  # a duplicate event id
        ({"idempotency-key": "b-1"}, json.dumps({"events": [{**ann, "event_id": "e-3"}]}).encode()),
        ({"idempotency-key": "b-1"}, json.dumps({"events": [{**ann, "event_id": "e-3"}]}).encode()),
        ({"idempotency-key": "b-1"}, json.dumps({"events": [{**ann, "value": 9}]}).encode()),  # 409
        ({"idempotency-key": "x" * 129}, json.dumps({"events": [ann]}).encode()),
        ({}, json.dumps({"events": [{"board": "nope", "member": "", "value": "x"}, ann]}).encode()),
        ({}, json.dumps({"events": [], "extra": 1}).encode()),  # FastAPI's 422
        ({}, b"{not json"),
        (
            {},
            json.dumps({"events": [{**ann, "event_id": f"m-{i}"} for i in range(10_001)]}).encode(),
        ),
        # Standings: asked in the query, in the body, in both alike; an applied batch resent
        # reads them again; a duplicate event has one too.
        (
            {}, json.dumps({"events": [ann, bob, {**ann, "event_id": "e-5"}]}).encode(),
            "?return=standing",
        ),
        ({}, json.dumps({"events": [bob], **standing, "standing_window": "day"}).encode()),
        ({}, json.dumps({"events": [ann], **standing}).encode(), "?return=standing&window=week"),
        ({"idempotency-key": "b-2"}, json.dumps({"events": [bob], **standing}).encode()),
        ({"idempotency-key": "b-2"}, json.dumps({"events": [bob], **standing}).encode()),
        # 422: the body and the query disagree (raised in the handler); a window a board
        # does not keep; a window without standings; a return FastAPI refuses (the route's).
        (
            {}, json.dumps({"events": [ann], **standing, "standing_window": "week"}).encode(),
            "?window=day",
        ),
        ({}, json.dumps({"events": [ann], **standing, "standing_window": "month"}).encode()),
        ({}, json.dumps({"events": [ann]}).encode(), "?window=day"),
        ({}, json.dumps({"events": [ann]}).encode(), "?return=everything"),
    ]  # fmt: skip

    def run() -> tuple[list[tuple[int, Any]], Any, list[float]]:
        with TestClient(
            create_app(settings, clock=clock), client=("127.0.0.1", 5000),
            base_url="http://localhost",
        ) as tc:  # fmt: skip
            answers = []
            for headers, body, *query in requests:
                resp = tc.post(
                    "/v1/scores" + "".join(query),
                    content=body,
                    headers={"content-type": "application/json", **headers},
                )
                answer = resp.json()
                if (
                    isinstance(answer, dict)
                    and "batch_id" in answer
                    and "idempotency-key" not in headers
                ):
                    answer["batch_id"] = "generated"
                answers.append((resp.status_code, answer))
            metrics = tc.get("/metrics").text
            counts = [
                _sample(metrics, "seasons_events_total", f'outcome="{r}"')
                for r in ("applied", "duplicate", "rejected")
            ]
        return answers, app.top("kills", "day").model_dump(), counts

    def empty() -> None:
        for key in app.client.scan_iter("*"):
            app.client.delete(key)

    # Which requests the fast path answered itself (not None: it did not hand them on).
    taken: list[bool] = []
    handler, names = fast.FAST[scores.post_scores]

    def counted(services: Any, asked: Any) -> Any:
        got = handler(services, asked)
        taken.append(got is not None)
        return got

    monkeypatch.setitem(fast.FAST, scores.post_scores, (counted, names))
    empty()
    fast_answers = run()
    # Bodies it cannot read go to FastAPI; the bad Idempotency-Key raised in the handler.
    # A body that is not JSON is answered by the fast path itself (400 invalid_json).
    assert taken == [True] * 6 + [False, True] + [True] * 5 + [True] * 2 + [False]
    statuses = [status for status, _ in fast_answers[0]]
    assert statuses == [200, 200, 200, 200, 409, 422, 422, 422, 400, 422] + [200] * 5 + [422] * 4
    assert fast_answers[2] == [4 + 5, 1 + 2, 2 + 10_001 + 2]  # applied, duplicate, rejected
    assert fast_answers[0][3] == fast_answers[0][2]  # a resend answers the original result
    assert fast_answers[0][14] == fast_answers[0][13]  # and reads the standings again
    answers = [answer for _, answer in fast_answers[0]]
    assert "standings" not in answers[0]
    first = answers[10]["standings"]
    assert [(s["index"], s["member"], s["window"], s["period"]) for s in first] == [
        (0, "ann", "season", "S3"), (1, "bob", "season", "S3"), (2, "ann", "season", "S3"),
    ]  # fmt: skip
    assert (first[0]["rank"], first[0]["score"]) == (first[2]["rank"], first[2]["score"])
    assert [s["window"] for s in answers[11]["standings"] + answers[12]["standings"]] == [
        "day",
        "week",
    ]
    errors = [answer["error"] for answer in answers[15:]]
    assert errors == ["invalid_input", "bad_window", "invalid_input", "invalid_input"]
    empty()
    monkeypatch.delitem(fast.FAST, scores.post_scores)
    assert run() == fast_answers
