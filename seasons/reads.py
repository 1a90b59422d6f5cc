"""The reads, prepared: each read is one Lua call, metadata included.

:class:`Reads` turns a query (board, window, period, member...) into a :class:`Read`: the
script call (:class:`seasons.executor.Call`) and what its reply is. Every read script answers
the JSON of its result, which the HTTP server sends as it is and the Python API validates into
its model (scores in the one form of :data:`seasons.models.Score`, with their parts beside
them on a board with a composite layout), or nil where the member asked for is not on the
board; the Read names the :class:`~seasons.errors.NotRanked` error that nil stands for.
Limits and the member rule are checked here, before any Redis call, for every interface
alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from pydantic import TypeAdapter

from seasons import timewindows as tw
from seasons import windows as win
from seasons.clock import Clock, system_clock
from seasons.config.settings import BoardSettings, Settings
from seasons.errors import InvalidInput, LimitExceeded, NotRanked, UnknownBoard
from seasons.events import member_problem
from seasons.executor import Call, Reply, script
from seasons.keys import Keys
from seasons.models import Climb, Entry, EntryDetail, History, Page

MAX_LIMIT = 1000
MAX_SIZE = 101
MAX_LAST = 400
MAX_LOOKUP = 1000
MAX_TARGETS = 1000
MAX_TARGET_RANK = 10**9
# The ranks a climb reaches for when none are given (every interface).
DEFAULT_TO = (10, 100)
DEFAULT_TO_TEXT = ",".join(map(str, DEFAULT_TO))


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


def _not_ranked(board: str, window: str, member: str, period_id: str) -> NotRanked:
    return NotRanked(
        f"{member!r} is not ranked on board {board!r}, {window} {period_id}",
        {"board": board, "window": window, "period": period_id, "member": member},
    )


T = TypeVar("T")

_RANGE, _POINTS = script("read_range"), script("read_points")
_PAGE, _ENTRY, _ENTRIES, _HISTORY, _CLIMB = (
    TypeAdapter(Page), TypeAdapter(EntryDetail), TypeAdapter(list[Entry]), TypeAdapter(History),
    TypeAdapter(Climb),
)  # fmt: skip


def parse_targets(text: str) -> list[int]:
    """The ranks of a climb as the HTTP query and the CLI give them: ``"10,100"``. Raises
    :class:`InvalidInput` naming ``to`` for anything but comma-separated integers (the
    limits are :meth:`Reads.climb`'s)."""
    parts = text.split(",")
    if not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise InvalidInput(
            f"to must be ranks separated by commas, such as 10,100; got {text!r}", {"to": text}
        )
    ranks = []
    for part in parts:
        digits = part.strip().lstrip("0") or "0"
        if len(digits) > len(str(MAX_TARGET_RANK)):
            raise LimitExceeded(
                f"to: each rank must be between 1 and {MAX_TARGET_RANK}, got {part.strip()}",
                {"to": part.strip()},
            )
        ranks.append(int(digits))
    return ranks


def _check_targets(to: Any) -> list[int]:
    if isinstance(to, str) or not isinstance(to, Iterable):
        raise InvalidInput(f"to must be a list of ranks, got {to!r}", {"to": to})
    ranks = list(to)
    if not 1 <= len(ranks) <= MAX_TARGETS:
        raise LimitExceeded(
            f"to takes 1 to {MAX_TARGETS} ranks, got {len(ranks)}", {"to": len(ranks)}
        )
    for rank in ranks:
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise LimitExceeded(f"to: each rank must be an integer, got {rank!r}", {"to": rank})
        if not 1 <= rank <= MAX_TARGET_RANK:
            raise LimitExceeded(
                f"to: each rank must be between 1 and {MAX_TARGET_RANK}, got {rank}", {"to": rank}
            )
    return ranks


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """A prepared read: the call, the model its JSON reply is, and for a read of one member
    the :class:`NotRanked` error that a nil reply (the member is not on the board) stands
    for; ``T`` then includes None."""

    call: Call
    model: TypeAdapter[Any]
    absent: NotRanked | None = None

    def result(self, reply: Reply) -> T:
        """The model of the reply; None when the member is not on the board."""
        if reply is None:
            if self.absent is None:
                raise TypeError(f"{self.call.script.name} answered nil to a read of a board")
            return cast(T, None)
        return cast(T, self.model.validate_json(reply))

    def body(self, reply: Reply) -> bytes:
        """The reply as an HTTP body: the result's JSON, or :class:`NotRanked`."""
        if reply is None:
            raise self.absent or TypeError(f"{self.call.script.name} answered nil")
        return reply if isinstance(reply, bytes) else reply.encode()


class Reads:
    """The reads of one namespace's boards, prepared (see the module's doc)."""

    def __init__(self, settings: Settings, keys: Keys, clock: Clock = system_clock):
        self.settings = settings
        self.keys = keys
        self.clock = clock
        # Each board's composite layout as the read scripts take it ('' for plain scores).
        self._layouts = {
            name: layout.script_layout() if (layout := cfg.composite_score()) else ""
            for name, cfg in settings.boards.items()
        }
        # (window, "current" | "previous") -> (valid from, valid until, period): see _resolve.
        self._relative: dict[tuple[str, str], tuple[datetime, datetime, win.Period]] = {}

    # --- resolving a board, a window and a period into keys -------------------------------

    def board(self, board: str) -> BoardSettings:
        cfg = self.settings.boards.get(board)
        if cfg is None:
            raise UnknownBoard(board, list(self.settings.boards))
        return cfg

    def target(
        self, board: str, window: str, period: str, now: datetime | None = None
    ) -> tuple[str, str, str]:
        """(period id, live key, archive key) of a read. Seasons read their archive once it
        exists; a snapshot id ``S@<timestamp>`` exists only as an archive."""
        spec = win.board_window(board, self.board(board), window)
        if spec.archived and "@" in period:
            base = period.split("@", 1)[0]
            tw.season_by_id(base, self.settings)  # the season part must name a season
            key = self.keys.archive(board, period)
            return period, key, key
        p = self._resolve(window, period, self.clock() if now is None else now)
        live = self.keys.window(board, p.window, p.id)
        archive = self.keys.archive(board, p.id) if spec.archived else live
        return p.id, live, archive

    def reached(self, board: str, window: str, period_id: str) -> tuple[str, str]:
        """(reach set of the live key, reach set of the archive key) of a read of
        ``period_id`` (an id as :meth:`target` answers it), for a board with earliest ties:
        a snapshot's both are the archive's; a window without archives has one key, twice."""
        archived = win.board_window(board, self.board(board), window).archived
        archive = self.keys.reached(board, "archive", period_id)
        if archived and "@" in period_id:
            return archive, archive
        live = self.keys.reached(board, win.spec(window).name, period_id)
        return live, archive if archived else live

    def distinct(self, board: str, window: str, period_id: str) -> tuple[str, str]:
        """(distinct set of the live key, distinct set of the archive key) of a read of
        ``period_id``, for a board with dense ties: paired as :meth:`reached` pairs the
        reach sets."""
        archived = win.board_window(board, self.board(board), window).archived
        archive = self.keys.distinct(board, "archive", period_id)
        if archived and "@" in period_id:
            return archive, archive
        live = self.keys.distinct(board, win.spec(window).name, period_id)
        return live, archive if archived else live

    def _beside(self, board: str, cfg: BoardSettings, window: str, pid: str) -> list[str]:
        """The keys a read takes beside the live and archive keys: their reach sets
        (earliest ties), their distinct sets (dense ties), or none."""
        if cfg.ties == "earliest":
            return list(self.reached(board, window, pid))
        if cfg.ties == "dense":
            return list(self.distinct(board, window, pid))
        return []

    def _resolve(self, window: str, period: str, now: datetime) -> win.Period:
        """:func:`win.resolve_period`, remembered for ``current`` and ``previous`` until the
        local day of ``now`` ends: they depend on that day alone (settings are frozen)."""
        if period != "current" and period != "previous":
            return win.resolve_period(window, period, now, self.settings)
        hit = self._relative.get((window, period))
        if hit is not None and hit[0] <= now < hit[1]:
            return hit[2]
        found = win.resolve_period(window, period, now, self.settings)
        zone = self.settings.zone
        today = tw.local_day(now, zone)
        valid = (tw.day_start(today, zone), tw.day_end(today, zone))
        self._relative[(window, period)] = (*valid, found)
        return found

    def not_ranked(self, board: str, window: str, member: str, period: str) -> NotRanked:
        """The error of every interface for a member that is not on the board (the CLI's
        exit status 3, HTTP's 404 not_ranked); ``period`` as asked (``current``...)."""
        return _not_ranked(board, window, member, self.target(board, window, period)[0])

    # --- the reads ------------------------------------------------------------------------

    def page(self, board: str, window: str, period: str, *, limit: int, offset: int) -> Read[Page]:
        """A page of the board, best first."""
        _limit("limit", limit, 1, MAX_LIMIT)
        _limit("offset", offset, 0, 10**9)
        return self._range(board, window, period, "page", offset, limit)

    def around_rank(
        self, board: str, window: str, rank: int, period: str, *, size: int
    ) -> Read[Page]:
        """``size`` entries centred on ``rank`` (shifted at the ends)."""
        _limit("size", size, 1, MAX_SIZE)
        _limit("rank", rank, 1, 10**9)
        return self._range(board, window, period, "rank", rank, size)

    def around_member(
        self, board: str, window: str, member: str, period: str, *, size: int
    ) -> Read[Page | None]:
        """``size`` entries centred on ``member``; nil if it is not ranked."""
        _limit("size", size, 1, MAX_SIZE)
        _check_member(member)
        return self._range(board, window, period, "member", member, size)

    def _range(self, board: str, window: str, period: str, mode: str, a: Any, b: int) -> Read[Any]:
        cfg = self.board(board)
        pid, live, archive = self.target(board, window, period)
        keys = [live, archive, self.keys.meta(board), *self._beside(board, cfg, window, pid)]
        args = [cfg.order, cfg.ties, mode, a, b, board, window, pid, self._layouts[board]]
        absent = _not_ranked(board, window, a, pid) if mode == "member" else None
        return Read(Call(_RANGE, keys, args), _PAGE, absent)

    def entry(self, board: str, window: str, member: str, period: str) -> Read[EntryDetail | None]:
        """``member``'s entry with its percentile, gap up and the board's total; nil if it is
        not ranked."""
        cfg = self.board(board)
        _check_member(member)
        pid, live, archive = self.target(board, window, period)
        args = [cfg.order, cfg.ties, "entry", self._layouts[board], member]
        call = Call(_POINTS, self._points_keys(board, cfg, window, pid, live, archive), args)
        return Read(call, _ENTRY, _not_ranked(board, window, member, pid))

    def climb(
        self, board: str, window: str, member: str, period: str, *, to: Iterable[int]
    ) -> Read[Climb | None]:
        """``member``'s rank and score, and for each rank of ``to`` the score at that position
        of the board and how far the member's score is from it; nil if it is not ranked."""
        cfg = self.board(board)
        ranks = _check_targets(to)
        _check_member(member)
        pid, live, archive = self.target(board, window, period)
        layout = self._layouts[board]
        args = [cfg.order, cfg.ties, "climb", layout, board, window, pid, member, *ranks]
        call = Call(_POINTS, self._points_keys(board, cfg, window, pid, live, archive), args)
        return Read(call, _CLIMB, _not_ranked(board, window, member, pid))

    def lookup(self, board: str, window: str, members: list[str], period: str) -> Read[list[Entry]]:
        """The ranked ones among ``members`` (a friends board), best first."""
        cfg = self.board(board)
        if len(members) > MAX_LOOKUP:
            raise LimitExceeded(
                f"lookup takes at most {MAX_LOOKUP} members, got {len(members)}",
                {"limit": MAX_LOOKUP},
            )
        for member in members:
            _check_member(member)
        pid, live, archive = self.target(board, window, period)
        args = [cfg.order, cfg.ties, "entries", self._layouts[board], *dict.fromkeys(members)]
        keys = self._points_keys(board, cfg, window, pid, live, archive)
        return Read(Call(_POINTS, keys, args), _ENTRIES)

    def history(self, board: str, member: str, window: str, *, last: int) -> Read[History]:
        """Rank and score of ``member`` in each of the last ``last`` periods, oldest first."""
        cfg = self.board(board)
        _limit("last", last, 1, MAX_LAST)
        spec = win.board_window(board, cfg, window)
        _check_member(member)
        periods = win.recent_periods(window, last, self.clock(), self.settings)
        keys = [self.keys.meta(board)]
        layout = self._layouts[board]
        args: list[Any] = [cfg.order, cfg.ties, "history", layout, board, window, member]
        beside = {"earliest": self.keys.reached, "dense": self.keys.distinct}.get(cfg.ties)
        for p in periods:
            live = self.keys.window(board, p.window, p.id)
            keys += [live, self.keys.archive(board, p.id) if spec.archived else live]
            if beside is not None:
                own = beside(board, p.window, p.id)
                keys += [own, beside(board, "archive", p.id) if spec.archived else own]
            args.append(p.id)
        return Read(Call(_POINTS, keys, args), _HISTORY)

    def _points_keys(
        self, board: str, cfg: BoardSettings, window: str, pid: str, live: str, archive: str
    ) -> list[str]:
        """The KEYS of a read_points call on one board: meta, live, archive and, for earliest
        ties, their reach sets, for dense ties their distinct sets."""
        return [self.keys.meta(board), live, archive, *self._beside(board, cfg, window, pid)]
