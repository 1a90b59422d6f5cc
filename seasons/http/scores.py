"""Writes: ``POST /v1/scores`` (write token, or loopback when none is configured)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from seasons.api import Seasons
from seasons.errors import InvalidBatchId, InvalidInput
from seasons.events import MAX_BATCH
from seasons.http.deps import MetricsDep, SeasonsDep, WriteAccess
from seasons.http.errors import AUTH_RESPONSES, ERROR_RESPONSES
from seasons.http.metrics import Metrics
from seasons.models import Event, WriteResult
from seasons.writes import check_batch_id

IDEMPOTENCY_KEY = "Idempotency-Key"
_RETURN_HELP = (
    "standing: the reply's standings give, per event, its member's rank and score after the "
    "batch, read in the same atomic step as the write (on a resend of an applied batch: "
    "read when resent)"
)
_WINDOW_HELP = (
    "The window of the standings (a window every board of the batch keeps); default season"
)

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
    return_: Literal["standing"] | None = Field(
        default=None, alias="return", description=_RETURN_HELP
    )
    standing_window: str | None = Field(default=None, description=_WINDOW_HELP)


@router.post(
    "/scores", response_model=WriteResult, dependencies=[WriteAccess],
    summary="Record a batch of score events (validated whole, applied atomically per board)",
)  # fmt: skip
def post_scores(
    body: ScoresIn,
    s: SeasonsDep,
    metrics: MetricsDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_KEY,
            description=(
                "The batch id (1-128 bytes of UTF-8, no control characters; spaces and tabs "
                "around it are not part of it; generated when absent and returned as "
                "batch_id). Sending the same batch again with it within 48 hours answers the "
                "original result and writes nothing; other events under the same key are "
                "refused (409 batch_id_reused)."
            ),
        ),
    ] = None,
    return_: Annotated[
        Literal["standing"] | None, Query(alias="return", description=_RETURN_HELP)
    ] = None,
    window: Annotated[str | None, Query(description=_WINDOW_HELP)] = None,
) -> WriteResult:
    batch_id = None if idempotency_key is None else batch_id_of(idempotency_key)
    return record(s, metrics, body.events, batch_id, standing_of(body, return_, window))


def standing_of(
    body: ScoresIn, returned: str | None, window: str | None
) -> tuple[bool, str | None]:
    """Whether the reply carries standings, and their window, as the body (``return``,
    ``standing_window``) or the query (``return``, ``window``) asks: each in either place,
    or in both alike."""
    for name, in_body, in_query in (
        ("return", body.return_, returned), ("standing_window", body.standing_window, window),
    ):  # fmt: skip
        if None not in (in_body, in_query) and in_body != in_query:
            raise InvalidInput(
                f"{name} is {in_body!r} in the body but {in_query!r} in the query; nothing written",
                {"field": name},
            )
    standing = "standing" in (body.return_, returned)
    return standing, body.standing_window if window is None else window


def record(
    s: Seasons,
    metrics: Metrics,
    events: list[Any],
    batch_id: str | None,
    standing: tuple[bool, str | None] = (False, None),
) -> WriteResult:
    """Write a batch and count its events: the route's work, and the fast path's
    (:mod:`seasons.http.fast`), so the two cannot differ. Blocking: run it in a thread.
    ``standing``: whether the result carries standings, and their window."""
    try:
        result = s.submit_many(
            events, batch_id=batch_id, standing=standing[0], standing_window=standing[1]
        )
    except InvalidInput:
        metrics.events.labels("rejected").inc(len(events))
        raise
    metrics.events.labels("applied").inc(result.applied)
    metrics.events.labels("duplicate").inc(result.duplicates)
    metrics.events.labels("held").inc(result.held)
    metrics.events.labels("banned").inc(result.banned)
    return result


def batch_id_of(header: str) -> str:
    """The batch id of an ``Idempotency-Key`` header. Header values reach us decoded as
    Latin-1 (HTTP's bytes), so they are read back as the UTF-8 that clients send. Spaces and
    tabs around the value are not part of it (RFC 9110, section 5.5: httptools drops those
    before a value, not those after), so ``k1 `` is the key ``k1``, as through any proxy."""
    try:
        text = header.strip(" \t").encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise InvalidBatchId(
            f"{IDEMPOTENCY_KEY} header is not valid UTF-8; nothing written",
            {"field": IDEMPOTENCY_KEY},
        ) from None
    return check_batch_id(text, f"{IDEMPOTENCY_KEY} header")
