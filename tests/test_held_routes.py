"""Held events over HTTP and the CLI (docs/http-api.md, docs/cli.md): the write reply's held
fields, the admin routes (token needed, 4xx with a code for bad input, nothing changed) and
``seasons held`` (exit codes), each answering what the Python API answers."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result
from reference import snapshot

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.keys import Keys

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "hr"
START = datetime(2035, 6, 13, 12, 0, 5, tzinfo=UTC)
ADMIN = "admin-token-held"
BOARDS = {"kills": {"member_rate": {"events": 1, "per": "PT1M"}}}
TOML = f"""
namespace = "{NS}"

[boards.kills]
member_rate = {{ events = 1, per = "PT1M" }}
"""


@pytest.fixture
def settings(settings_factory: Callable[..., Settings]) -> Settings:
    return settings_factory(namespace=NS, boards=BOARDS, api={"admin_token": ADMIN})


@pytest.fixture
def app(settings: Settings) -> Iterator[Seasons]:
    with Seasons(settings, clock=ManualClock(START)) as s:
        yield s


@pytest.fixture
def http(settings: Settings) -> Iterator[TestClient]:
    tc = TestClient(create_app(settings, clock=ManualClock(START)), base_url="http://localhost")
    with tc:
        yield tc


AUTH = {"Authorization": f"Bearer {ADMIN}"}


def _score(http: TestClient, value: int, event_id: str | None = None) -> Any:
    event: dict[str, Any] = {"board": "kills", "member": "ann", "value": value}
    if event_id:
        event["event_id"] = event_id
    return http.post("/v1/scores", json={"events": [event]}, headers=AUTH)


def _error(resp: Any, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == code, resp.text


def test_reply_routes_and_decisions(http: TestClient, app: Seasons, r: redis.Redis) -> None:
    first = _score(http, 5)
    assert first.status_code == 200 and "held" not in first.json()  # nothing held: as before
    second = _score(http, 7, "ev-1")
    assert second.status_code == 200
    body = second.json()
    assert (body["applied"], body["held"]) == (0, 1)
    assert body["held_events"] == [{"index": 0, "event_id": "ev-1", "reason": "member_rate"}]
    assert 'seasons_events_total{outcome="held"} 1.0' in http.get("/metrics", headers=AUTH).text

    page = http.get("/v1/admin/boards/kills/held", headers=AUTH)
    assert page.status_code == 200
    assert page.json() == app.held("kills").model_dump(mode="json")
    assert [e["event_id"] for e in page.json()["events"]] == ["ev-1"]

    # No token, a wrong one, a bad limit, an unknown board or event id: nothing changes.
    before = snapshot(r)
    _error(http.get("/v1/admin/boards/kills/held"), 401, "unauthorized")
    _error(http.post("/v1/admin/boards/kills/held/ev-1/approve"), 401, "unauthorized")
    wrong = {"Authorization": "Bearer nope"}
    _error(http.post("/v1/admin/boards/kills/held/ev-1/reject", headers=wrong), 401, "unauthorized")
    _error(http.get("/v1/admin/boards/kills/held?limit=0", headers=AUTH), 422, "limit_exceeded")
    _error(http.get("/v1/admin/boards/kills/held?limit=x", headers=AUTH), 422, "invalid_input")
    _error(http.get("/v1/admin/boards/kills/held?after=zz", headers=AUTH), 422, "invalid_input")
    _error(http.get("/v1/admin/boards/kills/held?bogus=1", headers=AUTH), 422, "unknown_parameter")
    _error(http.get("/v1/admin/boards/nope/held", headers=AUTH), 404, "unknown_board")
    _error(http.post("/v1/admin/boards/nope/held/ev-1/approve", headers=AUTH), 404, "unknown_board")
    _error(
        http.post("/v1/admin/boards/kills/held/ev-2/approve", headers=AUTH), 404, "held_not_found"
    )
    _error(http.post("/v1/admin/boards/kills/held/%01x/reject", headers=AUTH), 422, "invalid_input")
    assert snapshot(r) == before

    approved = http.post("/v1/admin/boards/kills/held/ev-1/approve", headers=AUTH)
    assert approved.status_code == 200, approved.text
    assert (approved.json()["applied"], approved.json()["after"]["state"]) == (1, "approved")
    assert app.rank("kills", "ann", "day").score == 12  # type: ignore[union-attr]
    again = http.post("/v1/admin/boards/kills/held/ev-1/approve", headers=AUTH)
    assert (again.status_code, again.json()["applied"], again.json()["repeated"]) == (200, 0, True)
    assert app.rank("kills", "ann", "day").score == 12  # type: ignore[union-attr]
    _error(http.post("/v1/admin/boards/kills/held/ev-1/reject", headers=AUTH), 409, "held_decided")


def test_generated_ids_in_the_path(http: TestClient, app: Seasons) -> None:
    """An event sent without an id is named <batch id>#<index>: '#' percent-encoded."""
    app.submit("kills", "ann", 1)
    held = app.submit_many(
        [{"board": "kills", "member": "ann", "value": v} for v in (2, 3)], batch_id="b/1"
    )
    assert [h.event_id for h in held.held_events or ()] == ["b/1#0", "b/1#1"]
    resp = http.post("/v1/admin/boards/kills/held/b%2F1%230/reject", headers=AUTH)
    assert resp.status_code == 200, resp.text
    assert resp.json()["after"]["state"] == "rejected"
    assert [e.event_id for e in app.held("kills").events] == ["b/1#1"]


