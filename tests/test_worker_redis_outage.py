"""Redis goes away during a job and comes back: the worker logs, backs off, retries and
completes; the long-lived worker never exits, and SIGTERM still stops it with status 0.

These tests use a redis-server of their own that saves its data set when stopped (SIGTERM
with a save point) and loads it when started again, as a production server with
persistence would.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from redis_server import RedisServer
from reference import key as ref_key
from reference import zset
from worker_support import Sim, file_rows, local, season_settings, today, toml_text

from seasons.archives import Archives

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer(args=["--save", "3600 1"]) as s:
        yield s


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    if not server.running:
        server.start()
    c = server.client()
    c.flushall()
    yield c
    c.close()


def test_close_rides_out_an_outage(server, client, settings_factory, tmp_path: Path, caplog):
    settings = season_settings(
        settings_factory, tmp_path / "archive", redis={"url": server.url},
        worker={"backoff_initial": 0.1, "backoff_max": 0.4},
    )  # fmt: skip
    sim = Sim(settings, seed=5)
    for i in range(7):
        sim.play_day(today() + timedelta(days=i))
    day8 = today() + timedelta(days=7)
    sim.play_day(day8, hours=(0.5,))
    sim.clock.set(local(day8, 1.25))

    back = threading.Event()
    outage = threading.Event()

    def restart() -> None:
        server.start()
        back.set()

    def fault(name: str) -> None:
        # Redis stops in the middle of the season close, and is back a second later.
        if name == "close_season:S1/files:kills:start" and not outage.is_set():
            outage.set()
            server.stop()
            threading.Timer(1.0, restart).start()

    sim.worker.fault = fault
    caplog.set_level(logging.WARNING, logger="seasons.jobs.worker")
    sim.worker.tick(sim.clock())  # returns only once everything due is done
    assert outage.is_set() and back.is_set()

    retries = [r.getMessage() for r in caplog.records if "Redis is unreachable" in r.getMessage()]
    assert retries  # logged (and backed off; the process test below sees it grow)
    delays = [float(m.rsplit("retrying in ", 1)[1].rstrip("s")) for m in retries]
    assert delays == sorted(delays) and max(delays) <= 0.4  # backing off, capped

    archives = Archives(sim.app.client, sim.app.scripts, settings, sim.app.keys)
    for board in settings.boards:
        assert client.hget(f"seasons:{{{board}}}:state", "season:S1") == b"archived"
        archives.verify(board, "S1", sim.app.keys.season(board, "S1"))
        path = tmp_path / "archive" / "seasons" / board / "S1.jsonl.gz"
        assert file_rows(path) == sim.expected_rows(board, "S1")
        live = zset(client, ref_key("seasons", board, "season", "S2"))
        assert live == sim.model.board(board, "season", "S2")
    # And the worker carries on as before.
    sim.play_day(day8, hours=(9,))
    sim.close()


def _lines(stream, sink: queue.Queue[str]) -> None:
    for line in stream:
        sink.put(line)


def _start_worker(
    settings, tmp_path: Path, **env_extra: str
) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """``seasons worker`` in a process of its own, configured by a TOML file of ``settings``
    (and ``env_extra``); its stderr lines arrive in the queue."""
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env |= {"SEASONS_CONFIG": str(config), **env_extra}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from seasons.cli import main; main()", "worker"],
        cwd=ROOT, env=env, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    log: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, log), daemon=True).start()
    return proc, log


def _wait_for(sink: queue.Queue[str], text: str, seen: list[str], timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = sink.get(timeout=0.1)
        except queue.Empty:
            continue
        seen.append(line)
        if text in line:
            return line
    raise AssertionError(f"no {text!r} in the worker's log:\n{''.join(seen)}")


def test_worker_process_never_exits_on_an_outage(server, client, settings_factory, tmp_path):
    settings = season_settings(
        settings_factory, tmp_path / "archive", redis={"url": server.url},
        worker={
            "heartbeat_interval": 0.2, "rollup_interval": 0.5, "sweep_interval": 1,
            "backoff_initial": 0.1, "backoff_max": 0.5,
        },
    )  # fmt: skip
    proc, log = _start_worker(settings, tmp_path)
    seen: list[str] = []
    try:
        _wait_for(log, "worker", seen)  # started
        deadline = time.monotonic() + 20
        while not client.exists("seasons:heartbeat") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.exists("seasons:heartbeat")

        server.stop()
        _wait_for(log, "Redis is unreachable", seen)
        _wait_for(log, "Redis is unreachable", seen)  # and again, after backing off
        assert proc.poll() is None
        server.start()
        fresh = server.client()
        fresh.delete("seasons:heartbeat")  # the one saved before the outage
        deadline = time.monotonic() + 20
        while not fresh.exists("seasons:heartbeat") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert fresh.exists("seasons:heartbeat"), "".join(seen)
        assert proc.poll() is None

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert not fresh.exists("seasons:heartbeat")  # deleted on the way out
        fresh.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _dead_cluster_url() -> str:
    """A cluster URL on a port where nothing listens."""
    from redis_server import free_port

    return f"redis://127.0.0.1:{free_port()}/0"


def test_worker_process_waits_for_an_unreachable_cluster_at_start(settings_factory, tmp_path):
    """A cluster client connects when it is built: with no node answering, ``seasons worker``
    keeps trying (backing off) instead of exiting, and SIGTERM still ends it with status 0."""
    settings = season_settings(
        settings_factory, tmp_path / "archive", redis={"url": _dead_cluster_url()},
        worker={"backoff_initial": 0.1, "backoff_max": 0.3},
    )  # fmt: skip
    proc, log = _start_worker(settings, tmp_path, SEASONS_REDIS__CLUSTER="true")
    seen: list[str] = []
    try:
        for _ in range(4):  # still trying, with growing delays up to the cap
            _wait_for(log, "unreachable at start", seen)
        assert proc.poll() is None
        delays = [
            float(line.rsplit("trying again in ", 1)[1].strip().rstrip("s"))
            for line in seen
            if "unreachable at start" in line
        ]
        assert delays[:3] == [0.1, 0.2, 0.3] and max(delays) == 0.3
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_worker_comes_up_once_the_cluster_answers(redis_cluster, settings_factory, tmp_path):
    """The first builds meet no node; once one answers, the worker runs (heartbeat)."""
    from seasons import Seasons
    from seasons.jobs.worker import run_worker

    settings = season_settings(
        settings_factory, tmp_path / "archive",
        redis={"url": redis_cluster.url, "cluster": True},
        worker={"backoff_initial": 0.05, "backoff_max": 0.1, "heartbeat_interval": 0.2},
    )  # fmt: skip
    dead = settings.model_copy(
        update={"redis": settings.redis.model_copy(update={"url": _dead_cluster_url()})}
    )
    builds: list[str] = []

    def build() -> Seasons:
        builds.append("dead" if len(builds) < 2 else "live")
        return Seasons(dead if builds[-1] == "dead" else settings)

    redis_cluster.flush()
    stop = threading.Event()
    outcome: list[int] = []
    runner = threading.Thread(target=lambda: outcome.append(run_worker(build, dead, stop=stop)))
    runner.start()
    admin = redis_cluster.client()
    try:
        deadline = time.monotonic() + 20
        while not admin.exists("seasons:heartbeat") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert admin.exists("seasons:heartbeat")
    finally:
        stop.set()
        runner.join(timeout=20)
        admin.close()
    assert builds == ["dead", "dead", "live"] and outcome == [0]
