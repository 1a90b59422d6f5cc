"""One error boundary: a Redis that cannot do the work is the same Seasons error through every
layer, for each real way it fails, on a private redis-server:

- stalled (SIGSTOP: it accepts connections and never answers) and killed (SIGKILL: nothing
  listens): every call that needs Redis is ``BackendUnreachable`` (HTTP 503
  ``backend_unavailable``), raised from redis-py's TimeoutError / ConnectionError;
- full (maxmemory with noeviction) and a read-only replica (``replica-read-only``): writes are
  ``BackendFull`` / ``BackendReadOnly`` (503 ``backend_full`` / ``backend_read_only``) and
  reads still answer.

Each layer is driven as its user drives it: the Python API (the facade and the jobs of
``seasons.jobs.registry``), the ``seasons`` commands through click's runner (exit status 1,
the reason on stderr, no traceback) and the HTTP app (the fast path and FastAPI's routes).
A bug of ours (an error reply Seasons does not expect) is not an outage: it reaches the caller
as redis-py raised it, a 500 over HTTP.

Redis fails after each layer is up and has talked to it (connections open, scripts loaded),
as in production. A stalled server costs about a second per call (redis-py's timeouts and
retries; five seconds for a new connection), so it gets a read and a write per layer; the
killed server, which refuses at once, gets every call.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN
from redis_server import RedisServer, free_port

from seasons import Seasons, connection
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.errors import BackendFull, BackendReadOnly, BackendUnavailable, BackendUnreachable
from seasons.http.app import create_app
from seasons.jobs import registry
from seasons.jobs.report import jobs_report

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SEEDED = {"ann": 7.0, "bob": 3.0}  # the kills of the day, written before Redis fails
MODES = ("stalled", "killed", "full", "replica")
# The calls made on a stalled server: a read and a write of each layer (module's doc).
STALLED = {"top", "submit", "cli top", "cli submit", "/v1/boards/kills/day", "/v1/scores"}


@dataclass
class Outage:
    """A Redis failing one way, and what every layer must say about it."""

    mode: str
    settings: Settings
    error: type[BackendUnavailable]  # what a call Redis cannot do raises
    code: str  # its HTTP error code
    reason: str  # a phrase of its message
    cause: type[Exception]  # the redis-py error it is raised from
    reads_fail: bool  # unreachable: reads fail too; a refusal: only writes
    begin: Callable[[], None]  # make Redis fail now

    def tried(self, name: str) -> bool:
        """Whether the test makes the call ``name`` (see the module's doc)."""
        return self.mode != "stalled" or name in STALLED

    def fails(self, kind: str) -> bool | None:
        """Whether a call of ``kind`` must fail: reads when unreachable, writes always; None
        for a call that may write nothing (a rollup with nothing to repair), so that only
        Redis unreachable decides it."""
        if kind == "any":
            return True if self.reads_fail else None
        return kind == "write" or self.reads_fail


def settings_for(url: str, tmp_path: Path, **redis_cfg: Any) -> Settings:
    toml = tmp_path / "empty.toml"
    toml.write_text("")
    return load_settings(
        environ={}, path=toml, redis={"url": url, "socket_timeout": 0.1, **redis_cfg},
        api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN},
        archive={"dir": str(tmp_path / "archive")}, **SETTINGS,
    )  # fmt: skip


def seed(settings: Settings) -> None:
    with Seasons(settings, clock=ManualClock(START)) as app:
        app.submit_many([{"board": "kills", "member": m, "value": v} for m, v in SEEDED.items()])


