"""Rollups run while a writer keeps writing: no event is lost or counted twice.

Every write (write-through into week and season) and every rollup step (one Lua call for a
small board, one per slice for a large one) is atomic, so whichever ran last the boards
equal the formula of docs/contract.md#boards-and-scores, computed by the reference model from
what was accepted.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from reference import key as ref_key
from reference import zset
from worker_support import Sim, season_settings, today

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.jobs.rollup import Rollup

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends


def boards_under_test(sim: Sim) -> list[tuple[str, str, str]]:
    """(board, window, period) of the weeks and seasons of yesterday and today."""
    out = []
    now = sim.clock()
    for day in (sim.model.cal.local_date(now) - timedelta(days=1), sim.model.cal.local_date(now)):
        for board in sim.settings.boards:
            for window in ("week", "season"):
                pid = sim.model.cal.period_id(window, day)
                if pid is not None and (board, window, pid) not in out:
                    out.append((board, window, pid))
    return out


@pytest.mark.parametrize("atomic_limit", [10**9, 0], ids=["atomic", "sliced"])
def test_rollups_during_writes(settings_factory, r, tmp_path: Path, atomic_limit: int) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    # Every routine rollup repairs, large boards included (by default they would be repaired
    # in slices only once per full_reconcile_interval).
    worker = settings.worker.model_copy(update={"full_reconcile_interval": timedelta(0)})
    settings = settings.model_copy(update={"worker": worker})
    sim = Sim(settings, seed=atomic_limit % 97)
    # 00:30 on the season's second day: yesterday still takes late events.
    sim.clock.set(sim.clock() + timedelta(days=1))
    sim.submit(sim.batch(40))
    sim.submit(sim.batch(40, ts=sim.clock() - timedelta(minutes=45)))
    targets = boards_under_test(sim)
    # Drift the boards on purpose, so that the rollups have something to repair.
    for board, window, pid in targets:
        r.zincrby(ref_key("seasons", board, window, pid), 1000, "p01")
        r.zadd(ref_key("seasons", board, window, pid), {"ghost": 5})

    done = threading.Event()
    batches = [0]

    def writer() -> None:
        while not done.is_set() and batches[0] < 400:
            late = batches[0] % 3 == 0
            sim.submit(sim.batch(5, ts=sim.clock() - timedelta(minutes=45) if late else None))
            batches[0] += 1
        done.set()

    rollups = 0
    with Seasons(settings, clock=sim.clock) as other:
        rollup = Rollup(
            other.client, other.scripts, settings, other.keys, atomic_limit=atomic_limit
        )
        thread = threading.Thread(target=writer)
        thread.start()
        try:
            while not done.is_set():
                outcomes = rollup.run(sim.clock())
                assert {o.mode for o in outcomes} == {"sliced" if atomic_limit == 0 else "atomic"}
                rollups += 1
        finally:
            done.set()
            thread.join()
        assert rollups >= 3 and batches[0] >= 20

        def check(exact_trimmed: bool) -> None:
            for board, window, pid in targets:
                got = zset(r, ref_key("seasons", board, window, pid))
                want = sim.model.board(board, window, pid)
                if settings.boards[board].max_entries and not exact_trimmed:
                    # Trimmed: who sits at a tie on the cut may differ until the next
                    # rollup; every score there is still exactly the formula's.
                    formula = sim.model.formula(board, window, pid)
                    assert len(got) == len(want)
                    assert all(formula[m] == s for m, s in got.items()), (board, window, pid)
                    assert sorted(got.values()) == sorted(want.values())
                else:
                    assert got == want, (board, window, pid)

        check(exact_trimmed=False)  # right after the race, whichever ran last
        rollup.run(sim.clock())
        check(exact_trimmed=True)
    sim.close()


def test_rollup_repairs_a_board_and_follows_new_weights(settings_factory, r, tmp_path: Path):
    """A board written with one set of weights and rolled up under new ones equals the
    formula with the new weights: the rollup is the only path when weights change."""
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=2)
    for i in range(3):
        sim.play_day(today() + timedelta(days=i), hours=(10, 20))
    boards = {**settings.model_dump()["boards"]}
    boards["kills"]["week_weights"] = [3, 1, 1, 1, 1, 1, 5]
    boards["kills"]["season_weights"] = [2]
    reweighted = season_settings(settings_factory, tmp_path / "archive", boards=boards)
    after = Sim(reweighted, start=sim.clock())
    after.model.days = sim.model.days
    after.model.meta = sim.model.meta
    state = CliState(clock=after.clock, settings=reweighted)
    result = CliRunner().invoke(cli, ["rebuild", "--board", "kills", "--json"], obj=state)
    assert result.exit_code == 0, result.output
    rebuilt = json.loads(result.output)["rebuilt"]
    assert [o["target"].split(":", 2)[2] for o in rebuilt] == [
        f"week:{after.model.cal.current('week', after.clock())}", "season:S1",
    ]  # fmt: skip
    for window in ("week", "season"):
        pid = after.model.cal.period_id(window, after.model.cal.local_date(after.clock()))
        assert zset(r, ref_key("seasons", "kills", window, pid)) == after.model.board(
            "kills", window, pid
        )
    sim.close()
    after.close()
