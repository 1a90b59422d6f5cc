"""Hidden and banned members (docs/fair-play.md): a member's state per board, set by
:meth:`Moderation.moderate` in one ``moderate.lua`` call per board.

A hidden or banned member's entries live on the twins of the board's live keys
(:meth:`seasons.keys.Keys.hidden`), so the public keys hold visible members only; the write
script sends a hidden member's new events to the twins and applies a banned member's nowhere.
The state is one hash per board (:meth:`Keys.moderation`), member -> JSON record; a visible
member has none.

Each call finds the board's live keys the way the sweep does (a SCAN of the board's keys,
plus every key a write may create now), so that a key written a moment later is one the
script was given; a write racing the call meets the new state atomically in its own script.

On a sharded board (seasons.shards) the member's record, its twins and the call's pending
follow-ups are in the member's store, where its writes and self-views read them and where
``moderate.lua`` runs as on a board of its own. The board's own hash (:meth:`Keys.moderation`
of the board) is then a copy of every store's records, for what is the board's as a whole
and reads them in the board's slot: claims, rewards and amended results. A follow-up brings
it to the store's record first (:meth:`Moderation.copy`), so a crash between the two is
mended by the recovery that finishes the follow-ups.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Literal, NamedTuple, cast

from seasons import calendar, shards, ties
from seasons import windows as win
from seasons.amend import Amender
from seasons.audit import Audit, Note
from seasons.clock import utc_text
from seasons.config.settings import Settings
from seasons.connection import RedisClient, scan_keys, text
from seasons.errors import InvalidInput, UnknownBoard, UnknownMode, UnknownState
from seasons.events import member_problem
from seasons.jobs.state import Checkpoint, no_checkpoint
from seasons.keys import HIDDEN, LIVE_TWIN_KINDS, Keys
from seasons.lifecycle import Lifecycle, event_id
from seasons.models import BoardModeration, MemberModeration, ModerationChange, ModerationRecord
from seasons.scripts import Scripts
from seasons.vocabulary import EventType
from seasons.write_script import rollup_targets

STATES = ("visible", "hidden", "banned")
# A pending follow-up this old is a crashed call's: one in flight is done well before.
RECOVER_AFTER = timedelta(minutes=1)
# The lock under which a sharded board's copy of a record is read and written (seconds): a
# copy takes two commands, so one held this long is a crashed caller's.
COPY_LOCK = 10
MODES = ("shadow", "open")
DEFAULT_MODE = "shadow"
SCAN_COUNT = 1000
State = Literal["visible", "hidden", "banned"]

# The audit action of a change to each state (seasons.audit.ACTIONS): to visible, "unban"
# when the member was banned on the board, else "unhide".
ACTION_TO = {"hidden": "hide", "banned": "ban"}


class Applied(NamedTuple):
    """What :meth:`Moderation.apply` did, and how many follow-ups of other calls its boards
    hold (pending: see :meth:`Moderator.recover`)."""

    change: ModerationChange
    others: int


@dataclass(frozen=True, slots=True)
class FollowUp:
    """What follows one call's change on one board: what ``moderate.lua`` records in
    :meth:`Keys.moderation_pending` under the call id."""

    call: str
    board: str
    store: str  # where its pending record is: the board, or the member's store of a sharded one
    member: str
    at: datetime
    note: Note
    before: ModerationRecord
    after: ModerationRecord


def action_of(before: str, after: str) -> str:
    """The audit action of a board's change from state ``before`` to ``after``."""
    if after == "visible":
        return "unban" if before == "banned" else "unhide"
    return ACTION_TO[after]