def fill(server: RedisServer) -> None:
    """Over maxmemory for good: junk outside Seasons' keys, then maxmemory below what it holds
    (noeviction keeps it all and refuses every write that needs memory)."""
    client = server.client()
    try:
        client.set("junk", "x" * (4 << 20))
        client.config_set("maxmemory", str(int(client.info("memory")["used_memory"]) // 2))
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.set("junk:more", "x")
    finally:
        client.close()


def replicate(master: RedisServer, replica: RedisServer) -> None:
    """Make ``replica`` a replica of ``master`` and wait until it holds the same data."""
    follower = replica.client()
    leader = master.client()
    try:
        follower.replicaof(master.host, master.port)
        deadline = time.monotonic() + 10
        while (
            follower.info("replication").get("master_link_status") != "up"
            or follower.dbsize() != leader.dbsize()
        ):
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.05)
    finally:
        follower.close()
        leader.close()


@pytest.fixture(params=MODES)
def outage(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Outage]:
    mode: str = request.param
    # The facade's own resends of a write (tests/test_write_retry.py) would only repeat the
    # same errors here.
    monkeypatch.setattr("seasons.api.WRITE_ATTEMPTS", 1)
    # No delay before a replica's first sync (Redis waits 5 s for more replicas by default).
    args = ["--maxmemory-policy", "noeviction", "--repl-diskless-sync-delay", "0"]
    with RedisServer(args=args) as server:
        settings = settings_for(server.url, tmp_path)
        seed(settings)
        unreachable = {"error": BackendUnreachable, "code": "backend_unavailable",
                       "reason": "Redis is unreachable", "reads_fail": True}  # fmt: skip
        if mode == "stalled":
            pid = server.pid
            assert pid is not None
            try:
                yield Outage(
                    mode, settings, cause=redis.TimeoutError, **unreachable,
                    begin=lambda: os.kill(pid, signal.SIGSTOP),
                )  # fmt: skip
            finally:
                os.kill(pid, signal.SIGCONT)
        elif mode == "killed":
            yield Outage(
                mode, settings, cause=redis.ConnectionError, **unreachable, begin=server.kill
            )
        elif mode == "full":
            yield Outage(
                mode, settings, BackendFull, "backend_full", "maxmemory",
                redis.ResponseError, reads_fail=False, begin=lambda: fill(server),
            )  # fmt: skip
        else:
            with RedisServer() as replica:  # replica-read-only is Redis's default
                replicate(server, replica)
                yield Outage(
                    mode, settings_for(replica.url, tmp_path), BackendReadOnly,
                    "backend_read_only", "read-only replica", redis.ResponseError,
                    reads_fail=False, begin=lambda: None,
                )  # fmt: skip


def test_the_python_api(outage: Outage) -> None:
    """The facade's reads and writes, and the jobs the worker runs on it."""
    now = START
    with Seasons(outage.settings, clock=ManualClock(now)) as app:
        calls: list[tuple[str, str, Callable[[], Any]]] = [
            ("top", "read", lambda: app.top("kills", "day")),
            ("rank", "read", lambda: app.rank("kills", "ann", "day")),
            ("history", "read", lambda: app.history("kills", "ann", last=3)),
            ("status", "read", lambda: jobs_report(app, now)),
            ("submit", "write", lambda: app.submit("kills", "cyd", 5)),
            ("heartbeat", "write",
             lambda: registry.BY_NAME["heartbeat"].run(registry.JobContext(app.backend), now)),
            ("rollup", "any", lambda: registry.rollup_of(app.backend).run(now)),
        ]  # fmt: skip
        for _, _, call in calls[:4]:  # the reads: connections open, scripts loaded
            call()
        outage.begin()
        for name, kind, call in calls:
            must_fail = outage.fails(kind)
            if must_fail is None or not outage.tried(name):
                continue
            if not must_fail:
                call()
                continue
            with pytest.raises(outage.error) as raised:
                call()
            assert type(raised.value) is outage.error, name
            assert outage.reason in raised.value.message, (name, raised.value.message)
            assert isinstance(raised.value.__cause__, outage.cause), (name, raised.value)
        if not outage.reads_fail:
            page = app.top("kills", "day")
            assert {e.member: e.score for e in page.entries} == SEEDED  # nothing was written


def cli_run(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(
        cli, list(args), obj=CliState(clock=ManualClock(START), settings=settings)
    )


def test_the_cli(outage: Outage) -> None:
    commands: list[tuple[str, list[str]]] = [
        ("read", ["top", "kills", "--json"]),
        ("read", ["rank", "kills", "ann", "--json"]),
        ("read", ["history", "kills", "ann", "--json"]),
        ("read", ["status", "--json"]),
        ("write", ["submit", "kills", "cyd", "5"]),
        ("write", ["acknowledge-loss"]),
    ]
    outage.begin()  # each command is a process of its own: it connects after the failure
    for kind, args in commands:
        if not outage.tried(f"cli {args[0]}"):
            continue
        result = cli_run(outage.settings, *args)
        if not outage.fails(kind):
            assert result.exit_code == 0, (args, result.output)
            continue
        assert isinstance(result.exception, SystemExit), (args, result.exception)
        assert result.exit_code == 1, (args, result.output)
        assert outage.reason in result.stderr, (args, result.stderr)
        assert result.stdout == "" and "Traceback" not in result.output, args


def test_http(outage: Outage) -> None:
    event = {"board": "kills", "member": "cyd", "value": 5}
    requests: list[tuple[str, str, str, dict[str, Any]]] = [
        ("read", "GET", "/v1/boards/kills/day", {}),  # the fast path
        ("read", "GET", "/v1/boards/kills/day?limit=5&offset=0&period=current", {}),
        ("read", "GET", "/v1/boards/kills/day/members/ann", {}),
        ("read", "GET", "/v1/boards/kills/members/ann/history", {}),
        ("read", "GET", "/v1/seasons", {}),
        ("read", "GET", "/v1/jobs", {}),
        ("write", "POST", "/v1/scores", {"json": {"events": [event]}, "headers": AUTH}),
        ("any", "POST", "/v1/admin/rollup", {"json": {}, "headers": AUTH}),
    ]
    app = create_app(outage.settings, clock=ManualClock(START))
    with TestClient(app, base_url="http://127.0.0.1") as http:
        for _, method, path, extra in requests[:-2]:  # the reads: connections open
            assert http.request(method, path, **extra).status_code == 200, path
        outage.begin()
        for kind, method, path, extra in requests:
            must_fail = outage.fails(kind)
            if must_fail is None or not outage.tried(path):
                continue
            answer = http.request(method, path, **extra)
            if not must_fail:
                assert answer.status_code == 200, (path, answer.text)
                continue
            assert answer.status_code == 503, (path, answer.text)
            body = answer.json()
            assert set(body) == {"error", "message", "details"}
            assert body["error"] == outage.code, (path, body)
            assert outage.reason in body["message"], (path, body)
        ready = http.get("/readyz")  # the first problem found names the outage
        assert ready.status_code == 503 and ready.json()["error"] == outage.code, ready.text
        if not outage.reads_fail:
            assert http.get("/v1/boards/kills/day").json()["total"] == len(SEEDED)


def test_a_cluster_no_node_of_answers(tmp_path: Path) -> None:
    """The cluster client reads the slot map when it is built: BackendUnreachable then."""
    settings = settings_for(f"redis://127.0.0.1:{free_port()}/0", tmp_path, cluster=True)
    with pytest.raises(BackendUnreachable, match="Redis Cluster is unreachable") as raised:
        Seasons(settings)
    assert isinstance(raised.value.__cause__, redis.exceptions.RedisClusterException)
    result = cli_run(settings, "top", "kills")
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1
    assert "Redis Cluster is unreachable" in result.stderr


def test_a_bug_of_ours_is_not_an_outage(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An error reply Seasons does not expect (here WRONGTYPE: a board key holding a string)
    passes every layer as redis-py raised it: no 503, a 500 with a log line over HTTP. A
    script Redis lost (NOSCRIPT, a protocol signal) is loaded again, not reported."""
    with RedisServer() as server:
        settings = settings_for(server.url, tmp_path)
        seed(settings)
        with Seasons(settings, clock=ManualClock(START)) as app:
            app.client.script_flush()
            assert app.top("kills", "day").total == len(SEEDED)  # NOSCRIPT: sent again
            app.submit("kills", "cyd", 1)
            page = app.reads.page("kills", "day", "current", limit=10, offset=0)
            for key in page.call.keys:
                if app.client.type(key) == "zset":
                    app.client.delete(key)
                    app.client.set(key, "not a board")
            with pytest.raises(redis.ResponseError, match="WRONGTYPE") as raised:
                app.top("kills", "day")
            assert not isinstance(raised.value, BackendUnavailable)
        result = cli_run(settings, "top", "kills", "--window", "day")
        assert isinstance(result.exception, redis.ResponseError), result.output
        caplog.set_level(logging.ERROR, logger="seasons.http")
        app_http = create_app(settings, clock=ManualClock(START))
        with TestClient(app_http, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
            for path in ("/v1/boards/kills/day", "/v1/boards/kills/day?period=current&limit=10"):
                answer = c.get(path)
                assert answer.status_code == 500, answer.text
                assert answer.json()["error"] == "internal_error"
        assert "unhandled error on GET /v1/boards/kills/day" in caplog.text


def test_redis_errors_are_translated_in_one_place(tmp_path: Path) -> None:
    """No second boundary: the HTTP app has no handler for redis-py's errors, and the old
    per-call wrapper is gone (the behaviour above is what proves the boundary holds)."""
    assert not hasattr(connection, "backend_errors")
    app = create_app(settings_for("redis://127.0.0.1:1/0", tmp_path))
    app.state.services.seasons.close()
    handled = [k for k in app.exception_handlers if isinstance(k, type)]
    assert not [k for k in handled if issubclass(k, redis.RedisError)], handled
    root = Path(__file__).resolve().parents[1]
    found = [
        str(p) for folder in ("seasons", "jobs")
        for p in (root / folder).rglob("*.py") if "backend_errors" in p.read_text()
    ]  # fmt: skip
    assert found == []
