"""The reads, prepared: each answers from one instant of the board, metadata included.

:class:`Reads` turns a query (board, window, period, member...) into a :class:`Read`: its
script call (:class:`seasons.executor.Call`), for most reads a plan of plain commands in one
transaction (:mod:`seasons.plans`), which the executor tries first, and what their reply is.
Both gather and rank; the read writes the JSON of its result from their reply
(:mod:`seasons.replies`), which the HTTP server sends as it is and the Python API validates
into its model (scores in the one form of :data:`seasons.models.Score`, with their parts
beside them on a board with a composite layout). A read of one member whose member is not
on the board answers the :class:`~seasons.errors.NotRanked` error the Read names. Limits and
the member rule are checked here, before any Redis call, for every interface alike.

A read addressed to a member (its entry, around it, a lookup, its history, its climb) names
the board's moderation hash and the twin of its live key too: where the member is missing, a
hidden or banned one is answered where it would stand if it alone were visible
(``seasons/lua/lib/hidden.lua``, docs/boards.md#hidden-and-banned-members).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from pydantic import TypeAdapter

from seasons import calendar, replies, ties
from seasons import windows as win
from seasons.clock import Clock, system_clock
from seasons.config.settings import BoardSettings, Settings
from seasons.errors import InvalidInput, LimitExceeded, NotRanked, UnknownBoard
from seasons.events import member_problem
from seasons.executor import Call, Plan, Reply, script
from seasons.keys import Keys
from seasons.models import Climb, Entry, EntryDetail, History, Page
from seasons.plans import ClimbPlan, EntryPlan, Guesses, HistoryPlan, LookupPlan, PagePlan
from seasons.replies import HIDDEN, Writer, flagged, meta, raw

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


def _checked(moderation: str, twin: str, live: str) -> str | None:
    """The moderation hash a plan reads for a member it misses, or None for a snapshot,
    which has no twin (:meth:`Reads._twin`)."""
    return None if twin == live else moderation


T = TypeVar("T")

_RANGE, _POINTS = script("read_range"), script("read_points")
_P = "read_points.lua"
# The fields of the read scripts' replies (their headers).
_RANGE_FIELDS = ("total", "start", "first", "rows", "metas")
_ENTRY_FIELDS = ("rank", "score", "meta", "total", "worse", "better")
_CLIMB_FIELDS = ("rank", "score", "targets")
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


# The JSON of a read's result from the script's reply; None where the member asked for is not
# on the board.
Render = Callable[[Any], bytes | None]


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """A prepared read: the call, how its reply is written as JSON, the model that JSON is,
    for a read of one member the :class:`NotRanked` error that stands for the member not
    being on the board (``T`` then includes None), and for some reads a
    :class:`~seasons.executor.Plan` that gathers the same reply with plain commands."""

    call: Call
    render: Render
    model: TypeAdapter[Any]
    absent: NotRanked | None = None
    plan: Plan | None = None  # plain commands that may answer instead of the script

    def result(self, reply: Reply) -> T:
        """The model of the reply; None when the member is not on the board."""
        body = self.render(reply)
        if body is None:
            if self.absent is None:
                raise TypeError(f"{self.call.script.name} answered nil to a read of a board")
            return cast(T, None)
        return cast(T, self.model.validate_json(body))

    def body(self, reply: Reply) -> bytes:
        """The reply as an HTTP body: the result's JSON, or :class:`NotRanked`."""
        body = self.render(reply)
        if body is None:
            raise self.absent or TypeError(f"{self.call.script.name} answered nil")
        return body