def check_request(
    settings: Settings, member: Any, state: Any, mode: Any, boards: Any, reason: Any
) -> tuple[str, State, str, list[str], str]:
    """The checked request, or the first problem of it as an
    :class:`~seasons.errors.InvalidInput` naming it (before anything is read or written)."""
    if (problem := member_problem(member)) is not None:
        raise problem
    if state not in STATES:
        raise UnknownState(
            f"unknown state {str(state)[:64]!r}: use {', '.join(STATES)}",
            {"field": "state", "known": list(STATES)},
        )
    if mode not in MODES:
        raise UnknownMode(
            f"unknown mode {str(mode)[:64]!r}: use {', '.join(MODES)}",
            {"field": "mode", "known": list(MODES)},
        )
    if boards is None:
        names = sorted(settings.boards)
    elif isinstance(boards, str) or not isinstance(boards, Iterable):
        raise InvalidInput("boards must be a list of board names", {"field": "boards"})
    else:
        names = sorted(set(boards))
        if not names:
            raise InvalidInput("boards must name at least one board (or be left out: all)",
                               {"field": "boards"})  # fmt: skip
        for name in names:
            if not isinstance(name, str) or name not in settings.boards:
                raise UnknownBoard(str(name)[:64], list(settings.boards))
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("reason is required: say why, for the audit trail",
                           {"field": "reason"})  # fmt: skip
    return member, cast(State, state), mode, names, reason


