"""Result and input models; ``model_dump()`` of a result is exactly its HTTP JSON."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MetaValue = str | int | float | bool | None


class Event(BaseModel):
    """One score event as apps send it (validated as a batch by :mod:`seasons.events`)."""

    model_config = ConfigDict(extra="forbid")

    board: str
    member: str
    value: float | int
    ts: str | float | int | None = Field(
        default=None, description="RFC 3339 with offset, or epoch seconds; default now"
    )
    event_id: str | None = Field(
        default=None, description="1-128 bytes; makes the write idempotent"
    )
    metadata: dict[str, MetaValue] | None = None


class WriteResult(BaseModel):
    """What a write batch did. A resend of the same batch id answers the original result."""

    applied: int = Field(description="Events this batch applied")
    duplicates: int = Field(description="Events whose event_id was applied already")
    # Absent from sums of several batches (an import's total, the demo data set).
    batch_id: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The batch's id (the Idempotency-Key, or generated): resend with it",
    )


class Entry(BaseModel):
    rank: int
    member: str
    score: float
    metadata: dict[str, Any] = Field(default_factory=dict)


class EntryDetail(Entry):
    """One member's entry with where it stands on the whole board (a read of one member)."""

    percentile: float = Field(
        description="100 x (ranked members with a strictly worse score) / (ranked members), "
        "0..100: the share of the board this member is ahead of (0 for the last, or alone)"
    )
    gap_up: float | None = Field(
        description="How much the score must improve to reach the nearest strictly better "
        "score on the board (|better - score|); null when no score is better (first, or "
        "tied for first)"
    )
    total: int = Field(description="Ranked members on the board")


class Page(BaseModel):
    board: str
    window: str
    period: str
    total: int
    entries: list[Entry]


class HistoryPoint(BaseModel):
    period: str
    rank: int | None
    score: float | None


class History(BaseModel):
    board: str
    window: str
    member: str
    history: list[HistoryPoint]


class ClimbTarget(BaseModel):
    rank: int = Field(description="The rank asked for")
    score: float | None = Field(
        description="The score at that position in the board's order; null when the board "
        "has fewer members"
    )
    gap: float = Field(
        description="How much the member's score must change to reach that score (its "
        "absolute difference); 0 when the member's rank is that rank or better, or the board "
        "has fewer members"
    )


class Climb(BaseModel):
    """What a member needs to reach some ranks of a board."""

    board: str
    window: str
    period: str
    member: str
    rank: int
    score: float
    targets: list[ClimbTarget]
