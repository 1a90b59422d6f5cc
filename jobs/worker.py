"""``seasons worker``: the long-lived worker (docs/operations.md#the-worker).

It reads top to bottom: the jobs are the table of :mod:`seasons.jobs.registry`, each one pass
at an instant ``now`` (:meth:`Worker.tick` runs every due one, for tests and for operators);
:meth:`Worker.run` hands the same passes to an APScheduler ``BackgroundScheduler`` with the
table's interval triggers (``coalesce``, ``max_instances=1``, ``misfire_grace_time`` from
settings) and waits for SIGTERM/SIGINT. After each pass the job's ``next_run`` is recorded
from its trigger: the time the scheduler fires it next. The handlers only set an
event; the job in hand stops at its next step boundary, the scheduler is shut down, the
heartbeat deleted, Redis closed, exit status 0.

Redis unable to do the work (unreachable, full, a replica: ``BackendUnavailable``) is never
fatal: a job logs it, backs off (doubling from ``worker.backoff_initial`` up to
``worker.backoff_max``) and retries, resuming its run from the steps it recorded; at start,
:func:`run_worker` waits for it the same way. Any other error is logged and recorded in the
job's state; the next run tries again.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from seasons.api import Seasons
from seasons.clock import system_clock
from seasons.config.settings import Settings
from seasons.connection import when_reachable
from seasons.errors import BackendUnavailable, LockLost
from seasons.jobs.registry import BY_NAME, JOBS, NAMES, SKIPPED, JobContext
from seasons.jobs.state import Checkpoint, Stopping
from seasons.redis_health import check_redis

log = logging.getLogger(__name__)


class Worker(JobContext):
    """The jobs of one namespace on one app, scheduled; stoppable through :attr:`stop`."""

    def __init__(
        self, app: Seasons, *, stop: threading.Event | None = None,
        fault: Checkpoint | None = None,
    ):  # fmt: skip
        super().__init__(app.backend, stop=stop, fault=fault)
        self.app = app  # closed with the worker
        self.scheduler: BackgroundScheduler | None = None
        # Each job's trigger, once run() scheduled them: the scheduler fires the job by it,
        # and its next fire time is what the job's state records as next_run.
        self.triggers: dict[str, IntervalTrigger] = {}
        self.intervals = {job.name: job.every(self.settings) for job in JOBS}
        # One pass of each job (tests replace one to hold it in hand).
        self.passes: dict[str, Callable[[datetime], Any]] = {
            job.name: partial(job.run, self) for job in JOBS
        }

    def due(self, job: str, now: datetime) -> bool:
        """For :meth:`tick`: every tick for the jobs that find their own work, else one
        interval after the job's last start."""
        if BY_NAME[job].every_tick:
            return True
        last = self.state.get(job).get("last_start")
        return last is None or datetime.fromisoformat(last) + self.intervals[job] <= now

    def tick(self, now: datetime) -> None:
        """Do all the work due at ``now``, in the table's order: heartbeat, due closes in
        order, rollup and sweep when their interval has passed since their last run."""
        for job in NAMES:
            if self.stop.is_set():
                return
            self.guarded(job, lambda: now, check_due=True)

    # --- retries ----------------------------------------------------------------------------

    def guarded(self, job: str, clock: Callable[[], datetime], *, check_due: bool = False) -> bool:
        """Run one pass of ``job``, retrying while Redis cannot do the work, until it completes
        or the worker stops. True if it completed."""
        delay = self.settings.worker.backoff_initial.total_seconds()
        cap = self.settings.worker.backoff_max.total_seconds()
        while not self.stop.is_set():
            now = clock()
            try:
                if check_due and not self.due(job, now):
                    return False
                began = time.monotonic()
                self.state.started(job, now)
                outcome = self.passes[job](now)
                self.state.ended(
                    job, clock(), SKIPPED if outcome == SKIPPED else "ok",
                    next_run=self.next_run(job, now), duration=time.monotonic() - began,
                )  # fmt: skip
                return True
            except BackendUnavailable as exc:
                log.warning("%s: %s; retrying in %.1fs", job, exc.message, delay)
                if self.stop.wait(delay):
                    return False
                delay = min(delay * 2, cap)
            except Stopping as exc:
                log.info("%s: stopping at %s; the run resumes from there next time", job, exc)
                return False
            except LockLost as exc:
                log.warning("%s: %s", job, exc)
                return False
            except Exception as exc:
                log.exception("%s failed", job)
                self._record_error(job, clock(), exc)
                return False
        return False

    def _record_error(self, job: str, now: datetime, exc: Exception) -> None:
        try:
            self.state.ended(job, now, "error", f"{type(exc).__name__}: {exc}",
                             next_run=self.next_run(job, now))  # fmt: skip
        except Exception as again:  # Redis gone as well: the log has it
            log.warning("%s: could not record the error (%s)", job, again)

    def next_run(self, job: str, started: datetime) -> datetime | None:
        """When ``job`` runs next, asked as a pass of it (started at ``started``) ends.

        Under :meth:`run`: the next fire time of the job's trigger after this instant, which
        is the time the scheduler holds for it (it fires the trigger's times, skipping those
        that fall while the job is still running). The trigger, not the scheduler's job:
        reading that takes the job store lock, which shutdown(wait=True) holds while it
        waits for this very pass (a deadlock). Under :meth:`tick`: one interval after this
        start (:meth:`due`), or None for a job that runs on every tick, whenever that is.
        """
        trigger = self.triggers.get(job)
        if trigger is not None:
            fires: datetime | None = trigger.get_next_fire_time(None, system_clock())
            return None if fires is None else fires.astimezone(UTC)
        if BY_NAME[job].every_tick:
            return None
        return started + self.intervals[job]

    # --- the long-lived process -------------------------------------------------------------

    def run(self) -> int:
        """Run the scheduler until SIGTERM/SIGINT (or :attr:`stop` is set); returns 0, or 2
        when it stopped because Redis's eviction policy became unsafe."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda signum, frame: self.stop.set())
        zone = self.settings.zone
        misfire = max(1, int(self.settings.worker.misfire_grace.total_seconds()))
        self.scheduler = scheduler = BackgroundScheduler(
            timezone=zone,
            # Work jobs one at a time (closes before rollups); the heartbeat and the webhooks'
            # deliveries beside them (a receiver that never answers holds up no close).
            executors={job.thread: ThreadPoolExecutor(1) for job in JOBS},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": misfire},
        )
        start = system_clock().astimezone(zone)  # the scheduler's time is the wall clock's
        for job in JOBS:
            self.triggers[job.name] = trigger = job.trigger(self.settings, start)
            scheduler.add_job(
                self.guarded, trigger, args=[job.name, self.app.clock], id=job.name,
                name=job.name, executor=job.thread, next_run_time=start,
            )  # fmt: skip
        log.info("worker %s started (namespace %s, zone %s)", self.heartbeat.worker,
                 self.settings.namespace, self.settings.timezone)  # fmt: skip
        try:
            self.integrity.check(start)
        except BackendUnavailable as exc:  # the first closes pass checks again
            log.warning("integrity check at start: %s", exc.message)
        scheduler.start()
        try:
            while not self.stop.wait(0.5):
                pass
        finally:
            log.info("stopping: finishing the step in hand")
            scheduler.shutdown(wait=True)
            self.shutdown()
        log.info("worker stopped")
        return self.exit_code

    def shutdown(self) -> None:
        """Delete the heartbeat (if still ours), close Redis."""
        try:
            self.heartbeat.stop()
        except Exception as exc:
            log.warning("could not delete the heartbeat (%s); it expires by itself", exc)
        self.app.close()


def run_worker(
    build: Callable[[], Seasons],
    settings: Settings,
    *,
    fault: Checkpoint | None = None,
    stop: threading.Event | None = None,
) -> int:
    """``seasons worker``: build the app, then :meth:`Worker.run` it until SIGTERM/SIGINT.

    A cluster client connects when it is built; while no node answers, this waits (backing
    off like a job) instead of exiting, so a worker started before its Redis, or restarted
    during an outage, comes up by itself. A signal (or ``stop``) meanwhile exits with status 0.
    """
    stop = stop if stop is not None else threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: stop.set())
    app = when_reachable(
        build, initial=settings.worker.backoff_initial.total_seconds(),
        cap=settings.worker.backoff_max.total_seconds(), stop=stop, what="worker",
    )  # fmt: skip
    if app is None:
        log.info("worker stopped before Redis could be reached")
        return 0
    try:
        check_redis(app.client, settings, what="worker")  # a Redis to refuse: exit 2
    except BaseException:
        app.close()
        raise
    return Worker(app, stop=stop, fault=fault).run()
