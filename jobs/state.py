"""Job state: what each job last did, and the completed steps of each close
(docs/operations.md#the-worker).

Two kinds of hashes, both without TTL (job state is exempt from expiry, docs/contract.md#keys):

- ``<ns>:job:<job>``: the job's summary (``last_start``, ``last_end``, ``last_status``,
  ``last_error``, ``next_run``, ``runs``, ``failures``, ``total_duration``; every instant in
  ISO 8601 with its offset, read back as UTC by :mod:`seasons.jobs.report`; ``close_day``
  also keeps ``through``, the last day closed);
- ``<ns>:job:<job>:<run id>``: one run of a close (``close_day:2026-01-11``,
  ``close_season:S1``): ``step:<name>`` -> when it completed, and ``finished``. A run killed at
  any point and started again skips the steps it recorded and redoes the one in hand, so
  every step must be idempotent.

Between steps a run passes *checkpoints*: the worker stops there on SIGTERM, extends the run's
lock, and tests make the process kill itself or pause there (:func:`fault_from_env`).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from redis.typing import EncodableT

from seasons.connection import RedisClient, decoded
from seasons.keys import Keys

Checkpoint = Callable[[str], None]

FAULT_AT = "SEASONS_FAULT_AT"  # checkpoint name where the fault fires
FAULT = "SEASONS_FAULT"  # kill (SIGKILL itself, the default) | pause (print, wait for stdin)
FAULT_TRACE = "SEASONS_FAULT_TRACE"  # non-empty: print every checkpoint passed


class Stopping(Exception):
    """The worker is shutting down: the run stops between steps and resumes next time."""


def no_checkpoint(name: str) -> None:
    return None


class Run:
    """One resumable run of a close: its recorded steps and its checkpoints."""

    def __init__(
        self,
        client: RedisClient,
        key: str,
        name: str,
        checkpoint: Checkpoint,
        clock: Callable[[], datetime],
    ):
        self.client = client
        self.key = key
        self.name = name
        self.checkpoint = checkpoint
        self.clock = clock
        self.fields = decoded(client.hgetall(key))

    @property
    def finished(self) -> bool:
        return "finished" in self.fields

    def done(self, step: str) -> bool:
        return f"step:{step}" in self.fields

    def step(self, step: str, action: Callable[[], Any]) -> bool:
        """Run ``action`` unless an earlier run recorded ``step``; True if it ran now."""
        if self.done(step):
            return False
        self.checkpoint(f"{self.name}/{step}:start")
        action()
        self.checkpoint(f"{self.name}/{step}:done")
        self.set(f"step:{step}", self.clock().isoformat())
        return True

    def set(self, field: str, value: str) -> None:
        self.client.hset(self.key, field, value)
        self.fields[field] = value

    def finish(self, outcome: str = "ok", keep: timedelta | None = None) -> None:
        """Record the run as finished; with ``keep``, its record expires after that long."""
        stamp = self.clock().isoformat()
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.key, mapping={"finished": stamp, "outcome": outcome})
        if keep is not None:
            pipe.expire(self.key, keep)
        pipe.execute()
        self.fields["finished"] = "yes"
        self.fields["outcome"] = outcome


class JobState:
    """Summaries of the worker's jobs and the runs of its closes."""

    def __init__(self, client: RedisClient, keys: Keys):
        self.client = client
        self.keys = keys

    def get(self, job: str) -> dict[str, str]:
        return decoded(self.client.hgetall(self.keys.job_state(job)))

    def update(self, job: str, **fields: str | datetime | None) -> None:
        """Set fields of a job's summary; None removes a field."""
        key = self.keys.job_state(job)
        drop = [k for k, v in fields.items() if v is None]
        keep: dict[EncodableT, str] = {
            k: v.isoformat() if isinstance(v, datetime) else v
            for k, v in fields.items()
            if v is not None
        }
        pipe = self.client.pipeline(transaction=False)
        if keep:
            pipe.hset(key, mapping=keep)
        if drop:
            pipe.hdel(key, *drop)
        pipe.execute()

    def started(self, job: str, now: datetime) -> None:
        self.update(job, last_start=now)

    def ended(
        self,
        job: str,
        now: datetime,
        status: str,
        error: str | None = None,
        next_run: datetime | None = None,
        duration: float | None = None,
    ) -> None:
        """Record the end of a run, with when the job runs next (None: no time is known,
        the field is removed); also counts ``runs``, ``failures`` and ``total_duration``
        (seconds), which ``/metrics`` exports."""
        self.update(
            job, last_end=now, last_status=status, last_error=error or None, next_run=next_run
        )
        key = self.keys.job_state(job)
        pipe = self.client.pipeline(transaction=False)
        pipe.hincrby(key, "runs", 1)
        if status == "error":
            pipe.hincrby(key, "failures", 1)
        if duration is not None:
            pipe.hincrbyfloat(key, "total_duration", duration)
        pipe.execute()

    def run(
        self, job: str, run_id: str, checkpoint: Checkpoint, clock: Callable[[], datetime]
    ) -> Run:
        name = f"{job}:{run_id}"
        return Run(self.client, self.keys.job_state(name), name, checkpoint, clock)

    def run_finished(self, job: str, run_id: str) -> bool:
        return bool(self.client.hexists(self.keys.job_state(f"{job}:{run_id}"), "finished"))

    def summaries(self, jobs: Iterable[str]) -> dict[str, dict[str, str]]:
        """The summary of each of ``jobs`` (``seasons.jobs.registry.NAMES``), in that order."""
        names = list(jobs)
        pipe = self.client.pipeline(transaction=False)
        for job in names:
            pipe.hgetall(self.keys.job_state(job))
        return {job: dict(found) for job, found in zip(names, pipe.execute(), strict=True)}


def fault_from_env(environ: Mapping[str, str] | None = None) -> Checkpoint | None:
    """A checkpoint hook for crash tests, read once at the worker's edge.

    ``SEASONS_FAULT_AT=<checkpoint>`` makes the process SIGKILL itself there, or with
    ``SEASONS_FAULT=pause`` print ``PAUSED <checkpoint>`` and wait for a line on stdin.
    ``SEASONS_FAULT_TRACE=1`` prints ``CHECKPOINT <name>`` at every checkpoint.
    """
    env = os.environ if environ is None else environ
    point, action, trace = env.get(FAULT_AT, ""), env.get(FAULT, "kill"), env.get(FAULT_TRACE)
    if not point and not trace:
        return None

    def hook(name: str) -> None:
        if trace:
            print(f"CHECKPOINT {name}", flush=True)
        if name != point:
            return
        if action == "pause":
            print(f"PAUSED {name}", flush=True)
            sys.stdin.readline()
        else:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook
