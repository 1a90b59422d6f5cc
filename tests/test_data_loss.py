"""Redis loses Seasons' data under a running worker: it notices, keeps the archives on disk as
they are, and stops closing until an operator restores or acknowledges (safe mode).

The findings: Redis restarted empty (killed, FLUSHALL) after season S1 was archived, and the
worker closed S1 again and exported the empty archive key over S1.jsonl.gz; an old RDB made
the close run again over the existing files; an evicting ``maxmemory-policy`` went unnoticed.
The worker runs as a real process (``Worker.run`` with its scheduler, on a fixed instant of a
ManualClock after S1 ended, or ``seasons worker`` itself for the eviction checks) against a
private redis-server that the tests kill and start; expectations are the bytes on disk before
the fault and the reference model's standings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from redis_server import RedisServer
from worker_support import BOARDS, Sim, dump_db, load_db, local, season_settings, today, toml_text

from seasons import Seasons
from seasons.cli import cli
from seasons.cli.common import CliState
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BackendUnavailable
from seasons.jobs.integrity import (
    Integrity,
    mark_recovered,
    marker_path,
    read_disk_marker,
    read_safe_mode,
)
from seasons.keys import Keys

ROOT = Path(__file__).resolve().parent.parent
NS = "seasons"
S1 = "S1"
FAST = {
    "heartbeat_interval": 0.2, "rollup_interval": 0.3, "sweep_interval": 0.5,
    "backoff_initial": 0.05, "backoff_max": 0.2, "lock_ttl": 2.0,
}  # fmt: skip
RUN_WORKER = """
import logging, sys
from datetime import datetime
from seasons.config import load_settings
from seasons.jobs.worker import Worker
from seasons import Seasons
from seasons.clock import ManualClock

