"""Admin calls (admin token, or loopback when none is configured): rollup, snapshot, rebuild,
erasure of a member, clearing a board's period, reviewing held events (list, approve,
reject; docs/writes.md#held-events), resetting the demo data set, and reading the audit
trail. Each runs one job's code on the app's client and clock, as the worker and the CLI do
(built by ``seasons.jobs.registry``, no worker or scheduler), and answers the JSON that
``seasons rollup | snapshot | rebuild | forget | clear | held | audit --json`` prints.
Forget, clear and the held events' decisions append their audit entry naming the caller
(:class:`Caller`: the token's name and the request id the guard found)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field, field_validator

from seasons import demo
from seasons import windows as win
from seasons.audit import ACTIONS, MAX_LIMIT, MAX_REASON
from seasons.erasure import Cleared, Forgotten, Recomputed
from seasons.held import MAX_LIMIT as MAX_HELD
from seasons.http.boards import path_member
from seasons.http.deps import AdminAccess, CallerDep, SeasonsDep
from seasons.http.errors import AUTH_RESPONSES, ERROR_RESPONSES, ErrorBody
from seasons.http.reset import reset_namespace
from seasons.http.scores import IDEMPOTENCY_KEY, batch_id_of
from seasons.jobs import registry
from seasons.jobs.reconcile import Outcome
from seasons.jobs.rollup import ALL, REBUILDS
from seasons.models import AuditPage, HeldDecision, HeldPage, WriteResult

# Why an action was done, for the audit trail (seasons.audit).
ReasonQ = Annotated[
    str | None, Query(description=f"Why, for the audit trail (at most {MAX_REASON} characters)")
]

router = APIRouter(
    prefix="/v1/admin", tags=["admin"], dependencies=[AdminAccess],
    responses={
        **ERROR_RESPONSES, **AUTH_RESPONSES,
        409: {"model": ErrorBody, "description": "Conflicts with stored state"},
    },
)  # fmt: skip


class RollupIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    board: str | None = Field(default=None, description="One board; default every board")


class RebuildIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    board: str | None = Field(default=None, description="One board; default every board")
    window: str = Field(
        default=ALL, json_schema_extra={"enum": list(REBUILDS)},
        description="A rolled-up window, or all of them",
    )  # fmt: skip
    period: str = Field(
        default="current",
        description="A day, week, month or season id (YYYY-MM-DD, YYYY-MM, S3), current, previous",
    )

    @field_validator("window")
    @classmethod
    def _rebuildable(cls, window: str) -> str:
        if window not in REBUILDS:
            raise ValueError(f"unknown window {window!r}: use {', '.join(REBUILDS)}")
        return window


class Rollups(BaseModel):
    rollups: list[Recomputed]


class Rebuilt(BaseModel):
    rebuilt: list[Recomputed]


class SnapshotIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    season: str = Field(description="Season id; a running season is snapshotted as S@<ts>")


class Snapshots(BaseModel):
    """Per board: the archive id written, what happened (snapshot, archived,
    already_archived) and the archive's manifest."""

    snapshots: list[dict[str, Any]]


class ClearIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    window: str = Field(
        json_schema_extra={"enum": list(win.WINDOWS)},
        description="The window of the period (one the board keeps)",
    )
    period: str = Field(
        description="A day, week, month or season id (YYYY-MM-DD, YYYY-MM, S3), current, previous"
    )
    with_days: bool = Field(
        default=False, description="A rolled-up window: clear its days too (else recompute it)"
    )
    reason: str | None = Field(
        default=None, description=f"Why, for the audit trail (at most {MAX_REASON} characters)"
    )


class DemoResetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    days: int = Field(default=35, ge=1, le=60)
    players: int = Field(default=200, ge=1, le=5000)


class DemoReset(BaseModel):
    deleted_keys: int
    deleted_files: int
    seeded: WriteResult


def _recomputed(outcomes: list[Outcome]) -> list[Recomputed]:
    return [Recomputed.model_validate(asdict(o)) for o in outcomes]


@router.post("/rollup", response_model=Rollups, summary="Run the rollup job now")
def rollup(s: SeasonsDep, body: RollupIn | None = None) -> Rollups:
    outcomes = registry.rollup_of(s.backend).run(s.clock(), body.board if body else None)
    return Rollups(rollups=_recomputed(outcomes))


@router.post(
    "/rebuild", response_model=Rebuilt,
    summary="Recompute week and/or season boards of a period from their day keys",
)  # fmt: skip
def rebuild(body: RebuildIn, s: SeasonsDep) -> Rebuilt:
    outcomes = registry.rollup_of(s.backend).rebuild(
        s.clock(), board=body.board, window=body.window, period=body.period
    )
    return Rebuilt(rebuilt=_recomputed(outcomes))


