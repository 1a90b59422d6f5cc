"""Validation of write batches (docs/contract.md#writes): every problem of every event, before
any write."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel

from seasons import calendar
from seasons.config.settings import (
    Settings,
    _iso,  # durations as the settings write them (PT1H)
    number_text,
)
from seasons.errors import BatchRejected, InvalidMember, LimitExceeded
from seasons.vocabulary import MAX_EXACT

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
    metadata: str | None  # '=' or '~' + JSON of the given fields (see write.lua), or None


class _Problems:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, index: int, field: str, code: str, message: str, **extra: Any) -> None:
        self.items.append(
            {"index": index, "field": field, "code": code, "message": message, **extra}
        )


# Unicode category Cc is exactly U+0000-U+001F and U+007F-U+009F.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

# Refused in member ids on top of the control characters: format characters (Cf: zero-width
# space and joiners, bidi overrides and isolates, BOM, soft hyphen, ...) and the line and
# paragraph separators. They are invisible or reorder text, so "ad\u200bmin" or "\u202enimda"
# would display as another member's id in every table, log and web page.
_INVISIBLE = frozenset({"Cf", "Zl", "Zp"})


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to about ``limit`` characters, for messages that quote input (a
    huge integer is described by its size: its digits may be too many to print)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<an integer of {value.bit_length()} bits>"
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 5]}...{text[-2:]}"


def check_id(value: Any, what: str) -> str | None:
    """Why ``value`` is not a valid id, or None: 1-128 bytes of UTF-8 without control
    characters (the rule of event ids and batch ids, which are opaque)."""
    if not isinstance(value, str):
        return f"{what} must be a string, got {type(value).__name__}"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        bad = ord(value[exc.start])
        if 0xDC80 <= bad <= 0xDCFF:  # how Python decodes a byte that is not UTF-8 (argv)
            byte = bad - 0xDC00
            return f"{what} is not valid UTF-8 (byte 0x{byte:02X} or lone surrogate U+{bad:04X})"
        return f"{what} is not valid UTF-8 (lone surrogate U+{bad:04X})"
    if size == 0:
        return f"{what} must not be empty"
    if size > MAX_ID_BYTES:
        return f"{what} is {size} bytes of UTF-8 (at most {MAX_ID_BYTES})"
    if found := _CONTROL.search(value):
        return f"{what} contains the control character U+{ord(found.group()):04X}"
    return None


def check_member(value: Any) -> str | None:
    """Why ``value`` is not a valid member id, or None: the rule every interface applies to
    members (writes, reads, restored archives; erasure a looser one, below). 1-128 bytes of
    UTF-8 without control characters (Cc), format characters (Cf) or line/paragraph
    separators (Zl, Zp)."""
    why = check_id(value, "member")
    if why is not None or value.isascii():
        return why
    for char in value:
        if char >= "\xad" and unicodedata.category(char) in _INVISIBLE:
            name = unicodedata.name(char, "unnamed")
            return f"member contains the invisible format character U+{ord(char):04X} ({name})"
    return None


def check_stored_member(value: Any) -> str | None:
    """Why ``value`` cannot be a member Seasons holds, or None: the rule before format
    characters were refused (UTF-8, 1-128 bytes, no control characters). Only erasure takes
    it, so that a member Redis held from before can still be removed; every way in (writes,
    restore) takes :func:`check_member`."""
    return check_id(value, "member")


def member_problem(value: Any, *, stored: bool = False) -> InvalidMember | None:
    """:func:`check_member` (with ``stored``: :func:`check_stored_member`) as the error a
    read or an erasure raises: it names the member."""
    why = check_stored_member(value) if stored else check_member(value)
    if why is None:
        return None
    if not isinstance(value, str):
        return InvalidMember(why, {"member": None})
    # A member far over the limit is quoted in part only (the message, the details).
    details = {"member": value if len(value) <= 4 * MAX_ID_BYTES else shown(value)}
    return InvalidMember(f"{why}: {shown(value)}", details)


def check_value(value: Any) -> str | None:
    """Why ``value`` is not a usable score, or None: a finite number within ±2^53."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"value must be a number, got {type(value).__name__}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"value must be finite, got {value}"
    if abs(value) > MAX_EXACT:
        return f"value {shown(value)} is outside ±2^53 (scores must stay exact in a double)"
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
    text = json.dumps(
        meta, ensure_ascii=False, separators=(",", ":"), allow_nan=False, sort_keys=True
    )
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        return None, "metadata is not valid UTF-8"
    if size > META_MAX_BYTES:
        return None, f"metadata is {size} bytes as JSON (at most {META_MAX_BYTES})"
    return text, None


# Epoch seconds beyond this are past the years 2 .. 9998 that parse_ts accepts, by far.
_TS_EPOCH_MAX = 10**12
_TS_TEXT_MAX = 64


def _check_ts(value: Any) -> str | None:
    """Why ``value`` cannot be an event time at all, or None (then :func:`calendar.parse_ts`
    decides): numbers of any size and texts of any length get a short message."""
    if isinstance(value, bool):
        return "ts must be RFC 3339 with an offset or epoch seconds, got a boolean"
    if isinstance(value, int) and abs(value) > _TS_EPOCH_MAX:  # before float(): it overflows
        return f"ts epoch seconds {shown(value)} are out of range (years 2 to 9998)"
    if isinstance(value, float) and not (math.isfinite(value) and abs(value) <= _TS_EPOCH_MAX):
        return f"ts epoch seconds {value} are out of range (years 2 to 9998)"
    if isinstance(value, str):
        if len(value) > _TS_TEXT_MAX:
            return f"ts is {len(value)} characters long: not RFC 3339 nor epoch seconds"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "ts is not valid UTF-8"
    return None


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
    days = _Days(settings, now)
    for i, ev in enumerate(raw):
        before = len(problems.items)
        valid = _validate_one(i, ev, settings, days, backfill, problems)
        if valid is not None and len(problems.items) == before:
            out.append(valid)
    if problems.items:
        raise BatchRejected(problems.items)
    return out


