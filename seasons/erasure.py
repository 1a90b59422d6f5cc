"""What the erasures answer: forgetting a member, and clearing a board's period.

Each is a pydantic model whose ``model_dump()`` is the JSON that the admin route and the
CLI's ``--json`` give for the same operation, so the Python API, the CLI and HTTP answer one
JSON for one answer.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class ForgottenBoard(BaseModel):
    """Where a member was removed on one board."""

    keys: list[str] = Field(description="The live and archived sorted sets it was on")
    metadata: bool = Field(description="Whether its metadata was removed")
    files_rewritten: list[str] = Field(
        description="Archive files and claims logs rewritten without it"
    )
    held: int = Field(default=0, description="Its held events removed (docs/writes.md#held-events)")
    moderation: bool = Field(
        default=False, description="Whether its moderation state (hidden or banned) was removed"
    )
    league: bool = Field(
        default=False,
        description="Whether it was removed from the board's league (its tier, its places in "
        "cohorts, its outcomes)",
    )


class Forgotten(BaseModel):
    """Where the member was removed: per board it was on, the keys, its metadata, the
    rewritten archive files (no entry for a board it was not on)."""

    member: str
    boards: dict[str, ForgottenBoard]
    lifecycle: int = Field(
        default=0,
        description="Lifecycle events naming it (member_hidden, ...) deleted from the stream",
    )


class Recomputed(BaseModel):
    """One rolled-up board recomputed from its day keys (``seasons.jobs.reconcile.Outcome``)."""

    target: str
    mode: str  # atomic | sliced
    size: int
    changed: int


class Cleared(BaseModel):
    """What a clear of one period of one board did. A request sent again with the same
    ``run_id`` answers this again and deletes nothing more."""

    run_id: str = Field(description="The clear's id (the Idempotency-Key, or generated)")
    board: str
    window: str
    period: str = Field(description="The period's id")
    with_days: bool
    deleted: list[str] = Field(
        description="Keys removed: the day keys cleared, the rolled-up boards left with no "
        "day (and an all-time base), those that existed when the clear was planned"
    )
    rebuilt: list[Recomputed] = Field(
        description="Rolled-up boards recomputed from the day keys they still have"
    )