class Reads:
    """The reads of one namespace's boards, prepared (see the module's doc)."""

    def __init__(self, settings: Settings, keys: Keys, clock: Clock = system_clock):
        self.settings = settings
        self.keys = keys
        self.clock = clock
        # The JSON writer of each board's results (its composite layout).
        self._writers = {
            name: Writer(cfg.composite_score()) for name, cfg in settings.boards.items()
        }
        # What the last reads found, for the plans' guesses (seasons.plans).
        self._guesses = Guesses()
        # (window, "current" | "previous") -> (valid from, valid until, period): see _resolve.
        self._relative: dict[tuple[str, str], tuple[datetime, datetime, win.Period]] = {}
        # (board, window, last) -> (valid from, valid until, KEYS, periods): see _recent.
        self._histories: dict[
            tuple[str, str, int], tuple[datetime, datetime, list[str], list[bytes], list[str]]
        ] = {}

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
            calendar.season_by_id(base, self.settings)  # the season part must name a season
            key = self.keys.archive(board, period)
            return period, key, key
        p = self._resolve(window, period, self.clock() if now is None else now)
        live = self.keys.window(board, p.window, p.id)
        archive = self.keys.archive(board, p.id) if spec.archived else live
        return p.id, live, archive

    def beside(self, board: str, window: str, period_id: str) -> tuple[str, str] | None:
        """(the set beside the live key, the set beside the archive key) of a read of
        ``period_id`` (an id as :meth:`target` answers it) that the board's tie rule keeps
        (:meth:`seasons.ties.TieSpec.beside`: reach sets, distinct sets), or None: a
        snapshot's both are the archive's; a window without archives has one key, twice."""
        cfg = self.board(board)
        name = ties.of(cfg).beside(self.keys)
        if name is None:
            return None
        archived = win.board_window(board, cfg, window).archived
        archive = name(board, "archive", period_id)
        if archived and "@" in period_id:
            return archive, archive
        live = name(board, win.spec(window).name, period_id)
        return live, archive if archived else live

    def _resolve(self, window: str, period: str, now: datetime) -> win.Period:
        """:func:`win.resolve_period`, remembered for ``current`` and ``previous`` until the
        local day of ``now`` ends: they depend on that day alone (settings are frozen)."""
        if period != "current" and period != "previous":
            return win.resolve_period(window, period, now, self.settings)
        hit = self._relative.get((window, period))
        if hit is not None and hit[0] <= now < hit[1]:
            return hit[2]
        found = win.resolve_period(window, period, now, self.settings)
        self._relative[(window, period)] = (*self._today(now), found)
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
        twin, sides = self._twin(board, window, pid, live)
        keys = [live, archive, self.keys.meta(board), self.keys.moderation(board), twin, *sides]
        head = b'{"board":%s,"window":%s,"period":%s,"total":' % (
            replies.text(board),
            replies.text(window),
            replies.text(pid),
        )
        writer, rule = self._writers[board], ties.of(cfg)

        def render(reply: Any) -> bytes | None:
            if reply is None:
                return None
            values, hidden = flagged(reply, _RANGE_FIELDS, "read_range.lua")
            total, start, first, rows, metas = values
            at = None if hidden is None else hidden - 1
            return writer.page(head + b"%d" % total, rule, start, first, rows, metas, at)

        absent = _not_ranked(board, window, a, pid) if mode == "member" else None
        call = Call(_RANGE, keys, [cfg.order, cfg.ties, mode, a, b, self._cap(cfg, window)])
        plan = None
        desc, board_keys = cfg.order == "desc", (self._guesses, live, archive, keys[2])
        planned = rule.planned
        if mode == "page" and ("page" in planned or ("top" in planned and a == 0)):
            plan = PagePlan(*board_keys, desc, offset=a, size=b)
        elif mode == "rank" and "around_rank" in planned:
            plan = PagePlan(*board_keys, desc, centre=a - 1, size=b)
        elif mode == "member" and "around_member" in planned:
            plan = PagePlan(
                *board_keys, desc, member=a, size=b, moderation=_checked(keys[3], twin, live)
            )
        return Read(call, render, _PAGE, absent, plan)

    def entry(self, board: str, window: str, member: str, period: str) -> Read[EntryDetail | None]:
        """``member``'s entry with its percentile, gap up and the board's total; nil if it is
        not ranked."""
        cfg = self.board(board)
        _check_member(member)
        pid, live, archive = self.target(board, window, period)
        writer, name = self._writers[board], member.encode()

        def render(reply: Any) -> bytes | None:
            if reply is None:
                return None
            values, hidden = flagged(reply, _ENTRY_FIELDS, _P)
            rank, score, stored, total, worse, better = values
            score = raw(score)
            gap = (
                replies.number_text(abs(float(better) - float(score)))
                if better is not None
                else b"null"
            )
            return (
                writer.entry(rank, name, score, meta(stored), hidden is not None)[:-1]
                + b',"percentile":'
                + replies.number_text(100 * worse / total)
                + b',"gap_up":'
                + gap
                + b',"total":%d}' % total
            )

        args = [cfg.order, cfg.ties, "entry", self._cap(cfg, window), member]
        keys = self._points_keys(board, window, pid, live, archive)
        plan, rule = None, ties.of(cfg)
        if "entry" in rule.planned:
            desc = cfg.order == "desc"
            plan = EntryPlan(
                self._guesses,
                live,
                archive,
                keys[0],
                desc,
                rule.shares,
                member,
                _checked(keys[1], keys[4], live),
            )
        call = Call(_POINTS, keys, args)
        return Read(call, render, _ENTRY, _not_ranked(board, window, member, pid), plan)

    def climb(
        self, board: str, window: str, member: str, period: str, *, to: Iterable[int]
    ) -> Read[Climb | None]:
        """``member``'s rank and score, and for each rank of ``to`` the score at that position
        of the board and how far the member's score is from it; nil if it is not ranked. A
        hidden or banned member's rank and score are its self-view; the targets stay the
        visible members' places."""
        cfg = self.board(board)
        ranks = _check_targets(to)
        _check_member(member)
        pid, live, archive = self.target(board, window, period)
        writer = self._writers[board]
        head = b'{"board":%s,"window":%s,"period":%s,"member":%s,"rank":' % (
            replies.text(board),
            replies.text(window),
            replies.text(pid),
            replies.text(member),
        )

        def render(reply: Any) -> bytes | None:
            if reply is None:
                return None
            (rank, score, targets), hidden = flagged(reply, _CLIMB_FIELDS, _P)
            here, out = float(score), []
            for k, at in zip(ranks, targets, strict=True):
                if at is None:
                    out.append(b'{"rank":%d,"score":null,"gap":0}' % k)
                    continue
                gap = replies.number_text(abs(float(at) - here)) if rank > k else b"0"
                out.append(b'{"rank":%d' % k + writer.score(raw(at)) + b',"gap":' + gap + b"}")
            return (
                head + b"%d" % rank + writer.score(raw(score)) + b',"targets":['
                + b",".join(out) + b"]" + (HIDDEN if hidden is not None else b"") + b"}"
            )  # fmt: skip

        args = [cfg.order, cfg.ties, "climb", self._cap(cfg, window), member, *ranks]
        keys = self._points_keys(board, window, pid, live, archive)
        call = Call(_POINTS, keys, args)
        plan = None
        if "climb" in ties.of(cfg).planned:
            plan = ClimbPlan(
                self._guesses, live, archive, cfg.order == "desc", member, ranks,
                _checked(keys[1], keys[4], live),
            )  # fmt: skip
        return Read(call, render, _CLIMB, _not_ranked(board, window, member, pid), plan)

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
        writer = self._writers[board]

        def render(reply: Any) -> bytes:
            (rows,), hidden = flagged(reply, ("rows",), _P)
            if rows and not isinstance(rows[1], bytes):  # a redis-py client's decoded text
                rows = [x if i % 4 == 0 else meta(x) for i, x in enumerate(rows)]
            entry = writer.entry
            out = [entry(*rows[i : i + 4]) for i in range(0, len(rows), 4)]
            for at in hidden or ():  # self-views in open mode (1-based rows)
                rank, member, score, stored = rows[4 * at - 4 : 4 * at]
                out[at - 1] = entry(rank, member, score, stored, True)
            return b"[" + b",".join(out) + b"]"

        asked = list(dict.fromkeys(members))
        keys = self._points_keys(board, window, pid, live, archive)
        plan = None
        if "lookup" in ties.of(cfg).planned:
            desc = cfg.order == "desc"
            moderation = _checked(keys[1], keys[4], live)
            plan = LookupPlan(self._guesses, live, archive, keys[0], desc, asked, moderation)
        args = [cfg.order, cfg.ties, "entries", self._cap(cfg, window), *asked]
        call = Call(_POINTS, keys, args)
        return Read(call, render, _ENTRIES, plan=plan)

    def history(
        self, board: str, member: str, window: str, *, last: int | None = None
    ) -> Read[History]:
        """Rank and score of ``member`` in each of the last ``last`` periods, oldest first;
        ``last`` None: the window's ``history_last`` (:data:`seasons.windows.SPECS`)."""
        cfg = self.board(board)
        spec = win.board_window(board, cfg, window)
        if last is None:
            last = spec.history_last
        _limit("last", last, 1, MAX_LAST)
        _check_member(member)
        keys, ids, lives = self._recent(board, cfg, spec.archived, window, last)
        writer = self._writers[board]
        head = b'{"board":%s,"window":%s,"member":%s,"history":[' % (
            replies.text(board),
            replies.text(window),
            replies.text(member),
        )

        def render(reply: Any) -> bytes:
            (places,), hidden = flagged(reply, ("places",), _P)
            flags = set(hidden or ())  # self-views in open mode (1-based periods)
            out = []
            for i, pid in enumerate(ids):
                rank, score = places[2 * i], places[2 * i + 1]
                if rank is None:
                    out.append(pid + b'null,"score":null}')
                else:
                    mark = HIDDEN if i + 1 in flags else b""
                    out.append(pid + b"%d" % rank + writer.score(raw(score)) + mark + b"}")
            return head + b",".join(out) + b"]}"

        plan = None
        if "history" in ties.of(cfg).planned and not spec.archived:
            plan = HistoryPlan(self._guesses, lives, cfg.order == "desc", member, keys[1])
        args = [cfg.order, cfg.ties, "history", self._cap(cfg, window), member]
        call = Call(_POINTS, keys, args)
        return Read(call, render, _HISTORY, plan=plan)

    def _recent(
        self, board: str, cfg: BoardSettings, archived: bool, window: str, last: int
    ) -> tuple[list[str], list[bytes], list[str]]:
        """The KEYS of a history's read_points call, the start of each period's JSON
        (``{"period":<id>,"rank":``) and each period's live key, remembered until the local
        day ends: the last periods depend on that day alone (settings are frozen)."""
        now = self.clock()
        hit = self._histories.get((board, window, last))
        if hit is not None and hit[0] <= now < hit[1]:
            return hit[2], hit[3], hit[4]
        periods = win.recent_periods(window, last, now, self.settings)
        keys = [self.keys.meta(board), self.keys.moderation(board)]
        lives = []
        for p in periods:
            live = self.keys.window(board, p.window, p.id)
            archive = self.keys.archive(board, p.id) if archived else live
            twin, sides = self._twin(board, window, p.id, live)
            keys += [live, archive, twin, *sides]
            lives.append(live)
        ids = [b'{"period":' + replies.text(p.id) + b',"rank":' for p in periods]
        if len(self._histories) >= len(self.settings.boards) * 64:
            self._histories.clear()  # a bound: histories of many lengths were asked
        self._histories[(board, window, last)] = (*self._today(now), keys, ids, lives)
        return keys, ids, lives

    def _today(self, now: datetime) -> tuple[datetime, datetime]:
        """The start and end of the local day of ``now``."""
        zone = self.settings.zone
        today = calendar.local_day(now, zone)
        return calendar.day_start(today, zone), calendar.day_end(today, zone)

    def _points_keys(self, board: str, window: str, pid: str, live: str, archive: str) -> list[str]:
        """The KEYS of a read_points call on one board: meta, the moderation hash, live,
        archive, the live key's twin and the sets their tie rule keeps beside them
        (:meth:`_sides`)."""
        twin, sides = self._twin(board, window, pid, live)
        return [self.keys.meta(board), self.keys.moderation(board), live, archive, twin, *sides]

    def _twin(self, board: str, window: str, pid: str, live: str) -> tuple[str, tuple[str, ...]]:
        """Where a hidden member's self-view of a read reads (``seasons/lua/lib/hidden.lua``):
        the twin of the live key (a snapshot, which is its archive alone, names its own key
        there, which the scripts read as no twin); and the sets the board's tie rule keeps
        beside the live and the archive key (:meth:`beside`), with the twin's reach set on an
        earliest board."""
        sides: tuple[str, ...] = self.beside(board, window, pid) or ()
        snapshot = "@" in pid and win.board_window(board, self.board(board), window).archived
        twin = live if snapshot else self.keys.twin_of(live)
        if sides and self.board(board).ties == "earliest":
            sides = (*sides, twin if snapshot else self.keys.twin_of(sides[0]))
        return twin, sides

    @staticmethod
    def _cap(cfg: BoardSettings, window: str) -> int:
        """The size a trimmed board keeps on ``window`` (0: untrimmed): day boards never
        are. A hidden member's self-view stands within it."""
        return cfg.max_entries if win.spec(window).rolled_up else 0
