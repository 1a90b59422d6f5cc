"""``seasons worker``: the long-lived worker (SPEC section 7).

It reads top to bottom: each job is one pass at an instant ``now`` (:meth:`Worker.tick` runs
every due one, for tests and for operators); :meth:`Worker.run` hands the same passes to an
APScheduler ``BackgroundScheduler`` with interval triggers in the configured zone
(``coalesce``, ``max_instances=1``, ``misfire_grace_time`` from settings) and waits for
SIGTERM/SIGINT. The handlers only set an event; the job in hand stops at its next step
boundary, the scheduler is shut down, the heartbeat deleted, Redis closed, exit status 0.

Redis unreachable is never fatal: a job logs it, backs off (doubling from
``worker.backoff_initial`` up to ``worker.backoff_max``) and retries, resuming its run from
the steps it recorded; at start, :func:`run_worker` waits for it the same way. Any other error
is logged and recorded in the job's state; the next run tries again.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.job import Job
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from seasons.api import Seasons
from seasons.archives import Archives
from seasons.config.settings import Settings
from seasons.connection import UNAVAILABLE, when_reachable
from seasons.errors import ArchiveExists, BackendUnavailable
from seasons.jobs.closes import Closes
from seasons.jobs.heartbeat import Heartbeat
from seasons.jobs.heartbeat import read as read_heartbeat
from seasons.jobs.integrity import ARCHIVE_CONFLICT, WHAT_TO_DO, Integrity, read_safe_mode
from seasons.jobs.locks import LockLost, locked
from seasons.jobs.rollup import Rollup
from seasons.jobs.state import Checkpoint, JobState, Stopping
from seasons.jobs.sweep import Sweeper
from seasons.redis_health import check_eviction, eviction_message
from seasons.redis_health import read as read_health

log = logging.getLogger(__name__)

RETRYABLE = (*UNAVAILABLE, BackendUnavailable)
EXIT_EVICTION = 2  # the CLI's status for a server Seasons must not run on
SKIPPED = "safe_mode"  # a pass that safe mode skipped: recorded as this status, not "ok"


class Worker:
    """The jobs of one namespace, with one Redis client, stoppable through :attr:`stop`."""

    def __init__(
        self, app: Seasons, *, stop: threading.Event | None = None,
        fault: Checkpoint | None = None,
    ):  # fmt: skip
        self.app = app
        self.settings = app.settings
        self.stop = stop if stop is not None else threading.Event()
        self.fault = fault
        client, scripts, settings, keys = app.client, app.scripts, app.settings, app.keys
        self.state = JobState(client, keys)
        self.rollup = Rollup(client, scripts, settings, keys)
        self.archives = Archives(client, scripts, settings, keys)
        self.closes = Closes(
            client, scripts, settings, keys, state=self.state, rollup=self.rollup,
            archives=self.archives, checkpoint=self._checkpoint, clock=app.clock,
        )  # fmt: skip
        self.sweeper = Sweeper(client, scripts, settings, keys, self.archives)
        self.heartbeat = Heartbeat(client, scripts, settings, keys)
        self.integrity = Integrity(client, settings, keys, self.heartbeat.worker)
        self.exit_code = 0
        self.scheduler: BackgroundScheduler | None = None
        self.scheduled: dict[str, Job] = {}  # by job name, once run() scheduled them
        w = settings.worker
        self.intervals: dict[str, timedelta] = {
            "heartbeat": w.heartbeat_interval, "closes": w.rollup_interval,
            "rollup": w.rollup_interval, "sweep": w.sweep_interval,
        }  # fmt: skip
        self.passes: dict[str, Callable[[datetime], Any]] = {
            "heartbeat": self._beat, "closes": self._closes,
            "rollup": self._rollup, "sweep": self._sweep,
        }  # fmt: skip

    # --- one pass of each job -------------------------------------------------------------

    def _beat(self, now: datetime) -> None:
        """Beat with the server's memory figures and safe mode; stop (exit 2) when Redis's
        policy became evicting without ``redis.allow_eviction``."""
        health = read_health(self.app.client, self.settings)
        safe = self.integrity.refresh()
        memory = {
            "policy": health.policy, "used_memory": health.used_memory,
            "maxmemory": health.maxmemory, "eviction_allowed": health.eviction_allowed,
        }  # fmt: skip
        self.heartbeat.beat(now, extra={"redis": memory, **({"safe_mode": safe} if safe else {})})
        if safe is not None:
            log.error("SAFE MODE (%s) since %s: %s; %s", safe.get("reason"),
                      safe.get("detected_at"), safe.get("message"), WHAT_TO_DO)  # fmt: skip
        if health.evicting and not health.eviction_allowed:
            log.error("stopping: %s", eviction_message(health.policy))
            self.exit_code = EXIT_EVICTION
            self.stop.set()

    def _closes(self, now: datetime) -> int | str:
        """Check for data loss, then run the due closes, unless in safe mode. A close that
        meets an archive file it would change enters safe mode (``archive_conflict``)."""
        if self.integrity.check(now) is not None:
            return SKIPPED
        try:
            return self.closes.catch_up(now)
        except ArchiveExists as exc:
            self.integrity.enter(ARCHIVE_CONFLICT, exc.message, now)
            raise

    def _rollup(self, now: datetime) -> Any:
        with locked(self.app.client, self.app.scripts, self.app.keys, "rollup",
                    self.settings.worker.lock_ttl) as lock:  # fmt: skip
            return None if lock is None else self.rollup.run(now, routine=True)

    def _sweep(self, now: datetime) -> Any:
        if self.integrity.in_safe_mode:
            return SKIPPED  # it would drop metadata of members whose archive keys are lost
        with locked(self.app.client, self.app.scripts, self.app.keys, "sweep",
                    self.settings.worker.lock_ttl) as lock:  # fmt: skip
            return None if lock is None else self.sweeper.run(now)

    def _checkpoint(self, name: str) -> None:
        if self.fault is not None:
            self.fault(name)
        if self.stop.is_set():
            raise Stopping(name)

    def due(self, job: str, now: datetime) -> bool:
        if job in ("heartbeat", "closes"):
            return True
        last = self.state.get(job).get("last_start")
        return last is None or datetime.fromisoformat(last) + self.intervals[job] <= now

    def tick(self, now: datetime) -> None:
        """Do all the work due at ``now``: heartbeat, due closes in order, rollup and sweep
        when their interval has passed since their last run."""
        for job in ("heartbeat", "closes", "rollup", "sweep"):
            if self.stop.is_set():
                return
            self.guarded(job, lambda: now, check_due=True)

    # --- retries ----------------------------------------------------------------------------

    def guarded(self, job: str, clock: Callable[[], datetime], *, check_due: bool = False) -> bool:
        """Run one pass of ``job``, retrying while Redis is unreachable, until it completes
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
                    next_run=self._next_run(job, now),
                    duration=time.monotonic() - began,
                )  # fmt: skip
                return True
            except RETRYABLE as exc:
                log.warning("%s: Redis is unreachable (%s); retrying in %.1fs", job, exc, delay)
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
            self.state.ended(job, now, "error", f"{type(exc).__name__}: {exc}")
        except Exception as again:  # Redis gone as well: the log has it
            log.warning("%s: could not record the error (%s)", job, again)

    def _next_run(self, job: str, now: datetime) -> datetime:
        if job == "closes":
            return self.closes.next_due(now)
        # The scheduled job as added, not scheduler.get_job(): that takes the scheduler's job
        # store lock, which shutdown(wait=True) holds while it waits for this very job to end
        # (a deadlock when a pass ends during shutdown). The memory job store keeps and
        # updates this same object.
        found = self.scheduled.get(job)
        if found is not None and found.next_run_time is not None:
            return found.next_run_time  # type: ignore[no-any-return]
        return now + self.intervals[job]

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
            # Work jobs one at a time (closes before rollups); the heartbeat beside them.
            executors={"default": ThreadPoolExecutor(1), "beat": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": misfire},
        )
        start = datetime.now(zone)
        for job in ("heartbeat", "closes", "rollup", "sweep"):
            self.scheduled[job] = scheduler.add_job(
                self.guarded, IntervalTrigger(
                    seconds=self.intervals[job].total_seconds(), timezone=zone
                ), args=[job, self.app.clock], id=job, name=job,
                executor="beat" if job == "heartbeat" else "default", next_run_time=start,
            )  # fmt: skip
        log.info("worker %s started (namespace %s, zone %s)", self.heartbeat.worker,
                 self.settings.namespace, self.settings.timezone)  # fmt: skip
        try:
            self.integrity.check(start)
        except RETRYABLE as exc:  # the first closes pass checks again
            log.warning("integrity check at start: Redis is unreachable (%s)", exc)
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
        """Delete the heartbeat (if still ours) and close Redis."""
        try:
            self.heartbeat.stop()
        except Exception as exc:
            log.warning("could not delete the heartbeat (%s); it expires by itself", exc)
        self.app.close()

    # --- for `seasons status` and GET /v1/jobs ------------------------------------------------

    def report(self, now: datetime) -> dict[str, Any]:
        return jobs_report(self.app, now)


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
        check_eviction(app.client, settings, what="worker")  # EvictionPolicy: exit 2
    except BaseException:
        app.close()
        raise
    return Worker(app, stop=stop, fault=fault).run()


def jobs_report(app: Seasons, now: datetime) -> dict[str, Any]:
    """The heartbeat (None when no worker is alive), safe mode (None unless the namespace
    is in it), the Redis server's policy, memory and role, and each job's last and next run."""
    return {
        "worker": read_heartbeat(app.client, app.keys, now),
        "safe_mode": read_safe_mode(app.client, app.keys),
        "redis": read_health(app.client, app.settings).to_dict(),
        "jobs": JobState(app.client, app.keys).summaries(),
    }
