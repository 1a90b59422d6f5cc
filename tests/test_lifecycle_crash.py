"""Lifecycle events survive SIGKILL at every checkpoint of the closes: a worker killed anywhere
in the last day's close and the season's, then started again, leaves each expected event in the
stream exactly once, and a consumer group created before the close reads each once.

Real processes (tests/test_worker_crash.py's driver and its season played to its end): the
close runs in a subprocess that kills itself at ``SEASONS_FAULT_AT``.
"""

from __future__ import annotations

import json
import signal
from datetime import timedelta
from typing import Any

import redis
from test_worker_crash import (
    BOARD,
    S1,
    Setup,
    archive_dir,
    checkpoints,
    expected_reward,
    setup,
    tick,
)
from worker_support import dump_db, file_rows, load_db, today

from seasons.manifest import sha256_of

__all__ = ["setup"]  # the fixture, shared with tests/test_worker_crash.py

STREAM = "seasons:lifecycle"  # docs/contract.md#keys


def stream_events(r: redis.Redis) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for _, raw in r.xrange(STREAM, "-", "+"):
        f = {k.decode(): v.decode() for k, v in raw.items()}
        out.append((f["id"], f["type"], json.loads(f["data"])))
    return out


def expected_of_the_close(setup: Setup) -> list[tuple[str, str, dict[str, Any]]]:
    """The events of the tick that closes S1's last day and S1 (one board), from the
    reference model's final standings and the archive file."""
    last = today() + timedelta(days=6)
    data = archive_dir(setup) / "S1.jsonl.gz"
    rows = file_rows(data)
    assert rows == setup.expected
    rewards = [expected_reward(rank, len(rows)) for rank, _, _, _ in rows]
    return [
        (f"day_closed:{last}", "day_closed", {"day": last.isoformat(), "boards": [BOARD]}),
        (f"season_closing:{BOARD}:{S1}", "season_closing", {"board": BOARD, "season": S1}),
        (f"rewards_ready:{BOARD}:{S1}", "rewards_ready", {
            "board": BOARD, "season": S1, "total": len(rows), "provisional": False,
            "tiers": [  # the crash setup's TIERS: rank 1 gold, then the top 50% silver
                {"tier": "1", "reward": "gold", "count": rewards.count("gold")},
                {"tier": "top 50%", "reward": "silver", "count": rewards.count("silver")},
            ],
        }),
        (f"season_archived:{BOARD}:{S1}", "season_archived", {
            "board": BOARD, "season": S1, "count": len(rows),
            "score_sum": float(sum(s for _, _, s, _ in rows)), "sha256": sha256_of(data),
        }),
    ]  # fmt: skip


def test_no_event_lost_or_doubled_by_a_kill_at_any_checkpoint(setup: Setup, r: redis.Redis) -> None:
    before_events = stream_events(r)  # the day closes of the season so far
    assert [t for _, t, _ in before_events] == ["day_closed"] * len(before_events)
    before = dump_db(r)

    clean = tick(setup, trace=True)
    assert clean.returncode == 0, clean.stderr
    points = checkpoints(clean.stdout)
    assert f"close_season:S1/archived:{BOARD}:start" in points
    assert any(p.endswith("/event:day_closed:done") for p in points)  # the emit's own step
    expected = before_events + expected_of_the_close(setup)
    assert stream_events(r) == expected

    # Back to before the close, a consumer group waiting; then kill the close at each
    # checkpoint in turn, each run resuming where the one before died.
    load_db(r, before)
    for p in archive_dir(setup).iterdir():
        p.unlink()
    r.xgroup_create(STREAM, "app", id="$")
    for point in points:
        killed = tick(setup, fault=point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        locks = list(r.scan_iter(match="seasons:lock:close_*"))
        if locks:
            r.delete(*locks)  # as if the dead worker's lock ran out
        ids = [eid for eid, _, _ in stream_events(r)]
        assert len(ids) == len(set(ids)), point  # never twice, whatever the kill
    final = tick(setup)
    assert final.returncode == 0, final.stderr
    assert stream_events(r) == before_events + expected_of_the_close(setup)

    got = r.xreadgroup("app", "c1", {STREAM: ">"}, count=100)
    read = [json.loads(f[b"data"]) | {"id": f[b"id"].decode()} for _, f in got[0][1]]
    assert [e["id"] for e in read] == [eid for eid, _, _ in expected[len(before_events) :]]
