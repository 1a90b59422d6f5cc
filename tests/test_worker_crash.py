"""Closes survive SIGKILL at every step boundary, and two workers archive a season once.

The close runs in a subprocess (one worker tick at a fixed instant of a ManualClock) with
``SEASONS_FAULT_AT=<checkpoint>``: the process SIGKILLs itself there (or, with
``SEASONS_FAULT=pause``, prints ``PAUSED`` and waits for a line on stdin).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from reference import key as ref_key
from reference import zset
from worker_support import (
    BOARDS,
    TICK_DRIVER,
    Sim,
    checkpoints,
    file_rows,
    local,
    season_settings,
    today,
    toml_text,
)

from seasons import Seasons
from seasons.archives import Archives
from seasons.config import Settings

ROOT = Path(__file__).resolve().parent.parent
BOARD = "laps"  # trimmed, shared ranks: the board with the most to get wrong
# Reward tiers on it, so that the close has a results step (results:laps).
TIERS = [{"ranks": "1", "reward": "gold"}, {"top_percent": 50, "reward": "silver"}]
S1 = "S1"


class Setup:
    def __init__(self, settings: Settings, env: dict[str, str], at: datetime, expected: Any,
                 sim: Sim):  # fmt: skip
        self.settings, self.env, self.at, self.expected, self.sim = settings, env, at, expected, sim


@pytest.fixture
def setup(settings_factory, r, tmp_path: Path) -> Setup:
    """S1 played to its end with a worker; its last day and the season not yet closed."""
    settings = season_settings(
        settings_factory, tmp_path / "archive", boards={BOARD: {**BOARDS[BOARD], "rewards": TIERS}},
        worker={"lock_ttl": 1.0},
    )  # fmt: skip
    sim = Sim(settings, seed=11)
    for i in range(7):
        sim.play_day(today() + timedelta(days=i))
    day8 = today() + timedelta(days=7)
    sim.play_day(day8, hours=(0.5,))
    sim.app.close()
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    return Setup(settings, env, local(day8, 1.25), sim.expected_rows(BOARD, S1), sim)


def tick(
    setup: Setup,
    *,
    fault: str | None = None,
    action: str = "kill",
    trace: bool = False,
    extra: dict[str, str] | None = None,
    wait: bool = True,
) -> Any:
    env = dict(setup.env, **(extra or {}))
    if fault:
        env["SEASONS_FAULT_AT"], env["SEASONS_FAULT"] = fault, action
    if trace:
        env["SEASONS_FAULT_TRACE"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-c", TICK_DRIVER, setup.at.isoformat()], cwd=ROOT, env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    if not wait:
        return proc
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def archive_dir(setup: Setup) -> Path:
    return setup.settings.archive.dir / "seasons" / BOARD


def assert_archived_once(setup: Setup, r: redis.Redis) -> None:
    """Complete and verified, exactly one archive, nothing lost."""
    assert r.hget(f"seasons:{{{BOARD}}}:state", "season:S1") == b"archived"
    assert r.hget("seasons:job:close_season:S1", "finished") is not None
    assert sorted(r.scan_iter(match=f"seasons:{{{BOARD}}}:archive:*")) == [
        f"seasons:{{{BOARD}}}:archive:S1".encode()
    ]
    assert sorted(p.name for p in archive_dir(setup).iterdir()) == [
        "S1.jsonl.gz", "S1.manifest.json",
    ]  # fmt: skip
    assert file_rows(archive_dir(setup) / "S1.jsonl.gz") == setup.expected
    with Seasons(setup.settings) as app:
        archives = Archives(app.client, app.scripts, app.settings, app.keys)
        manifest = archives.verify(BOARD, S1, app.keys.season(BOARD, S1))
    assert manifest.count == len(setup.expected)
    # One set of results: the expected standings, each with its tier (shared ranks: by rank).
    assert sorted(r.scan_iter(match=f"seasons:{{{BOARD}}}:results:*")) == [
        f"seasons:{{{BOARD}}}:results:S1".encode()
    ]
    results = {
        k.decode(): json.loads(v) for k, v in r.hgetall(f"seasons:{{{BOARD}}}:results:S1").items()
    }
    summary = results.pop("")
    total = len(setup.expected)
    assert summary["total"] == total and summary["provisional"] is False
    assert results == {
        m: {"rank": rank, "score": score, "reward": expected_reward(rank, total)}
        for rank, m, score, _ in setup.expected
    }
    with gzip.open(archive_dir(setup) / "S1.jsonl.gz", "rt") as f:
        lines = [json.loads(x) for x in f]
    assert {x["member"]: x["reward"] for x in lines} == {m: x["reward"] for m, x in results.items()}
    assert not list(r.scan_iter(match=f"seasons:{{{BOARD}}}:claims:*"))
    model = setup.sim.model
    assert zset(r, ref_key("seasons", BOARD, "season", S1)) == model.board(BOARD, "season", S1)
    assert zset(r, ref_key("seasons", BOARD, "season", "S2")) == model.board(BOARD, "season", "S2")
    last = today() + timedelta(days=6)
    assert r.hexists(f"seasons:{{{BOARD}}}:state", f"closed:{last}")
    assert not list(r.scan_iter(match="seasons:lock:close_*"))


def expected_reward(rank: int, total: int) -> str | None:
    """TIERS by hand: rank 1 gold, then rank <= ceil(total / 2) silver."""
    if rank == 1:
        return "gold"
    return "silver" if rank <= -(-total // 2) else None


def test_killed_at_every_step_boundary_then_run_again(setup: Setup, r: redis.Redis) -> None:
    # A clean run, traced, names every checkpoint of the two closes (last day, S1).
    before = {k: (r.dump(k), r.pexpiretime(k)) for k in r.scan_iter()}
    clean = tick(setup, trace=True)
    assert clean.returncode == 0, clean.stderr
    points = checkpoints(clean.stdout)
    assert f"close_season:S1/files:{BOARD}:archive:data-written" in points
    assert f"close_season:S1/results:{BOARD}:rows-written" in points
    results_key = f"seasons:{{{BOARD}}}:results:S1"
    clean_results = r.hgetall(results_key)
    assert any(p.startswith("close_day:") for p in points)
    assert len(points) == len(set(points))
    assert_archived_once(setup, r)

    # Back to the state before the close; then kill the close at each checkpoint in turn,
    # every run resuming from where the one before it died.
    r.flushall()
    for k, (payload, expires) in before.items():
        r.restore(k, expires if expires > 0 else 0, payload, absttl=expires > 0)
    for p in archive_dir(setup).iterdir():
        p.unlink()
    for n, point in enumerate(points):
        killed = tick(setup, fault=point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        locks = list(r.scan_iter(match="seasons:lock:close_*"))
        assert len(locks) == 1, point  # the dead worker's lock
        if n == 0:
            # Started again while the dead worker's lock lives (3 s more, so that the new
            # process surely starts before it runs out): it leaves the close alone...
            r.pexpire(locks[0], 3000)
            blocked = tick(setup, trace=True)
            assert blocked.returncode == 0
            assert not [c for c in checkpoints(blocked.stdout) if c.startswith("close_")]
            # ... until the lock expires (lock_ttl 1 s here; a short poll, not a clock).
            deadline = time.monotonic() + 10
            while r.exists(*locks) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not r.exists(*locks)
        else:
            r.delete(*locks)  # as if its TTL ran out
    final = tick(setup)
    assert final.returncode == 0, final.stderr
    assert_archived_once(setup, r)
    assert r.hgetall(results_key) == clean_results  # the fault-free run's, field for field


def test_two_workers_started_together_archive_once(setup: Setup, r: redis.Redis) -> None:
    procs = [tick(setup, trace=True, wait=False) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    archived = [
        c for out, _ in outs for c in checkpoints(out)
        if c == f"close_season:S1/archive:{BOARD}:start"
    ]  # fmt: skip
    assert len(archived) == 1
    assert_archived_once(setup, r)


def test_second_worker_leaves_a_close_in_progress_alone(setup: Setup, r: redis.Redis) -> None:
    longer = {"SEASONS_WORKER__LOCK_TTL": "60"}
    first = tick(setup, fault=f"close_season:S1/files:{BOARD}:start", action="pause",
                 extra=longer, wait=False)  # fmt: skip
    try:
        assert first.stdout.readline().strip() == f"PAUSED close_season:S1/files:{BOARD}:start"
        second = tick(setup, trace=True, extra=longer)
        assert second.returncode == 0, second.stderr
        assert not [c for c in checkpoints(second.stdout) if c.startswith("close_season")]
        assert r.hget(f"seasons:{{{BOARD}}}:state", "season:S1") == b"closing"
        assert not (archive_dir(setup) / "S1.jsonl.gz").exists()
        out, err = first.communicate("\n", timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    assert "TICKED" in out
    assert_archived_once(setup, r)