logging.basicConfig(level="INFO", stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
clock = ManualClock(datetime.fromisoformat(sys.argv[1]))
sys.exit(Worker(Seasons(load_settings(), clock=clock)).run())
"""


# --- helpers ----------------------------------------------------------------------------------


def poll(what: str, found: Callable[[], Any], log: list[str] | None = None, timeout: float = 30):
    """``found()`` once it is truthy, within a deadline (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = found()
        except (redis.ConnectionError, BackendUnavailable):
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{''.join(log or [])[-4000:]}")


class Proc:
    """A worker process with its stderr lines collected."""

    def __init__(self, args: list[str], env: dict[str, str]):
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, text=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def saw(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def wait_for(self, text: str, timeout: float = 30) -> None:
        poll(repr(text), lambda: self.saw(text), self.lines, timeout)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def environment(settings: Settings, tmp_path: Path, **extra: str) -> dict[str, str]:
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    return env | {"SEASONS_CONFIG": str(config), **extra}


def archive_files(settings: Settings, season: str = S1) -> dict[str, bytes]:
    out = {}
    for board in sorted(settings.boards):
        folder = settings.archive.dir / NS / board
        for name in (f"{season}.jsonl.gz", f"{season}.manifest.json"):
            out[f"{board}/{name}"] = (folder / name).read_bytes()
    return out


def cli_run(settings: Settings, at: datetime, *args: str) -> Any:
    result = CliRunner().invoke(
        cli, list(args), obj=CliState(clock=ManualClock(at), settings=settings)
    )
    return result


def heartbeat(client: redis.Redis) -> dict[str, Any] | None:
    raw = client.get(f"{NS}:heartbeat")
    return json.loads(raw) if raw else None


def ran_closes_since(client: redis.Redis, runs: int) -> Callable[[], bool]:
    """True once the closes job has run (and been skipped by safe mode) ``runs`` more times."""
    first: list[int] = []

    def check() -> bool:
        job = client.hgetall(f"{NS}:job:closes")
        if job.get(b"last_status") != b"safe_mode":
            return False
        count = int(job.get(b"runs", 0))
        if not first:
            first.append(count)
        return count >= first[0] + runs

    return check


# --- the marker and safe mode, one check at a time -----------------------------------------


@pytest.fixture
def settings(settings_factory, tmp_path: Path) -> Settings:
    return season_settings(settings_factory, tmp_path / "archive")


def integrity(settings: Settings) -> tuple[Seasons, Integrity]:
    app = Seasons(settings)
    return app, Integrity(app.client, settings, app.keys, "test-worker")


@pytest.mark.both_backends
def test_a_fresh_namespace_gets_a_marker_in_redis_and_on_disk(settings, r) -> None:
    app, check = integrity(settings)
    assert check.check(datetime.now().astimezone()) is None
    raw = r.get(f"{NS}:marker")
    assert raw is not None and r.ttl(f"{NS}:marker") == -1
    assert json.loads(raw)["id"] and json.loads(raw)["created_at"]
    assert read_disk_marker(settings) == raw.decode()
    assert marker_path(settings) == settings.archive.dir / NS / "marker.json"
    # A lost disk copy is written again from Redis.
    marker_path(settings).unlink()
    assert check.check(datetime.now().astimezone()) is None
    assert read_disk_marker(settings) == raw.decode()
    app.close()


def manifest_without_file(settings: Settings) -> None:
    """An archive manifest of season S0 on disk (its data file is not needed here)."""
    folder = settings.archive.dir / NS / "kills"
    folder.mkdir(parents=True)
    (folder / "S0.manifest.json").write_text(json.dumps({
        "board": "kills", "season": "S0", "count": 1, "score_sum": 1.0, "sha256": "0" * 64,
        "created_at": "2026-01-01T00:00:00Z",
    }))  # fmt: skip


def test_an_upgrade_with_every_archive_key_present_is_not_data_loss(settings, r) -> None:
    app, check = integrity(settings)
    manifest_without_file(settings)
    r.zadd(app.keys.archive("kills", "S0"), {"ann": 1})
    assert check.check(datetime.now().astimezone()) is None
    assert r.exists(f"{NS}:marker") and marker_path(settings).exists()
    app.close()


def test_an_archive_without_its_key_and_no_marker_is_data_loss(settings, r) -> None:
    app, check = integrity(settings)
    manifest_without_file(settings)
    safe = check.check(datetime.now().astimezone())
    assert safe is not None and safe["reason"] == "data_loss"
    assert "S0.manifest.json" in safe["message"]
    assert not r.exists(f"{NS}:marker")  # no marker written over the evidence
    assert read_safe_mode(r, app.keys) == safe
    app.close()


def test_a_marker_this_process_saw_and_lost_is_data_loss(settings, r) -> None:
    app, check = integrity(settings)
    check.check(datetime.now().astimezone())
    r.delete(f"{NS}:marker")
    marker_path(settings).unlink()  # even without the disk copy
    safe = check.check(datetime.now().astimezone())
    assert safe is not None and safe["reason"] == "data_loss"
    app.close()


@pytest.mark.both_backends
def test_another_redis_is_a_marker_mismatch_until_recovered(settings, r) -> None:
    app, check = integrity(settings)
    check.check(datetime.now().astimezone())
    r.set(f"{NS}:marker", json.dumps({"id": "someone-else", "created_at": "x"}))
    safe = check.check(datetime.now().astimezone())
    assert safe is not None and safe["reason"] == "marker_mismatch"
    assert "someone-else" in safe["message"] and str(marker_path(settings)) in safe["message"]
    # Redis loses the safe-mode key: it is written again, with when it was first detected.
    r.delete(f"{NS}:safe_mode")
    assert check.check(datetime.now().astimezone()) == safe
    assert read_safe_mode(r, app.keys) == safe
    mark_recovered(r, app.keys, settings, reason="acknowledged")
    assert read_safe_mode(r, app.keys) is None
    assert check.check(datetime.now().astimezone()) is None
    assert read_disk_marker(settings) == r.get(f"{NS}:marker").decode()
    app.close()


# --- Redis restarted empty under a running worker ------------------------------------------


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        yield s


def played(
    settings_factory, server: RedisServer, tmp_path: Path, **overrides: Any
) -> tuple[Settings, Sim, datetime]:
    """S1 of two boards played to its end; S1 not closed yet. Returns the instant to close at."""
    settings = season_settings(
        settings_factory, tmp_path / "archive", redis={"url": server.url}, worker=FAST,
        **overrides,
    )  # fmt: skip
    sim = Sim(settings, seed=3)
    for i in range(7):
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 12), n=5)
    day8 = today() + timedelta(days=7)
    sim.play_day(day8, hours=(0.5,), n=2)
    sim.app.close()
    return settings, sim, local(day8, 1.25)


@pytest.mark.parametrize("fault", ["restart_empty", "flushall"])
def test_redis_emptied_under_a_running_worker(
    fault: str, settings_factory, server: RedisServer, tmp_path: Path
) -> None:
    settings, sim, at = played(settings_factory, server, tmp_path)
    client = server.client()
    worker = Proc(
        [sys.executable, "-c", RUN_WORKER, at.isoformat()], environment(settings, tmp_path)
    )
    try:
        poll(
            "S1 archived",
            lambda: client.hget(f"{NS}:job:close_season:S1", "finished"),
            worker.lines,
        )
        assert worker.saw("closed season S1")
        before = archive_files(settings)
        expected = {b: sim.expected_rows(b, S1) for b in sorted(settings.boards)}
        assert all(expected.values())

        if fault == "restart_empty":
            server.kill()
            server.start()
            client.close()
            client = server.client()
        else:
            client.flushall()

        safe = poll("safe mode", lambda: read_safe_mode(client, Keys(NS)), worker.lines)
        assert safe["reason"] == "data_loss" and "marker" in safe["message"]
        poll("a heartbeat in safe mode", lambda: (heartbeat(client) or {}).get("safe_mode"))
        poll("two closes passes skipped", ran_closes_since(client, 2), worker.lines)
        # No close ran: the run record, the season's state and the archive key stay gone, and
        # the files on disk are byte for byte what the first close wrote.
        assert not client.exists(f"{NS}:job:close_season:S1")
        for board in settings.boards:
            assert client.hget(f"{NS}:{{{board}}}:state", "season:S1") is None
            assert not client.exists(f"{NS}:{{{board}}}:archive:S1")
        assert archive_files(settings) == before
        assert worker.saw("ERROR") and worker.saw("SAFE MODE (data_loss)")

        status = cli_run(settings, at, "status", "--json")
        assert status.exit_code == 0, status.output
        report = json.loads(status.output)
        assert report["safe_mode"]["reason"] == "data_loss"
        assert report["worker"]["safe_mode"]["reason"] == "data_loss"
        table = cli_run(settings, at, "status")
        assert "SAFE MODE (data_loss)" in table.output and "seasons restore --all" in table.output

        # The operator restores the archives and marks the namespace recovered.
        for board in sorted(settings.boards):
            file = settings.archive.dir / NS / board / "S1.jsonl.gz"
            restored = cli_run(settings, at, "restore", str(file))
            assert restored.exit_code == 0, restored.output
        with Seasons(settings) as app:
            mark_recovered(app.client, app.keys, settings, reason="restored")
        poll(
            "the worker out of safe mode",
            lambda: "safe_mode" not in (heartbeat(client) or {"safe_mode": 1}),
            worker.lines,
        )
        poll(
            "S1 closed again",
            lambda: client.hget(f"{NS}:job:close_season:S1", "finished"),
            worker.lines,
        )
        assert archive_files(settings) == before
        with Seasons(settings, clock=ManualClock(at)) as app:
            for board, rows in expected.items():
                page = app.top(board, "season", period=S1, limit=1000)
                assert [(e.rank, e.member, e.score) for e in page.entries] == [
                    (rank, member, score) for rank, member, score, _ in rows
                ]
        assert worker.stop() == 0
    finally:
        worker.kill()
        client.close()


# --- claims and results across a data loss -----------------------------------------------------

# The first matching tier wins: kills (each member its own rank) and laps (shared ranks).
REWARDS = {
    "kills": [{"ranks": "1", "reward": "gold"}, {"ranks": "2-3", "reward": "silver"},
              {"top_percent": 50, "reward": "bronze"}],
    "laps": [{"ranks": "1", "reward": "gold"}, {"top_percent": 60, "reward": "bronze"}],
}  # fmt: skip


def test_claims_and_results_come_back_as_they_stood(
    settings_factory, server: RedisServer, tmp_path: Path
) -> None:
    boards = {b: {**cfg, "rewards": REWARDS[b]} for b, cfg in BOARDS.items()}
    settings, sim, at = played(settings_factory, server, tmp_path, boards=boards)
    client = server.client()
    worker = Proc(
        [sys.executable, "-c", RUN_WORKER, at.isoformat()], environment(settings, tmp_path)
    )
    app = Seasons(settings, clock=ManualClock(at))
    try:
        poll(
            "S1 archived",
            lambda: client.hget(f"{NS}:job:close_season:S1", "finished"),
            worker.lines,
        )
        results = {b: f"{NS}:{{{b}}}:results:S1" for b in sorted(settings.boards)}
        claims = {b: f"{NS}:{{{b}}}:claims:S1" for b in sorted(settings.boards)}
        # The close's ranks, from the reference model: rank 1 of each board is forgotten.
        expected = {b: sim.expected_rows(b, S1) for b in sorted(settings.boards)}
        first = {b: rows[0][1] for b, rows in expected.items()}
        rank, second = next((r, m) for r, m, _, _ in expected["kills"] if m not in first.values())
        assert rank in (2, 3)  # silver, and its rank must not move up
        paid = app.claim("kills", S1, second, claim_id="pay-2")
        assert (paid.already_claimed, paid.rank, paid.reward) == (False, rank, "silver")
        app.claim("kills", S1, first["kills"], claim_id="pay-1")
        for member in sorted(set(first.values())):
            app.forget(member)
        log = settings.archive.dir / NS / "kills" / "S1.claims.jsonl"
        logged = [json.loads(line) for line in log.read_text().splitlines()]
        assert [(c["member"], c["claim_id"], c["reward"]) for c in logged] == [
            (second, "pay-2", "silver")
        ]
        # What Redis held before the loss: the close's results, less the forgotten members.
        held = {b: client.hgetall(k) for b, k in results.items()}
        held_claims = {b: client.hgetall(k) for b, k in claims.items()}
        for b, rows in expected.items():
            kept = {m.encode(): rank for rank, m, _, _ in rows if m not in first.values()}
            assert {m: json.loads(v)["rank"] for m, v in held[b].items() if m} == kept
        assert json.loads(held["kills"][second.encode()])["reward"] == "silver"

        client.flushall()
        poll("safe mode", lambda: read_safe_mode(client, Keys(NS)), worker.lines)
        restored = cli_run(settings, at, "restore", "--all")
        assert restored.exit_code == 0, restored.output
        assert "safe mode is over" in restored.output

        # Results and claims are what they were, byte for byte, ranks and rewards included.
        assert {b: client.hgetall(k) for b, k in results.items()} == held
        assert {b: client.hgetall(k) for b, k in claims.items()} == held_claims
        again = app.claim("kills", S1, second, claim_id="pay-3")
        assert (again.already_claimed, again.claimed_at) == (True, paid.claimed_at)
        resent = app.claim("kills", S1, second, claim_id="pay-2")
        assert (resent.already_claimed, resent.rank, resent.reward) == (False, rank, "silver")
        poll(
            "the worker out of safe mode",
            lambda: "safe_mode" not in (heartbeat(client) or {"safe_mode": 1}),
            worker.lines,
        )
        assert worker.stop() == 0
    finally:
        worker.kill()
        app.close()
        client.close()


# --- an old RDB: the close runs again over the files it wrote -----------------------------------


def test_an_old_rdb_makes_the_close_meet_its_files(settings_factory, r, tmp_path: Path) -> None:
    settings = season_settings(
        settings_factory, tmp_path / "archive", boards={"kills": BOARDS["kills"]}
    )  # fmt: skip
    sim = Sim(settings, seed=8)
    for i in range(6):
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 12), n=5)
    old = dump_db(r)  # the last RDB before the season's last day
    sim.play_day(today() + timedelta(days=6), hours=(0.5, 12), n=5)
    day8 = today() + timedelta(days=7)
    sim.play_day(day8, hours=(0.5, 1.25), n=2)
    assert r.hget(f"{NS}:job:close_season:S1", "finished")
    before = archive_files(settings)

    load_db(r, old)  # Redis restarts from that RDB
    sim.worker.tick(sim.clock())
    job = {k.decode(): v.decode() for k, v in r.hgetall(f"{NS}:job:closes").items()}
    assert job["last_status"] == "error"
    assert "ArchiveExists" in job["last_error"] and "already exists" in job["last_error"]
    assert "S1.jsonl.gz" in job["last_error"] or "S1.manifest.json" in job["last_error"]
    safe = read_safe_mode(r, sim.app.keys)
    assert safe is not None and safe["reason"] == "archive_conflict"
    assert archive_files(settings) == before
    # Later passes close nothing and leave the files alone.
    sim.clock.advance(timedelta(minutes=5))
    sim.worker.tick(sim.clock())
    assert r.hget(f"{NS}:job:closes", "last_status") == b"safe_mode"
    assert r.hget(f"{NS}:{{kills}}:state", "season:S1") != b"archived"
    assert archive_files(settings) == before
    sim.close()


