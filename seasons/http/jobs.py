"""``GET /v1/jobs``: the worker's heartbeat and each job's last and next run, as the worker
recorded them in Redis (it runs in another process). The JSON is that of ``seasons status
--json`` without its ``seasons`` (which ``GET /v1/seasons`` gives)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter

from seasons.api import Seasons
from seasons.http.deps import SeasonsDep
from seasons.http.errors import ERROR_RESPONSES
from seasons.http.metrics import JobStats
from seasons.jobs.registry import NAMES
from seasons.jobs.report import JobsReport, jobs_report
from seasons.jobs.state import JobState

router = APIRouter(prefix="/v1", tags=["jobs"], responses={503: ERROR_RESPONSES[503]})


def job_stats_reader(s: Seasons) -> JobStats:
    """What ``/metrics`` reads at scrape time: job -> its summary fields, for every job of
    the registry."""

    def read() -> Mapping[str, Mapping[str, Any]]:
        return JobState(s.client, s.keys).summaries(NAMES)

    return read


@router.get(
    "/jobs", response_model=JobsReport, summary="Worker heartbeat, and each job's last/next run",
    description=(
        "Counts are integers and durations numbers of seconds; every instant is ISO 8601 in "
        "UTC. A job's next_run is the next fire time of the worker's scheduler for it (null "
        "while no scheduler runs it)."
    ),
)  # fmt: skip
def get_jobs(s: SeasonsDep) -> JobsReport:
    return jobs_report(s, s.clock())
