"""The close of a sharded board survives SIGKILL at every step boundary: one archive, the
fault-free run's, byte for byte (docs/sharding.md#closes-and-archives), on a trimmed board
with shared ranks and on one with earliest ties (its reach set archived beside it).

As tests/test_worker_crash.py does for an unsharded board: the close runs in a subprocess
with ``SEASONS_FAULT_AT=<checkpoint>``, which SIGKILLs itself there; each run resumes from
where the one before it died.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
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

ROOT = Path(__file__).resolve().parent.parent
BOARD = "laps"
# Trimmed with shared ranks: the most to get wrong when merging shards; earliest ties: the
# stores' reach sets gathered beside the archive.
CONFIGS = {
    "trimmed-shared": BOARDS[BOARD],
    "earliest": {"aggregate": "min", "order": "asc", "ties": "earliest"},
}
TIERS = [{"ranks": "1", "reward": "gold"}, {"top_percent": 50, "reward": "silver"}]
SHARDS = 3


def tick(env: dict[str, str], at: str, **fault: str) -> subprocess.CompletedProcess[str]:
    env = dict(env, **fault)
    return subprocess.run(
        [sys.executable, "-c", TICK_DRIVER, at], cwd=ROOT, env=env, text=True,
        capture_output=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_a_sharded_close_killed_at_every_step_boundary_archives_once(
    settings_factory: Any, r: redis.Redis, tmp_path: Path, kind: str
) -> None:
    cfg = {**CONFIGS[kind], "rewards": TIERS, "shards": SHARDS}
    settings = season_settings(
        settings_factory, tmp_path / "archive", boards={BOARD: cfg}, worker={"lock_ttl": 1.0}
    )
    sim = Sim(settings, seed=13)
    for i in range(7):
        sim.play_day(today() + timedelta(days=i))
    day8 = today() + timedelta(days=7)
    sim.play_day(day8, hours=(0.5,))
    sim.app.close()
    expected = sim.expected_rows(BOARD, "S1")
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    at = local(day8, 1.25).isoformat()
    folder = settings.archive.dir / "seasons" / BOARD

    before = {k: (r.dump(k), r.pexpiretime(k)) for k in r.scan_iter()}
    clean = tick(env, at, SEASONS_FAULT_TRACE="1")
    assert clean.returncode == 0, clean.stderr
    points = checkpoints(clean.stdout)
    assert any(p.startswith("close_season:S1/") for p in points)
    assert any(p.startswith("close_day:") for p in points)
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    results = r.hgetall(f"seasons:{{{BOARD}}}:results:S1")
    assert file_rows(folder / "S1.jsonl.gz") == expected  # the model's standings

    r.flushall()
    for k, (payload, expires) in before.items():
        r.restore(k, expires if expires > 0 else 0, payload, absttl=expires > 0)
    for p in folder.iterdir():
        p.unlink()
    for point in points:
        killed = tick(env, at, SEASONS_FAULT_AT=point, SEASONS_FAULT="kill")
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        r.delete(*r.scan_iter(match="seasons:lock:close_*"))  # as if its TTL ran out
    final = tick(env, at)
    assert final.returncode == 0, final.stderr

    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files
    assert r.hgetall(f"seasons:{{{BOARD}}}:results:S1") == results
    archived = sorted(r.scan_iter(match="seasons:*:archive:*"))
    assert archived == [
        f"seasons:{{{BOARD}}}:{name}:S1".encode()
        for name in (("archive", "reached:archive") if cfg.get("ties") == "earliest" else
                     ("archive",))
    ]  # fmt: skip
    for store in [BOARD, *(f"{BOARD}#{i}" for i in range(SHARDS))]:
        assert r.hget(f"seasons:{{{store}}}:state", "season:S1") == b"archived", store
    summary = json.loads(results[b""])
    assert summary["total"] == len(expected) and summary["provisional"] is False
