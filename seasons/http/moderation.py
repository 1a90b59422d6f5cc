"""Hidden and banned members (docs/fair-play.md): ``PUT`` and ``GET
/v1/admin/members/{member}/moderation`` (admin token), as ``Seasons.moderate`` and
``Seasons.moderation`` and ``seasons hide|unhide|ban|unban`` do. The change appends its audit
entries naming the caller (the token's name, the request id)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from seasons.audit import MAX_REASON
from seasons.http.boards import path_member
from seasons.http.deps import AdminAccess, CallerDep, SeasonsDep
from seasons.http.errors import AUTH_RESPONSES, ERROR_RESPONSES
from seasons.models import MemberModeration, ModerationChange
from seasons.moderation import DEFAULT_MODE, MODES, STATES

router = APIRouter(
    prefix="/v1/admin", tags=["admin"], dependencies=[AdminAccess],
    responses={**ERROR_RESPONSES, **AUTH_RESPONSES},
)  # fmt: skip

MemberP = Annotated[str, Path(description="Member id")]


class ModerationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Plain strings, checked by the domain: an unknown state or mode is its own error code.
    state: str = Field(json_schema_extra={"enum": list(STATES)}, description="The new state")
    mode: str = Field(
        default=DEFAULT_MODE, json_schema_extra={"enum": list(MODES)},
        description="The member's self-view: shadow (as if visible) or open (flagged)",
    )  # fmt: skip
    boards: list[str] | None = Field(default=None, description="Boards; default every board")
    reason: str | None = Field(
        default=None, description=f"Why, for the audit trail (required, at most {MAX_REASON} "
        "characters)",
    )  # fmt: skip


@router.put(
    "/members/{member:path}/moderation", response_model=ModerationChange,
    summary="Set a member's state on boards: visible, hidden (shadow or open) or banned",
)  # fmt: skip
def moderate(
    request: Request, body: ModerationIn, s: SeasonsDep, caller: CallerDep, member: MemberP
) -> ModerationChange:
    member = path_member(request, member)
    return s.moderate(
        member, body.state, mode=body.mode, boards=body.boards, reason=body.reason or "",
        actor=caller.actor, request_id=caller.request_id,
    )  # fmt: skip


@router.get(
    "/members/{member:path}/moderation", response_model=MemberModeration,
    summary="A member's state, mode, reason, time and actor on every board",
)  # fmt: skip
def moderation(request: Request, s: SeasonsDep, member: MemberP) -> MemberModeration:
    return s.moderation(path_member(request, member))
