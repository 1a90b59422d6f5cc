"""``GET /v1/jobs``: the worker's heartbeat and each job's last and next run, as the worker
recorded them in Redis (it runs in another process). The JSON is that of ``seasons status
--json`` without its ``seasons`` (which ``GET /v1/seasons`` gives)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter

from seasons.api import Seasons
from seasons.hooks import summaries as hook_summaries
from seasons.http.deps import SeasonsDep
from seasons.http.errors import ERROR_RESPONSES
from seasons.http.metrics import HOOKS_FIELD, JobStats
from seasons.jobs.registry import NAMES
from seasons.jobs.report import JobsReport, jobs_report
from seasons.jobs.state import JobState

router = APIRouter(prefix="/v1", tags=["jobs"], responses={503: ERROR_RESPONSES[503]})


def job_stats_reader(s: Seasons) -> JobStats:
    """What ``/metrics`` reads at scrape time: job -> its summary fields, for every job of
    the registry; the hooks job's also has each webhook's deliveries (under HOOKS_FIELD)."""

    def read() -> Mapping[str, Mapping[str, Any]]:
        stats: dict[str, Mapping[str, Any]] = dict(JobState(s.client, s.keys).summaries(NAMES))
        hooks = hook_summaries(s.client, s.keys, s.settings)
        if hooks:
            by_hook = {name: hook.model_dump(mode="json") for name, hook in hooks.items()}
            stats["hooks"] = {**stats.get("hooks", {}), HOOKS_FIELD: by_hook}
        return stats

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
