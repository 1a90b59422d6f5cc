"""A real uvicorn server while Redis goes away and comes back: 503 ``backend_unavailable``
while it is gone, 200 again once it is back, without restarting the HTTP server."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, serving
from redis_server import RedisServer

from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app

ROOT = Path(__file__).resolve().parent.parent


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
        sent = http.post("/v1/scores", json=_score("cyd"), headers=write).json()
        assert {k: v for k, v in sent.items() if k != "batch_id"} == {"applied": 1, "duplicates": 0}
        assert http.get("/v1/boards/kills/day/members/cyd").json()["rank"] == 1
        assert http.get("/readyz").json()["error"] == "not_ready"  # Redis back, no worker
    for token in (WRITE_TOKEN, ADMIN_TOKEN):
        assert token not in caplog.text


def serve_on_cluster(tmp_path: Path, port: int, redis_extra: str = "") -> subprocess.Popen[str]:
    """``seasons serve`` in a process of its own, on a cluster whose only node given is
    127.0.0.1:``port`` (``redis_extra``: more lines of its ``[redis]`` table), retrying every
    0.1 to 0.2 s at start; its stderr piped."""
    from redis_server import free_port

    config = tmp_path / "seasons.toml"
    config.write_text(
        f'[redis]\nurl = "redis://127.0.0.1:{port}/0"\ncluster = true\n{redis_extra}'
        "[worker]\nbackoff_initial = 0.1\nbackoff_max = 0.2\n[boards.kills]\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    return subprocess.Popen(
        [sys.executable, "-c", "from seasons.cli import main; main()", "serve",
         "--port", str(free_port())],
        cwd=ROOT, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def test_sigterm_stops_serve_while_its_redis_holds_a_connection_unanswered(
    tmp_path: Path,
) -> None:
    """``seasons serve`` whose Redis address accepts a connection and never answers (a
    wedged node): the client being built waits on the socket (here for a minute), and
    SIGTERM still ends serve at once, with status 0, not after the wait."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # connections complete in the backlog; nothing ever reads or answers
    proc = serve_on_cluster(tmp_path, listener.getsockname()[1], "socket_timeout = 60\n")
    try:
        listener.settimeout(30)
        held, _ = listener.accept()  # serve is connecting: its build waits on this socket
        time.sleep(0.5)  # and is in its read now
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0  # well before the 60 s socket timeout
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
        held.close()
    finally:
        listener.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_waits_for_an_unreachable_cluster_at_start(tmp_path: Path) -> None:
    """``seasons serve`` on a cluster no node of answers yet: it keeps trying (the cluster
    client connects when built) instead of exiting, and SIGTERM ends it with status 0."""
    from redis_server import free_port

    proc = serve_on_cluster(tmp_path, free_port())
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 20
        while sum("unreachable at start" in x for x in seen) < 3:
            assert time.monotonic() < deadline, "".join(seen)
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.1))
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not any("Traceback" in x for x in seen), "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
