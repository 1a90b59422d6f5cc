"""League reads and cohort reward claims (docs/leagues.md): ``GET
/v1/leagues/{board}/members/{member}``, ``GET /v1/leagues/{board}/{period}/cohorts/{id}``,
``GET /v1/leagues/{board}`` (public, like the board reads) and ``POST
/v1/leagues/{board}/{period}/rewards/{member}/claim`` (write token, like a season claim).

Each read is the facade's prepared read (:attr:`seasons.Seasons.league_reads`), awaited on the
event loop: one script call; each body is the ``model_dump_json()`` of what the Python API
answers, and the CLI's ``--json``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request

from seasons.http.boards import JsonBody, path_member
from seasons.http.deps import SeasonsDep, ServicesDep, WriteAccess
from seasons.http.errors import AUTH_RESPONSES, ERROR_RESPONSES, ErrorBody
from seasons.http.scores import IDEMPOTENCY_KEY, batch_id_of
from seasons.models import LeagueClaim, LeagueCohort, LeagueOverview

_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorBody,
        "description": "The period's close is not complete (rewards_not_ready)",
    }
}
router = APIRouter(prefix="/v1/leagues", tags=["leagues"], responses=ERROR_RESPONSES)

Board = Annotated[str, Path(description="A configured board with a league")]
Member = Annotated[str, Path(description="Member id (1-128 bytes of UTF-8)")]
PeriodP = Annotated[
    str, Path(description="A period id of the league's window, current or previous")
]
PeriodQ = Annotated[
    str, Query(description="A period id of the league's window, current or previous")
]


def _answers(model: Any) -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model, "description": "Successful Response"}, **ERROR_RESPONSES}


@router.post(
    "/{board}/{period}/rewards/{member:path}/claim", response_model=LeagueClaim,
    dependencies=[WriteAccess], responses={**AUTH_RESPONSES, **_CONFLICT},
    summary="Claim a member's cohort reward of a league period, exactly once",
    description=(
        "As a season's claim: the first claim records it, every other answers the same reward "
        "and `claimed_at` with `already_claimed` true, except a resend with the recording "
        "claim's `Idempotency-Key`. 404 `no_reward` for a member without one; 409 "
        "`rewards_not_ready` before the period's close is complete."
    ),
)  # fmt: skip
def claim_league(
    request: Request, s: SeasonsDep, board: Board, period: PeriodP, member: Member,
    idempotency_key: Annotated[
        str | None,
        Header(alias=IDEMPOTENCY_KEY,
               description="The claim's id (1-128 bytes of UTF-8; generated when absent)"),
    ] = None,
) -> JsonBody:  # fmt: skip
    claim_id = None if idempotency_key is None else batch_id_of(idempotency_key)
    found = s.claim_league(board, period, path_member(request, member), claim_id=claim_id)
    return JsonBody(found.model_dump_json())


@router.get(
    "/{board}/members/{member:path}", response_model=None, responses=_answers(LeagueCohort),
    summary="A member's cohort with its standings and zones (404 not_in_league if none)",
)  # fmt: skip
async def member_cohort(
    request: Request, services: ServicesDep, board: Board, member: Member,
    period: PeriodQ = "current",
) -> JsonBody:  # fmt: skip
    read = services.seasons.league_reads.member(board, path_member(request, member), period)
    return JsonBody(await services.body(read))


@router.get(
    "/{board}/{period}/cohorts/{cohort}", response_model=None, responses=_answers(LeagueCohort),
    summary="A cohort's standings and zones",
)  # fmt: skip
async def cohort(
    services: ServicesDep, board: Board, period: PeriodP,
    cohort: Annotated[int, Path(description="Cohort id", json_schema_extra={"minimum": 1})],
) -> JsonBody:  # fmt: skip
    return JsonBody(
        await services.body(services.seasons.league_reads.cohort(board, cohort, period))
    )


@router.get(
    "/{board}", response_model=None, responses=_answers(LeagueOverview),
    summary="Members and cohorts per tier of a league period",
)  # fmt: skip
async def overview(services: ServicesDep, board: Board, period: PeriodQ = "current") -> JsonBody:
    return JsonBody(await services.body(services.seasons.league_reads.overview(board, period)))
