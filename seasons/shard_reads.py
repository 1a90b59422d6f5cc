"""Reads of a sharded board: every shard asked, their answers merged (docs/sharding.md#reads).

A sharded board's period is S sorted sets, one per store (seasons.shards), in as many slots.
No one call reads them all, so each read here is a :class:`~seasons.executor.Steps`: rounds
of commands, each round sent at once (one round trip per server), merged in Python, which
scales out. Every answer is the unsharded board's, byte for byte, for the board's order and
its ``member``, ``shared`` or ``earliest`` ties:

- a member's place is the sum over the shards of where it stands or would stand on each:
  counted with plain commands (ZCOUNT of the better scores; its own rank on its shard), or,
  where another shard holds its score, placed by ``seasons/lua/shard_seek.lua`` (a binary
  search of its score's run, O(log n));
- a page at positions [o, o + l) is a merge of each shard's entries around its share of
  them (members are spread evenly by their hash), with a margin that is checked: an entry's
  global position is known exactly when every shard's slice reaches it, and the page is
  answered only when every one of its positions is; else it is read again with wider slices,
  at last from the top;
- a season that has its archive is read there: the archive is one key of the board's own
  slot (seasons.shard_archive), read as a board of one shard;
- on an earliest board a position holds the same score as in Redis's order, and only the
  order inside runs of equal scores differs: a page is merged in Redis's order, then the
  runs it touches are read whole on every shard with their reach times and sorted here; a
  member's place counts, on every shard, the members of its score reached before it (plain
  commands: no script reads or sorts a run);
- a hidden or banned member missing from its store's live key answers its self-view, as
  ``seasons/lua/lib/hidden.lua`` does on an unsharded board: its record and its score on the
  twin are read in its store (one round more, only for a member missing from the board), and
  it is placed among the visible members of every shard as a probe that is on none.

The rounds of one read are not one instant of the board as a script's reply is: a write
between two rounds can show in the second. Each round alone is one instant of a server.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from seasons import shards, ties
from seasons.config.settings import BoardSettings
from seasons.executor import Call, Command, Gathered, Steps, script
from seasons.keys import Keys
from seasons.replies import Writer, meta, raw
from seasons.ties import TieSpec

_SEEK = script("shard_seek")
# A member's place asked for: Redis's text of its score, and the member.
Probe = tuple[bytes, str]
# Tries of a page from guessed slices (each with wider margins) before it reads every
# shard's entries from the top down to the page's end, which is always exact.
GUESSES = 2
# Tries more of an earliest board's page whose rounds a write came between (seasons reads
# in rounds, each one instant of a server): the last answers the order of its own rounds.
RACES = 2


@dataclass(frozen=True, slots=True)
class Source:
    """One sorted set a read merges: a store's key of the period, or the archive; the
    metadata hash of its members; on a live key, its twin and the store's moderation hash,
    where a hidden member's self-view is read (an archive has none: it is the public board
    alone); on an earliest board, its reach set and its twin's."""

    key: str
    meta: str
    twin: str | None = None
    moderation: str | None = None
    reach: str | None = None
    twin_reach: str | None = None


class Row(NamedTuple):
    """An entry read from a shard: Redis's text of its score, its score, member bytes, and
    the index of its source."""

    score: float
    member: bytes
    text: bytes
    source: int


@dataclass(frozen=True, slots=True)
class Place:
    """Where a probe (score, member) stands over every shard."""

    position: int  # 0-based, in the board's order
    better: int  # members of a strictly better score
    equal: int  # members of its score (itself included, when it is on the board)
    nearer: float | None  # the nearest strictly better score
    total: int  # members on every shard
    # On each source: (members of a strictly better score, members of its score)
    runs: tuple[tuple[int, int], ...] = ()


