"""Reviewing held events (docs/writes.md#held-events): the events that a board's per-member
limits (``member_rate``, ``max_period_gain``) held in the write script, listed, approved or
rejected. Each decision is one method returning a :class:`HeldDecision` with the record
before and after, so that whatever must follow a decision is one line there.

Approve applies the event as a backfill write of that one event would: with its original
``ts``, to every window it would have reached, through ``write.lua`` in one call that checks
the record is still held, applies it whatever the limits, and marks the record approved.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
from collections.abc import Sequence
from typing import Any, cast

from seasons import shards
from seasons.connection import RedisClient, scan_keys
from seasons.errors import (
    BatchRejected,
    Conflict,
    DayFolded,
    HeldDecided,
    HeldNotFound,
    HeldRefused,
    HeldTooLate,
    InvalidInput,
    LimitExceeded,
    NotReplicated,
    SeasonClosed,
    UnknownBoard,
)
from seasons.events import MAX_ID_BYTES, validate_batch
from seasons.keys import Keys
from seasons.models import HeldDecision, HeldEvent, HeldPage
from seasons.write_script import HELD_SLACK, TWINS, parse_reply, refused, script_args
from seasons.writes import Writes, new_batch_id

MAX_LIMIT = 1000
SCAN_COUNT = 1000  # records and keys read per call while a member is forgotten
# A generated event id is the batch id, '#' and the event's index (up to 5 digits).
MAX_HELD_ID_BYTES = MAX_ID_BYTES + 6

# The write path's problem codes that refuse an approval, by the error raised.
_REFUSALS: dict[str, type[Conflict]] = {
    "season_closed": SeasonClosed,
    "day_folded": DayFolded,
    "late_event": HeldTooLate,
}


def check_held_id(value: Any) -> str:
    """``value`` if it can name a held event (an event id, or a generated
    ``<batch id>#<index>``), else :class:`InvalidInput` naming it."""
    why = None
    if not isinstance(value, str) or not value:
        why = "event_id must be a non-empty string"
    elif len(value.encode("utf-8", "surrogatepass")) > MAX_HELD_ID_BYTES:
        why = f"event_id is over {MAX_HELD_ID_BYTES} bytes of UTF-8"
    elif any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value):
        why = "event_id contains a control character"
    if why is not None:
        raise InvalidInput(f"{why}; nothing changed", {"field": "event_id"})
    return value


