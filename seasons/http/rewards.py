"""Rewards of a season: ``GET /v1/seasons/{season}/rewards`` (a member's result and claim, or
a page of the results with their summary) and ``POST
/v1/seasons/{season}/rewards/{member}/claim`` (write token), exactly once.

Each body is the ``model_dump_json()`` of what the Python API answers
(:meth:`seasons.Seasons.rewards`, :meth:`seasons.Seasons.claim`), and the CLI's ``--json``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from pydantic import BaseModel

from seasons.http.boards import JsonBody, path_member
from seasons.http.deps import SeasonsDep, WriteAccess
from seasons.http.errors import AUTH_RESPONSES, ERROR_RESPONSES, ErrorBody
from seasons.http.scores import IDEMPOTENCY_KEY, batch_id_of
from seasons.models import Claim, MemberReward, RewardsPage
from seasons.read_limits import MAX_LIMIT

_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {
        "model": ErrorBody,
        "description": "The season's results are not computed yet (rewards_not_ready), or "
        "are a snapshot's (provisional: never claimable)",
    }
}
router = APIRouter(prefix="/v1", tags=["rewards"], responses={**ERROR_RESPONSES, **_CONFLICT})

Season = Annotated[
    str, Path(description="A season id (S3), or a snapshot S3@YYYYMMDDTHHMMSSZ (provisional)")
]
BoardQ = Annotated[str, Query(description="A configured board")]
Member = Annotated[str, Path(description="Member id (1-128 bytes of UTF-8)")]


def _body(model: BaseModel) -> JsonBody:
    return JsonBody(model.model_dump_json())


@router.get(
    "/seasons/{season}/rewards", response_model=None,
    responses={200: {"model": MemberReward | RewardsPage, "description": "Successful Response"}},
    summary="A member's reward and claim in a season, or a page of the season's results",
    description=(
        "With `member`: its rank, score, reward (null below every tier) and whether and when "
        "it was claimed (404 `no_result` if it has no result). Without: the results in rank "
        "order, `offset`/`limit` paged, with the summary (each tier with the members it "
        "granted and the claims of its reward). 409 `rewards_not_ready` until the season's "
        "close has computed its results."
    ),
)  # fmt: skip
def get_rewards(
    s: SeasonsDep,
    season: Season,
    board: BoardQ,
    member: Annotated[str | None, Query(description="One member's result")] = None,
    offset: Annotated[
        int, Query(description="Entries to skip", json_schema_extra={"minimum": 0})
    ] = 0,
    limit: Annotated[
        int, Query(description=f"Entries per page, 1-{MAX_LIMIT}",
                   json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT})
    ] = 100,
) -> JsonBody:  # fmt: skip
    return _body(s.rewards(board, season, member, offset=offset, limit=limit))


@router.post(
    "/seasons/{season}/rewards/{member:path}/claim", response_model=Claim,
    dependencies=[WriteAccess], responses=AUTH_RESPONSES,
    summary="Claim a member's reward of a season, exactly once",
    description=(
        "Records the claim atomically and answers the reward. Every later (or concurrent) "
        "claim of the same reward answers the same reward and the first claim's "
        "`claimed_at`, with `already_claimed` true, except a resend with the recording "
        "claim's `Idempotency-Key`. 404 `no_reward` for a member without "
        "reward; 409 `rewards_not_ready` before the results exist, `provisional` for a "
        "snapshot's. An answer with `already_claimed` false is first appended to the "
        "season's claims log under `archive.dir` and fsynced, so it survives a Redis that "
        "lost its data; 503 `claims_log_unavailable` when it cannot be (the claim stands: "
        "resend with the same `Idempotency-Key`)."
    ),
)  # fmt: skip
def claim_reward(
    request: Request, s: SeasonsDep, season: Season, member: Member, board: BoardQ,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_KEY,
            description=(
                "The claim's id (1-128 bytes of UTF-8, no control characters; generated when "
                "absent). A claim sent again with the id of the claim that recorded the reward "
                "answers already_claimed false again: a client that lost an answer can resend."
            ),
        ),
    ] = None,
) -> JsonBody:  # fmt: skip
    claim_id = None if idempotency_key is None else batch_id_of(idempotency_key)
    found = s.claim(board, season, path_member(request, member), claim_id=claim_id)
    return _body(found)
