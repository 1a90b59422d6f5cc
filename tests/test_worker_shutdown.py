"""Stopping the worker while a pass is in hand: shutdown waits for the pass, and the pass
ends without needing anything shutdown holds (APScheduler's shutdown(wait=True) keeps its
job store lock while it waits for running jobs)."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from apscheduler.schedulers.base import STATE_STOPPED
from worker_support import season_settings

from seasons import Seasons
from seasons.jobs.worker import Worker


def test_a_pass_that_ends_during_shutdown_lets_the_worker_stop(
    settings_factory: Any, r: Any, tmp_path: Path
) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    worker = Worker(Seasons(settings))
    entered, release = threading.Event(), threading.Event()
    rollup = worker.passes["rollup"]

    def slow_rollup(now: datetime) -> Any:
        entered.set()
        release.wait(20)
        return rollup(now)

    worker.passes["rollup"] = slow_rollup
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    assert entered.wait(20), "the rollup pass never started"
    worker.stop.set()
    deadline = time.monotonic() + 10
    while (worker.scheduler is None or worker.scheduler.state != STATE_STOPPED) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.01)
    assert worker.scheduler is not None and worker.scheduler.state == STATE_STOPPED
    time.sleep(0.2)  # shutdown now holds its locks and waits for the pass in hand
    release.set()
    runner.join(20)
    assert not runner.is_alive(), "the worker did not stop: the pass waited on the scheduler"
    assert worker.exit_code == 0