class Board:
    """What a read of one period of a sharded board needs: its sources (the stores' keys, or
    the archive once it exists), its order and its cap."""

    def __init__(
        self, keys: Keys, board: str, cfg: BoardSettings, window: str, pid: str,
        archive: str | None, cap: int,
    ):  # fmt: skip
        # ties = "earliest": equal scores in the order their members reached them, read
        # from the reach sets beside the keys.
        self.earliest = ties.of(cfg).reach_set

        def reach(store: str, window: str) -> str | None:
            return keys.reached(store, window, pid) if self.earliest else None

        def source(store: str) -> Source:
            live, r = keys.window(store, window, pid), reach(store, window)
            twin_reach = None if r is None else keys.twin_of(r)
            return Source(live, keys.meta(store), keys.twin_of(live), keys.moderation(store), r,
                          twin_reach)  # fmt: skip

        self.live = [source(store) for store in shards.stores(board, cfg)]
        self.archive = (
            None
            if archive is None
            else Source(archive, keys.meta(board), reach=reach(board, "archive"))
        )
        self.desc = cfg.order == "desc"
        self.cap = cap
        # Each store's metadata hash: where an archive's members' metadata is first looked
        # for (seasons.shards.metadata).
        self.store_metas = [s.meta for s in self.live]

    @classmethod
    def of_archive(
        cls, keys: Keys, board: str, cfg: BoardSettings, archive: str, pid: str, cap: int
    ) -> Board:
        """A board read from its archive alone (a snapshot ``S@<ts>``, ``pid``)."""
        found = cls(keys, board, cfg, "season", pid, None, cap)
        reach = keys.reached(board, "archive", pid) if found.earliest else None
        found.live = [Source(archive, keys.meta(board), reach=reach)]
        return found

    def reached(self, source: Source, member: str) -> list[Command]:
        """On an earliest board, the commands reading the time ``member`` reached its score on
        ``source`` (its reach set, then its twin's: a hidden member's), whose replies
        :func:`_reach_time` reads; none on the other boards."""
        if not self.earliest:
            return []
        return [("ZSCORE", r, member) for r in (source.reach, source.twin_reach) if r]

    def store_of(self, member: str) -> int:
        """The index in :attr:`store_metas` (and :attr:`live`) of ``member``'s store."""
        return shards.shard_of(member, len(self.store_metas))

    def metas(self, source: Source, member: bytes) -> list[str]:
        """The hashes holding ``member``'s metadata on ``source``, the first found wins
        (seasons.shards.metadata): a store's key, its store's; an archive's, its store's
        (the latest, as an unsharded board shows it), then the board's own copy."""
        if source.twin is not None:  # a live key of a store
            return [source.meta]
        return [self.store_metas[self.store_of(member.decode("utf-8", "surrogatepass"))],
                source.meta]  # fmt: skip

    def opened(self) -> Gathered:
        """Steps answering the sources to read: the archive when it exists, else the
        stores' keys."""
        if self.archive is None:
            return self.live
        (found,) = yield [("EXISTS", self.archive.key)]
        return [self.archive] if int(found) else self.live

    def public(self, total: int) -> int:
        """The members a read shows of ``total``: a trimmed board's top ``cap``."""
        return min(total, self.cap) if self.cap > 0 else total

    def fits(self, place: Place) -> bool:
        """Whether a member at ``place`` is shown: within a trimmed board's top ``cap`` (a
        member on the board stands before its total; a hidden one's self-view, on none,
        stands there only within the cap, the last member making room)."""
        return self.cap == 0 or place.position < self.cap


class Found(NamedTuple):
    """A member found on a board: Redis's text of its score, its stored metadata (when
    asked), its :class:`Place` among the visible members, the visible members shown, and
    whether it is a hidden one's self-view: None (visible), ``"shadow"`` or ``"open"``."""

    score: bytes
    stored: Any
    place: Place
    shown: int
    hidden: str | None


def mode(record: Any) -> str:
    """A hidden or banned member's self-view mode from its moderation record (stored JSON):
    shadow unless it says open (as lib/hidden.lua's ``mode``)."""
    try:
        fields = json.loads(raw(record))
    except ValueError:
        return "shadow"
    return "open" if isinstance(fields, dict) and fields.get("mode") == "open" else "shadow"


def _score(value: Any) -> bytes:
    """A score as the text the reads write and send back to Redis: Redis's own, or, where a
    redis-py client's reply callback made it a float (ZSCORE, ZRANGE ... WITHSCORES through
    a cluster pipeline), its shortest exact text (the same JSON, the same double)."""
    return repr(value).encode() if isinstance(value, float) else raw(value)


def _rows(reply: Sequence[Any], source: int) -> list[Row]:
    """The entries of a ZRANGE ... WITHSCORES reply: flat, or (member, score) pairs once a
    redis-py client's callback has paired them."""
    paired = bool(reply) and isinstance(reply[0], (list, tuple))
    pairs = reply if paired else zip(reply[::2], reply[1::2], strict=True)
    out = []
    for member, score in pairs:
        text = _score(score)
        out.append(Row(float(text), raw(member), text, source))
    return out


