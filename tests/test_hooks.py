"""Webhooks (seasons.hooks): every lifecycle event reaches each hook's receiver, signed, with
its stable id, through failures, a SIGKILLed worker and a receiver that never answers; an
answer that never ends, or drips, costs one delivery its deadline and nothing else (no memory,
no other hook's deliveries, no wait at SIGTERM); the documented verifier refuses a replay
under another event id.

Receivers are real HTTP servers on 127.0.0.1 in threads of the test (those that misbehave on
the wire: tests/receivers.py); the lifecycle entries are appended here with XADD in the format
seasons/lifecycle.py writes (id, type, at, data). The checks compare with a reference: the
events appended, the HMAC computed here with hashlib, the bytes counted where the receiver
wrote them, the worker's peak RSS from /proc.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from receivers import Raw, drip, endless, ok

from seasons import Seasons
from seasons.cli import cli
from seasons.cli.common import CliState
from seasons.clock import ManualClock
from seasons.config import ConfigError, Settings
from seasons.hooks import BACKOFF_BASE, BACKOFF_CAP, Hooks, Try, backoff, group_of
from seasons.http.jobs import job_stats_reader
from seasons.http.metrics import Metrics
from seasons.jobs.report import jobs_report
from seasons.jobs.worker import Worker

ROOT = Path(__file__).resolve().parent.parent
SECRET = "hook-secret-not-to-print"
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
# The type of the events the tests with a real worker append: one its closes do not (they
# append day_closed events of their own, which those hooks do not take).
KIND = "restore_done"


# --- the lifecycle entries and the receivers --------------------------------------------


def emit(r: Any, app: Seasons, kind: str, eid: str, data: dict[str, Any]) -> dict[str, Any]:
    """Append one lifecycle event as seasons/lifecycle.py does; the body a hook should get."""
    event = {"id": eid, "type": kind, "at": "2026-12-01T08:00:00Z", "data": data}
    fields = {**event, "data": json.dumps(data)}
    r.xadd(app.keys.lifecycle(), fields)
    return event


def events(r: Any, app: Seasons, n: int, kind: str = "day_closed") -> list[dict[str, Any]]:
    return [emit(r, app, kind, f"{kind}:kills:{i}", {"board": "kills", "n": i}) for i in range(n)]


class Receiver:
    """An HTTP receiver: answers 500 to the first ``fail`` requests, then 200; with
    ``hold``, the first request waits until :attr:`release` is set."""

    def __init__(self, fail: int = 0, hold: bool = False):
        self.fail, self.hold = fail, hold
        self.release, self.first = threading.Event(), threading.Event()
        self.seen: list[tuple[int, dict[str, str], bytes]] = []  # status, headers, body
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    n = len(receiver.seen)
                    status = 500 if n < receiver.fail else 200
                    receiver.seen.append((status, dict(self.headers), body))
                if n == 0 and receiver.hold:
                    receiver.first.set()
                    receiver.release.wait(20)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def delivered(self) -> dict[str, list[dict[str, Any]]]:
        """Event id -> the bodies answered 200, each checked against its signature."""
        out: dict[str, list[dict[str, Any]]] = {}
        with self.lock:
            seen = list(self.seen)
        for status, headers, body in seen:
            stamp = headers["X-Seasons-Timestamp"]
            mac = hmac.new(SECRET.encode(), stamp.encode() + b"." + body, hashlib.sha256)
            assert headers["X-Seasons-Signature"] == "sha256=" + mac.hexdigest()
            assert headers["Content-Type"] == "application/json"
            payload = json.loads(body)
            assert list(payload) == ["id", "type", "at", "data"]
            assert headers["X-Seasons-Event-Id"] == payload["id"]
            assert headers["X-Seasons-Event-Type"] == payload["type"]
            if status == 200:
                out.setdefault(payload["id"], []).append(payload)
        return out

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


class Silent:
    """A receiver that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.conns: list[socket.socket] = []
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.fixture
def receivers() -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def make(kind: type = Receiver, **kwargs: Any) -> Any:
        made.append(kind(**kwargs))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


def hook(url: str, name: str = "a", **extra: Any) -> dict[str, Any]:
    return {"name": name, "url": url, "secret": SECRET, **extra}