def backfill_refusal(day: date, settings: Settings, now: datetime) -> str | None:
    """Why a backfill (``seasons import --backfill``, ``submit_many(backfill=True)``) cannot
    write ``day`` at ``now``, or None when time allows it: the day's keys are kept
    ``retention`` past its end, and nothing older is written. The write script refuses the
    rest (a closing or archived season). The late-event hint asks this too, so it is only
    given where the backfill would go ahead."""
    if calendar.day_end(day, settings.zone) + settings.retention <= now:
        return (
            f"day {day} is past its retention (retention = {_iso(settings.retention)} after "
            "its end): nothing can write it any more, not even import --backfill"
        )
    return None


def _backfill_hint(day: date, settings: Settings, now: datetime) -> str:
    """The refusal of a late event whose day a backfill may still write by time (the write
    path's :meth:`seasons.writes.Writes.validate` replaces it by :func:`late_for_good` where
    the backfill would refuse the day all the same)."""
    span = calendar.season_of_day(day, settings)
    until = f" while its season {span.id} is not archived" if span is not None else ""
    return (
        f"day {day} ended and its late grace ({_iso(settings.late_grace)}) is over; "
        f"`seasons import --backfill` can still write it{until}"
    )


def late_for_good(day: date, settings: Settings, because: str) -> str:
    """The refusal of a late event whose day no backfill can write either, ``because`` the
    write path says so (``season S1 is archived``)."""
    return (
        f"day {day} ended and its late grace ({_iso(settings.late_grace)}) is over, and "
        f"{because}: nothing can write it any more, not even import --backfill"
    )


class _Days:
    """Local day and lateness of event times, computed once per distinct time in a batch
    (most events of a batch share ``now`` or a few times)."""

    def __init__(self, settings: Settings, now: datetime):
        self.settings = settings
        self.now = now
        self._seen: dict[datetime, tuple[date, str | None]] = {}

    def of(self, ts: datetime) -> tuple[date, str | None]:
        found = self._seen.get(ts)
        if found is None:
            found = (
                calendar.local_day(ts, self.settings.zone),
                calendar.lateness(ts, self.now, self.settings),
            )
            self._seen[ts] = found
        return found


def _validate_one(
    i: int, ev: Any, settings: Settings, days: _Days, backfill: bool, problems: _Problems
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
    elif why := check_member(ev["member"]):
        problems.add(i, "member", "invalid_member", why)
    if "value" not in ev:
        problems.add(i, "value", "missing_field", "value is required")
    elif why := check_value(ev["value"]):
        problems.add(i, "value", "invalid_value", why)
    event_id = ev.get("event_id")
    if event_id is not None and (why := check_id(event_id, "event_id")):
        problems.add(i, "event_id", "invalid_event_id", why)
    meta_json = None
    meta = ev.get("metadata")
    if meta is not None and not (isinstance(meta, Mapping) and not meta):  # {}: no change
        text, why = check_metadata(meta)
        if why:
            problems.add(i, "metadata", "invalid_metadata", why)
        elif text is not None:
            # For write.lua: '=' JSON without nulls (a member with no metadata yet takes it
            # as it is), '~' JSON with nulls (always merged with what is stored).
            has_null = any(v is None for v in meta.values())
            meta_json = ("~" if has_null else "=") + text
    now = days.now
    raw_ts = ev.get("ts")
    if why := _check_ts(raw_ts):
        problems.add(i, "ts", "invalid_ts", why)
        return None
    try:
        ts = calendar.parse_ts(raw_ts, now)
    except (ValueError, OverflowError, OSError) as exc:
        problems.add(i, "ts", "invalid_ts", f"ts {exc}")
        return None
    day, late = days.of(ts)
    if late == "future_event":
        problems.add(i, "ts", "future_event", f"ts {ts.isoformat()} is more than 5 minutes ahead")
    elif late == "late_event" and (refusal := backfill_refusal(day, settings, now)) is not None:
        problems.add(i, "ts", "late_event", refusal)
    elif late == "late_event" and not backfill:
        problems.add(i, "ts", "late_event", _backfill_hint(day, settings, now))
    if not isinstance(board, str) or board not in settings.boards:
        return None
    if "value" not in ev or check_value(ev["value"]) is not None:
        return None  # its problem is listed; float() could overflow on a huge integer
    _check_bounds(i, board, ev, settings, problems)
    return ValidEvent(
        i, board, ev.get("member", ""), float(ev["value"]), ts, day, event_id, meta_json
    )


def _check_bounds(
    i: int, board: str, ev: Mapping[str, Any], settings: Settings, problems: _Problems
) -> None:
    """A value outside its board's bounds (on a composite board: the packed score) refuses
    the event, naming the bound. Every new event passes here (submit, import, backfill); a
    restored archive does not."""
    value, member = ev["value"], ev.get("member")
    if (broken := settings.boards[board].broken_bound(value)) is None:
        return
    bound, limit = broken
    relation = "below" if bound == "min_value" else "above"
    problems.add(
        i, "value", "out_of_bounds",
        f"value {number_text(float(value))} is {relation} boards.{board}.{bound} = "
        f"{number_text(limit)}",
        member=member if check_member(member) is None else None,
        value=value, bound=bound, limit=limit,
    )  # fmt: skip
