"""Reads answered with plain commands: the plans of :mod:`seasons.reads`.

A plan (:class:`seasons.executor.Plan`) answers a read in one MULTI/EXEC of plain commands,
gathering what the read's script would have answered, in the script's own reply: the read
writes its JSON from either alike. Plain commands in a transaction cost Redis's one thread a
fraction of a script's time, and answer from one instant of the board just as well.

Where a read needs something it cannot know before it reads (the members of a page, whose
metadata it returns; whether a season's archive exists yet), the plan guesses it from the
last read of the same thing (:class:`Guesses`), reads the guess with the rest, and checks it
against what the same transaction read: a wrong guess is never answered, it is learned and
the read tried again, then left to the script. A value the read depends on (an entry's
score, from which its rank and gap are counted; the position a page around a member is
centred on) is guessed the same way from the last read of that member, so a member read
again answers in one transaction; the first read of a member reads it in a transaction of
its own. Reads whose dependent values cannot be checked so stay scripts.

A read addressed to a member (its entry, around it, a lookup, its history, its climb) that
misses it on a live key may be reading a hidden or banned member, whose own view only the
script answers (``seasons/lua/lib/hidden.lua``). Such a read is learned as one that misses
(:attr:`Guesses.missing`), tried again with the member's field of the board's moderation
hash read in the same transaction, and from then on reads it each time it is asked; a read
that finds its member no longer reads it. A field there sends the read to the script
(:data:`~seasons.executor.SCRIPTED`); none answers it as before. A read whose members are
all on the board never reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from seasons.executor import MISSED, SCRIPTED, Command, Missed, Reply

# Guesses remembered per table, and members in the pages remembered: bounds on memory (each
# table starts again beyond them; a page holds up to 1000 members). Sized for the pages around
# some tens of thousands of players who each read their own: a few tens of MB at most.
REMEMBERED = 65_536
MEMBERS_REMEMBERED = 262_144


class Guesses:
    """What the last reads found: whether each archive key existed, each board's size, the
    members of each page, each member's score and position read last (keyed by board key
    and member), and the reads that missed their member (keyed by board key and member, or
    for a lookup the hash of its members); shared by all the reads of one
    :class:`~seasons.reads.Reads`."""

    def __init__(self) -> None:
        self.archived: dict[str, bool] = {}
        self.totals: dict[str, int] = {}
        self.pages: dict[tuple[str, int, int], tuple[bytes, ...]] = {}
        self.scores: dict[tuple[str, str], bytes] = {}
        self.positions: dict[tuple[str, str], int] = {}
        self.missing: dict[tuple[str, Any], bool] = {}
        # League cohorts (keyed by the period's `joined` key): each member's cohort, and each
        # cohort's members in join order.
        self.cohort_of: dict[tuple[str, str], int] = {}
        self.cohorts: dict[tuple[str, int], tuple[bytes, ...]] = {}
        self._members = 0  # in self.pages, about (a page replaced still counts)
        self._cohort_members = 0  # in self.cohorts, about, as _members

    def remember(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        if len(table) >= REMEMBERED:
            table.clear()
        table[key] = value

    def checks(self, where: tuple[str, Any]) -> bool:
        """Whether the last read of ``where`` missed its member: this one reads its field of
        the moderation hash with it."""
        return where in self.missing

    def found(self, where: tuple[str, Any]) -> None:
        """The read of ``where`` found its members: the next one reads no moderation."""
        self.missing.pop(where, None)

    def remember_page(self, key: tuple[str, int, int], members: tuple[bytes, ...]) -> None:
        self._members += len(members)
        if self._members > MEMBERS_REMEMBERED or len(self.pages) >= REMEMBERED:
            self.pages.clear()
            self._members = len(members)
        self.pages[key] = members

    def forget_cohort(self, joined: str, cohort: int) -> None:
        """``cohort`` is one only its script answers (see :class:`CohortPlan`): no plan."""
        self.cohorts.pop((joined, cohort), None)

    def remember_cohort(self, joined: str, cohort: int, members: Sequence[bytes]) -> None:
        """What a league read found of ``cohort``: its members, each one's cohort (both
        tables start again beyond REMEMBERED members)."""
        names = tuple(members)
        if self.cohorts.get((joined, cohort)) == names:
            return
        self._cohort_members += len(names)
        if self._cohort_members > REMEMBERED or len(self.cohort_of) + len(names) > REMEMBERED:
            self.cohorts.clear()
            self.cohort_of.clear()
            self._cohort_members = len(names)
        self.cohorts[(joined, cohort)] = names
        for m in names:
            self.cohort_of[(joined, m.decode("utf-8", "surrogateescape"))] = cohort


class _Board:
    """The sorted set a plan reads: the live key, or the archive once it exists. Where the
    two differ, the transaction asks EXISTS of the archive and reads the key the guess names;
    :meth:`check` refuses a reply read from the wrong one."""

    def __init__(self, guesses: Guesses, live: str, archive: str):
        self._guesses, self._live, self._archive = guesses, live, archive
        self._archived = False

    def commands(self) -> tuple[str, list[Command]]:
        """The key to read, and the commands that check it (first in the transaction)."""
        if self._archive == self._live:
            return self._live, []
        self._archived = self._guesses.archived.get(self._archive, False)
        key = self._archive if self._archived else self._live
        return key, [("EXISTS", self._archive)]

    def check(self, replies: list[Any]) -> list[Any] | None:
        """The replies after the check's, or None when the guess read the wrong key."""
        if self._archive == self._live:
            return replies
        exists = bool(replies[0])
        if exists != self._archived:
            self._guesses.remember(self._guesses.archived, self._archive, exists)
            return None
        return replies[1:]

    @property
    def archived(self) -> bool:
        """Whether the key read (once :meth:`check` accepted it) is the archive: the public
        board alone, where no member has a self-view."""
        return self._archive != self._live and self._archived