def test_approve_in_an_archived_season_is_409(
    http: TestClient, app: Seasons, r: redis.Redis
) -> None:
    app.submit("kills", "ann", 1)
    app.submit("kills", "ann", 2, event_id="x")
    season = app.rank("kills", "ann", "season").model_dump()  # type: ignore[union-attr]
    assert season["score"] == 1
    for key in r.scan_iter(match=f"{NS}:{{kills}}:season:*"):
        season_id = key.decode().rsplit(":", 1)[1]
        r.hset(app.keys.state("kills"), f"season:{season_id}", "archived")
    resp = http.post("/v1/admin/boards/kills/held/x/approve", headers=AUTH)
    _error(resp, 409, "season_closed")
    assert [e.event_id for e in app.held("kills").events] == ["x"]


# --- the CLI ---------------------------------------------------------------------------------


@pytest.fixture
def run(redis_settings: dict[str, Any], tmp_path: Path) -> Callable[..., Result]:
    toml = tmp_path / "seasons.toml"
    toml.write_text(TOML)
    env = {
        "SEASONS_REDIS__URL": redis_settings["url"],
        "SEASONS_REDIS__CLUSTER": "true" if redis_settings["cluster"] else "false",
        "SEASONS_CONFIG": str(toml),
    }

    def invoke(*args: str) -> Result:
        result = CliRunner().invoke(
            cli, list(args), env=env, obj=CliState(clock=ManualClock(START))
        )
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result

    return invoke


def test_cli_held(run: Callable[..., Result], r: redis.Redis) -> None:
    assert run("submit", "kills", "ann", "5").exit_code == 0
    held = run("submit", "kills", "ann", "7", "--event-id", "e1", "--json")
    assert held.exit_code == 0, held.output
    assert json.loads(held.output)["held"] == 1
    listed = run("held", "list", "kills", "--json")
    assert listed.exit_code == 0
    assert [e["event_id"] for e in json.loads(listed.output)["events"]] == ["e1"]
    before = snapshot(r)
    assert run("held", "list", "kills", "--limit", "0").exit_code == 2
    assert run("held", "list", "nope").exit_code == 2  # an unknown board is bad input
    assert run("held", "approve", "kills", "e2").exit_code == 3
    assert run("held", "approve", "kills").exit_code == 2
    assert snapshot(r) == before
    done = run("held", "approve", "kills", "e1")
    assert done.exit_code == 0 and "approved" in done.output
    assert run("held", "approve", "kills", "e1").exit_code == 0  # repeated: nothing applied
    top = run("top", "kills", "--window", "day", "--json")
    assert json.loads(top.output)["entries"][0]["score"] == 12
    assert run("held", "reject", "kills", "e1").exit_code == 1  # approved already


