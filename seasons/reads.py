"""The read path: each read is one Lua call, metadata included (SPEC sections 4, 9, 11)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter
from redis.commands.core import Script

from config.settings import Settings
from seasons import timewindows as tw
from seasons.errors import BadWindow, LimitExceeded, UnknownBoard
from seasons.events import member_problem
from seasons.keys import Keys
from seasons.lanes import SyncLane
from seasons.models import Entry, History, HistoryPoint, Page
from seasons.scripts import Scripts

MAX_LIMIT = 1000
MAX_SIZE = 101
MAX_LAST = 400
MAX_LOOKUP = 1000


def _limit(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitExceeded(f"{name} must be an integer, got {value!r}", {name: value})
    if not low <= value <= high:
        raise LimitExceeded(f"{name} must be between {low} and {high}, got {value}", {name: value})


def _check_member(member: Any) -> None:
    """The member rule of writes (:func:`seasons.events.check_member`), checked before any
    Redis call: a member no write can store is refused, not looked up (nor encoded)."""
    if (problem := member_problem(member)) is not None:
        raise problem


def _check_window(window: str) -> None:
    if window not in tw.WINDOWS:
        raise BadWindow(f"unknown window {window!r}: use day, week or season", {"window": window})


# read_points.lua answers a JSON array of entries, null where the member is not ranked.
_POINTS = TypeAdapter(list[Entry | None])


@dataclass(frozen=True, slots=True)
class RangeCall:
    """A prepared ``read_range.lua`` call: the script's KEYS and ARGV. Prepared apart from
    running it so that the HTTP server can run the same read on its asyncio client."""

    keys: list[str]
    args: list[Any]

    @staticmethod
    def page(reply: str | bytes) -> Page:
        # The script replies with the page's JSON: one parse and validation in pydantic-core.
        return Page.model_validate_json(reply)

    @staticmethod
    def empty(reply: bytes) -> bool:
        """Whether the script's reply holds no entries (the member is not on the board):
        read_range.lua ends every reply with its entries, ``"entries":[]}`` when none."""
        return reply.endswith(b'"entries":[]}')


@dataclass(frozen=True, slots=True)
class PointsCall:
    """A prepared ``read_points.lua`` call (rank, lookup, history), and ``finish``, which
    turns the script's reply (None if the call asks for no point at all) into the result."""

    keys: list[str]
    args: list[Any]
    finish: Callable[[str | bytes | None], Any]

    @property
    def asks(self) -> bool:
        return len(self.args) > 3  # ARGV[4..]: the points; ARGV[1..3]: order, ties, metadata