class Moderation:
    """The moderation state of the boards of one facade."""

    def __init__(self, client: RedisClient, scripts: Scripts, settings: Settings, keys: Keys):
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys

    def home(self, board: str, member: str) -> str:
        """Where ``member``'s record, twins and pending follow-ups are: the board, or on a
        sharded board its store."""
        return shards.member_store(board, self.settings.boards[board], member)

    def status(self, member: str, boards: list[str]) -> list[ModerationRecord]:
        """``member``'s record on each of ``boards``."""
        return [
            self._record(b, self.client.hget(self.keys.moderation(self.home(b, member)), member))
            for b in boards
        ]

    def apply(
        self, member: str, state: State, mode: str, boards: list[str], reason: str, note: Note,
        call: str, now: datetime, checkpoint: Checkpoint = no_checkpoint,
    ) -> Applied:  # fmt: skip
        """Set ``member``'s state on each of ``boards`` (checked by :func:`check_request`);
        each board changed records the pending follow-ups of ``call``
        (:meth:`Keys.moderation_pending`) in the same script."""
        record = "" if state == "visible" else _json(
            {"state": state, "mode": mode, "reason": reason, "at": utc_text(now),
             "actor": note.actor}
        )  # fmt: skip
        pending = _json({"call": call, "member": member, "at": utc_text(now), "actor": note.actor,
                         "reason": note.reason, "request_id": note.request_id})  # fmt: skip
        out = []
        others = 0
        for board in boards:
            keys, plan = self.plan(board, self.home(board, member), now)
            reply = self.scripts.moderate(keys=keys, args=[member, record, _json(plan), pending])
            kind = text(reply[0])
            old = reply[1] if reply[1] else None
            before = self._record(board, old)
            others += int(reply[-1])
            if kind == "same":
                out.append(BoardModeration(board=board, changed=False, before=before,
                                           after=before, moved=0))  # fmt: skip
                continue
            after = self._record(board, record or None)
            out.append(BoardModeration(board=board, changed=True, before=before, after=after,
                                       moved=int(reply[2])))  # fmt: skip
            checkpoint(f"moderate:{board}/applied")
        return Applied(ModerationChange(member=member, state=state, boards=out), others)

    def pending(self, board: str) -> list[FollowUp]:
        """The follow-ups pending on ``board``: its calls' records
        (:meth:`Keys.moderation_pending`), on every store of a sharded board."""
        out = []
        for store in shards.stores(board, self.settings.boards[board]):
            for raw in self.client.hvals(self.keys.moderation_pending(store)):
                p = json.loads(text(raw))
                c = p["call"]
                out.append(FollowUp(
                    call=c["call"], board=board, store=store, member=c["member"],
                    at=datetime.fromisoformat(c["at"]),
                    note=Note(c["actor"], c["reason"], c["request_id"]),
                    before=self._state(board, p["before"]),
                    after=self._state(board, p["after"]),
                ))  # fmt: skip
        return out

    def done(self, follow_ups: Iterable[FollowUp]) -> None:
        """Delete the pending records of ``follow_ups``: one HDEL per board (or store)."""
        calls: dict[str, list[str]] = {}
        for f in follow_ups:
            calls.setdefault(f.store, []).append(f.call)
        for store, ids in sorted(calls.items()):
            self.client.hdel(self.keys.moderation_pending(store), *ids)

    def copy(self, follow_ups: Iterable[FollowUp]) -> None:
        """On a sharded board, the board's copy of each member's record made the store's
        (see the module's doc): read and written under a lock, so that two calls on one
        member leave the copy of the later one's record, whichever copies last."""
        copied = {(f.board, f.member) for f in follow_ups if f.store != f.board}
        for board, member in sorted(copied):
            name = self.keys.lock(f"moderation:{board}")
            with self.client.lock(name, timeout=COPY_LOCK, blocking_timeout=2 * COPY_LOCK):
                record = self.client.hget(self.keys.moderation(self.home(board, member)), member)
                if record is None:
                    self.client.hdel(self.keys.moderation(board), member)
                else:
                    self.client.hset(self.keys.moderation(board), member, record)

    def _record(self, board: str, raw: Any) -> ModerationRecord:
        return self._state(board, json.loads(text(raw)) if raw else None)

    def _state(self, board: str, fields: dict[str, Any] | None) -> ModerationRecord:
        """A board's record of a member from its stored fields (None: visible)."""
        if fields is None:
            return ModerationRecord(board=board, state="visible")
        return ModerationRecord(board=board, **fields)

    # --- the keys of one call ---------------------------------------------------------------

    def plan(self, board: str, at: str, now: datetime) -> tuple[list[str], dict[str, Any]]:
        """KEYS and ARGV[3] of ``moderate.lua`` for ``board`` on ``at`` (the board, or the
        store of a sharded one holding the member): every live public key that exists or
        that a write may create now, each with its twin (and distinct set); the days of each
        trimmed rolled-up board."""
        cfg = self.settings.boards[board]
        rule = ties.of(cfg)
        keys = self.keys
        public = self.live_keys(board, at, now)
        trimmed = cfg.max_entries > 0
        today = calendar.local_day(now, self.settings.zone)
        declared = dict.fromkeys([keys.moderation(at), keys.state(at), keys.tmp(at, "moderate"),
                                  keys.moderation_pending(at)])  # fmt: skip
        pairs: list[list[Any]] = []
        for key in public:
            parsed = keys.parse(key)
            assert parsed is not None
            distinct = None
            rolled = None
            if parsed.kind in win.WINDOWS:
                if rule.distinct_set:
                    distinct = keys.distinct(at, parsed.kind, parsed.ident)
                if trimmed and parsed.kind != "day":
                    rolled = self._rolled(board, at, parsed.kind, parsed.ident, today)
            twin = keys.hidden(key)
            pairs.append([key, twin, distinct, rolled])
            declared.update(dict.fromkeys(k for k in (key, twin, distinct) if k is not None))
            if rolled is not None:
                declared.update(dict.fromkeys(d[0] for d in rolled["days"]))
                if rolled["base"] is not None:
                    declared[rolled["base"]["key"]] = None
        plan = {"aggregate": cfg.aggregate, "order": cfg.order, "max_entries": cfg.max_entries,
                "pairs": pairs}  # fmt: skip
        return list(declared), plan

    def _rolled(
        self, board: str, at: str, window: str, period_id: str, today: date
    ) -> dict[str, Any]:
        """What write.lua's rollup names on ``at`` for the period ``period_id`` of ``window``:
        its days (up to the day after tomorrow: a write's horizon) and base."""
        period = win.explicit_period(win.spec(window), period_id, self.settings)
        day = today if period.endless else period.first
        horizon = max(today, day) + timedelta(days=2)
        store = None if at == board else at
        for target in rollup_targets(board, day, self.settings, self.keys, horizon, store):
            if target.window == window:
                return {"days": [list(d) for d in target.days], "base": target.base}
        raise ValueError(f"board {board!r} keeps no {window} period {period_id!r}")

    def live_keys(self, board: str, at: str, now: datetime) -> list[str]:
        """The public keys on ``at`` (the board, or a store of it) of ``board``'s live periods
        holding member entries (window keys, bases, reach sets: :data:`LIVE_TWIN_KINDS`)
        that exist, or whose twin does, or that a write may create now; sorted."""
        keys = self.keys
        cfg = self.settings.boards[board]
        rule = ties.of(cfg)
        found: set[str] = set()
        for batch in scan_keys(self.client, keys.board_pattern(at), count=SCAN_COUNT):
            for key in batch:
                parsed = keys.parse(key)
                if parsed is None:
                    continue
                if parsed.kind == HIDDEN:
                    key = keys.public_of(key)
                    parsed = keys.parse(key)
                    assert parsed is not None
                if parsed.kind in LIVE_TWIN_KINDS and not _archived(parsed.kind, parsed.ident):
                    found.add(key)
        settings = self.settings
        day = calendar.local_day(now - settings.late_grace, settings.zone)
        last = calendar.local_day(now + calendar.FUTURE_TOLERANCE, settings.zone)
        while day <= last:  # as jobs.sweep's open_keys: a write may create these any moment
            for window in win.board_windows(cfg):
                p = window.period_of_day(day, settings)
                if p is None:
                    continue
                found.add(keys.window(at, window.name, p.id))
                if rule.reach_set:
                    found.add(keys.reached(at, window.name, p.id))
                if p.endless:
                    found.add(keys.base(at, window.name))
            day += timedelta(days=1)
        return sorted(found)