# --- the audit trail and erasure ---------------------------------------------------------------


def _entries(app: Seasons, action: str) -> list[Any]:
    return app.audit(action=action, limit=100).entries


def test_decisions_are_audited_once(http: TestClient, app: Seasons) -> None:
    """Each decision appends one entry naming the token's actor, the member, the board and the
    record's state before and after; asking the same decision again appends nothing more."""
    assert _score(http, 5).status_code == 200
    for event_id in ("e1", "e2"):
        assert _score(http, 7, event_id).json()["held"] == 1
    approve = http.post(
        "/v1/admin/boards/kills/held/e1/approve?reason=looked%20fine",
        headers={**AUTH, "X-Request-ID": "req-approve-1"},
    )
    assert approve.status_code == 200, approve.text
    assert approve.headers["x-request-id"] == "req-approve-1"
    again = http.post("/v1/admin/boards/kills/held/e1/approve", headers=AUTH)
    assert again.json()["repeated"] is True
    (entry,) = _entries(app, "held_approve")
    assert (entry.actor, entry.member, entry.boards) == ("admin", "ann", ["kills"])
    assert (entry.reason, entry.request_id) == ("looked fine", "req-approve-1")
    assert entry.before["state"] == "held" and entry.after["state"] == "approved"
    assert entry.before["event_id"] == "e1" and entry.after["value"] == 7
    assert "member" not in entry.before and "metadata" not in entry.after
    # Python: its actor; a repeated reject appends nothing more either.
    app.reject("kills", "e2", actor="moderator-bot", reason="too fast")
    app.reject("kills", "e2", actor="moderator-bot")
    (rejected,) = _entries(app, "held_reject")
    assert (rejected.actor, rejected.reason) == ("moderator-bot", "too fast")
    assert rejected.member == "ann"
    assert rejected.after["state"] == "rejected"
    # A reason over the limit is bad input: 422, nothing decided, nothing appended.
    assert _score(http, 1, "e3").json()["held"] == 1
    long = http.post(f"/v1/admin/boards/kills/held/e3/reject?reason={'x' * 501}", headers=AUTH)
    _error(long, 422, "invalid_input")
    assert app.held("kills").events[-1].state == "held"
    assert len(_entries(app, "held_reject")) == 1


def test_cli_decision_names_the_os_user(run: Callable[..., Result], r: redis.Redis) -> None:
    import getpass

    assert run("submit", "kills", "ann", "5").exit_code == 0
    assert run("submit", "kills", "ann", "7", "--event-id", "e1").exit_code == 0
    done = run("held", "reject", "kills", "e1", "--reason", "bot")
    assert done.exit_code == 0, done.output
    trail = json.loads(run("audit", "--action", "held_reject", "--json").output)["entries"]
    assert [(e["actor"], e["reason"]) for e in trail] == [(f"cli:{getpass.getuser()}", "bot")]


def test_forget_erases_held_events_and_counters(app: Seasons, r: redis.Redis) -> None:
    """A forgotten member's held events (held or decided) and its rate counters go with it;
    another member's stay."""
    # Event ids are the caller's and are kept as ids (dedupe), so none names a member here.
    for n, member in enumerate(("ann", "bob")):
        app.submit("kills", member, 5)
        app.submit("kills", member, 7, event_id=f"e{n}1")
        app.submit("kills", member, 8, event_id=f"e{n}2")
    app.reject("kills", "e01")
    assert {e.member for e in app.held("kills").events} == {"ann", "bob"}
    found = app.forget("ann")
    assert found.boards["kills"].held == 2
    left = app.held("kills").events
    assert [e.event_id for e in left] == ["e11", "e12"]
    assert r.hget(Keys(NS).held("kills"), "e01") is None  # decided ones too
    for key in r.scan_iter(match=f"{NS}:*"):
        kind = r.type(key)
        if kind == b"hash":
            dump = json.dumps({k.decode(): v.decode() for k, v in r.hgetall(key).items()})
        elif kind == b"zset":
            dump = json.dumps([m.decode() for m in r.zrange(key, 0, -1)])
        else:
            continue
        assert "ann" not in dump, key