def _time(value: Any) -> float:
    """A reach time from a ZSCORE or ZMSCORE reply (Redis's text, or a float once a redis-py
    client's callback parsed it); inf when there is none: reached last, as lib/ranks.lua
    ranks a member without one."""
    return math.inf if value is None else float(_score(value))


def _reach_time(replies: Sequence[Any]) -> float:
    """A member's reach time from the replies of :meth:`Board.reached`: the first found."""
    return _time(_first(replies))


def _range(key: str, desc: bool, start: int, stop: int) -> Command:
    """ZRANGE of positions [start, stop) in the board's order, with scores."""
    if desc:
        return ("ZRANGE", key, start, stop - 1, "REV", "WITHSCORES")
    return ("ZRANGE", key, start, stop - 1, "WITHSCORES")


def _order_key(row: Row) -> tuple[float, bytes]:
    """The board's order: by score, then member bytes (both reversed on a desc board: Redis's
    ZRANGE ... REV)."""
    return row.score, row.member


def positioned(
    slices: Sequence[tuple[int, list[Row], int]], desc: bool, end: int | None = None
) -> list[tuple[int, Row]]:
    """The global position of every entry of ``slices`` whose position they determine, in
    the board's order. Each slice is (its first position on its shard, its rows in the
    board's order, the shard's size). An entry's position is the sum over the shards of the
    entries before it; a shard's count is known when its slice starts at its top or at an
    entry before this one, and ends at its bottom or at an entry after it. One merge of the
    slices, O(rows x log shards), stopped at position ``end`` when given."""
    seen = [0] * len(slices)  # rows of each slice before the current entry

    def blocks(j: int) -> bool:  # whether slice j leaves the current entry's count unknown
        start, rows, size = slices[j]
        return (start > 0 and seen[j] == 0) or (seen[j] == len(rows) and start + len(rows) < size)

    blocking = [blocks(j) for j in range(len(slices))]
    unknown = sum(blocking)
    position = sum(start for start, _, _ in slices)  # Σ (start + seen) over the slices
    out = []
    key = _order_key
    for row in heapq.merge(*(rows for _, rows, _ in slices), key=key, reverse=desc):
        if end is not None and position >= end:
            break
        i = row.source
        if unknown - blocking[i] == 0:
            out.append((position, row))
        seen[i] += 1
        position += 1
        now = blocks(i)
        unknown += now - blocking[i]
        blocking[i] = now
    return out