def _missing(
    guesses: Guesses, where: tuple[str, Any], moderation: str | None, archived: bool,
    checked: bool, fields: Sequence[Any],
) -> Reply | Missed:  # fmt: skip
    """What a plan answers for a read that missed its member(s) on the board: not ranked
    (None) on an archive, a read without ``moderation`` (a snapshot) or where the
    moderation ``fields`` read with it (``checked``) are all nil; the script where one is
    there (a hidden or banned member); else the read is learned as one that misses, and
    tried again with them."""
    if moderation is None or archived:
        return None
    if checked:
        return None if all(f is None for f in fields) else SCRIPTED
    guesses.remember(guesses.missing, where, True)
    return MISSED


class PagePlan:
    """A page: ZCARD, ZRANGE and HMGET of the metadata of the members the last read of the
    same rows found (a top page changes its members far less often than it is read; a read
    of other rows learns them in its first transaction). The rows are ``offset`` ..
    ``offset + size - 1``, or with ``centre`` (a 0-based rank) ``size`` rows centred on it and
    shifted at either end of the board, which needs the board's size: the last one read is
    the guess. Around a ``member`` (on a board whose ties are ``member``), the centre is its
    position: the one the last read around it found, read again beside the rows and checked;
    for a member not read before, a first transaction reads it. On a board whose ties are
    ``shared`` or ``dense`` only pages from the first row are planned (its rank is 1; another
    row's needs its score), ``earliest`` pages never (their order needs the reach sets of the
    runs they cut)."""

    __slots__ = (
        "_guesses", "_board", "_live", "_meta", "_desc", "_offset", "_centre", "_size",
        "_member", "_start", "_asked", "_moderation", "_check",
    )  # fmt: skip

    def __init__(
        self, guesses: Guesses, live: str, archive: str, meta: str, desc: bool, *,
        offset: int = 0, centre: int | None = None, member: str | None = None, size: int,
        moderation: str | None = None,
    ):  # fmt: skip
        self._guesses, self._board = guesses, _Board(guesses, live, archive)
        self._live, self._meta, self._desc = live, meta, desc
        self._moderation, self._check = moderation, False
        if member is not None:
            centre = guesses.positions.get((live, member))
            self._check = guesses.checks((live, member))
        self._offset, self._centre, self._size, self._member = offset, centre, size, member
        self._start, self._asked = offset, tuple[bytes, ...]()

    def _first_row(self, total: int) -> int:
        if self._centre is None:
            return self._offset
        return max(0, min(self._centre - self._size // 2, total - self._size))

    def commands(self) -> list[Command]:
        key, out = self._board.commands()
        if self._member is not None:
            out.append(("ZREVRANK" if self._desc else "ZRANK", key, self._member))
            if self._centre is None:  # its position first (and its moderation, if it missed)
                out.append(("ZCARD", key))
                if self._check and self._moderation is not None:
                    out.append(("HGET", self._moderation, self._member))
                return out
        self._start = start = self._first_row(self._guesses.totals.get(self._live, 1 << 62))
        self._asked = members = self._guesses.pages.get((self._live, start, self._size), ())
        rows = (start, start + self._size - 1, *(("REV",) if self._desc else ()), "WITHSCORES")
        out += [("ZCARD", key), ("ZRANGE", key, *rows)]
        if members:
            out.append(("HMGET", self._meta, *members))
        return out

    def settle(self, replies: list[Any]) -> Reply | Missed:
        got = self._board.check(replies)
        if got is None:
            return MISSED
        if self._member is not None:
            position, *got = got
            where = (self._live, self._member)
            if position is None:  # not on the board
                self._guesses.positions.pop(where, None)
                checked = self._check and self._centre is None
                self._centre, self._check = None, True
                return _missing(
                    self._guesses, where, self._moderation, self._board.archived, checked, got[1:]
                )
            if self._check:
                self._guesses.found(where)
            if position != self._centre:  # not read yet, or moved since
                self._centre = position
                self._guesses.remember(self._guesses.positions, where, position)
                self._guesses.remember(self._guesses.totals, self._live, got[0])
                return MISSED
        total, rows, start = got[0], got[1], self._start
        if self._centre is not None:
            self._guesses.remember(self._guesses.totals, self._live, total)
            if self._first_row(total) != start:
                return MISSED
        members, found = self._asked, tuple(rows[::2])
        metas = dict(zip(members, got[2], strict=True)) if members else {}
        if found != members:
            self._guesses.remember_page((self._live, start, self._size), found)
            if not all(m in metas for m in found):
                return MISSED
        return [
            "total", total, "start", start, "first", start + 1, "rows", rows,
            "metas", [metas[m] for m in found],
        ]  # fmt: skip


class EntryPlan:
    """A member's entry on a board whose ties are ``member`` or ``shared``: from its score
    (the one the last read of it found), its rank (by position, or 1 + the members strictly
    better), the members strictly worse, the nearest strictly better score, the board's size
    and its metadata, with the score read again and checked. A member not read before has its
    score read first, in a transaction of its own; a member not on the board costs that one
    alone."""

    __slots__ = (
        "_guesses", "_board", "_meta", "_member", "_where", "_desc", "_shared", "_score",
        "_moderation", "_check",
    )  # fmt: skip

    def __init__(
        self, guesses: Guesses, live: str, archive: str, meta: str, desc: bool, shared: bool,
        member: str, moderation: str | None = None,
    ):  # fmt: skip
        self._guesses, self._board = guesses, _Board(guesses, live, archive)
        self._meta, self._member, self._where = meta, member, (live, member)
        self._desc, self._shared = desc, shared
        self._score = guesses.scores.get(self._where)
        self._moderation, self._check = moderation, guesses.checks(self._where)

    def commands(self) -> list[Command]:
        key, out = self._board.commands()
        m, s = self._member, self._score
        out.append(("ZSCORE", key, m))
        if s is None:  # its score first (and its moderation, if it missed)
            if self._check and self._moderation is not None:
                out.append(("HGET", self._moderation, m))
            return out
        above = below = b"(" + s  # the scores strictly better or worse than s, by side
        rank: Command
        worse: Command
        better: Command
        if self._desc:
            rank = ("ZCOUNT", key, above, "+inf") if self._shared else ("ZREVRANK", key, m)
            worse = ("ZCOUNT", key, "-inf", below)
            better = ("ZRANGE", key, above, "+inf", "BYSCORE", "LIMIT", 0, 1, "WITHSCORES")
        else:
            rank = ("ZCOUNT", key, "-inf", below) if self._shared else ("ZRANK", key, m)
            worse = ("ZCOUNT", key, above, "+inf")
            better = ("ZRANGE", key, below, "-inf", "BYSCORE", "REV", "LIMIT", 0, 1, "WITHSCORES")
        return [*out, rank, worse, better, ("ZCARD", key), ("HGET", self._meta, m)]

    def settle(self, replies: list[Any]) -> Reply | Missed:
        got = self._board.check(replies)
        if got is None:
            return MISSED
        score = got[0]
        if score is None:  # not on the board
            self._guesses.scores.pop(self._where, None)
            checked = self._check and self._score is None
            self._score, self._check = None, True
            return _missing(
                self._guesses, self._where, self._moderation, self._board.archived, checked, got[1:]
            )
        if self._check:
            self._guesses.found(self._where)
        if score != self._score:  # not read yet, or changed since
            self._score = score
            self._guesses.remember(self._guesses.scores, self._where, score)
            return MISSED
        rank, worse, better, total, meta = got[1:]
        return [
            "rank", rank + 1, "score", score, "meta", meta, "total", total, "worse", worse,
            "better", better[1] if better else None,
        ]  # fmt: skip


class ClimbPlan:
    """How far a member is from some ranks, on a board whose ties are ``member``: its rank
    and score, and the score at each of those positions."""

    __slots__ = ("_guesses", "_board", "_member", "_where", "_desc", "_ranks", "_moderation",
                 "_check")  # fmt: skip

    def __init__(
        self, guesses: Guesses, live: str, archive: str, desc: bool, member: str,
        ranks: Sequence[int], moderation: str | None = None,
    ):  # fmt: skip
        self._guesses, self._board = guesses, _Board(guesses, live, archive)
        self._member, self._where, self._desc = member, (live, member), desc
        self._ranks = ranks
        self._moderation, self._check = moderation, guesses.checks(self._where)

    def commands(self) -> list[Command]:
        key, out = self._board.commands()
        m, rev = self._member, ("REV",) if self._desc else ()
        out += [("ZREVRANK" if self._desc else "ZRANK", key, m), ("ZSCORE", key, m)]
        out += [("ZRANGE", key, k - 1, k - 1, *rev, "WITHSCORES") for k in self._ranks]
        if self._check and self._moderation is not None:  # it missed last time
            out.append(("HGET", self._moderation, m))
        return out

    def settle(self, replies: list[Any]) -> Reply | Missed:
        got = self._board.check(replies)
        if got is None:
            return MISSED
        position, score, *at = got
        n = len(self._ranks)
        if position is None:  # not on the board: tried again reading its moderation field
            checked, self._check = self._check, True
            return _missing(
                self._guesses, self._where, self._moderation, self._board.archived, checked,
                at[n:],
            )  # fmt: skip
        if self._check:
            self._guesses.found(self._where)
        targets = [r[1] if r else None for r in at[:n]]
        return ["rank", position + 1, "score", score, "targets", targets]


class LookupPlan:
    """A lookup on a board whose ties are ``member``: each member's score and rank, and the
    metadata of all of them (a member not on the board has none to send); for a lookup that
    missed some, their moderation fields too."""

    __slots__ = (
        "_guesses", "_board", "_meta", "_rank", "_members", "_names", "_where", "_moderation",
        "_check",
    )  # fmt: skip

    def __init__(
        self, guesses: Guesses, live: str, archive: str, meta: str, desc: bool,
        members: Sequence[str], moderation: str | None = None,
    ):  # fmt: skip
        self._guesses, self._board, self._meta = guesses, _Board(guesses, live, archive), meta
        self._rank, self._members = "ZREVRANK" if desc else "ZRANK", members
        self._names = [m.encode() for m in members]  # as the script's reply names them
        self._where = (live, hash(tuple(members)))
        self._moderation, self._check = moderation, guesses.checks(self._where)

    def commands(self) -> list[Command]:
        key, out = self._board.commands()
        for m in self._members:
            out += [("ZSCORE", key, m), (self._rank, key, m)]
        if self._members:
            out.append(("HMGET", self._meta, *self._members))
            if self._check and self._moderation is not None:
                out.append(("HMGET", self._moderation, *self._members))
        return out

    def settle(self, replies: list[Any]) -> Reply | Missed:
        got = self._board.check(replies)
        if got is None:
            return MISSED
        n = len(self._names)
        found = [
            (got[2 * i + 1] + 1, i, m, got[2 * i], got[2 * n][i])
            for i, m in enumerate(self._names)
            if got[2 * i] is not None
        ]
        if len(found) < n:  # some are not on the board: hidden ones are the script's
            checked = self._check
            self._check = True
            states = got[2 * n + 1] if checked and len(got) > 2 * n + 1 else []
            missed = [states[i] for i in range(len(states)) if got[2 * i] is None]
            answer = _missing(
                self._guesses,
                self._where,
                self._moderation,
                self._board.archived,
                checked,
                missed,
            )
            if answer is not None:
                return answer
        elif self._check:
            self._guesses.found(self._where)
        found.sort()
        return ["rows", [x for rank, _, m, score, meta in found for x in (rank, m, score, meta)]]


class HistoryPlan:
    """A member's history on a board whose ties are ``member``, in a window without archives:
    its score and rank in each period. A member found in one period is visible (a moderation
    moves it off every live public key at once, as read_points.lua's history knows); one
    missed in every period is read with its moderation field too."""

    __slots__ = ("_guesses", "_keys", "_rank", "_member", "_where", "_moderation", "_check")

    def __init__(
        self, guesses: Guesses, keys: Sequence[str], desc: bool, member: str,
        moderation: str | None = None,
    ):  # fmt: skip
        self._guesses, self._keys = guesses, keys
        self._rank, self._member = "ZREVRANK" if desc else "ZRANK", member
        self._where = (keys[0] if keys else "", member)
        self._moderation, self._check = moderation, guesses.checks(self._where)

    def commands(self) -> list[Command]:
        m = self._member
        out = [c for key in self._keys for c in ((self._rank, key, m), ("ZSCORE", key, m))]
        if self._check and self._moderation is not None:
            out.append(("HGET", self._moderation, m))
        return out

    def settle(self, replies: list[Any]) -> Reply | Missed:
        places, n = [], 2 * len(self._keys)
        for i in range(0, n, 2):
            rank, score = replies[i], replies[i + 1]
            places += [None, None] if rank is None else [rank + 1, score]
        if places and all(p is None for p in places):  # missed everywhere: the script
            checked = self._check
            self._check = True
            answer = _missing(
                self._guesses, self._where, self._moderation, False, checked, replies[n:]
            )
            if answer is not None:
                return answer
        elif self._check:
            self._guesses.found(self._where)
        return ["places", places]


class CohortPlan:
    """A league cohort of the current period (``seasons/lua/league_read.lua``'s reply, mode
    member or cohort): the members of the cohort the last read found and their scores on
    the period's board, with the cohort's range of ``joined`` read again and checked (a
    member of it is in no other cohort of the period); for a member, its tier too. A read
    with no guess is not planned: the script answers it, and the read learns from its reply
    (:meth:`Guesses.remember_cohort`). The script also answers a member no longer in its
    cohort, an empty cohort, a cohort with a member missing from the board (hidden or
    banned: its score is on the twin key; or erased) and a period whose close has begun
    (its outcomes exist)."""

    __slots__ = ("_guesses", "_keys", "_span", "_cohort", "_member", "_members")

    def __init__(
        self, guesses: Guesses, keys: Sequence[str], span: int, cohort: int, member: str | None
    ):  # fmt: skip
        # keys: those of league_read.lua: joined, cohorts, open, outcome, state, tiers, live,
        # twin, moderation, reached, twin's reached, counts
        self._guesses, self._keys, self._span = guesses, keys, span
        self._cohort, self._member = cohort, member
        self._members = guesses.cohorts.get((keys[0], cohort), ())

    @classmethod
    def of(
        cls, guesses: Guesses, keys: Sequence[str], span: int, member: str | None,
        cohort: int | None,
    ) -> CohortPlan | None:  # fmt: skip
        """The plan of a read of ``member``'s cohort or of cohort ``cohort``; None without
        a guess of its members."""
        if member is not None:
            cohort = guesses.cohort_of.get((keys[0], member))
        if cohort is None or not guesses.cohorts.get((keys[0], cohort)):
            return None
        return cls(guesses, keys, span, cohort, member)

    def commands(self) -> list[Command]:
        k, c = self._keys, self._cohort
        out: list[Command] = [("EXISTS", k[3])]
        if self._member is not None:
            out.append(("HGET", k[5], self._member))
        out += [
            ("HGET", k[1], c), ("ZRANGEBYSCORE", k[0], c * self._span, (c + 1) * self._span - 1),
            ("ZMSCORE", k[6], *self._members),
        ]  # fmt: skip
        return out

    def settle(self, replies: list[Any]) -> Reply | Missed:
        closing, *replies = replies
        tier = None
        if self._member is not None:
            tier, *replies = replies
        info, found, scores = replies
        if info is None and self._member is None:
            self._guesses.forget_cohort(self._keys[0], self._cohort)
            return ["status", "unknown"]
        if info is not None and tuple(found) != self._members and found and not closing:
            self._guesses.remember_cohort(self._keys[0], self._cohort, found)
            self._members = tuple(found)
            return MISSED
        if (
            info is None  # the member's cohort is gone: the script says where the member is
            or closing  # the close's outcomes
            or tuple(found) != self._members  # emptied
            or None in scores  # a member hidden, banned (its score is on the twin key), erased
            or (self._member is not None and self._member.encode() not in found)  # erased
        ):
            self._guesses.forget_cohort(self._keys[0], self._cohort)
            return SCRIPTED
        nil = [None] * len(found)
        return [
            "status", "ok", "cohort", self._cohort, "info", info, "members", found,
            "scores", scores, "reached", [], "moderation", nil, "outcomes", nil, "tier", tier,
            "closing", 0,
        ]  # fmt: skip