@router.post(
    "/snapshot", response_model=Snapshots,
    summary="Archive files of a running season (S@<ts>), or close an ended season now",
)  # fmt: skip
def snapshot(body: SnapshotIn, s: SeasonsDep) -> Snapshots:
    results = registry.closes_of(s.backend).snapshot(body.season, s.clock())
    return Snapshots(snapshots=[r.to_dict() for r in results])


@router.delete(
    "/members/{member:path}", response_model=Forgotten,
    summary="Erase a member everywhere: live and archived boards, metadata, archive files",
)  # fmt: skip
def forget_member(
    request: Request, s: SeasonsDep, caller: CallerDep,
    member: Annotated[str, Path(description="Member id")], reason: ReasonQ = None,
) -> Forgotten:  # fmt: skip
    # The erasure checks the member rule (InvalidMember, 422) before any Redis call.
    member = path_member(request, member, stored=True)
    return s.forget(member, actor=caller.actor, reason=reason, request_id=caller.request_id)


@router.post(
    "/boards/{board}/clear", response_model=Cleared,
    summary="Clear one period of a board: a day's key (and recompute the boards holding it), "
    "or recompute a rolled-up board from its days (with_days: clear them first)",
)  # fmt: skip
def clear(
    body: ClearIn, s: SeasonsDep, caller: CallerDep,
    board: Annotated[str, Path(description="Board name")],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_KEY,
            description=(
                "The clear's id (1-128 bytes of UTF-8, no control characters; generated when "
                "absent and returned as run_id). The same request again with it resumes a "
                "clear that was stopped, or answers the finished one (48 hours), never "
                "deleting twice; another request under the same key is refused (409 "
                "run_id_reused)."
            ),
        ),
    ] = None,
) -> Cleared:  # fmt: skip
    run_id = None if idempotency_key is None else batch_id_of(idempotency_key)
    return s.clear(
        board, body.window, body.period, body.with_days, run_id=run_id, actor=caller.actor,
        reason=body.reason, request_id=caller.request_id,
    )  # fmt: skip


@router.get(
    "/audit", response_model=AuditPage,
    summary="The audit trail (forget, clear, restore: who, when, why), newest first",
)  # fmt: skip
def audit(
    s: SeasonsDep,
    member: Annotated[str | None, Query(description="Only the entries naming this member")] = None,
    action: Annotated[str | None, Query(
        description="Only this action's entries", json_schema_extra={"enum": list(ACTIONS)},
    )] = None,
    limit: Annotated[int, Query(
        description=f"Entries returned, 1-{MAX_LIMIT}",
        json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT},
    )] = 20,
    after: Annotated[str | None, Query(
        description="A page's next (a stream id): only the entries older than it")] = None,
) -> AuditPage:  # fmt: skip
    return s.audit(member=member, action=action, limit=limit, after=after)


BoardP = Annotated[str, Path(description="Board name")]
HeldIdP = Annotated[
    str, Path(description="The held event's id (as its page lists it: <batch_id>#<index> when it "
              "had none; percent-encode '#' and '/')"),
]  # fmt: skip


@router.get(
    "/boards/{board}/held", response_model=HeldPage,
    summary="The events a per-member limit holds on a board, oldest arrival first",
)  # fmt: skip
def list_held(
    s: SeasonsDep, board: BoardP,
    limit: Annotated[int, Query(description=f"Events returned, 1-{MAX_HELD}",
                                json_schema_extra={"minimum": 1, "maximum": MAX_HELD})] = 100,
    after: Annotated[str | None, Query(description="A page's next: the events after it")] = None,
) -> HeldPage:  # fmt: skip
    return s.held(board, limit=limit, after=after)


@router.post(
    "/boards/{board}/held/{event_id:path}/approve", response_model=HeldDecision,
    summary="Apply a held event once, with its original ts, to every window it reaches",
)  # fmt: skip
def approve_held(
    s: SeasonsDep, caller: CallerDep, board: BoardP, event_id: HeldIdP, reason: ReasonQ = None
) -> HeldDecision:
    return s.approve(
        board, event_id, actor=caller.actor, reason=reason, request_id=caller.request_id
    )


@router.post(
    "/boards/{board}/held/{event_id:path}/reject", response_model=HeldDecision,
    summary="Drop a held event: it is never applied",
)  # fmt: skip
def reject_held(
    s: SeasonsDep, caller: CallerDep, board: BoardP, event_id: HeldIdP, reason: ReasonQ = None
) -> HeldDecision:
    return s.reject(
        board, event_id, actor=caller.actor, reason=reason, request_id=caller.request_id
    )


@router.post(
    "/demo/reset", response_model=DemoReset,
    summary="Delete every board's data and seed the demo data set (namespaces demo* only)",
)  # fmt: skip
def demo_reset(s: SeasonsDep, body: DemoResetIn | None = None) -> DemoReset:
    body = body or DemoResetIn()
    keys, files = reset_namespace(s)
    seeded = demo.seed_demo(s, days=body.days, players=body.players)
    return DemoReset(deleted_keys=keys, deleted_files=files, seeded=seeded)