class ShardReads:
    """The steps of each read of a sharded board (:class:`seasons.reads.Reads` prepares the
    rest of the :class:`~seasons.reads.Read` around them)."""

    def __init__(self, writer: Writer, rule: TieSpec):
        self.writer, self.rule = writer, rule

    # --- pages ------------------------------------------------------------------------------

    def page(
        self, b: Board, head: bytes, start_of: Callable[[int | None], int], size: int
    ) -> Steps:
        """A page of ``size`` entries from position ``start_of(shown)`` (``shown``: the
        members the board shows; None before it is known) as read_range.lua answers it."""

        def steps() -> Gathered:
            sources = yield from b.opened()
            total, start, rows = yield from self._slice(b, sources, start_of, size)
            return (yield from self._render(b, sources, head, total, start, rows))

        return Steps("a page of a sharded board", steps)

    def _slice(
        self, b: Board, sources: list[Source], start_of: Callable[[int | None], int], size: int,
        *, by_score: bool = False, around: list[tuple[int, int]] | None = None,
    ) -> Gathered:  # fmt: skip
        """(members shown, the page's first position, its rows in the board's order; with
        ``by_score`` in Redis's order of equal scores, which holds the same score at each
        position). ``around``: the slice of each source to read first, when known."""
        n, start, cards = len(sources), start_of(None), None
        for attempt in range(GUESSES + 2 + RACES):
            if attempt == 0 and around is not None:
                spans = around
            else:
                spans = self._spans(n, start, size, cards, min(attempt, GUESSES))
            commands: list[Any] = []
            for s, (lo, hi) in zip(sources, spans, strict=True):
                commands += [("ZCARD", s.key), _range(s.key, b.desc, lo, hi)]
            got = yield commands
            cards = [int(c) for c in got[::2]]
            shown = b.public(sum(cards))
            wanted = start_of(shown)
            slices = [
                (lo, _rows(reply, i), card)
                for i, ((lo, _), reply, card) in enumerate(
                    zip(spans, got[1::2], cards, strict=True)
                )
            ]
            if wanted != start and attempt < GUESSES:  # near the end: the page shifts back
                start = wanted
                continue
            end = min(start + size, shown)
            if start >= end:
                return shown, start, []
            found = {p: row for p, row in positioned(slices, b.desc, end) if start <= p}
            if len(found) < end - start:
                continue
            rows = [found[p] for p in range(start, end)]
            if b.earliest and not by_score:
                ordered = yield from self._reached_order(b, sources, start, rows)
                if ordered is None and attempt < GUESSES + 1 + RACES:
                    continue  # a write between the rounds moved the page: read it again
                rows = ordered or rows
            return shown, start, rows
        raise AssertionError("a page read from the top of every shard is always whole")

    def _reached_order(
        self, b: Board, sources: list[Source], start: int, rows: list[Row]
    ) -> Gathered:
        """``rows`` (positions start.. in Redis's order of equal scores) in the earliest
        order, as lib/ranks.lua's page orders them: each position holds the same score in
        both, so only runs of equal scores change order. The runs inside the page are whole
        in it; those of its first and last score may reach past it, and are read whole on
        every source (ZRANGE BYSCORE), with the count of members better than the first
        (ZCOUNT). Then each run's reach times (ZMSCORE on each source's reach set) order it:
        earlier first, then member bytes. Two rounds of plain commands, sorted here, which
        scales out. None when a write between the rounds left them disagreeing."""
        first, last = rows[0].text, rows[-1].text
        commands: list[Any] = []
        for s in sources:
            commands += [_better(s.key, b.desc, first), ("ZRANGE", s.key, first, first, "BYSCORE")]
            if last != first:
                commands.append(("ZRANGE", s.key, last, last, "BYSCORE"))
        got = iter((yield commands))
        base = 0  # the position of the first run's first member
        ends: dict[bytes, list[Row]] = {first: [], last: []}
        for i in range(len(sources)):
            base += int(next(got))
            for row in (rows[0],) if last == first else (rows[0], rows[-1]):
                ends[row.text] += [row._replace(member=raw(m), source=i) for m in next(got)]
        inner: list[list[Row]] = []  # the runs whole in the page
        for row in rows:
            if row.text not in (first, last):
                if not inner or inner[-1][0].text != row.text:
                    inner.append([])
                inner[-1].append(row)
        runs = [ends[first], *inner, *([ends[last]] if last != first else [])]
        asked: dict[int, list[bytes]] = {}  # source -> members whose reach times are read
        for run in runs:
            if len(run) > 1:
                for row in run:
                    asked.setdefault(row.source, []).append(row.member)
        times: dict[bytes, float] = {}
        if asked:
            replies = yield [("ZMSCORE", sources[i].reach, *ms) for i, ms in asked.items()]
            for members, found in zip(asked.values(), replies, strict=True):
                times.update(zip(members, map(_time, found), strict=True))
        ordered = [
            row
            for run in runs
            for row in (
                sorted(run, key=lambda r: (times[r.member], r.member)) if len(run) > 1 else run
            )
        ]
        lo = start - base
        if lo < 0 or lo + len(rows) > len(ordered):
            return None
        page = ordered[lo : lo + len(rows)]
        return page if [r.text for r in page] == [r.text for r in rows] else None

    @staticmethod
    def _spans(
        n: int, start: int, size: int, cards: list[int] | None, attempt: int
    ) -> list[tuple[int, int]]:
        """The slice [lo, hi) of each of ``n`` shards read for positions [start, start +
        size): around each shard's share of the positions (its share of the members when
        the sizes are known, else an even one: members spread by their hash), with a margin
        of a few standard deviations of that share, widened at each attempt; from the top
        when that reads no more, and on the last attempt."""
        end = start + size
        if n == 1:
            return [(start, end)]
        prefix = [(0, end)] * n
        if attempt == GUESSES:
            return prefix
        total = sum(cards) if cards else 0
        out = []
        for i in range(n):
            share = cards[i] / total if cards and total else 1 / n
            margin = (3 * math.sqrt(end * share) + 2) * 4**attempt
            lo = max(0, math.floor(start * share - margin))
            out.append((lo, max(lo, math.ceil(end * share + margin))))
        return prefix if sum(hi - lo for lo, hi in out) >= n * end else out

    def _render(
        self, b: Board, sources: list[Source], head: bytes, total: int, start: int,
        rows: list[Row], hidden: int | None = None,
    ) -> Gathered:  # fmt: skip
        """The page's JSON, its metadata (and on a shared board its first rank) read;
        ``hidden``: the 0-based row of an open self-view."""
        where = {r.member: b.metas(sources[r.source], r.member) for r in rows}
        asked: dict[str, list[bytes]] = {}
        for member, hashes in where.items():
            for h in hashes:
                asked.setdefault(h, []).append(member)
        commands: list[Any] = [("HMGET", h, *members) for h, members in asked.items()]
        if self.rule.shares and rows:
            commands += [_better(s.key, b.desc, rows[0].text) for s in sources]
        got = (yield commands) if commands else []
        found: dict[tuple[str, bytes], Any] = {}
        for (h, members), reply in zip(asked.items(), got, strict=False):
            found.update(((h, m), v) for m, v in zip(members, reply, strict=True))
        metas = {m: meta(_first(found[h, m] for h in hashes)) for m, hashes in where.items()}
        first = start + 1
        if self.rule.shares and rows:
            first = 1 + sum(int(c) for c in got[len(asked) :])
        flat: list[bytes] = []
        for r in rows:
            flat += [r.member, r.text]
        return self.writer.page(
            head + b"%d" % total,
            self.rule,
            start,
            first,
            flat,
            [metas[r.member] for r in rows],
            hidden,
        )

    # --- members ----------------------------------------------------------------------------

    def around_member(self, b: Board, head: bytes, member: str, size: int) -> Steps:
        """``size`` entries centred on ``member``; None when it is not on the board. A hidden
        or banned member's self-view (read_range.lua's): the visible members' page with it
        standing at its place."""

        def steps() -> Gathered:
            sources = yield from b.opened()
            home = self._home(b, sources, member)
            (score,) = yield [("ZSCORE", sources[home].key, member)]
            how = None
            if score is None:
                (view,) = yield from self._views(b, sources, [member])
                if view is None:
                    return None
                score, how = view
            score = _score(score)
            slices: list[tuple[int, list[Row], int]] = []
            spans: list[tuple[int, int]] = []
            if b.earliest:  # its place as an entry's; then the page there, read from each
                # store's run of its score with `size` entries either side
                (place,) = yield from self.places(b, sources, [(score, member)])
                position, total = place.position, place.total
                spans = [(max(0, more - size), more + same + size) for more, same in place.runs]
            else:  # where it stands on each shard (on none, for a self-view), exactly, with
                # the entries around it there
                args = [b"desc" if b.desc else b"asc", 2 * size + 1, size, score, member]
                got = yield [Call(_SEEK, [s.key], args) for s in sources]
                position = total = 0
                for i, reply in enumerate(got):
                    card, (at, _, _, _, rows) = int(reply[0]), reply[1]
                    slices.append((max(0, int(at) - size), _rows(rows, i), card))
                    position += int(at)
                    total += card
            at = None
            if how is None:
                shown = b.public(total)
                if position >= shown:
                    return None
                start = max(0, min(position - size // 2, shown - size))
                end = min(start + size, shown)
            else:  # standing there as the only other member, within the cap
                if b.cap and position >= b.cap:
                    return None
                shown = b.public(total + 1)
                start = max(0, min(position - size // 2, shown - size))
                end = min(start + size, shown) - 1  # the visible rows beside it
            if b.earliest:
                _, _, page = yield from self._slice(
                    b, sources, fixed(start), end - start, around=spans
                )
            else:
                found = {p: row for p, row in positioned(slices, b.desc, end) if start <= p}
                page = [found[p] for p in range(start, end)]
            if how is not None:
                page.insert(position - start, Row(float(score), member.encode(), score, home))
                at = position - start if how == "open" else None
            return (yield from self._render(b, sources, head, shown, start, page, at))

        return Steps("around a member of a sharded board", steps)

    def _views(self, b: Board, sources: list[Source], members: list[str]) -> Gathered:
        """The self-view of each of ``members``, each missing from its store's live key: its
        score text on the twin and its mode, or None when it is not hidden or banned (or on
        no twin); all None on an archive, which has no twins. One round, none on an
        archive."""
        homes = [sources[self._home(b, sources, m)] for m in members]
        if not any(h.twin is not None for h in homes):
            return [None] * len(members)
        commands: list[Any] = []
        for m, h in zip(members, homes, strict=True):
            commands += [("HGET", h.moderation, m), ("ZSCORE", h.twin, m)]
        got = yield commands
        out: list[tuple[bytes, str] | None] = []
        for k in range(len(members)):
            record, score = got[2 * k], got[2 * k + 1]
            out.append(None if record is None or score is None else (_score(score), mode(record)))
        return out

    def places(self, b: Board, sources: list[Source], probes: list[Probe]) -> Gathered:
        """The :class:`Place` of each (score text, member) of ``probes`` over ``sources``."""
        (found,) = yield from self.places_of([(b, sources, probes)])
        return found

    def places_of(
        self, asked: list[tuple[Board, list[Source], list[tuple[bytes, str]]]]
    ) -> Gathered:
        """:meth:`places` of several boards (periods of a history) in the same rounds.

        First plain commands, in one round: on each source its size and, for each probe,
        ZCOUNT of the better and of the equal scores and the nearest better score, and the
        member's own rank on the source holding it. A probe's position on another source is
        the count better when no member there has its score; otherwise (ties across shards,
        on a board ranking by position) ``shard_seek.lua`` places it there exactly, in a
        second round.

        On an earliest board the first round also reads the probe's reach time (on its
        source's reach set, or its twin's) and, on every source, the members of its score
        (ZRANGE BYSCORE: the run lib/ranks.lua reads for an unsharded rank); the second
        their reach times (ZMSCORE), and the probe stands after the better members and the
        members of its score reached before it, or at the same time with smaller member
        bytes."""
        commands: list[Any] = []
        for b, sources, probes in asked:
            commands += [("ZCARD", s.key) for s in sources]
            for score, member in probes:
                home = self._home(b, sources, member)
                for i, s in enumerate(sources):
                    commands += _counts(s.key, b.desc, score)
                    if b.earliest:  # its reach time; the members of its score
                        if i == home:
                            commands += b.reached(s, member)
                        commands.append(("ZRANGE", s.key, score, score, "BYSCORE"))
                    elif i == home:
                        commands.append(("ZREVRANK" if b.desc else "ZRANK", s.key, member))
        got = iter((yield commands) if commands else [])
        found: list[list[list[Any]]] = []  # per board, probe, source: [position, better, ...]
        cards: list[int] = []
        seek: list[tuple[int, int, int]] = []  # (board, probe, source) placed by the script
        # earliest: (board, probe, source) -> the other members of its score there
        runs: dict[tuple[int, int, int], list[bytes]] = {}
        times: dict[tuple[int, int], float] = {}  # earliest: (board, probe) -> its reach time
        for n, (b, sources, probes) in enumerate(asked):
            sizes = [int(next(got)) for _ in sources]
            cards.append(sum(sizes))
            rows = []
            for k, (_, member) in enumerate(probes):
                home = self._home(b, sources, member)
                row = []
                for i in range(len(sources)):
                    more, same, near = int(next(got)), int(next(got)), _nearest(next(got))
                    position = None
                    if b.earliest:  # after the better members; those of its run reached
                        # before it are counted in the second round
                        if i == home:
                            reached = [next(got) for _ in b.reached(sources[i], member)]
                            times[n, k] = _reach_time(reached)
                        mine = member.encode("utf-8", "surrogatepass")
                        run = [m for m in map(raw, next(got)) if m != mine]
                        position = more
                        if run:
                            runs[n, k, i] = run
                    elif i == home:  # None: a hidden member's self-view, on no source
                        rank = next(got)
                        position = None if rank is None else int(rank)
                    if position is None and same == 0:
                        position = more
                    if position is None:
                        if self.rule.shares and b.cap == 0:
                            position = more  # only a cap reads it; ranks count the better
                        else:
                            seek.append((n, k, i))
                    row.append([position, more, same, near])
                rows.append(row)
            found.append(rows)
        if runs:
            keys = list(runs)
            reached = yield [("ZMSCORE", asked[n][1][i].reach, *runs[n, k, i]) for n, k, i in keys]
            for (n, k, i), reply in zip(keys, reached, strict=True):
                t, mine = times[n, k], asked[n][2][k][1].encode("utf-8", "surrogatepass")
                found[n][k][i][0] += sum(
                    1 for x, tx in zip(runs[n, k, i], map(_time, reply), strict=True)
                    if tx < t or (tx == t and x < mine)
                )  # fmt: skip
        if seek:
            calls = []
            for n, k, i in seek:
                b, sources, probes = asked[n]
                order = b"desc" if b.desc else b"asc"
                calls.append(Call(_SEEK, [sources[i].key], [order, 0, 0, *probes[k]]))
            for (n, k, i), reply in zip(seek, (yield calls), strict=True):
                found[n][k][i][0] = int(reply[1][0])
        return [
            [_place(b, rows, total) for rows in per]
            for (b, _, _), per, total in zip(asked, found, cards, strict=True)
        ]

    def _home(self, b: Board, sources: list[Source], member: str) -> int:
        """The index in ``sources`` of the one that holds ``member``."""
        return 0 if len(sources) == 1 else b.store_of(member)

    def rank_of(self, b: Board, place: Place) -> int:
        return 1 + (place.better if self.rule.shares else place.position)

    def entry(self, b: Board, member: str) -> Steps:
        """The reply fields of read_points.lua's entry (rank, score, meta, total, worse,
        better, whether it is an open self-view), or None when ``member`` is not on the
        board."""

        def steps() -> Gathered:
            sources = yield from b.opened()
            found = yield from self._member(b, sources, member, meta=True)
            if found is None:
                return None
            place, total = found.place, found.shown
            worse = max(0, total - place.better - place.equal)
            if found.hidden is not None:  # as lib/hidden.lua's total and worse
                total = b.public(place.total + 1)
                if b.cap and place.total >= b.cap and worse:
                    worse -= 1  # the last member makes room, and it was worse
            return (self.rank_of(b, place), found.score, found.stored, total, worse,
                    place.nearer, found.hidden == "open")  # fmt: skip

        return Steps("an entry of a sharded board", steps)

    def _member(self, b: Board, sources: list[Source], member: str, *, meta: bool) -> Gathered:
        """The :class:`Found` of ``member`` (its metadata read when ``meta``); None when it
        is neither on the board nor hidden with a self-view there, or stands past a trimmed
        board's top."""
        home = sources[self._home(b, sources, member)]
        asked: list[Any] = [("ZSCORE", home.key, member)]
        if meta:
            asked += [("HGET", h, member) for h in b.metas(home, member.encode())]
        got = yield asked
        hidden = None
        if got[0] is None:
            (view,) = yield from self._views(b, sources, [member])
            if view is None:
                return None
            score, hidden = view
        else:
            score = _score(got[0])
        (place,) = yield from self.places(b, sources, [(score, member)])
        if not b.fits(place):
            return None
        return Found(score, _first(got[1:]), place, b.public(place.total), hidden)

    def lookup(self, b: Board, members: list[str]) -> Steps:
        """(rank, member bytes, score text, stored metadata, whether it is an open self-view)
        of each of ``members`` on the board, best first (equal ranks in the order asked)."""

        def steps() -> Gathered:
            sources = yield from b.opened()
            homes = [sources[self._home(b, sources, m)] for m in members]
            commands: list[Any] = []
            spans = []  # each member's replies: its score, then its metadata hashes'
            for m, home in zip(members, homes, strict=True):
                hashes = b.metas(home, m.encode())
                spans.append((len(commands), len(commands) + 1 + len(hashes)))
                commands += [("ZSCORE", home.key, m), *[("HGET", h, m) for h in hashes]]
            got = yield commands
            scores = [got[lo] for lo, _ in spans]
            stored = [_first(got[lo + 1 : hi]) for lo, hi in spans]
            missing = [k for k in range(len(members)) if scores[k] is None]
            views = yield from self._views(b, sources, [members[k] for k in missing])
            viewed = dict(zip(missing, views, strict=True))
            asked = []  # (k, score text, stored metadata, self-view mode or None)
            for k in range(len(members)):
                if scores[k] is not None:
                    asked.append((k, _score(scores[k]), stored[k], None))
                elif (view := viewed[k]) is not None:
                    asked.append((k, view[0], stored[k], view[1]))
            places = yield from self.places(b, sources, [(x[1], members[x[0]]) for x in asked])
            out = [
                (self.rank_of(b, place), k, members[k].encode(), score, s, how == "open")
                for (k, score, s, how), place in zip(asked, places, strict=True)
                if b.fits(place)
            ]
            out.sort(key=lambda x: (x[0], x[1]))
            return [(rank, m, score, s, flag) for rank, _, m, score, s, flag in out]

        return Steps("a lookup on a sharded board", steps)

    def climb(self, b: Board, member: str, ranks: list[int]) -> Steps:
        """(rank, score text, the score at each rank of ``ranks`` or None, whether it is an
        open self-view), or None."""

        def steps() -> Gathered:
            sources = yield from b.opened()
            found = yield from self._member(b, sources, member, meta=False)
            if found is None:
                return None
            targets: list[bytes | None] = []  # the visible members' places, whoever asks
            for k in ranks:
                if k > found.shown:
                    targets.append(None)
                    continue
                _, _, rows = yield from self._slice(b, sources, fixed(k - 1), 1, by_score=True)
                targets.append(rows[0].text)
            return (self.rank_of(b, found.place), found.score, targets, found.hidden == "open")

        return Steps("a climb on a sharded board", steps)

    def history(self, boards: list[Board], member: str) -> Steps:
        """(rank, score text, whether it is an open self-view) of ``member`` on each of
        ``boards`` ((None, None, False): not on it), in three or four rounds whatever the
        number of periods (one more for a member missing from every live period)."""

        def steps() -> Gathered:
            archives = [b.archive for b in boards if b.archive is not None]
            found = iter((yield [("EXISTS", a.key) for a in archives]) if archives else [])
            opened = [
                [b.archive] if b.archive is not None and int(next(found)) else b.live
                for b in boards
            ]
            homes = [
                srcs[self._home(b, srcs, member)] for b, srcs in zip(boards, opened, strict=True)
            ]
            got = yield [("ZSCORE", home.key, member) for home in homes]
            scores = [None if s is None else _score(s) for s in got]
            # On a live key it is visible now (a moderation moves it off every one); missing
            # from every live one it may be hidden: its record (one, in its store) and its
            # score on each missed period's twin.
            live = [n for n, h in enumerate(homes) if h.twin is not None]
            missed = [n for n in live if scores[n] is None]
            how = None
            if missed and len(missed) == len(live):
                got = yield [("HGET", homes[missed[0]].moderation, member),
                             *[("ZSCORE", homes[n].twin, member) for n in missed]]  # fmt: skip
                if got[0] is not None:
                    how = mode(got[0])
                    for n, score in zip(missed, got[1:], strict=True):
                        scores[n] = None if score is None else _score(score)
            asked = [(n, score) for n, score in enumerate(scores) if score is not None]
            placed = yield from self.places_of(
                [(boards[n], opened[n], [(score, member)]) for n, score in asked]
            )
            out: list[tuple[int | None, bytes | None, bool]] = [(None, None, False)] * len(boards)
            for (n, score), (place,) in zip(asked, placed, strict=True):
                b = boards[n]
                if b.fits(place):
                    out[n] = (self.rank_of(b, place), score, how == "open" and n in missed)
            return out

        return Steps("a history on a sharded board", steps)


def _first(values: Any) -> Any:
    """The first of ``values`` that is not None (a member's metadata from the hashes that
    may hold it, in order); None when none is."""
    return next((v for v in values if v is not None), None)


def _counts(key: str, desc: bool, score: bytes) -> list[Command]:
    """ZCOUNT of the better and of the equal scores than ``score`` on ``key``, and the
    nearest better score (a ZRANGE of one entry)."""
    if desc:
        nearest: Command = ("ZRANGE", key, b"(" + score, "+inf", "BYSCORE", "LIMIT", 0, 1,
                            "WITHSCORES")  # fmt: skip
    else:
        nearest = ("ZRANGE", key, b"(" + score, "-inf", "BYSCORE", "REV", "LIMIT", 0, 1,
                   "WITHSCORES")  # fmt: skip
    return [_better(key, desc, score), ("ZCOUNT", key, score, score), nearest]


def _nearest(reply: Any) -> float | None:
    """The score of a ZRANGE ... WITHSCORES of one entry (flat, or paired by a redis-py
    client's callback); None when it is empty."""
    if not reply:
        return None
    first = reply[0]
    return float(_score(first[1] if isinstance(first, (list, tuple)) else reply[1]))


def _place(b: Board, rows: list[list[Any]], total: int) -> Place:
    """A probe's :class:`Place` from its [position, better, equal, nearest] on each source."""
    nearer: float | None = None
    for _, _, _, near in rows:
        if near is not None and (nearer is None or (near < nearer if b.desc else near > nearer)):
            nearer = near
    return Place(
        sum(r[0] for r in rows), sum(r[1] for r in rows), sum(r[2] for r in rows), nearer, total,
        tuple((r[1], r[2]) for r in rows),
    )  # fmt: skip


def _better(key: str, desc: bool, score: bytes) -> Command:
    """ZCOUNT of the members of a strictly better score than ``score``."""
    if desc:
        return ("ZCOUNT", key, b"(" + score, "+inf")
    return ("ZCOUNT", key, "-inf", b"(" + score)


def fixed(start: int) -> Callable[[int | None], int]:
    """A page's first position that does not depend on the board's size."""
    return lambda _: start
