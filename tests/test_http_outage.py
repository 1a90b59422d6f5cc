"""A real uvicorn server while Redis goes away and comes back: 503 ``backend_unavailable``
while it is gone, 200 again once it is back, without restarting the HTTP server."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, serving
from redis_server import RedisServer

from config import Settings
from seasons.clock import ManualClock
from seasons.http.app import create_app


@pytest.fixture
def server(redis_server: RedisServer, settings_factory: Callable[..., Settings]) -> Iterator[str]:
    """Base URL of uvicorn serving the app in a thread, on the session's Redis."""
    settings = settings_factory(
        **SETTINGS, api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN}
    )
    try:
        with serving(create_app(settings, clock=ManualClock(START))) as url:
            yield url
    finally:
        if not redis_server.running:  # leave the session's Redis up for the next test
            redis_server.start()


def _score(member: str) -> dict:
    return {"events": [{"board": "kills", "member": member, "value": 3}]}


def test_redis_outage_gives_503_and_recovers(
    server: str, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    write = {"Authorization": f"Bearer {WRITE_TOKEN}"}
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=server, timeout=30) as http:
        assert http.post("/v1/scores", json=_score("ann"), headers=write).status_code == 200
        assert http.get("/v1/boards/kills/day").json()["total"] == 1

        redis_server.stop()
        calls: list[tuple[str, str, dict[str, Any]]] = [
            ("GET", "/v1/boards/kills/day", {}),
            ("GET", "/v1/boards/kills/day/members/ann", {}),
            ("GET", "/v1/boards/kills/day/members/ann/around", {}),
            ("GET", "/v1/boards/kills/day/ranks/1/around", {}),
            ("POST", "/v1/boards/kills/day/lookup", {"json": {"members": ["ann"]}}),
            ("GET", "/v1/boards/kills/members/ann/history", {}),
            ("POST", "/v1/scores", {"json": _score("bob"), "headers": write}),
            ("GET", "/v1/seasons", {}),
            ("GET", "/v1/jobs", {}),
            ("POST", "/v1/admin/rollup", {"headers": admin}),
            ("GET", "/readyz", {}),
        ]
        for method, path, kwargs in calls:
            resp = http.request(method, path, **kwargs)
            assert resp.status_code == 503, (path, resp.text)
            body = resp.json()
            assert body["error"] == "backend_unavailable", (path, body)
            assert set(body) == {"error", "message", "details"}
        # The process itself is fine, and metrics still render (job state marked unreadable).
        assert http.get("/healthz").status_code == 200
        metrics = http.get("/metrics")
        assert metrics.status_code == 200
        assert "seasons_job_state_up 0.0" in metrics.text
        assert 'route="/v1/boards/{board}/{window}",status="503"' in metrics.text
        # Input errors that need no Redis are still reported as such.
        assert http.get("/v1/boards/nope/day").json()["error"] == "unknown_board"

        redis_server.start()  # same port, empty data set
        resp = http.get("/v1/boards/kills/day")
        assert resp.status_code == 200, resp.text
        assert resp.json()["total"] == 0
        assert http.post("/v1/scores", json=_score("cyd"), headers=write).json() == {
            "applied": 1,
            "duplicates": 0,
        }
        assert http.get("/v1/boards/kills/day/members/cyd").json()["rank"] == 1
        assert http.get("/readyz").json()["error"] == "not_ready"  # Redis back, no worker
    for token in (WRITE_TOKEN, ADMIN_TOKEN):
        assert token not in caplog.text