class Reader:
    """Reads of one namespace's boards."""

    def __init__(
        self,
        client: Any,
        scripts: Scripts,
        settings: Settings,
        keys: Keys,
        lane: SyncLane | None = None,
    ):
        self.client = client
        self.lane = lane
        self.scripts = scripts
        self.settings = settings
        self.keys = keys
        # (window, "current" | "previous") -> (valid from, valid until, period): see _resolve.
        self._relative: dict[tuple[str, str], tuple[datetime, datetime, tw.Period]] = {}

    # --- resolving a board, a window and a period into keys -------------------------------

    def board(self, board: str) -> Any:
        cfg = self.settings.boards.get(board)
        if cfg is None:
            raise UnknownBoard(board, list(self.settings.boards))
        return cfg

    def target(self, board: str, window: str, period: str, now: datetime) -> tuple[str, str, str]:
        """(period id, live key, archive key) of a read. Seasons read their archive once it
        exists; a snapshot id ``S@<timestamp>`` exists only as an archive."""
        self.board(board)
        _check_window(window)
        if window == "season" and "@" in period:
            base = period.split("@", 1)[0]
            tw.season_by_id(base, self.settings)  # the season part must name a season
            key = self.keys.archive(board, period)
            return period, key, key
        p = self._resolve(window, period, now)
        live = self.keys.window(board, p.window, p.id)
        archive = self.keys.archive(board, p.id) if window == "season" else live
        return p.id, live, archive

    def _resolve(self, window: str, period: str, now: datetime) -> tw.Period:
        """:func:`tw.resolve_period`, remembered for ``current`` and ``previous`` until the
        local day of ``now`` ends: they depend on that day alone (settings are frozen)."""
        if period != "current" and period != "previous":
            return tw.resolve_period(window, period, now, self.settings)  # type: ignore[arg-type]
        hit = self._relative.get((window, period))
        if hit is not None and hit[0] <= now < hit[1]:
            return hit[2]
        found = tw.resolve_period(window, period, now, self.settings)  # type: ignore[arg-type]
        zone = self.settings.zone
        today = tw.local_day(now, zone)
        valid = (tw.day_start(today, zone), tw.day_end(today, zone))
        self._relative[(window, period)] = (*valid, found)
        return found

    # --- reads --------------------------------------------------------------------------

    def page_call(
        self, board: str, window: str, period: str, now: datetime, *, limit: int, offset: int
    ) -> RangeCall:
        _limit("limit", limit, 1, MAX_LIMIT)
        _limit("offset", offset, 0, 10**9)
        return self._range_call(board, window, period, now, "page", offset, limit)

    def around_rank_call(
        self, board: str, window: str, rank: int, period: str, now: datetime, *, size: int
    ) -> RangeCall:
        _limit("size", size, 1, MAX_SIZE)
        _limit("rank", rank, 1, 10**9)
        return self._range_call(board, window, period, now, "rank", rank, size)

    def around_member_call(
        self, board: str, window: str, member: str, period: str, now: datetime, *, size: int
    ) -> RangeCall:
        _limit("size", size, 1, MAX_SIZE)
        _check_member(member)
        return self._range_call(board, window, period, now, "member", member, size)

    def _range_call(
        self, board: str, window: str, period: str, now: datetime, mode: str, a: Any, b: int
    ) -> RangeCall:
        cfg = self.board(board)
        pid, live, archive = self.target(board, window, period, now)
        return RangeCall(
            keys=[live, archive, self.keys.meta(board)],
            args=[cfg.order, cfg.ties, mode, a, b, board, window, pid],
        )

    def run(self, call: RangeCall) -> Page:
        """Run a prepared range read (one script call)."""
        return call.page(self._eval(self.scripts.read_range, call.keys, call.args))

    def _eval(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        if self.lane is not None:
            return self.lane.run(script, keys, args)
        return script(keys=keys, args=args)

    def page(
        self, board: str, window: str, period: str, now: datetime, *, limit: int, offset: int
    ) -> Page:
        return self.run(self.page_call(board, window, period, now, limit=limit, offset=offset))

    def around_rank(
        self, board: str, window: str, rank: int, period: str, now: datetime, *, size: int
    ) -> Page:
        return self.run(self.around_rank_call(board, window, rank, period, now, size=size))

    def around_member(
        self, board: str, window: str, member: str, period: str, now: datetime, *, size: int
    ) -> Page | None:
        page = self.run(self.around_member_call(board, window, member, period, now, size=size))
        return page if page.entries else None

    def members_call(
        self, board: str, window: str, members: list[str], period: str, now: datetime
    ) -> PointsCall:
        """The given members that are ranked, best first (a friends board, a member's entry)."""
        cfg = self.board(board)
        if len(members) > MAX_LOOKUP:
            raise LimitExceeded(
                f"lookup takes at most {MAX_LOOKUP} members, got {len(members)}",
                {"limit": MAX_LOOKUP},
            )
        for member in members:
            _check_member(member)
        _, live, archive = self.target(board, window, period, now)
        args: list[Any] = [cfg.order, cfg.ties, 1]
        for m in dict.fromkeys(members):
            args += [1, m]

        def finish(reply: str | bytes | None) -> list[Entry]:
            if reply is None:
                return []
            out = [e for e in _POINTS.validate_json(reply) if e is not None]
            out.sort(key=lambda e: e.rank)
            return out

        return PointsCall([self.keys.meta(board), live, archive], args, finish)

    def history_call(
        self, board: str, member: str, window: str, now: datetime, *, last: int
    ) -> PointsCall:
        """Rank and score of ``member`` in each of the last ``last`` periods, oldest first."""
        cfg = self.board(board)
        _limit("last", last, 1, MAX_LAST)
        _check_window(window)
        _check_member(member)
        periods = tw.recent_periods(window, last, now, self.settings)  # type: ignore[arg-type]
        keys = [self.keys.meta(board)]
        args: list[Any] = [cfg.order, cfg.ties, 0]
        for n, p in enumerate(periods, start=1):
            live = self.keys.window(board, p.window, p.id)
            keys += [live, self.keys.archive(board, p.id) if window == "season" else live]
            args += [n, member]

        def finish(reply: str | bytes | None) -> History:
            found = _POINTS.validate_json(reply) if reply is not None else []
            points = [
                HistoryPoint(period=p.id, rank=e.rank if e else None, score=e.score if e else None)
                for p, e in zip(periods, found, strict=True)
            ]
            return History(board=board, window=window, member=member, history=points)

        return PointsCall(keys, args, finish)

    def run_points(self, call: PointsCall) -> Any:
        """Run a prepared points read (one script call, none when it asks for nothing)."""
        reply = self._eval(self.scripts.read_points, call.keys, call.args) if call.asks else None
        return call.finish(reply)

    def members(
        self, board: str, window: str, members: list[str], period: str, now: datetime
    ) -> list[Entry]:
        result: list[Entry] = self.run_points(
            self.members_call(board, window, members, period, now)
        )
        return result

    def history(self, board: str, member: str, window: str, now: datetime, *, last: int) -> History:
        result: History = self.run_points(self.history_call(board, member, window, now, last=last))
        return result
