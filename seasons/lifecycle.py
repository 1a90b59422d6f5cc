"""Lifecycle events: what the worker's closes (and restores, and safe mode) did, appended to
one Redis Stream, ``<ns>:lifecycle``, that apps read with consumer groups
(docs/contract.md#lifecycle-events).

Each event is one stream entry with the fields ``id`` (a stable id: the same close step
always names its event the same), ``type``, ``at`` (ISO 8601 UTC) and ``data`` (a JSON
object's text). :meth:`Lifecycle.emit` appends it in one script (``lifecycle_emit.lua``)
that checks the id against the stream's id set first, so an emit repeated after a crash, or
by a second worker, adds nothing: each event is in the stream once. The stream is bounded
(``lifecycle.max_len``, XADD MAXLEN ~) and so is its id set, trimmed with it.

The types, how their ids are built and what their ``data`` holds are declared once, in
:data:`TYPES`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from pydantic import BaseModel

from seasons.clock import utc_text
from seasons.config.settings import Settings
from seasons.connection import RedisClient, text
from seasons.errors import InvalidInput
from seasons.keys import Keys
from seasons.scripts import script
from seasons.vocabulary import EventType

MAX_LIMIT = 1000  # events one read returns at most
STREAM_ID = re.compile(r"\d{1,20}(-\d{1,20})?")
MAX_ID_PART = 2**64 - 1


@dataclass(frozen=True, slots=True)
class TypeSpec:
    """One event type: its id's form (``str.format`` fields), its ``data`` fields, and when
    it is appended."""

    id: str
    data: tuple[str, ...]
    when: str


TYPES: dict[EventType, TypeSpec] = {
    EventType.DAY_CLOSED: TypeSpec(
        "day_closed:{day}", ("day", "boards"),
        "a day is closed on every board (its final rollups done)",
    ),
    EventType.SEASON_CLOSING: TypeSpec(
        "season_closing:{board}:{season}", ("board", "season"),
        "a board's season is marked closing: writes for it are rejected from then on",
    ),
    EventType.SEASON_ARCHIVED: TypeSpec(
        "season_archived:{board}:{season}", ("board", "season", "count", "score_sum", "sha256"),
        "a board's season is archived: its files verified (figures from the manifest)",
    ),
    EventType.REWARDS_READY: TypeSpec(
        "rewards_ready:{board}:{season}", ("board", "season", "total", "provisional", "tiers"),
        "a board's season results (ranks and rewards) are computed",
    ),
    EventType.DATA_LOSS: TypeSpec(
        "data_loss:{detected_at}", ("reason", "message", "detected_at", "worker"),
        "the worker found that Redis lost Seasons' data and entered safe mode",
    ),
    EventType.RESTORE_DONE: TypeSpec(
        "restore_done:{board}:{season}:{run}",
        ("board", "season", "count", "score_sum", "sha256", "action", "run"),
        "an archive file was loaded back into Redis (`seasons restore`; run: its start)",
    ),
    EventType.MEMBER_HIDDEN: TypeSpec(
        "member_hidden:{board}:{member}:{at}", ("board", "member", "mode", "at"),
        "a member is hidden on a board (from visible or banned; at: the change's time)",
    ),
    EventType.MEMBER_UNHIDDEN: TypeSpec(
        "member_unhidden:{board}:{member}:{at}", ("board", "member", "mode", "at"),
        "a hidden or banned member is visible again on a board (mode null)",
    ),
    EventType.MEMBER_BANNED: TypeSpec(
        "member_banned:{board}:{member}:{at}", ("board", "member", "mode", "at"),
        "a member is banned on a board (from visible or hidden)",
    ),
    EventType.RESULTS_AMENDED: TypeSpec(
        "results_amended:{board}:{season}:{version}", ("season", "board", "version", "changed"),
        "a board's season results got a new version after a late moderation change "
        "(changed: members whose result differs from the version before)",
    ),
    EventType.LEAGUE_CLOSED: TypeSpec(
        "league_closed:{board}:{period}",
        ("board", "window", "period", "cohorts", "members", "promoted", "demoted", "stayed",
         "idle", "rewarded"),
        "a period of a board's league is closed: every member's outcome written, archived and "
        "its tier set (the counts of seasons.leagues.counts)",
    ),
}  # fmt: skip


# The types whose events name a member (their data and id hold it): what erasure deletes.
MEMBER_TYPES = frozenset(str(kind) for kind, spec in TYPES.items() if "member" in spec.data)
FORGET_SCAN = 1000  # stream entries read, or deleted, per call while a member is forgotten


def event_id(kind: EventType, **fields: Any) -> str:
    """The stable id of an event of ``kind`` (the fields its id names, e.g. ``day``)."""
    return TYPES[kind].id.format(**{k: _id_part(v) for k, v in fields.items()})


def run_stamp(at: datetime) -> str:
    """A compact UTC instant for ids (``20261201T203700.123456Z``)."""
    return at.astimezone(UTC).strftime("%Y%m%dT%H%M%S.%fZ")


class LifecycleEvent(BaseModel):
    """One event of the stream: where it is in the stream and its four fields."""

    stream_id: str
    id: str
    type: str
    at: str
    data: dict[str, Any]


class LifecycleEvents(BaseModel):
    """Events newest first."""

    events: list[LifecycleEvent]


class Lifecycle:
    """The lifecycle stream of one namespace: append once per id, read back newest first."""

    def __init__(self, client: RedisClient, keys: Keys, settings: Settings):
        self.client = client
        self.keys = keys
        self.settings = settings
        self._emit = client.register_script(script("lifecycle_emit").source)

    def emit(self, kind: EventType, id: str, data: dict[str, Any], at: datetime) -> str | None:
        """Append the event ``id`` unless it is already in the stream; returns the new stream
        entry's id, or None when it was there. Raises like any Redis call
        (:class:`~seasons.errors.BackendUnavailable`): a close step that emits is retried."""
        spec = TYPES[EventType(kind)]
        missing = set(spec.data) - set(data)
        if missing:  # a programming error, never the caller's input
            raise ValueError(f"{kind} event {id}: data lacks {', '.join(sorted(missing))}")
        found = self._emit(
            keys=[self.keys.lifecycle(), self.keys.lifecycle_ids()],
            args=[id, str(kind), utc_text(at), _json(data), self.settings.lifecycle.max_len],
        )  # fmt: skip
        return text(found) if found else None

    def read(self, limit: int = 20, after: str | None = None) -> LifecycleEvents:
        """The last ``limit`` events, newest first; with ``after`` (a stream id, e.g. the last
        ``stream_id`` of a page), the ones older than it."""
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(
                f"limit must be 1-{MAX_LIMIT}, got {limit}", {"limit": limit, "max": MAX_LIMIT}
            )
        top = "+"
        if after is not None:
            parts = [int(p) for p in after.split("-")] if STREAM_ID.fullmatch(after) else []
            if not parts or max(parts) > MAX_ID_PART:
                raise InvalidInput(
                    f"after must be a stream id (<ms>-<seq>, e.g. 1764621420000-0), got {after!r}",
                    {"after": after},
                )
            if parts == [0, 0]:
                return LifecycleEvents(events=[])  # nothing is older (Redis refuses "(0-0")
            top = "(" + after
        found = self.client.xrevrange(self.keys.lifecycle(), top, "-", count=limit) or []
        return LifecycleEvents(
            events=[_event(sid, fields) for sid, fields in found if sid is not None and fields]
        )

    def forget(self, member: str) -> int:
        """Erasure (``Seasons.forget``): delete the events that name ``member`` (the types of
        :data:`MEMBER_TYPES`, whose id holds it too) from the stream and their ids from the
        id set. Returns how many went. The stream is bounded (``lifecycle.max_len``), so it is
        read whole, :data:`FORGET_SCAN` entries per call; a webhook with such an event still
        pending gives it up as trimmed."""
        stream, ids = self.keys.lifecycle(), self.keys.lifecycle_ids()
        found: list[tuple[str, str]] = []  # (stream id, event id)
        low = "-"
        while True:
            page = self.client.xrange(stream, low, "+", count=FORGET_SCAN) or []
            for sid, fields in page:
                if sid is None or not fields:
                    continue
                event = _event(sid, fields)
                if event.type in MEMBER_TYPES and event.data.get("member") == member:
                    found.append((event.stream_id, event.id))
            last = page[-1][0] if page else None
            if len(page) < FORGET_SCAN or last is None:
                break
            low = "(" + text(last)
        for start in range(0, len(found), FORGET_SCAN):
            chunk = found[start : start + FORGET_SCAN]
            self.client.xdel(stream, *(sid for sid, _ in chunk))
            self.client.zrem(ids, *(eid for _, eid in chunk))
        return len(found)


def _event(sid: bytes | str, fields: Mapping[Any, Any]) -> LifecycleEvent:
    got = {text(k): text(v) for k, v in fields.items()}
    data = json.loads(got.get("data") or "{}")
    return LifecycleEvent(
        stream_id=text(sid), id=got.get("id", ""), type=got.get("type", ""),
        at=got.get("at", ""), data=data if isinstance(data, dict) else {"value": data},
    )  # fmt: skip


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True, allow_nan=False)


def _id_part(value: Any) -> str:
    if isinstance(value, date | datetime):
        return value.isoformat()
    return str(value)
