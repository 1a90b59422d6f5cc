"""``GET /v1/lifecycle``: the last events of the lifecycle stream, newest first (what a
consumer group reads from ``<ns>:lifecycle``; docs/contract.md#lifecycle-events)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from seasons.http.deps import SeasonsDep
from seasons.http.errors import ERROR_RESPONSES
from seasons.lifecycle import MAX_LIMIT, LifecycleEvents

router = APIRouter(prefix="/v1", tags=["lifecycle"], responses={503: ERROR_RESPONSES[503]})

LimitQ = Annotated[
    int, Query(description=f"Events returned, 1-{MAX_LIMIT}",
               json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT}),
]  # fmt: skip
AfterQ = Annotated[
    str | None,
    Query(description="A stream_id from a page: only the events older than it (the next page)"),
]


@router.get(
    "/lifecycle", response_model=LifecycleEvents,
    summary="The last lifecycle events (day closed, season archived, ...), newest first",
    responses={422: ERROR_RESPONSES[422]},
)  # fmt: skip
def get_lifecycle(s: SeasonsDep, limit: LimitQ = 20, after: AfterQ = None) -> LifecycleEvents:
    return s.lifecycle(limit, after)
