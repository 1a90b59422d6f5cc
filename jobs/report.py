"""What ``GET /v1/jobs`` and ``seasons status --json`` say about the worker: typed, one shape.

The worker keeps its state in Redis as strings (hash fields, a JSON heartbeat); this module
reads them into models whose ``model_dump(mode="json")`` is the HTTP JSON: counts are JSON
integers, durations JSON numbers (seconds), and every instant is ISO 8601 in UTC
(``2026-12-01T07:05:00.123456Z``), whatever zone the worker or its scheduler used.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from seasons.api import Seasons
from seasons.hooks import HookSummary
from seasons.hooks import summaries as hook_summaries
from seasons.jobs.heartbeat import read as read_heartbeat
from seasons.jobs.integrity import read_safe_mode
from seasons.jobs.registry import NAMES
from seasons.jobs.state import JobState
from seasons.redis_health import read as read_health


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("an instant needs its UTC offset")
    return value.astimezone(UTC)


# An instant, given in UTC whatever offset it was written with.
UtcTime = Annotated[datetime, AfterValidator(_utc)]


class JobSummary(BaseModel):
    """One job's last run and next run, as the worker recorded them."""

    last_start: UtcTime | None = None
    last_end: UtcTime | None = None
    # ok, error, or safe_mode (registry.SKIPPED: a closes or sweep pass safe mode skipped)
    last_status: Literal["ok", "error", "safe_mode"] | None = None
    last_error: str | None = None
    next_run: UtcTime | None = Field(
        default=None,
        description="When the worker's scheduler fires the job next (its interval trigger); "
        "null when no scheduler runs it (a worker driven tick by tick)",
    )
    runs: int = 0
    failures: int = 0
    total_duration: float = Field(default=0.0, description="Seconds spent in all its runs")


class SafeMode(BaseModel):
    """What the worker found when it detected data loss; closes and archives are stopped."""

    reason: str
    message: str = ""
    detected_at: UtcTime | None = None
    worker: str | None = None


class WorkerMemory(BaseModel):
    """The Redis server's memory as the worker saw it at its last beat."""

    policy: str
    used_memory: int
    maxmemory: int  # 0: no limit
    eviction_allowed: bool


class WorkerBeat(BaseModel):
    """The worker's last heartbeat (null fields: a heartbeat that could not be read)."""

    worker: str | None = None  # host:pid:random
    pid: int | None = None
    host: str | None = None
    at: UtcTime | None = None
    interval_seconds: float | None = None
    age_seconds: float | None = None
    expires_in_seconds: float | None = None
    redis: WorkerMemory | None = None
    safe_mode: SafeMode | None = None  # as the worker saw it at that beat


class RedisReport(BaseModel):
    """The Redis server as it concerns Seasons (on a cluster: the worst master)."""

    policy: str
    used_memory: int
    maxmemory: int  # 0: no limit
    read_only: bool
    eviction_allowed: bool
    evicting: bool
    full: bool
    memory_ratio: float | None
    problems: dict[str, str]


class JobsReport(BaseModel):
    """The JSON of ``GET /v1/jobs``; ``seasons status --json`` is it plus ``seasons`` (the
    JSON of ``GET /v1/seasons``)."""

    worker: WorkerBeat | None = Field(
        description="The heartbeat, or null when no worker beat within three intervals"
    )
    safe_mode: SafeMode | None = Field(
        description="Set while the namespace is in safe mode (docs/recovery.md), else null"
    )
    redis: RedisReport
    jobs: dict[str, JobSummary] = Field(description="Every job of the worker, by name")
    hooks: dict[str, HookSummary] = Field(
        default_factory=dict,
        description="Every configured webhook ([[hooks]]) by name: events delivered, failed "
        "(given up after max_age), pending, retrying, and the last failed attempt",
    )


def jobs_report(app: Seasons, now: datetime) -> JobsReport:
    """The heartbeat (None when no worker is alive), safe mode (None unless the namespace is
    in it), the Redis server's policy, memory and role, each job's last and next run, and
    each webhook's deliveries."""
    beat: dict[str, Any] | None = read_heartbeat(app.client, app.keys, now)
    return JobsReport(
        worker=None if beat is None else WorkerBeat.model_validate(_readable(beat)),
        safe_mode=_safe_mode(read_safe_mode(app.client, app.keys)),
        redis=RedisReport.model_validate(read_health(app.client, app.settings).to_dict()),
        jobs={
            job: JobSummary.model_validate(fields)
            for job, fields in JobState(app.client, app.keys).summaries(NAMES).items()
        },
        hooks=hook_summaries(app.client, app.keys, app.settings),
    )


def _readable(beat: dict[str, Any]) -> dict[str, Any]:
    """The heartbeat's fields that have the type the model expects (a heartbeat written by
    another version, or damaged, loses the others rather than failing the report)."""
    out = {}
    for name in WorkerBeat.model_fields:
        try:
            WorkerBeat.model_validate({name: beat.get(name)})
        except ValueError:
            continue
        out[name] = beat.get(name)
    return out


def _safe_mode(found: dict[str, Any] | None) -> SafeMode | None:
    if found is None:
        return None
    try:
        return SafeMode.model_validate(found)
    except ValueError:
        return SafeMode(reason=str(found.get("reason", "unknown")), message=str(found))
