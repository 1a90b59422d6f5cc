"""Redis refusing work, or able to lose it: a full server (noeviction), a read-only replica, an
evicting maxmemory-policy. Each on a private redis-server configured that way.

- A write Redis refuses is a 503 with ``backend_full`` / ``backend_read_only`` (HTTP), the
  matching ``BackendUnavailable`` subclass (Python API), and nothing is written;
  ``/readyz`` is not ready while it lasts and ``/metrics`` shows the memory figures.
- ``seasons serve`` refuses an evicting policy at start (exit 2, a message saying how to fix
  it) unless ``redis.allow_eviction``; a policy switched to evicting while it runs stops it
  with exit 2; a non-loopback address with empty tokens, and a port it cannot bind, exit 2.
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis_server import RedisServer, free_port

from seasons import Seasons
from seasons.config import load_settings
from seasons.errors import BackendFull, BackendReadOnly
from seasons.http.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
TOKENS = {"write_token": "w-token", "admin_token": "a-token"}
AUTH = {"Authorization": "Bearer a-token"}
EVENT = {"board": "kills", "member": "ann", "value": 5}


def settings_for(server: RedisServer, tmp_path: Path, **overrides: Any) -> Any:
    toml = tmp_path / "empty.toml"
    toml.write_text("")
    redis_cfg = {"url": server.url, **overrides.pop("redis", {})}
    return load_settings(
        environ={}, path=toml, redis=redis_cfg, boards={"kills": {}},
        api=TOKENS, archive={"dir": str(tmp_path / "archive")}, **overrides,
    )  # fmt: skip


@contextlib.contextmanager
def http_on(settings: Any) -> Iterator[TestClient]:
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        yield client


def fill(server: RedisServer) -> None:
    """Put Redis over its maxmemory for good: junk (outside Seasons' namespace), then a
    maxmemory below what it holds (noeviction keeps it all, and refuses every write)."""
    client = server.client()
    try:
        client.set("junk", "x" * (4 << 20))
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", str(used // 2))
        try:
            client.set("junk:more", "x")
        except redis.exceptions.OutOfMemoryError:
            return
        raise AssertionError("Redis never reported OOM")
    finally:
        client.close()


def problems(answer: Any) -> dict[str, str]:
    """The problems /readyz names: in its body when ready, in the error's details when not."""
    body = answer.json()
    found: dict[str, str] = (
        body["problems"] if answer.status_code == 200 else body["details"]["problems"]
    )
    return found


def gauge(metrics: str, name: str) -> float:
    """The value of an unlabelled gauge in Prometheus text."""
    found = [line.split()[1] for line in metrics.splitlines() if line.startswith(name + " ")]
    assert len(found) == 1, metrics
    return float(found[0])


def digest(server: RedisServer) -> Any:
    client = server.client()
    try:
        return client.execute_command("DEBUG", "DIGEST")
    finally:
        client.close()


def test_a_full_redis_is_503_backend_full_and_nothing_is_written(tmp_path: Path) -> None:
    with RedisServer(args=["--maxmemory-policy", "noeviction"]) as server:
        settings = settings_for(server, tmp_path)
        with Seasons(settings) as app, http_on(settings) as http:
            app.submit("kills", "bob", 1)  # the board exists before Redis fills up
            assert "backend_full" not in problems(http.get("/readyz"))
            fill(server)
            before = digest(server)
            answer = http.post("/v1/scores", json={"events": [EVENT]}, headers=AUTH)
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"] == "backend_full"
            assert "maxmemory" in answer.json()["message"]
            with pytest.raises(BackendFull):
                app.submit("kills", "ann", 5)
            assert digest(server) == before
            ready = http.get("/readyz")
            assert ready.status_code == 503
            assert "backend_full" in problems(ready)
            limit = int(server.client().config_get("maxmemory")["maxmemory"])
            metrics = http.get("/metrics").text
            assert gauge(metrics, "seasons_redis_maxmemory_bytes") == limit
            # Reads still answer while writes are refused.
            assert http.get("/v1/boards/kills/day").json()["total"] == 1
            # Room again: writes go through and /readyz no longer names the memory.
            client = server.client()
            client.config_set("maxmemory", "0")
            client.close()
            assert (
                http.post("/v1/scores", json={"events": [EVENT]}, headers=AUTH).status_code == 200
            )
            assert "backend_full" not in problems(http.get("/readyz"))
            assert app.rank("kills", "ann", "day").score == 5  # type: ignore[union-attr]


def test_a_read_only_replica_is_503_backend_read_only(tmp_path: Path) -> None:
    with RedisServer() as master, RedisServer() as replica:
        client = replica.client()
        client.replicaof(master.host, master.port)
        deadline = time.monotonic() + 10
        while client.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)
        client.close()
        settings = settings_for(replica, tmp_path)
        with Seasons(settings) as app, http_on(settings) as http:
            before = digest(replica)
            answer = http.post("/v1/scores", json={"events": [EVENT]}, headers=AUTH)
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"] == "backend_read_only"
            with pytest.raises(BackendReadOnly):
                app.submit("kills", "ann", 5)
            ready = http.get("/readyz")
            assert ready.status_code == 503 and ready.json()["error"] == "backend_read_only"
            assert digest(replica) == before
            assert gauge(http.get("/metrics").text, "seasons_redis_read_only") == 1


