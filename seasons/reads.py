"""The reads, prepared: each answers from one instant of the board, metadata included.

:class:`Reads` turns a query (board, window, period, member...) into a :class:`Read`: its
script call (:class:`seasons.executor.Call`), for most reads a plan of plain commands in one
transaction (:mod:`seasons.plans`), which the executor tries first, and what their reply is.
Both gather and rank; the read writes the JSON of its result from their reply
(:mod:`seasons.replies`), which the HTTP server sends as it is and the Python API validates
into its model (scores in the one form of :data:`seasons.models.Score`, with their parts
beside them on a board with a composite layout). A read of one member whose member is not
on the board answers the :class:`~seasons.errors.NotRanked` error the Read names. Limits and
the member rule are checked before any Redis call, for every interface alike
(:mod:`seasons.read_limits`).

A read addressed to a member (its entry, around it, a lookup, its history, its climb) names
the board's moderation hash and the twin of its live key too: where the member is missing, a
hidden or banned one is answered where it would stand if it alone were visible
(``seasons/lua/lib/hidden.lua``, docs/boards.md#hidden-and-banned-members).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from pydantic import TypeAdapter

from seasons import replies, shards, ties
from seasons import windows as win
from seasons.clock import Clock, system_clock
from seasons.config.settings import Settings
from seasons.errors import LimitExceeded, NotRanked
from seasons.executor import Call, Plan, Reply, Steps, script
from seasons.keys import Keys
from seasons.models import Climb, Entry, EntryDetail, History, Page
from seasons.plans import ClimbPlan, EntryPlan, Guesses, HistoryPlan, LookupPlan, PagePlan
from seasons.read_limits import (
    MAX_LAST,
    MAX_LIMIT,
    MAX_LOOKUP,
    MAX_SIZE,
    check_asked_member,
    check_limit,
    check_targets,
)
from seasons.read_targets import Targets, unranked
from seasons.replies import HIDDEN, Writer, flagged, meta, raw
from seasons.shard_reads import Board, ShardReads, fixed


def _checked(moderation: str, twin: str, live: str) -> str | None:
    """The moderation hash a plan reads for a member it misses, or None for a snapshot,
    which has no twin (:meth:`seasons.read_targets.Targets._twin`)."""
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


# The JSON of a read's result from the script's reply; None where the member asked for is not
# on the board.
Render = Callable[[Any], bytes | None]


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """A prepared read: the call, how its reply is written as JSON, the model that JSON is,
    for a read of one member the :class:`NotRanked` error that stands for the member not
    being on the board (``T`` then includes None), and for some reads a
    :class:`~seasons.executor.Plan` that gathers the same reply with plain commands."""

    call: Call | Steps  # Steps: a sharded board's (seasons.shard_reads), no plan
    render: Render
    model: TypeAdapter[Any]
    absent: NotRanked | None = None
    plan: Plan | None = None  # plain commands that may answer instead of the script

    def result(self, reply: Reply) -> T:
        """The model of the reply; None when the member is not on the board."""
        body = self.render(reply)
        if body is None:
            if self.absent is None:
                raise TypeError(f"{self.name} answered nil to a read of a board")
            return cast(T, None)
        return cast(T, self.model.validate_json(body))

    def body(self, reply: Reply) -> bytes:
        """The reply as an HTTP body: the result's JSON, or :class:`NotRanked`."""
        body = self.render(reply)
        if body is None:
            raise self.absent or TypeError(f"{self.name} answered nil")
        return body

    @property
    def name(self) -> str:
        return self.call.name if isinstance(self.call, Steps) else self.call.script.name


