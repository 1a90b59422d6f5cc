"""Webhooks (seasons.hooks): every lifecycle event reaches each hook's receiver, signed, with
its stable id, through failures, a SIGKILLed worker and a receiver that never answers.

Receivers are real HTTP servers on 127.0.0.1 in threads of the test; the lifecycle entries are
appended here with XADD in the format seasons/lifecycle.py writes (id, type, at, data). The
checks compare with a reference: the events appended, the HMAC computed here with hashlib.
"""

from __future__ import annotations

import hashlib
import hmac
import json
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
    hooks.close()
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
    hooks.close()
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