def test_readyz_names_an_evicting_policy_and_an_allowed_one_as_a_warning(tmp_path: Path) -> None:
    with RedisServer(args=["--maxmemory-policy", "allkeys-lru"]) as server:
        with Seasons(settings_for(server, tmp_path)) as app, http_on(app.settings) as http:
            app.client.set(app.keys.heartbeat(), "test", ex=60)
            ready = http.get("/readyz")
            assert ready.status_code == 503 and ready.json()["error"] == "eviction_policy"
            assert "allkeys-lru" in ready.json()["message"]
        allowed = settings_for(server, tmp_path, redis={"allow_eviction": True})
        with Seasons(allowed) as app, http_on(allowed) as http:
            app.client.set(app.keys.heartbeat(), "test", ex=60)
            ready = http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert "eviction_allowed" in ready.json()["warnings"]
            assert gauge(http.get("/metrics").text, "seasons_redis_evicting") == 1


# --- seasons serve as a process ------------------------------------------------------------


class Process:
    """``seasons serve`` as a subprocess, its stderr collected line by line."""

    def __init__(self, config: Path, *args: str, env: dict[str, str] | None = None):
        environ = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
        environ.update(env or {}, SEASONS_CONFIG=str(config))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from seasons.cli import main; main()", "serve", *args],
            cwd=ROOT, env=environ, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        stderr = self.proc.stderr
        assert stderr is not None
        threading.Thread(target=lambda: [self.lines.put(x) for x in stderr], daemon=True).start()

    def wait_for(self, text: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in x for x in self.seen):
            assert time.monotonic() < deadline, "".join(self.seen)
            with contextlib.suppress(queue.Empty):
                self.seen.append(self.lines.get(timeout=0.1))

    def exit_status(self, timeout: float = 20) -> int:
        status = self.proc.wait(timeout=timeout)
        time.sleep(0.1)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return status

    @property
    def output(self) -> str:
        return "".join(self.seen)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def serve(config: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Process]:
    proc = Process(config, *args, env=env)
    try:
        yield proc
    finally:
        proc.close()


def config_file(tmp_path: Path, server: RedisServer, extra: str = "", tokens: bool = True) -> Path:
    path = tmp_path / "seasons.toml"
    api = '[api]\nwrite_token = "w"\nadmin_token = "a"\n' if tokens else "[api]\n"
    path.write_text(
        f'[redis]\nurl = "{server.url}"\n[worker]\nheartbeat_interval = 0.2\n'
        f'[boards.kills]\n[archive]\ndir = "{tmp_path / "archive"}"\n{api}{extra}'
    )
    return path


def test_serve_refuses_an_evicting_policy_at_start(tmp_path: Path) -> None:
    with RedisServer(args=["--maxmemory-policy", "allkeys-lru"]) as server:
        with serve(config_file(tmp_path, server), "--port", str(free_port())) as proc:
            assert proc.exit_status() == 2, proc.output
            assert "allkeys-lru" in proc.output and "noeviction" in proc.output
            assert "allow_eviction" in proc.output and "Traceback" not in proc.output
        env = {"SEASONS_REDIS__ALLOW_EVICTION": "true"}
        with serve(config_file(tmp_path, server), "--port", str(free_port()), env=env) as proc:
            proc.wait_for("serving")
            assert any("may evict" in x for x in proc.seen), proc.output
            assert proc.proc.poll() is None


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_stops_with_status_2_when_the_policy_starts_evicting(
    tmp_path: Path, workers: str
) -> None:
    args = ("--port", str(free_port()), "--workers", workers)
    with RedisServer() as server, serve(config_file(tmp_path, server), *args) as proc:
        proc.wait_for("serving")
        client = server.client()
        client.config_set("maxmemory-policy", "volatile-lru")
        client.close()
        assert proc.exit_status() == 2, proc.output
        assert "volatile-lru" in proc.output


def test_serve_refuses_a_network_address_with_empty_tokens(tmp_path: Path) -> None:
    with RedisServer() as server:
        config = config_file(tmp_path, server, tokens=False)
        with serve(config, "--host", "0.0.0.0", "--port", str(free_port())) as proc:
            assert proc.exit_status() == 2, proc.output
            assert "api.write_token" in proc.output and "allow_empty_tokens" in proc.output
        allowed = config_file(tmp_path, server, "allow_empty_tokens = true\n", tokens=False)
        with serve(allowed, "--host", "127.0.0.2", "--port", str(free_port())) as proc:
            proc.wait_for("serving")
        with serve(config_file(tmp_path, server), "--host", "127.0.0.2",
                   "--port", str(free_port())) as proc:  # fmt: skip
            proc.wait_for("serving")  # tokens set: any address


def test_serve_exits_2_on_a_port_it_cannot_bind(tmp_path: Path) -> None:
    with RedisServer() as server, contextlib.closing(__import__("socket").socket()) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with serve(config_file(tmp_path, server), "--port", str(port)) as proc:
            assert proc.exit_status() == 2, proc.output
            assert f"cannot listen on 127.0.0.1:{port}" in proc.output
            assert "serving" not in proc.output and "Traceback" not in proc.output