class Held:
    """The held events of the boards of one facade, on its write path (client, scripts,
    settings, keys, clock)."""

    def __init__(self, writes: Writes):
        self.writes = writes
        self.client = writes.client
        self.settings = writes.settings
        self.keys = writes.keys

    def list(self, board: str, limit: int = 100, after: str | None = None) -> HeldPage:
        """The events still held on ``board``, oldest arrival first: ``limit`` (1-1000) of
        them, after the event id ``after`` (a page's ``next``)."""
        self._board(board)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise LimitExceeded(
                f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}", {"limit": limit}
            )
        if after is not None:
            check_held_id(after)
        stores = self._stores(board)
        if len(stores) == 1:
            order = self.keys.held_order(board)
            start = 0 if after is None else self._after(board, board, after)
            ids = [_text(i) for i in self.client.zrange(order, start, start + limit)]
        else:  # each shard's page from the same place, merged by arrival, then id
            ids = self._merged(board, stores, after, limit + 1)
        page = ids[:limit]
        events = []
        if page:
            by_store: dict[str, builtins.list[str]] = {}
            for store, event_id in self._homes(stores, page):
                by_store.setdefault(store, []).append(event_id)
            texts: dict[str, Any] = {}
            for store, asked in by_store.items():
                found = self.client.hmget(self.keys.held(store), asked)
                texts.update(zip(asked, found, strict=True))
            events = [_event(texts[i]) for i in page if texts.get(i) is not None]
        return HeldPage(board=board, events=events, next=page[-1] if len(ids) > limit else None)

    def _stores(self, board: str) -> builtins.list[str]:
        return shards.stores(board, self.settings.boards[board])

    def _merged(
        self, board: str, stores: Sequence[str], after: str | None, count: int
    ) -> builtins.list[str]:
        """The first ``count`` event ids held on any of ``stores`` after ``after``, by
        arrival then id (the order of one store's held order)."""
        rows: builtins.list[tuple[float, str]] = []
        for store in stores:
            order = self.keys.held_order(store)
            start = 0 if after is None else self._after(board, store, after)
            got = cast(
                builtins.list[tuple[str, float]],
                self.client.zrange(order, start, start + count - 1, withscores=True),
            )
            rows += [(float(score), _text(i)) for i, score in got]
        return [i for _, i in sorted(rows)[:count]]

    def _homes(self, stores: Sequence[str], ids: Sequence[str]) -> builtins.list[tuple[str, str]]:
        """(store, event id) of each of ``ids``: the store whose records hold it (one
        HEXISTS per store and id; the first store that does)."""
        if len(stores) == 1:
            return [(stores[0], i) for i in ids]
        pipe = self.client.pipeline(transaction=False)
        for i in ids:
            for store in stores:
                pipe.hexists(self.keys.held(store), i)
        found = iter(pipe.execute())
        out = []
        for i in ids:
            here = [store for store in stores if next(found)]
            if here:
                out.append((here[0], i))
        return out

    def approve(self, board: str, event_id: str) -> HeldDecision:
        """Apply the held event ``event_id`` of ``board`` exactly once, as a backfill write of
        it would, and mark it approved. Approved already: ``repeated``, nothing applied.
        :class:`HeldNotFound`, :class:`HeldDecided` (it was rejected), or a
        :class:`HeldRefused` (:class:`SeasonClosed`, :class:`DayFolded`, :class:`HeldTooLate`)
        when the write would refuse it; it stays held then."""
        store, before = self._found(board, event_id)
        if before.state == "approved":
            return self._decided(board, before, "approve", repeated=True)
        if before.state != "held":
            raise _decided_otherwise(board, before)
        writes, now = self.writes, self.writes.clock()
        event: dict[str, Any] = {
            "board": board, "member": before.member, "value": before.value, "ts": before.ts,
        }  # fmt: skip
        if before.metadata is not None:
            event["metadata"] = before.metadata
        try:
            valid = validate_batch([event], self.settings, now, backfill=True)
        except BatchRejected as exc:
            raise _refusal(board, event_id, exc.details) from None
        # A generated id may be longer than a caller's; the script takes it as it is.
        valid = [dataclasses.replace(valid[0], event_id=event_id)]
        batch_id, replicas = new_batch_id(), self.settings.redis.wait_replicas
        for twins in (False, True):  # with the twin keys when the member is hidden
            keys, args = script_args(
                board, valid, self.settings, self.keys, now, batch_id=batch_id,
                digest="approve", backfill=True, approve=event_id, twins=twins, store=store,
            )  # fmt: skip
            with refused():
                replies, acked = writes.send([(keys, args)], replicas=replicas)
            reply = replies[0]
            if _text(reply[0]) != TWINS:
                break
        if replicas and min(acked) < replicas:  # applied on the master: approving again says so
            raise NotReplicated(
                f"the approval was applied on the master, but only {min(acked)} of {replicas} "
                "replicas acknowledged it in time (redis.wait_replicas): approve again",
                {"replicas": replicas, "acknowledged": min(acked), "event_id": event_id},
            )
        if _text(reply[0]) == "not_held":  # decided by another call in between
            return self.approve(board, event_id)
        try:
            result = parse_reply(reply)
        except BatchRejected as exc:
            raise _refusal(board, event_id, exc.details) from None
        after = self._record(board, event_id)
        return HeldDecision(
            board=board, event_id=event_id, action="approve", repeated=False,
            applied=result.applied, before=before, after=after,
        )  # fmt: skip

    def reject(self, board: str, event_id: str) -> HeldDecision:
        """Drop the held event ``event_id`` of ``board``: never applied. Rejected already:
        ``repeated``. :class:`HeldNotFound`, or :class:`HeldDecided` (it was approved)."""
        store, before = self._found(board, event_id)
        if before.state == "rejected":
            return self._decided(board, before, "reject", repeated=True)
        if before.state != "held":
            raise _decided_otherwise(board, before)
        stamp = self.writes.clock().timestamp()
        expire_at = int(stamp + self.settings.retention.total_seconds() + HELD_SLACK)
        keys = [self.keys.held(store), self.keys.held_order(store), self.keys.held_done(store)]
        reply = self.writes.scripts.held_reject(
            keys=keys, args=[event_id, repr(stamp), str(expire_at)]
        )
        if _text(reply[0]) == "not_held":
            return self.reject(board, event_id)
        return self._decided(board, before, "reject", repeated=False)

    def _decided(
        self, board: str, before: HeldEvent, action: str, *, repeated: bool
    ) -> HeldDecision:
        after = self._record(board, before.event_id) if not repeated else before
        return HeldDecision(
            board=board, event_id=before.event_id, action=action, repeated=repeated,
            applied=0, before=before, after=after,
        )  # fmt: skip

    def _board(self, board: str) -> None:
        if board not in self.settings.boards:
            raise UnknownBoard(board, list(self.settings.boards))

    def _record(self, board: str, event_id: str) -> HeldEvent:
        return self._found(board, event_id)[1]

    def _found(self, board: str, event_id: str) -> tuple[str, HeldEvent]:
        """The store whose records hold ``event_id`` (the board's own, unsharded; on a
        sharded board its member's shard), and its record."""
        self._board(board)
        check_held_id(event_id)
        stores = self._stores(board)
        pipe = self.client.pipeline(transaction=False)
        for store in stores:
            pipe.hget(self.keys.held(store), event_id)
        for store, text in zip(stores, pipe.execute(), strict=True):
            if text is not None:
                return store, _event(text)
        raise HeldNotFound(
            f"no held event {event_id!r} on board {board!r} (never held, or dropped "
            "after retention)",
            {"board": board, "event_id": event_id},
        )

    def _after(self, board: str, store: str, after: str) -> int:
        """The position in ``store``'s held order just past the event ``after`` of
        ``board``: its own when it is still held there, else where it is or was (by its
        record's arrival, the order's ties by id)."""
        order = self.keys.held_order(store)
        rank = self.client.zrank(order, after)
        if isinstance(rank, int):
            return rank + 1
        text = None
        for where in self._stores(board):
            text = self.client.hget(self.keys.held(where), after)
            if text is not None:
                break
        if text is None:
            raise InvalidInput(
                f"after: {after!r} is no held event of board {board!r}; pass a page's next",
                {"field": "after"},
            )
        arrived = repr(_event(text).arrived_at)
        before = int(self.client.zcount(order, "-inf", f"({arrived}"))
        same = [_text(m) for m in self.client.zrangebyscore(order, arrived, arrived)]
        return before + len([m for m in same if m <= after])


