"""Writes: ``POST /v1/scores`` (write token, or loopback when none is configured)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from seasons.errors import InvalidInput
from seasons.events import MAX_BATCH
from seasons.http.deps import MetricsDep, SeasonsDep, WriteAccess
from seasons.http.errors import AUTH_RESPONSES, ERROR_RESPONSES
from seasons.models import Event, WriteResult

router = APIRouter(prefix="/v1", tags=["scores"], responses={**ERROR_RESPONSES, **AUTH_RESPONSES})


class ScoresIn(BaseModel):
    """A batch of events. The events are checked by the write path, not here, so that a bad
    event is reported with its index and field exactly as the Python API and the CLI do."""

    model_config = ConfigDict(extra="forbid")

    events: Annotated[
        list[Any],
        WithJsonSchema({"type": "array", "items": Event.model_json_schema()}),
        Field(description=f"At most {MAX_BATCH} events; one bad event rejects the batch"),
    ]


@router.post(
    "/scores", response_model=WriteResult, dependencies=[WriteAccess],
    summary="Record a batch of score events (validated whole, applied atomically per board)",
)  # fmt: skip
def post_scores(body: ScoresIn, s: SeasonsDep, metrics: MetricsDep) -> WriteResult:
    try:
        result = s.submit_many(body.events)
    except InvalidInput:
        metrics.events.labels("rejected").inc(len(body.events))
        raise
    metrics.events.labels("applied").inc(result.applied)
    metrics.events.labels("duplicate").inc(result.duplicates)
    return result