class Reads(Targets):
    """The reads of one namespace's boards, prepared (see the module's doc), on the keys
    :class:`~seasons.read_targets.Targets` resolves."""

    def __init__(self, settings: Settings, keys: Keys, clock: Clock = system_clock):
        super().__init__(settings, keys, clock)
        # The JSON writer of each board's results (its composite layout).
        self._writers = {
            name: Writer(cfg.composite_score()) for name, cfg in settings.boards.items()
        }
        # What the last reads found, for the plans' guesses (seasons.plans).
        self._guesses = Guesses()
        # The merged reads of each sharded board (seasons.shard_reads).
        self._sharded = {
            name: ShardReads(self._writers[name], ties.of(cfg))
            for name, cfg in settings.boards.items()
            if shards.is_sharded(cfg)
        }

    def _periods(
        self, board: str, spec: win.WindowSpec, last: int
    ) -> list[tuple[win.Period, str, str]]:
        """The last ``last`` periods of ``spec`` with their live and archive keys (the live
        one twice for a window without archives)."""
        out = []
        for p in win.recent_periods(spec.name, last, self.clock(), self.settings):
            live = self.keys.window(board, p.window, p.id)
            out.append((p, live, self.keys.archive(board, p.id) if spec.archived else live))
        return out

    def _shard_board(self, board: str, window: str, pid: str, live: str, archive: str) -> Board:
        """A sharded board's period as its reads merge it: the stores' keys, or the archive
        (a snapshot's is its only key)."""
        cfg = self.board(board)
        cap = self._cap(cfg, window)
        if live == archive and win.spec(window).archived:  # a snapshot S@<ts>
            return Board.of_archive(self.keys, board, cfg, archive, pid, cap)
        kept = archive if archive != live else None
        return Board(self.keys, board, cfg, win.spec(window).name, pid, kept, cap)

    def page(self, board: str, window: str, period: str, *, limit: int, offset: int) -> Read[Page]:
        """A page of the board, best first."""
        check_limit("limit", limit, 1, MAX_LIMIT)
        check_limit("offset", offset, 0, 10**9)
        return self._range(board, window, period, "page", offset, limit)

    def around_rank(
        self, board: str, window: str, rank: int, period: str, *, size: int
    ) -> Read[Page]:
        """``size`` entries centred on ``rank`` (shifted at the ends)."""
        check_limit("size", size, 1, MAX_SIZE)
        check_limit("rank", rank, 1, 10**9)
        return self._range(board, window, period, "rank", rank, size)

    def around_member(
        self, board: str, window: str, member: str, period: str, *, size: int
    ) -> Read[Page | None]:
        """``size`` entries centred on ``member``; nil if it is not ranked."""
        check_limit("size", size, 1, MAX_SIZE)
        check_asked_member(member)
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

        absent = unranked(board, window, a, pid) if mode == "member" else None
        sharded = self._sharded.get(board)
        if sharded is not None:
            b_ = self._shard_board(board, window, pid, live, archive)
            if mode == "member":
                steps = sharded.around_member(b_, head, a, b)
            elif mode == "rank":
                steps = sharded.page(b_, head, _centred(a - 1, b), b)
            else:
                steps = sharded.page(b_, head, fixed(a), b)
            return Read(steps, _as_is, _PAGE, absent)
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
        check_asked_member(member)
        pid, live, archive = self.target(board, window, period)
        writer, name = self._writers[board], member.encode()

        def detail(
            rank: int, score: bytes, stored: Any, total: int, worse: int,
            better: float | None, hidden: bool,
        ) -> bytes:  # fmt: skip
            gap = b"null" if better is None else replies.number_text(abs(better - float(score)))
            return (
                writer.entry(rank, name, score, meta(stored), hidden)[:-1]
                + b',"percentile":'
                + replies.number_text(100 * worse / total)
                + b',"gap_up":'
                + gap
                + b',"total":%d}' % total
            )

        def render(reply: Any) -> bytes | None:
            if reply is None:
                return None
            values, hidden = flagged(reply, _ENTRY_FIELDS, _P)
            rank, score, stored, total, worse, better = values
            better = None if better is None else float(better)
            return detail(rank, raw(score), stored, total, worse, better, hidden is not None)

        absent = unranked(board, window, member, pid)
        sharded = self._sharded.get(board)
        if sharded is not None:
            b = self._shard_board(board, window, pid, live, archive)

            def merged(v: Any) -> bytes | None:
                if v is None:
                    return None
                return detail(*v)

            return Read(sharded.entry(b, member), merged, _ENTRY, absent)
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
        return Read(call, render, _ENTRY, absent, plan)

    def climb(
        self, board: str, window: str, member: str, period: str, *, to: Iterable[int]
    ) -> Read[Climb | None]:
        """``member``'s rank and score, and for each rank of ``to`` the score at that position
        of the board and how far the member's score is from it; nil if it is not ranked. A
        hidden or banned member's rank and score are its self-view; the targets stay the
        visible members' places."""
        cfg = self.board(board)
        ranks = check_targets(to)
        check_asked_member(member)
        pid, live, archive = self.target(board, window, period)
        writer = self._writers[board]
        head = b'{"board":%s,"window":%s,"period":%s,"member":%s,"rank":' % (
            replies.text(board),
            replies.text(window),
            replies.text(pid),
            replies.text(member),
        )

        def body(rank: int, score: bytes, targets: list[Any], hidden: bool) -> bytes:
            here, out = float(score), []
            for k, at in zip(ranks, targets, strict=True):
                if at is None:
                    out.append(b'{"rank":%d,"score":null,"gap":0}' % k)
                    continue
                gap = replies.number_text(abs(float(at) - here)) if rank > k else b"0"
                out.append(b'{"rank":%d' % k + writer.score(raw(at)) + b',"gap":' + gap + b"}")
            return (
                head + b"%d" % rank + writer.score(score) + b',"targets":['
                + b",".join(out) + b"]" + (HIDDEN if hidden else b"") + b"}"
            )  # fmt: skip

        def render(reply: Any) -> bytes | None:
            if reply is None:
                return None
            (rank, score, targets), hidden = flagged(reply, _CLIMB_FIELDS, _P)
            return body(rank, raw(score), targets, hidden is not None)

        absent = unranked(board, window, member, pid)
        sharded = self._sharded.get(board)
        if sharded is not None:
            b = self._shard_board(board, window, pid, live, archive)

            def climbed(v: Any) -> bytes | None:
                return None if v is None else body(*v)

            return Read(sharded.climb(b, member, ranks), climbed, _CLIMB, absent)
        args = [cfg.order, cfg.ties, "climb", self._cap(cfg, window), member, *ranks]
        keys = self._points_keys(board, window, pid, live, archive)
        call = Call(_POINTS, keys, args)
        plan = None
        if "climb" in ties.of(cfg).planned:
            plan = ClimbPlan(
                self._guesses, live, archive, cfg.order == "desc", member, ranks,
                _checked(keys[1], keys[4], live),
            )  # fmt: skip
        return Read(call, render, _CLIMB, absent, plan)

    def lookup(self, board: str, window: str, members: list[str], period: str) -> Read[list[Entry]]:
        """The ranked ones among ``members`` (a friends board), best first."""
        cfg = self.board(board)
        if len(members) > MAX_LOOKUP:
            raise LimitExceeded(
                f"lookup takes at most {MAX_LOOKUP} members, got {len(members)}",
                {"limit": MAX_LOOKUP},
            )
        for member in members:
            check_asked_member(member)
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
        sharded = self._sharded.get(board)
        if sharded is not None:
            b = self._shard_board(board, window, pid, live, archive)

            def entries(found: list[tuple[int, bytes, bytes, Any, bool]]) -> bytes:
                out = [writer.entry(rank, m, score, meta(s), h) for rank, m, score, s, h in found]
                return b"[" + b",".join(out) + b"]"

            return Read(sharded.lookup(b, asked), entries, _ENTRIES)
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
        check_limit("last", last, 1, MAX_LAST)
        check_asked_member(member)
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

        sharded = self._sharded.get(board)
        if sharded is not None:
            boards = [
                self._shard_board(board, window, p.id, live, archive)
                for p, live, archive in self._periods(board, spec, last)
            ]

            def places(found: list[tuple[int | None, bytes | None, bool]]) -> bytes:
                out = []
                for pid, (rank, score, hidden) in zip(ids, found, strict=True):
                    if rank is None or score is None:
                        out.append(pid + b'null,"score":null}')
                    else:
                        mark = HIDDEN if hidden else b""
                        out.append(pid + b"%d" % rank + writer.score(score) + mark + b"}")
                return head + b",".join(out) + b"]}"

            return Read(sharded.history(boards, member), places, _HISTORY)
        plan = None
        if "history" in ties.of(cfg).planned and not spec.archived:
            plan = HistoryPlan(self._guesses, lives, cfg.order == "desc", member, keys[1])
        args = [cfg.order, cfg.ties, "history", self._cap(cfg, window), member]
        call = Call(_POINTS, keys, args)
        return Read(call, render, _HISTORY, plan=plan)


def _as_is(body: Any) -> bytes | None:
    """A merged read's answer, already its JSON (seasons.shard_reads)."""
    return cast(bytes | None, body)


def _centred(centre: int, size: int) -> Callable[[int | None], int]:
    """The first position of ``size`` entries centred on ``centre`` (0-based), shifted back
    at the end of a board of ``shown`` members (read_range.lua's rule)."""

    def start(shown: int | None) -> int:
        if shown is None:
            return max(0, centre - size // 2)
        return max(0, min(centre - size // 2, shown - size))

    return start
