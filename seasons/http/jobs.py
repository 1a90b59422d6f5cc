"""``GET /v1/jobs``: the worker's heartbeat and each job's last and next run, as the worker
recorded them in Redis (it runs in another process). The JSON is that of ``seasons status
--json`` without its ``seasons`` (which ``GET /v1/seasons`` gives)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from seasons.api import Seasons
from seasons.http.deps import SeasonsDep
from seasons.http.errors import ERROR_RESPONSES
from seasons.http.metrics import JobStats
from seasons.jobs.registry import NAMES, jobs_report
from seasons.jobs.state import JobState

router = APIRouter(prefix="/v1", tags=["jobs"], responses={503: ERROR_RESPONSES[503]})


class Jobs(BaseModel):
    # The heartbeat (worker, pid, host, at, interval_seconds, age_seconds, expires_in_seconds),
    # or null when no worker has beaten within three intervals.
    worker: dict[str, Any] | None
    # What the worker found when it detected data loss (reason, message, detected_at, worker),
    # or null; while set, closes and archives are stopped (docs/recovery.md).
    safe_mode: dict[str, Any] | None = None
    # The Redis server: maxmemory-policy, used_memory, maxmemory, read_only, problems, ...
    redis: dict[str, Any] | None = None
    jobs: dict[str, dict[str, str]]  # job -> last_start, last_end, last_status, next_run, ...


def job_stats_reader(s: Seasons) -> JobStats:
    """What ``/metrics`` reads at scrape time: job -> its summary fields, for every job of
    the registry."""

    def read() -> Mapping[str, Mapping[str, Any]]:
        return JobState(s.client, s.keys).summaries(NAMES)

    return read


@router.get("/jobs", response_model=Jobs, summary="Worker heartbeat, and each job's last/next run")
def get_jobs(s: SeasonsDep) -> Jobs:
    return Jobs.model_validate(jobs_report(s, s.clock()))