def poll(what: str, check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Wait for ``check()`` to be truthy (a bound on the wait, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# --- backoff --------------------------------------------------------------------------------


@pytest.mark.parametrize("attempts", [1, 2, 3, 8, 10, 11, 40, 2000])
def test_backoff_is_full_jitter_of_attempts_and_seed(attempts: int) -> None:
    ceiling = BACKOFF_CAP if attempts > 30 else min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempts - 1))
    for seed in range(20):
        expected = random.Random(seed).uniform(0, ceiling)
        assert backoff(attempts, random.Random(seed)) == expected
        assert 0 <= expected <= ceiling


# --- delivery through failures, on a test clock ---------------------------------------------


@pytest.mark.both_backends
def test_every_event_reaches_a_failing_receiver_signed_with_its_id(
    settings_factory, r, receivers
) -> None:
    flaky = receivers(fail=12)  # every first try (8) and 4 second ones
    picky = receivers()
    settings = settings_factory(
        hooks=[hook(flaky.url), hook(picky.url, "rewards", events=["rewards_ready"])]
    )
    clock = ManualClock(T0)
    app = Seasons(settings, clock=clock)
    hooks = Hooks(app.client, app.keys, settings, consumer="w1", clock=clock,
                  rng=random.Random(5))  # fmt: skip
    before = events(r, app, 2, "season_closing")  # before the hooks exist: never delivered
    for h in settings.hooks:
        hooks.ensure_group(h)
    sent = events(r, app, 6) + events(r, app, 2, "rewards_ready")
    waiting = jobs_report(app, clock()).hooks
    assert (waiting["a"].pending, waiting["rewards"].pending) == (8, 2)  # of their types
    tries: list[tuple[float, Try]] = []
    for _ in range(60):
        hooks.run()
        state = {k.decode(): v for k, v in r.hgetall(app.keys.hook("a")).items()}
        due = [Try.model_validate_json(v) for k, v in state.items() if k.startswith("try:")]
        tries += [(clock().timestamp(), t) for t in due]
        if not due:
            break
        # the first try due (a datetime rounds to the microsecond: one more)
        clock.set(datetime.fromtimestamp(min(t.next for t in due), UTC) + timedelta(microseconds=1))
    got = flaky.delivered()
    assert sorted(got) == sorted(e["id"] for e in sent)
    assert all(bodies == [e] for e in sent for bodies in [got[e["id"]]])
    assert not set(got) & {e["id"] for e in before}
    assert picky.delivered() == {e["id"]: [e] for e in sent if e["type"] == "rewards_ready"}
    for at, t in tries:  # each retry waited at most its backoff's ceiling
        assert 0 <= t.next - at <= min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (t.attempts - 1))
    assert max(t.attempts for _, t in tries) >= 2
    report = jobs_report(app, clock())
    assert report.hooks["a"].delivered == len(sent)
    assert (report.hooks["a"].pending, report.hooks["a"].failed) == (0, 0)
    assert (
        report.hooks["a"].last_error is not None
        and "HTTP 500" in report.hooks["a"].last_error.error
    )
    assert report.hooks["rewards"].delivered == 2 and report.hooks["rewards"].pending == 0
    app.close()


@pytest.mark.both_backends
def test_a_pass_is_bounded_and_resumes(settings_factory, r, receivers) -> None:
    ok = receivers()
    settings = settings_factory(hooks=[hook(ok.url)])
    clock = ManualClock(T0)
    app = Seasons(settings, clock=clock)
    hooks = Hooks(app.client, app.keys, settings, consumer="w1", clock=clock)
    hooks.ensure_group(settings.hooks[0])
    sent = events(r, app, 45)
    assert [hooks.run()["a"] for _ in range(4)] == [20, 20, 5, 0]
    assert sorted(ok.delivered()) == sorted(e["id"] for e in sent)
    app.close()


# --- a worker SIGKILLed mid-delivery --------------------------------------------------------


