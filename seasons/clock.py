"""Clocks: the only place that reads the wall clock. Everything else is given ``now``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (tests, simulations, the demo's backfill)."""

    def __init__(self, start: datetime):
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self.now = start.astimezone(UTC)

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: datetime) -> None:
        self.now = when.astimezone(UTC)

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def utc_text(at: datetime, timespec: str = "auto") -> str:
    """An instant as every answer and stored record writes it: ISO 8601 in UTC with ``Z``
    (``2026-12-01T20:37:00Z``; ``timespec`` as :meth:`datetime.isoformat` takes it)."""
    return at.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