def _archived(kind: str, ident: str) -> bool:
    """An archive's reach set (``reached:archive:<season>``): not live."""
    return kind == "reached" and ident.startswith("archive:")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def forget_pending(client: RedisClient, keys: Keys, at: str, member: str) -> int:
    """Erasure (``Seasons.forget``): the pending follow-ups on ``at`` (a board, or the
    member's store of a sharded one) that name ``member`` (a crashed call's,
    :meth:`Moderator.recover`) go, so that no recovery appends an audit entry or an event
    naming a forgotten member. Returns how many went. They are few (a crash's, for a
    minute), so they are read whole."""
    key = keys.moderation_pending(at)
    calls = [
        call for call, raw in client.hgetall(key).items()
        if json.loads(text(raw))["call"]["member"] == member
    ]  # fmt: skip
    if calls:
        client.hdel(key, *calls)
    return len(calls)


class Moderator:
    """:class:`Moderation` with what follows each change: one audit entry per action of a
    call (naming the boards it changed), one lifecycle event per board whose state changed,
    and the amendment of the results of each such board's seasons closed lately
    (:mod:`seasons.amend`).

    The follow-ups survive a crash: ``moderate.lua`` records them with the change
    (:meth:`Keys.moderation_pending`), and they are deleted only once all are done. Each is
    harmless to run again (events and audit entries are appended once per id, an amendment
    is idempotent), so those a crash left are finished by :meth:`recover`: run by the next
    moderation call on the board and by the worker's close job."""

    def __init__(
        self, moderation: Moderation, audit: Audit, lifecycle: Lifecycle,
        amender: Amender | None = None, checkpoint: Checkpoint = no_checkpoint,
    ):  # fmt: skip
        self.moderation = moderation
        self.audit = audit
        self.lifecycle = lifecycle
        self.amender = amender
        self.checkpoint = checkpoint  # tests kill a call at each step here

    def moderate(
        self, member: Any, state: Any, *, mode: Any, boards: Any, reason: Any, note: Note,
        now: datetime,
    ) -> ModerationChange:  # fmt: skip
        checked = check_request(self.moderation.settings, member, state, mode, boards, reason)
        call = secrets.token_hex(16)
        change, others = self.moderation.apply(*checked, note, call, now, self.checkpoint)
        home = self.moderation.home
        self._follow_up(
            [FollowUp(call, b.board, home(b.board, change.member), change.member, now, note,
                      b.before, b.after) for b in change.boards if b.changed],
            now,
        )  # fmt: skip
        if self.amender is not None:
            # An amendment cut off before on a board this call left as it was is finished.
            for b in change.boards:
                if not b.changed:
                    self.amender.resume(b.board, now)
        if others:  # another call's follow-ups: a crash's, once they are old enough
            self.recover(now)
        return change

    def recover(self, now: datetime) -> int:
        """Finish the follow-ups that calls cut off by a crash left, on every board: those
        recorded :data:`RECOVER_AFTER` or more before ``now`` (a younger one may be its
        call's, still running). Returns how many board changes it finished."""
        found = [
            f for board in sorted(self.moderation.settings.boards)
            for f in self.moderation.pending(board) if now - f.at >= RECOVER_AFTER
        ]  # fmt: skip
        self._follow_up(found, now)
        return len(found)

    def _follow_up(self, follow_ups: list[FollowUp], now: datetime) -> None:
        """The copies of a sharded board's records, the events, the audit entry of each
        (call, action) naming its boards, and the amendments of ``follow_ups``; then their
        pending records deleted."""
        self.moderation.copy(follow_ups)
        by_action: dict[tuple[str, str], list[FollowUp]] = {}
        for f in follow_ups:
            by_action.setdefault((f.call, action_of(f.before.state, f.after.state)), []).append(f)
            if f.before.state != f.after.state:
                kind = EVENT_TO[f.after.state]
                at = utc_text(f.at)
                self.lifecycle.emit(
                    kind, event_id(kind, board=f.board, member=f.member, at=at),
                    {"board": f.board, "member": f.member, "mode": f.after.mode, "at": at},
                    f.at,
                )  # fmt: skip
                self.checkpoint(f"moderate:{f.board}/event")
        for (call, action), done in by_action.items():
            first = done[0]
            self.audit.append(
                action, first.note, first.at, member=first.member,
                boards=[f.board for f in done],
                before={f.board: _summary(f.before) for f in done},
                after={f.board: _summary(f.after) for f in done},
                once=f"moderate:{call}:{action}",
            )  # fmt: skip
            self.checkpoint(f"moderate/audit:{action}")
        if self.amender is not None:
            # The seasons closed lately get new results (seasons.amend), after the audit entry
            # and events; an amendment cut off before is finished first.
            changed = {f.board for f in follow_ups if f.before.state != f.after.state}
            for board in sorted({f.board for f in follow_ups}):
                if board in changed:
                    self.amender.after_change(board, now)
                else:
                    self.amender.resume(board, now)
                self.checkpoint(f"moderate:{board}/amended")
        self.moderation.done(follow_ups)

    def status(self, member: Any, boards: Any = None) -> MemberModeration:
        if (problem := member_problem(member, stored=True)) is not None:
            raise problem
        names = sorted(self.moderation.settings.boards) if boards is None else list(boards)
        for name in names:
            if name not in self.moderation.settings.boards:
                raise UnknownBoard(str(name)[:64], list(self.moderation.settings.boards))
        return MemberModeration(member=member, boards=self.moderation.status(member, names))


EVENT_TO = {
    "hidden": EventType.MEMBER_HIDDEN,
    "banned": EventType.MEMBER_BANNED,
    "visible": EventType.MEMBER_UNHIDDEN,
}


def _summary(record: ModerationRecord) -> dict[str, Any]:
    """What an audit entry records of a board's state: no member id."""
    return {"state": record.state, "mode": record.mode, "reason": record.reason}