def worker_process(config: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    return subprocess.Popen(
        [sys.executable, "-c", "from seasons.cli import main; main()", "worker"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_worker_killed_mid_delivery_delivers_again_after_restart(
    settings_factory, r, receivers, redis_url, tmp_path
) -> None:
    held = receivers(hold=True)
    config = tmp_path / "seasons.toml"
    config.write_text(
        f'[redis]\nurl = "{redis_url}"\n[archive]\ndir = "{tmp_path / "archive"}"\n'
        "[worker]\nhooks_interval = 0.1\nheartbeat_interval = 1\nlock_ttl = 1\n"
        f'[[hooks]]\nname = "a"\nurl = "{held.url}"\nsecret = "{SECRET}"\ntimeout = 1\n'
        'events = ["restore_done"]\n'
    )
    settings = settings_factory(hooks=[hook(held.url, events=[KIND])])
    app = Seasons(settings)
    worker = worker_process(config)
    try:
        poll("the hook's group", lambda: _groups(r, app))
        sent = events(r, app, 3, KIND)
        assert held.first.wait(20), "no delivery started"
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        held.release.set()
        worker = worker_process(config)
        poll("every event", lambda: len(held.delivered()) == len(sent))
        poll("the acknowledgements", lambda: jobs_report(app, app.clock()).hooks["a"].pending == 0)
    finally:
        worker.terminate()
        worker.wait(20)
    got = held.delivered()
    assert sorted(got) == sorted(e["id"] for e in sent)
    assert all(body == e for e in sent for body in got[e["id"]])
    first = json.loads(held.seen[0][2])["id"]  # the request in hand at the kill: sent again
    assert sum(json.loads(body)["id"] == first for _, _, body in held.seen) >= 2
    app.close()


def _groups(r: Any, app: Seasons) -> list[str]:
    try:
        return [g["name"].decode() for g in r.xinfo_groups(app.keys.lifecycle())]
    except Exception:
        return []


# --- a receiver that never answers ----------------------------------------------------------


def test_a_silent_receiver_fails_visibly_and_holds_nothing_back(
    settings_factory, r, receivers, tmp_path
) -> None:
    """One request that waits its whole timeout (1.5 s) on a receiver that never answers;
    max_age (0.5 s) has passed when it fails, so the event is given up after that one try.
    Meanwhile the closes and the rollup keep running (every 0.05 s) beside it."""
    silent = receivers(Silent)
    settings = settings_factory(
        hooks=[hook(silent.url, timeout=1.5, max_age=0.5, events=[KIND])],
        archive={"dir": str(tmp_path / "archive")},
        worker={"hooks_interval": 0.05, "rollup_interval": 0.05, "heartbeat_interval": 0.5},
    )
    app = Seasons(settings)
    stop = threading.Event()
    worker = Worker(app, stop=stop)
    worker.hooks.ensure_group(settings.hooks[0])
    sent = events(r, app, 1, KIND)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()

    def runs(job: str) -> int:
        return jobs_report(app, app.clock()).jobs[job].runs

    try:
        poll("the request", lambda: silent.conns)
        during = {job: runs(job) for job in ("closes", "rollup")}
        poll("the failure", lambda: jobs_report(app, app.clock()).hooks["a"].failed == 1)
        # The request was in flight from the first poll to the second: other jobs ran.
        assert all(runs(job) >= during[job] + 2 for job in during), during
        assert jobs_report(app, app.clock()).jobs["hooks"].last_status == "ok"
    finally:
        stop.set()
        thread.join(20)
    a = jobs_report(app, app.clock()).hooks["a"]
    # the worker's own day_closed events, which this hook does not take, are not pending
    assert (a.failed, a.delivered, a.pending, a.retrying) == (1, 0, 0, 0)
    assert a.last_error is not None and a.last_error.final
    assert a.last_error.event == sent[0]["id"]
    assert "no answer within 1.5s" in a.last_error.error
    client = Seasons(settings)
    text = Metrics(job_stats=job_stats_reader(client)).render()[0].decode()
    assert 'seasons_hook_deliveries_total{hook="a",outcome="failed"} 1.0' in text
    assert 'seasons_hook_deliveries_total{hook="a",outcome="delivered"} 0.0' in text
    assert 'seasons_hook_pending{hook="a"} 0.0' in text
    assert 'seasons_hook_last_error_timestamp_seconds{hook="a"}' in text
    status = CliRunner().invoke(cli, ["status"], obj=CliState(settings=settings))
    assert "webhooks" in status.output and "given up" in status.output, status.output
    client.close()


# --- answers that never end, drip, or outlast the worker ----------------------------------


def vm_hwm(pid: int) -> int:
    """The process's peak resident set size, in bytes (VmHWM in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def worker_config(tmp_path: Path, redis_url: str, url: str, timeout: float) -> Path:
    config = tmp_path / "seasons.toml"
    config.write_text(
        f'[redis]\nurl = "{redis_url}"\n[archive]\ndir = "{tmp_path / "archive"}"\n'
        "[worker]\nhooks_interval = 0.1\nheartbeat_interval = 1\nlock_ttl = 1\n"
        f'[[hooks]]\nname = "a"\nurl = "{url}"\nsecret = "{SECRET}"\ntimeout = {timeout}\n'
        f'events = ["{KIND}"]\n'
    )
    return config


def test_an_endless_answer_is_read_no_further_than_a_few_kib(
    settings_factory, r, receivers, redis_url, tmp_path
) -> None:
    """A 200 whose body never ends (up to 128 MiB here, a bound for a worker that reads it
    all): a real worker counts the event delivered once, cuts the answer off at once, and its
    peak RSS hardly moves. The bytes are counted where the receiver writes them: what a
    worker that stops reading leaves unread in the socket buffers is counted too."""
    limit = 128 * 2**20
    endless_ = receivers(Raw, answers=lambda n: endless(limit))
    settings = settings_factory(hooks=[hook(endless_.url, events=[KIND])])
    app = Seasons(settings)
    worker = worker_process(worker_config(tmp_path, redis_url, endless_.url, timeout=3))
    try:
        poll("the hook's group", lambda: _groups(r, app))
        before = vm_hwm(worker.pid)
        events(r, app, 1, KIND)
        poll("the delivery", lambda: jobs_report(app, app.clock()).hooks["a"].delivered == 1)
        exchange = endless_.exchanges[0]
        assert exchange.done.wait(20), "the answer was never cut off"
        grown = vm_hwm(worker.pid) - before
    finally:
        worker.terminate()
        worker.wait(20)
    assert len(endless_.exchanges) == 1  # delivered: not retried
    assert exchange.sent < 16 * 2**20, exchange.sent
    assert exchange.ended is not None and exchange.ended - exchange.came < 3 + 5
    assert grown < 50 * 2**20, grown
    a = jobs_report(app, app.clock()).hooks["a"]
    assert (a.delivered, a.pending, a.retrying, a.failed) == (1, 0, 0, 0)
    app.close()


# The status line and headers dripped (no status by the deadline: the receiver is away), or a
# 200 whose body drips (the status came in time: delivered, the rest cut off at the deadline).
DRIP_HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
DRIP_BODY = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize(("head", "text", "delivered"), [
    (b"", DRIP_HEAD, 0), (DRIP_BODY, b"x" * 100, 1),
], ids=["status-dripped", "body-dripped"])  # fmt: skip
def test_a_dripping_receiver_is_cut_at_its_timeout_and_holds_no_other_hook_back(
    settings_factory, r, receivers, head: bytes, text: bytes, delivered: int
) -> None:
    """A receiver writing one byte a second (whose every read comes well within a per-read
    timeout) is cut off at its hook's 2 s timeout; the other hook, after it in the settings,
    gets all its events in the same pass while the dripping request is still open."""
    timeout = 2.0
    slow = receivers(Raw, answers=lambda n: drip(text, head=head, every=1.0, limit=20))
    fast = receivers(Raw, answers=lambda n: ok)
    settings = settings_factory(
        hooks=[hook(slow.url, "slow", timeout=timeout), hook(fast.url, "fast")]
    )
    app = Seasons(settings)
    hooks = Hooks(app.client, app.keys, settings, consumer="w1", clock=app.clock)
    for h in settings.hooks:
        hooks.ensure_group(h)
    sent = events(r, app, 3)
    began = time.monotonic()
    got = hooks.run()
    took = time.monotonic() - began
    assert took < timeout + 6, took
    assert got == {"slow": delivered, "fast": 3}
    assert sorted(json.loads(e.request)["id"] for e in fast.exchanges) == sorted(
        e["id"] for e in sent
    )
    # One request to the slow receiver: away, or its hook's time in this pass was up.
    assert len(slow.exchanges) == 1
    dripping = slow.exchanges[0]
    assert dripping.done.wait(5), "the dripping request was never closed"
    assert dripping.ended is not None and dripping.ended - dripping.came < timeout + 5
    assert max(e.came for e in fast.exchanges) < dripping.ended  # while it was open
    report = jobs_report(app, app.clock()).hooks
    assert (report["slow"].delivered, report["slow"].pending) == (delivered, 3 - delivered)
    assert (report["fast"].delivered, report["fast"].pending) == (3, 0)
    if not delivered:
        assert report["slow"].retrying == 1
        assert report["slow"].last_error is not None
        assert "no answer within 2s" in report["slow"].last_error.error
    app.close()


def test_a_worker_serves_the_healthy_hook_beside_a_drip_and_keeps_its_lock(
    settings_factory, r, receivers, tmp_path, caplog
) -> None:
    """A worker whose first hook's receiver drips (timeout 2 s) and whose second is healthy:
    the healthy hook gets its events while the drip is open, pass after pass the hooks job
    ends ok, and its lock (TTL 3 s here) is never lost."""
    slow = receivers(Raw, answers=lambda n: drip(DRIP_HEAD, every=1.0, limit=20))
    fast = receivers(Raw, answers=lambda n: ok)
    settings = settings_factory(
        hooks=[hook(slow.url, "slow", timeout=2, events=[KIND]),
               hook(fast.url, "fast", events=[KIND])],
        archive={"dir": str(tmp_path / "archive")},
        worker={"hooks_interval": 0.05, "heartbeat_interval": 0.5, "lock_ttl": 0.5},
    )  # fmt: skip
    app = Seasons(settings)
    stop = threading.Event()
    worker = Worker(app, stop=stop)
    for h in settings.hooks:
        worker.hooks.ensure_group(h)
    sent = events(r, app, 3, KIND)
    thread = threading.Thread(target=worker.run, daemon=True)
    with caplog.at_level(logging.WARNING):
        thread.start()
        try:
            poll("the healthy hook's events", lambda: len(fast.exchanges) == 3, timeout=10)
            poll("the dripping request", lambda: slow.exchanges)
            dripping = slow.exchanges[0]
            assert dripping.done.wait(10), "the dripping request was never closed"
            poll("a pass after it", lambda: jobs_report(app, app.clock()).jobs["hooks"].runs >= 2)
        finally:
            stop.set()
            thread.join(20)
    assert not thread.is_alive()
    assert dripping.ended is not None and max(e.came for e in fast.exchanges) < dripping.ended
    assert sorted(json.loads(e.request)["id"] for e in fast.exchanges) == sorted(
        e["id"] for e in sent
    )
    report = jobs_report(app, app.clock())
    assert report.jobs["hooks"].last_status == "ok"
    assert report.hooks["fast"].delivered == 3
    lost = [rec.getMessage() for rec in caplog.records if "lost" in rec.getMessage()]
    assert not lost, lost
    app.close()


def test_sigterm_aborts_a_dripping_delivery_which_is_delivered_after_restart(
    settings_factory, r, receivers, redis_url, tmp_path
) -> None:
    """SIGTERM of a real worker while its hook's receiver drips an answer under a 30 s timeout:
    it exits 0 within a few seconds, the event stays pending, and the next worker delivers it
    (the receiver answers 200 at once from its second request on)."""
    dripping = drip(DRIP_HEAD, every=1.0, limit=25)
    receiver = receivers(Raw, answers=lambda n: dripping if n == 0 else ok)
    config = worker_config(tmp_path, redis_url, receiver.url, timeout=30)
    settings = settings_factory(hooks=[hook(receiver.url, events=[KIND])])
    app = Seasons(settings)
    worker = worker_process(config)
    try:
        poll("the hook's group", lambda: _groups(r, app))
        sent = events(r, app, 1, KIND)
        poll("the request", lambda: receiver.exchanges)
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(8)  # not the 30 s timeout, nor the 25 s drip
        assert code == 0
        a = jobs_report(app, app.clock()).hooks["a"]
        assert (a.delivered, a.pending, a.failed) == (0, 1, 0)
        worker = worker_process(config)
        poll("the delivery", lambda: jobs_report(app, app.clock()).hooks["a"].delivered == 1)
    finally:
        worker.kill()
        worker.wait(20)
    assert [json.loads(e.request) for e in receiver.exchanges] == [sent[0], sent[0]]
    app.close()


# --- the documented verifier ----------------------------------------------------------------


def documented_verifier() -> Callable[..., Any]:
    """``verify`` as docs/operations.md#webhooks gives it to receivers to copy, run as written."""
    doc = (ROOT / "docs" / "operations.md").read_text()
    section = doc[doc.index("## Webhooks") :]
    start = section.index("```python\n") + len("```python\n")
    scope: dict[str, Any] = {}
    exec(section[start : section.index("```", start)], scope)
    return scope["verify"]


def test_the_documented_verifier_refuses_a_replay_with_a_changed_event_id(
    settings_factory, r, receivers
) -> None:
    """A request captured and replayed with another ``X-Seasons-Event-Id`` must not pass for
    another event: the verifier returns the signed body's event, and refuses headers that
    disagree with it; a receiver deduping by that event's id takes the event once."""
    receiver = receivers()
    settings = settings_factory(hooks=[hook(receiver.url)])
    app = Seasons(settings)
    hooks = Hooks(app.client, app.keys, settings, consumer="w1", clock=app.clock)
    hooks.ensure_group(settings.hooks[0])
    [event] = events(r, app, 1)
    assert hooks.run() == {"a": 1}
    [(_status, headers, body)] = receiver.seen
    verify = documented_verifier()
    assert verify(SECRET, headers, body) == event
    replays = [
        {**headers, "X-Seasons-Event-Id": "day_closed:kills:99"},
        {**headers, "X-Seasons-Event-Type": "season_closing"},
    ]
    assert [verify(SECRET, replay, body) for replay in replays] == [None, None]
    assert verify(SECRET, headers, body.replace(b'"n":0', b'"n":1')) is None
    assert verify("another secret", headers, body) is None
    stale = str(int(headers["X-Seasons-Timestamp"]) - 3600)
    mac = hmac.new(SECRET.encode(), stale.encode() + b"." + body, hashlib.sha256)
    signed = f"sha256={mac.hexdigest()}"
    old = {**headers, "X-Seasons-Timestamp": stale, "X-Seasons-Signature": signed}
    assert verify(SECRET, old, body) is None
    # The receiver the docs describe: it handles each verified event id once.
    handled: dict[str, int] = {}
    for sent in [headers, *replays, headers]:
        if (verified := verify(SECRET, sent, body)) is not None:
            handled[verified["id"]] = handled.get(verified["id"], 0) + 1
    assert handled == {event["id"]: 2}  # the exact replay is seen, and deduped by its id
    app.close()


# --- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hooks", "key", "says"),
    [
        ([{"url": "http://x", "secret": "s"}], "hooks[0].name", "missing"),
        ([hook("http://x", "A b")], "hooks[0].name", "a-z"),
        ([hook("ftp://x")], "hooks[0].url", "http:// or https://"),
        ([hook("http://")], "hooks[0].url", "with a host"),
        ([hook("http://x", secret="")], "hooks[0].secret", "must not be empty"),
        (
            [hook("http://x", events=["day_closed", "day_close"])],
            "hooks[0].events",
            "unknown event type 'day_close': the types are day_closed, season_closing",
        ),
        ([hook("http://x", timeout=0)], "hooks[0].timeout", "positive"),
        ([hook("http://x", max_age="a day")], "hooks[0].max_age", "duration"),
        ([hook("http://x", bogus=1)], "hooks[0].bogus", ""),
        ([hook("http://x"), hook("http://y")], "hooks", "repeated: a"),
    ],
)
def test_bad_hooks_are_named(settings_factory, hooks: Any, key: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        settings_factory(hooks=hooks)
    message = str(info.value)
    assert key in message and says in message, message


def test_secrets_and_urls_are_not_printed(settings_factory, tmp_path) -> None:
    url = f"https://app:{SECRET}@example.com/hook"
    with pytest.raises(ConfigError) as info:
        settings_factory(hooks=[hook("ftp://" + SECRET, secret=[SECRET])])
    assert SECRET not in str(info.value)
    settings: Settings = settings_factory(hooks=[hook(url)])
    assert settings.hooks[0].max_age == timedelta(days=1)
    assert settings.hooks[0].timeout == timedelta(seconds=10)
    shown = CliRunner().invoke(cli, ["config"], obj=CliState(settings=settings))
    assert shown.exit_code == 0 and "hooks" in shown.output
    assert SECRET not in shown.output


def test_cli_exits_2_on_a_bad_hook(tmp_path) -> None:
    config = tmp_path / "seasons.toml"
    config.write_text(f'[[hooks]]\nname = "a"\nurl = "mailto:x"\nsecret = "{SECRET}"\n')
    result = CliRunner().invoke(cli, ["--config", str(config), "config"], obj=CliState(), env={})
    assert result.exit_code == 2 and "hooks[0].url" in result.stderr
    assert SECRET not in result.output


def test_group_name() -> None:
    assert group_of("a") == "hook:a"
