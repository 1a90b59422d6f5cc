"""Validation of write batches (SPEC section 6): every problem of every event, before any write."""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from config.settings import Settings
from seasons import timewindows as tw
from seasons.errors import BatchRejected, LimitExceeded

MAX_EXACT = 2**53
MAX_ID_BYTES = 128
META_MAX_FIELDS = 16
META_MAX_BYTES = 1024
MAX_BATCH = 10_000
EVENT_FIELDS = {"board", "member", "value", "ts", "event_id", "metadata"}


@dataclass(frozen=True, slots=True)
class ValidEvent:
    index: int
    board: str
    member: str
    value: float
    ts: datetime
    day: date
    event_id: str | None
    metadata: str | None  # JSON of the given fields (null = delete), or None


class _Problems:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, index: int, field: str, code: str, message: str) -> None:
        self.items.append({"index": index, "field": field, "code": code, "message": message})


def _check_id(value: Any, what: str) -> str | None:
    """Why ``value`` is not a valid member / event id, or None."""
    if not isinstance(value, str):
        return f"{what} must be a string, got {type(value).__name__}"
    size = len(value.encode("utf-8", "surrogatepass"))
    if size == 0:
        return f"{what} must not be empty"
    if size > MAX_ID_BYTES:
        return f"{what} is {size} bytes of UTF-8 (at most {MAX_ID_BYTES})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} is not valid UTF-8"
    for ch in value:
        if unicodedata.category(ch) == "Cc":
            return f"{what} contains the control character U+{ord(ch):04X}"
    return None


def check_value(value: Any) -> str | None:
    """Why ``value`` is not a usable score, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"value must be a number, got {type(value).__name__}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"value must be finite, got {value}"
    if abs(value) > MAX_EXACT:
        return f"value {value} is outside ±2^53 (scores must stay exact in a double)"
    return None


def check_metadata(meta: Any) -> tuple[str | None, str | None]:
    """(JSON to send, problem): a flat object of strings, numbers, booleans and nulls."""
    if not isinstance(meta, Mapping):
        return None, f"metadata must be a JSON object, got {type(meta).__name__}"
    if len(meta) > META_MAX_FIELDS:
        return None, f"metadata has {len(meta)} fields (at most {META_MAX_FIELDS})"
    for key, v in meta.items():
        if not isinstance(key, str) or not key:
            return None, "metadata field names must be non-empty strings"
        if v is None or isinstance(v, bool | str):
            continue
        if isinstance(v, int | float):
            if isinstance(v, float) and not math.isfinite(v):
                return None, f"metadata field {key!r} is not a finite number"
            if isinstance(v, int) and abs(v) > MAX_EXACT:
                return None, f"metadata field {key!r} is outside ±2^53"
            continue
        return None, (
            f"metadata field {key!r} is a {type(v).__name__}; "
            "only strings, numbers, booleans and null are allowed"
        )
    text = json.dumps(meta, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if len(text.encode()) > META_MAX_BYTES:
        return None, f"metadata is {len(text.encode())} bytes as JSON (at most {META_MAX_BYTES})"
    return text, None


def validate_batch(
    events: Iterable[Mapping[str, Any] | BaseModel],
    settings: Settings,
    now: datetime,
    *,
    backfill: bool = False,
) -> list[ValidEvent]:
    """Check a whole batch; raise :class:`BatchRejected` listing every problem found."""
    raw = [e.model_dump(exclude_none=True) if isinstance(e, BaseModel) else e for e in events]
    if len(raw) > MAX_BATCH:
        raise LimitExceeded(
            f"batch has {len(raw)} events (at most {MAX_BATCH})", {"limit": MAX_BATCH}
        )
    problems = _Problems()
    out: list[ValidEvent] = []
    for i, ev in enumerate(raw):
        before = len(problems.items)
        valid = _validate_one(i, ev, settings, now, backfill, problems)
        if valid is not None and len(problems.items) == before:
            out.append(valid)
    if problems.items:
        raise BatchRejected(problems.items)
    return out


def _validate_one(
    i: int, ev: Any, settings: Settings, now: datetime, backfill: bool, problems: _Problems
) -> ValidEvent | None:
    if not isinstance(ev, Mapping):
        problems.add(i, "event", "invalid_event", "event must be a JSON object")
        return None
    for extra in sorted(set(ev) - EVENT_FIELDS):
        problems.add(i, str(extra), "unknown_field", f"unknown field {extra!r}")
    board = ev.get("board")
    if not isinstance(board, str) or board not in settings.boards:
        known = ", ".join(sorted(settings.boards)) or "none"
        problems.add(i, "board", "unknown_board", f"unknown board {board!r} (configured: {known})")
    if "member" not in ev:
        problems.add(i, "member", "missing_field", "member is required")
    elif why := _check_id(ev["member"], "member"):
        problems.add(i, "member", "invalid_member", why)
    if "value" not in ev:
        problems.add(i, "value", "missing_field", "value is required")
    elif why := check_value(ev["value"]):
        problems.add(i, "value", "invalid_value", why)
    event_id = ev.get("event_id")
    if event_id is not None and (why := _check_id(event_id, "event_id")):
        problems.add(i, "event_id", "invalid_event_id", why)
    meta_json = None
    if ev.get("metadata") is not None:
        meta_json, why = check_metadata(ev["metadata"])
        if why:
            problems.add(i, "metadata", "invalid_metadata", why)
    try:
        ts = tw.parse_ts(ev.get("ts"), now)
    except (ValueError, OverflowError, OSError) as exc:
        problems.add(i, "ts", "invalid_ts", f"ts {exc}")
        return None
    day = tw.local_day(ts, settings.zone)
    late = tw.lateness(ts, now, settings)
    if late == "future_event":
        problems.add(i, "ts", "future_event", f"ts {ts.isoformat()} is more than 5 minutes ahead")
    elif late == "late_event" and not backfill:
        grace = settings.late_grace
        problems.add(
            i, "ts", "late_event",
            f"day {day} ended and its late grace ({grace}) is over; use import --backfill",
        )
    elif late == "late_event" and tw.day_end(day, settings.zone) + settings.retention <= now:
        problems.add(i, "ts", "late_event", f"day {day} is past its retention; nothing to backfill")
    if not isinstance(board, str) or board not in settings.boards:
        return None
    try:
        value = float(ev["value"])
    except (KeyError, TypeError, ValueError):
        return None
    return ValidEvent(i, board, ev.get("member", ""), value, ts, day, event_id, meta_json)