def held_summary(record: HeldEvent) -> dict[str, Any]:
    """What an audit entry records of a held event: no member id (the entry names the
    member apart, by its salted hash) and no metadata."""
    return {
        "event_id": record.event_id, "state": record.state, "value": record.value,
        "ts": record.ts, "reason": record.reason,
    }  # fmt: skip


def forget_member(client: RedisClient, keys: Keys, board: str, member: str) -> int:
    """Erasure (``Seasons.forget``): the held events of ``member`` on ``board`` (on a sharded
    board: the store of its shard, whose keys hold them), decided ones
    included (records, their order and decision entries), and its counters of
    ``member_rate``. Returns how many held records went. The records are few (a board's
    held events of its retention), so they are read whole."""
    record_key = keys.held(board)
    ids = [
        field
        for field, text in client.hscan_iter(record_key, count=SCAN_COUNT)
        if _event(text).member == member
    ]
    for start in range(0, len(ids), SCAN_COUNT):
        chunk = ids[start : start + SCAN_COUNT]
        pipe = client.pipeline(transaction=False)
        pipe.hdel(record_key, *chunk)
        pipe.zrem(keys.held_order(board), *chunk)
        pipe.zrem(keys.held_done(board), *chunk)
        pipe.execute()
    for batch in scan_keys(client, keys.board_pattern(board), count=SCAN_COUNT, kind="hash"):
        for key in batch:
            parsed = keys.parse(key)
            if parsed is not None and parsed.kind == "rate":
                client.hdel(key, member)
    return len(ids)


def _event(text: str | bytes) -> HeldEvent:
    return HeldEvent.model_validate(json.loads(text))


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _decided_otherwise(board: str, record: HeldEvent) -> HeldDecided:
    return HeldDecided(
        f"held event {record.event_id!r} of board {board!r} was {record.state} already; "
        "nothing changed",
        {"board": board, "event_id": record.event_id, "state": record.state},
    )


def _refusal(board: str, event_id: str, problems: list[dict[str, Any]]) -> Conflict:
    first = problems[0]
    cls = _REFUSALS.get(first.get("code", ""), HeldRefused)
    return cls(
        f"held event {event_id!r} of board {board!r} cannot be applied: {first['message']}; "
        "it stays held",
        {"board": board, "event_id": event_id, "problems": problems},
    )