# --- eviction -----------------------------------------------------------------------------------


def worker_cli(settings: Settings, tmp_path: Path, **extra: str) -> Proc:
    args = [sys.executable, "-c", "from seasons.cli import main; main()", "worker"]
    return Proc(args, environment(settings, tmp_path, **extra))


def test_an_evicting_redis_is_refused_at_start_unless_allowed(settings_factory, tmp_path) -> None:
    with RedisServer(args=["--maxmemory-policy", "allkeys-lru"]) as lru:
        settings = season_settings(
            settings_factory, tmp_path / "archive", redis={"url": lru.url}, worker=FAST
        )  # fmt: skip
        refused = worker_cli(settings, tmp_path)
        assert refused.proc.wait(timeout=30) == 2
        refused.wait_for("maxmemory-policy is 'allkeys-lru'")
        client = lru.client()
        assert not client.exists(f"{NS}:heartbeat")

        allowed = worker_cli(settings, tmp_path, SEASONS_REDIS__ALLOW_EVICTION="true")
        try:
            allowed.wait_for("redis.allow_eviction is set")
            beat = poll("a heartbeat", lambda: heartbeat(client), allowed.lines)
            assert beat["redis"]["policy"] == "allkeys-lru"
            assert beat["redis"]["eviction_allowed"] is True
            allowed_settings = season_settings(
                settings_factory, tmp_path / "archive",
                redis={"url": lru.url, "allow_eviction": True},
            )  # fmt: skip
            status = cli_run(allowed_settings, datetime.now().astimezone(), "status")
            assert "allkeys-lru" in status.output and "warning:" in status.output
            assert allowed.stop() == 0
        finally:
            allowed.kill()
            client.close()


def test_a_policy_switched_to_evicting_stops_the_worker(settings_factory, server, tmp_path) -> None:
    settings = season_settings(
        settings_factory, tmp_path / "archive", redis={"url": server.url}, worker=FAST
    )  # fmt: skip
    client = server.client()
    worker = worker_cli(settings, tmp_path)
    try:
        beat = poll("a heartbeat", lambda: heartbeat(client), worker.lines)
        info = client.info("memory")
        assert beat["redis"]["policy"] == "noeviction" == info["maxmemory_policy"]
        assert beat["redis"]["maxmemory"] == info["maxmemory"]
        assert beat["redis"]["used_memory"] > 0 and beat["redis"]["eviction_allowed"] is False
        client.config_set("maxmemory-policy", "allkeys-lru")
        assert worker.proc.wait(timeout=30) == 2
        assert worker.saw("ERROR") and worker.saw("maxmemory-policy is 'allkeys-lru'")
    finally:
        worker.kill()
        client.close()
