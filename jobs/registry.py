"""The worker's jobs, declared once (docs/operations.md#the-worker): each one's name, what it
does, the setting that spaces its runs (:meth:`Job.trigger`, the one schedule: the worker's
scheduler fires it, and the worker records its next fire time as the job's ``next_run``), and
its pass.
The worker schedules them from :data:`JOBS`; ``seasons status``, ``GET /v1/jobs``
(:mod:`seasons.jobs.report`) and ``/metrics`` report them by :data:`NAMES`;
``seasons worker --help`` lists them.

A pass is a function of a :class:`JobContext` (the job objects of one namespace, built once) and
the instant ``now``. The job objects are built here too (:func:`rollup_of`, :func:`closes_of`,
...), from a :class:`~seasons.backend.Backend` (the facade's ``backend``), so that an admin call
or a CLI operation runs one job on the app it has, without a worker;
so are those of the operator's jobs that no schedule runs (:func:`clear_of`: clearing a
board's period, resumable like a close).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from apscheduler.triggers.interval import IntervalTrigger

from seasons.archives import Archives
from seasons.backend import Backend
from seasons.config.settings import Settings
from seasons.errors import ArchiveExists
from seasons.hooks import Hooks
from seasons.jobs.clear import Clear
from seasons.jobs.closes import Closes
from seasons.jobs.heartbeat import Heartbeat
from seasons.jobs.integrity import ARCHIVE_CONFLICT, WHAT_TO_DO, Integrity
from seasons.jobs.locks import locked
from seasons.jobs.rollup import Rollup
from seasons.jobs.state import Checkpoint, JobState, Stopping, no_checkpoint
from seasons.jobs.sweep import Sweeper
from seasons.redis_health import eviction_message
from seasons.redis_health import read as read_health

log = logging.getLogger(__name__)

EXIT_EVICTION = 2  # the CLI's status for a server Seasons must not run on
SKIPPED = "safe_mode"  # a pass that safe mode skipped: recorded as this status, not "ok"


# --- the job objects, for one backend ------------------------------------------------------


def rollup_of(b: Backend) -> Rollup:
    return Rollup(b.client, b.scripts, b.settings, b.keys)


def archives_of(b: Backend) -> Archives:
    return Archives(b.client, b.scripts, b.settings, b.keys)


def sweeper_of(b: Backend, archives: Archives | None = None) -> Sweeper:
    archives = archives if archives is not None else archives_of(b)
    return Sweeper(b.client, b.scripts, b.settings, b.keys, archives)


def closes_of(
    b: Backend, *, state: JobState | None = None, rollup: Rollup | None = None,
    archives: Archives | None = None, checkpoint: Checkpoint = no_checkpoint,
) -> Closes:  # fmt: skip
    """Closes on ``b``'s client and clock; ``checkpoint`` is called between the steps of a
    run (the worker's stops there on SIGTERM)."""
    return Closes(
        b.client, b.scripts, b.settings, b.keys,
        state=state if state is not None else JobState(b.client, b.keys),
        rollup=rollup if rollup is not None else rollup_of(b),
        archives=archives if archives is not None else archives_of(b),
        checkpoint=checkpoint, clock=b.clock,
    )  # fmt: skip


def clear_of(b: Backend, *, checkpoint: Checkpoint = no_checkpoint) -> Clear:
    """Clears on ``b``'s client and clock; ``checkpoint`` is called between the steps of a
    run (tests stop or kill a run there)."""
    return Clear(
        b.client, b.settings, b.keys, state=JobState(b.client, b.keys),
        rollup=rollup_of(b), checkpoint=checkpoint, clock=b.clock,
    )  # fmt: skip


class JobContext:
    """What the passes of one worker share: its backend, the job objects built once on it,
    and the event that stops it (:attr:`stop`, checked between the steps of a run)."""

    def __init__(
        self, backend: Backend, *, stop: threading.Event | None = None,
        fault: Checkpoint | None = None,
    ):  # fmt: skip
        b = self.backend = backend
        self.settings = b.settings
        self.stop = stop if stop is not None else threading.Event()
        self.fault = fault  # tests' hook at every checkpoint (seasons.jobs.state.fault_from_env)
        self.exit_code = 0
        self.state = JobState(b.client, b.keys)
        self.rollup = rollup_of(b)
        self.archives = archives_of(b)
        self.closes = closes_of(
            b, state=self.state, rollup=self.rollup, archives=self.archives,
            checkpoint=self.checkpoint,
        )  # fmt: skip
        self.sweeper = sweeper_of(b, self.archives)
        self.heartbeat = Heartbeat(b.client, b.settings, b.keys)
        self.integrity = Integrity(b.client, b.settings, b.keys, self.heartbeat.worker)
        self.hooks = Hooks(
            b.client, b.keys, b.settings, consumer=self.heartbeat.worker, clock=b.clock
        )

    def checkpoint(self, name: str) -> None:
        if self.fault is not None:
            self.fault(name)
        if self.stop.is_set():
            raise Stopping(name)


# --- one pass of each job -----------------------------------------------------------------


def beat(ctx: JobContext, now: datetime) -> None:
    """Beat with the server's memory figures and safe mode; stop (exit 2) when Redis's
    policy became evicting without ``redis.allow_eviction``."""
    health = read_health(ctx.backend.client, ctx.settings)
    safe = ctx.integrity.refresh()
    memory = {
        "policy": health.policy, "used_memory": health.used_memory,
        "maxmemory": health.maxmemory, "eviction_allowed": health.eviction_allowed,
    }  # fmt: skip
    ctx.heartbeat.beat(now, extra={"redis": memory, **({"safe_mode": safe} if safe else {})})
    if safe is not None:
        log.error("SAFE MODE (%s) since %s: %s; %s", safe.get("reason"),
                  safe.get("detected_at"), safe.get("message"), WHAT_TO_DO)  # fmt: skip
    if health.evicting and not health.eviction_allowed:
        log.error("stopping: %s", eviction_message(health.policy))
        ctx.exit_code = EXIT_EVICTION
        ctx.stop.set()


def close(ctx: JobContext, now: datetime) -> int | str:
    """Check for data loss, then run the due closes, unless in safe mode. A close that
    meets an archive file it would change enters safe mode (``archive_conflict``)."""
    if ctx.integrity.check(now) is not None:
        return SKIPPED
    try:
        return ctx.closes.catch_up(now)
    except ArchiveExists as exc:
        ctx.integrity.enter(ARCHIVE_CONFLICT, exc.message, now)
        raise


def roll_up(ctx: JobContext, now: datetime) -> Any:
    b = ctx.backend
    with locked(b.client, b.keys, "rollup", ctx.settings.worker.lock_ttl) as lock:
        return None if lock is None else ctx.rollup.run(now, routine=True)


def sweep(ctx: JobContext, now: datetime) -> Any:
    if ctx.integrity.in_safe_mode:
        return SKIPPED  # it would drop metadata of members whose archive keys are lost
    b = ctx.backend
    with locked(b.client, b.keys, "sweep", ctx.settings.worker.lock_ttl) as lock:
        return None if lock is None else ctx.sweeper.run(now)


def deliver(ctx: JobContext, now: datetime) -> Any:
    """Deliver the lifecycle events to the webhooks (seasons.hooks): one bounded pass, under
    a lock so that two workers do not retry the same entry at once."""
    if not ctx.settings.hooks:
        return None
    b = ctx.backend
    # Extended before each request and every hooks.TICK while the pass runs, so held through
    # the whole pass; a worker killed meanwhile holds it up to this TTL: its deliveries
    # resume after.
    longest = max(h.timeout for h in ctx.settings.hooks) + timedelta(seconds=1)
    ttl = max(ctx.settings.worker.lock_ttl, longest)
    with locked(b.client, b.keys, "hooks", ttl) as lock:
        if lock is None:
            return None

        def between(name: str) -> None:
            ctx.checkpoint(name)
            lock.extend()

        def alive() -> None:
            # Shutdown aborts the deliveries in flight: SIGTERM never waits on a receiver.
            if ctx.stop.is_set():
                raise Stopping("hooks")
            lock.extend()

        return ctx.hooks.run(between, alive)


# --- the table ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    """One job of the worker."""

    name: str  # its state key (``<ns>:job:<name>``), log lines, metrics label
    does: str  # one line, for ``seasons worker --help``
    interval: str  # the ``worker.*`` setting that spaces its runs
    run: Callable[[JobContext, datetime], Any]  # one pass
    # Run on every tick: the pass itself finds what is due (the heartbeat always is). The
    # closes job is one: it runs every rollup_interval and closes whatever fell due.
    every_tick: bool = False
    thread: str = "default"  # the scheduler's executor: the heartbeat beats beside the work

    def every(self, settings: Settings) -> timedelta:
        value = getattr(settings.worker, self.interval)
        assert isinstance(value, timedelta), self.interval
        return value

    def trigger(self, settings: Settings, start: datetime) -> IntervalTrigger:
        """When the worker's scheduler fires this job: at ``start`` and every interval
        after it, in the configured zone."""
        return IntervalTrigger(
            seconds=self.every(settings).total_seconds(), start_date=start, timezone=settings.zone
        )


# In the order a tick runs them: the heartbeat, closes before the rollup (a close's final
# rollup of a season comes before the routine one), the sweep, then the webhooks.
JOBS: tuple[Job, ...] = (
    Job("heartbeat", "beat, with Redis's memory and safe mode; exit 2 if Redis may evict",
        "heartbeat_interval", beat, every_tick=True, thread="beat"),
    Job("closes", "check for data loss, then close and archive the days and seasons due",
        "rollup_interval", close, every_tick=True),
    Job("rollup", "recompute the open rolled-up boards from their day keys",
        "rollup_interval", roll_up),
    Job("sweep", "set the TTL a key's name implies; drop metadata of members on no board",
        "sweep_interval", sweep),
    # On a thread of its own: a receiver that answers slowly never delays a close.
    Job("hooks", "POST the lifecycle events to the [[hooks]] URLs, retrying failures",
        "hooks_interval", deliver, thread="hooks"),
)  # fmt: skip
NAMES: tuple[str, ...] = tuple(job.name for job in JOBS)
BY_NAME: dict[str, Job] = {job.name: job for job in JOBS}
