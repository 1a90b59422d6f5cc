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
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from typing import Any, Literal, cast

from seasons import calendar, ties
from seasons import windows as win
from seasons.amend import Amender
from seasons.audit import Audit, Note
from seasons.clock import utc_text
from seasons.config.settings import Settings
from seasons.connection import RedisClient, scan_keys, text
from seasons.errors import InvalidInput, UnknownBoard, UnknownMode, UnknownState
from seasons.events import member_problem
from seasons.keys import HIDDEN, LIVE_TWIN_KINDS, Keys
from seasons.lifecycle import Lifecycle, event_id
from seasons.models import BoardModeration, MemberModeration, ModerationChange, ModerationRecord
from seasons.scripts import Scripts
from seasons.vocabulary import EventType
from seasons.write_script import rollup_targets

STATES = ("visible", "hidden", "banned")
MODES = ("shadow", "open")
DEFAULT_MODE = "shadow"
SCAN_COUNT = 1000
State = Literal["visible", "hidden", "banned"]

# The audit action of a change to each state (seasons.audit.ACTIONS): to visible, "unban"
# when the member was banned on the board, else "unhide".
ACTION_TO = {"hidden": "hide", "banned": "ban"}


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

    def status(self, member: str, boards: list[str]) -> list[ModerationRecord]:
        """``member``'s record on each of ``boards``."""
        return [self._record(b, self.client.hget(self.keys.moderation(b), member)) for b in boards]

    def apply(
        self, member: str, state: State, mode: str, boards: list[str], reason: str, actor: str,
        now: datetime,
    ) -> ModerationChange:  # fmt: skip
        """Set ``member``'s state on each of ``boards`` (checked by :func:`check_request`)."""
        record = "" if state == "visible" else _json(
            {"state": state, "mode": mode, "reason": reason, "at": utc_text(now), "actor": actor}
        )  # fmt: skip
        out = []
        for board in boards:
            keys, plan = self.plan(board, now)
            reply = self.scripts.moderate(keys=keys, args=[member, record, _json(plan)])
            kind = text(reply[0])
            old = reply[1] if reply[1] else None
            before = self._record(board, old)
            if kind == "same":
                out.append(BoardModeration(board=board, changed=False, before=before,
                                           after=before, moved=0))  # fmt: skip
                continue
            after = self._record(board, record or None)
            out.append(BoardModeration(board=board, changed=True, before=before, after=after,
                                       moved=int(reply[2])))  # fmt: skip
        return ModerationChange(member=member, state=state, boards=out)

    def _record(self, board: str, raw: Any) -> ModerationRecord:
        if not raw:
            return ModerationRecord(board=board, state="visible")
        return ModerationRecord(board=board, **json.loads(text(raw)))

    # --- the keys of one call ---------------------------------------------------------------

    def plan(self, board: str, now: datetime) -> tuple[list[str], dict[str, Any]]:
        """KEYS and ARGV[3] of ``moderate.lua`` for ``board``: every live public key that
        exists or that a write may create now, each with its twin (and distinct set); the
        days of each trimmed rolled-up board."""
        cfg = self.settings.boards[board]
        rule = ties.of(cfg)
        keys = self.keys
        public = self.live_keys(board, now)
        trimmed = cfg.max_entries > 0
        today = calendar.local_day(now, self.settings.zone)
        declared = dict.fromkeys([keys.moderation(board), keys.state(board),
                                  keys.tmp(board, "moderate")])  # fmt: skip
        pairs: list[list[Any]] = []
        for key in public:
            parsed = keys.parse(key)
            assert parsed is not None
            distinct = None
            rolled = None
            if parsed.kind in win.WINDOWS:
                if rule.distinct_set:
                    distinct = keys.distinct(board, parsed.kind, parsed.ident)
                if trimmed and parsed.kind != "day":
                    rolled = self._rolled(board, parsed.kind, parsed.ident, today)
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

    def _rolled(self, board: str, window: str, period_id: str, today: date) -> dict[str, Any]:
        """What write.lua's rollup names for the period ``period_id`` of ``window``: its days
        (up to the day after tomorrow: a write's horizon) and base."""
        period = win.explicit_period(win.spec(window), period_id, self.settings)
        day = today if period.endless else period.first
        horizon = max(today, day) + timedelta(days=2)
        for target in rollup_targets(board, day, self.settings, self.keys, horizon):
            if target.window == window:
                return {"days": [list(d) for d in target.days], "base": target.base}
        raise ValueError(f"board {board!r} keeps no {window} period {period_id!r}")

    def live_keys(self, board: str, now: datetime) -> list[str]:
        """The public keys of ``board``'s live periods holding member entries (window keys,
        bases, reach sets: :data:`LIVE_TWIN_KINDS`) that exist, or whose twin does, or that
        a write may create now; sorted."""
        keys = self.keys
        cfg = self.settings.boards[board]
        rule = ties.of(cfg)
        found: set[str] = set()
        for batch in scan_keys(self.client, keys.board_pattern(board), count=SCAN_COUNT):
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
                found.add(keys.window(board, window.name, p.id))
                if rule.reach_set:
                    found.add(keys.reached(board, window.name, p.id))
                if p.endless:
                    found.add(keys.base(board, window.name))
            day += timedelta(days=1)
        return sorted(found)


def _archived(kind: str, ident: str) -> bool:
    """An archive's reach set (``reached:archive:<season>``): not live."""
    return kind == "reached" and ident.startswith("archive:")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class Moderator:
    """:class:`Moderation` with what follows each change: one audit entry per action of a
    call (naming the boards it changed), one lifecycle event per board whose state changed,
    and the amendment of the results of each such board's seasons closed lately
    (:mod:`seasons.amend`)."""

    def __init__(
        self, moderation: Moderation, audit: Audit, lifecycle: Lifecycle,
        amender: Amender | None = None,
    ):  # fmt: skip
        self.moderation = moderation
        self.audit = audit
        self.lifecycle = lifecycle
        self.amender = amender

    def moderate(
        self, member: Any, state: Any, *, mode: Any, boards: Any, reason: Any, note: Note,
        now: datetime,
    ) -> ModerationChange:  # fmt: skip
        checked = check_request(self.moderation.settings, member, state, mode, boards, reason)
        change = self.moderation.apply(*checked, note.actor, now)
        by_action: dict[str, list[BoardModeration]] = {}
        for b in change.boards:
            if b.changed:
                by_action.setdefault(action_of(b.before.state, b.after.state), []).append(b)
            if b.before.state != b.after.state:
                kind = EVENT_TO[b.after.state]
                at = utc_text(now)
                self.lifecycle.emit(
                    kind, event_id(kind, board=b.board, member=change.member, at=at),
                    {"board": b.board, "member": change.member, "mode": b.after.mode, "at": at},
                    now,
                )  # fmt: skip
        for action, done in by_action.items():
            self.audit.append(
                action, note, now, member=change.member, boards=[b.board for b in done],
                before={b.board: _summary(b.before) for b in done},
                after={b.board: _summary(b.after) for b in done},
            )  # fmt: skip
        if self.amender is not None:
            # The seasons closed lately get new results (seasons.amend), after the audit entry
            # and events; an amendment cut off before is finished first.
            for b in change.boards:
                if b.before.state != b.after.state:
                    self.amender.after_change(b.board, now)
                else:
                    self.amender.resume(b.board, now)
        return change

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
