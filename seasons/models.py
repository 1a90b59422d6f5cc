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
