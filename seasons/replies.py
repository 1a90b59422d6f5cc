"""The JSON of read results, written from what a read gathers.

A read's plan (:mod:`seasons.plans`) or its script (``seasons/lua/read_range.lua``,
``read_points.lua``, which only read and rank) answers Redis's own replies (members, Redis's
text of each score, the stored metadata JSON, counts) as a list of named fields, which
:func:`fields` checks. The JSON every
interface answers is written here, on the side that scales out: the HTTP server sends these
bytes as they are, the Python API and the CLI validate them into the models of
:mod:`seasons.models`, whose ``model_dump_json()`` writes the same text.

A score is written as :data:`seasons.models.Score` declares (:func:`number_text`); strings as
``json.dumps(..., ensure_ascii=False)`` writes them; metadata as stored (its writer is
:mod:`seasons.events`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from seasons.composite import CompositeScore
from seasons.ties import TieSpec

# What a hidden member's self-view in open mode adds to its entry (seasons.models.Entry).
HIDDEN = b',"hidden":true'
_SPECIAL = re.compile(rb'[\x00-\x1f"\\]')
# Below this, an integral double is written as the integer it is (models.score_json).
_INTEGER_TEXT = 1e16


def string(raw: bytes) -> bytes:
    """``raw`` (UTF-8) as a JSON string."""
    if _SPECIAL.search(raw) is None:
        return b'"' + raw + b'"'
    text = json.dumps(raw.decode("utf-8", "surrogateescape"), ensure_ascii=False)
    return text.encode("utf-8", "surrogateescape")


def text(value: str) -> bytes:
    """A Python string as a JSON string."""
    return string(value.encode())


def number_text(x: float) -> bytes:
    """A score, gap or percentile as :data:`seasons.models.Score` writes it: an integral value
    below 10^16 as the integer it is (``0`` for -0), any other in the shortest digits that
    read back as the same double (Python's ``repr``), in decimal notation from 10^-5 and as
    ``d.ddde+x`` / ``d.ddde-x`` outside it."""
    if x.is_integer() and -_INTEGER_TEXT < x < _INTEGER_TEXT:
        return b"%d" % x
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"{x!r} is not a finite number and has no JSON text")
    mantissa, _, exp = repr(x).partition("e")
    if not exp:  # repr writes decimals from 10^-4 to 10^16
        return mantissa.encode()
    power = int(exp)
    if power == -5:  # decimal from 10^-5 on: 1.5e-05 -> 0.000015
        sign = "-" if mantissa[0] == "-" else ""
        return f"{sign}0.0000{mantissa.lstrip('-').replace('.', '')}".encode()
    return f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}".encode()


def score_text(raw: bytes) -> bytes:
    """Redis's text of a score as JSON (:func:`number_text`): the usual score, a non-negative
    integer of up to 16 digits, is already in that form."""
    if len(raw) <= 16 and raw.isdigit():
        return raw
    return number_text(float(raw))


def fields(reply: Any, names: tuple[str, ...], script: str) -> list[Any]:
    """The values of a script's reply of named fields (``{name, value, ...}``), in the order
    of ``names``; a reply of other fields is a bug of ours, raised as such."""
    if not isinstance(reply, list) or len(reply) != 2 * len(names):
        raise TypeError(f"{script} answered {reply!r}, not the fields {', '.join(names)}")
    got = reply[::2]
    for name, found in zip(names, got, strict=True):
        if (found.decode() if isinstance(found, bytes) else found) != name:
            raise TypeError(f"{script} answered the fields {got!r}, not {', '.join(names)}")
    return reply[1::2]


def flagged(reply: Any, names: tuple[str, ...], script: str) -> tuple[list[Any], Any]:
    """:func:`fields` of a reply that may end with one more field, ``hidden``: a self-view
    of a hidden or banned member in open mode (``seasons/lua/lib/hidden.lua``) names there
    what carries ``"hidden": true``. The values of ``names``, and hidden's (None: absent)."""
    if isinstance(reply, list) and len(reply) == 2 * len(names) + 2:
        return fields(reply[:-2], names, script), fields(reply[-2:], ("hidden",), script)[0]
    return fields(reply, names, script), None


def raw(value: Any) -> bytes:
    """A reply's string as bytes: Seasons' own connections answer bytes, a redis-py client
    (a cluster, TLS) decoded text."""
    return value if isinstance(value, bytes) else str(value).encode()


class Writer:
    """The JSON of one board's results: its composite layout, if any, gives every score its
    parts (``"parts"`` beside the score where it splits)."""

    def __init__(self, layout: CompositeScore | None):
        self.layout = layout
        if layout is not None:
            self._names = [text(name) + b":" for name in layout.names]
            self._max = layout.max_score

    def score(self, raw_score: bytes) -> bytes:
        """``,"score":<score>`` and its parts, for Redis's text of a score."""
        if self.layout is None:
            return b',"score":' + score_text(raw_score)
        return b',"score":' + score_text(raw_score) + self._parts(float(raw_score))

    def _parts(self, x: float) -> bytes:
        if not (0 <= x <= self._max and x.is_integer()):
            return b""
        assert self.layout is not None
        values = self.layout.split(x).values()
        return (
            b',"parts":{'
            + b",".join(name + b"%d" % v for name, v in zip(self._names, values, strict=True))
            + b"}"
        )

    def entry(
        self, rank: int, member: bytes, score: bytes, meta: bytes | None, hidden: bool = False
    ) -> bytes:
        """``{"rank","member","score","parts"?,"metadata","hidden"?}``: ``hidden`` (true) only
        for a hidden member's self-view in open mode."""
        return b'{"rank":%d,"member":%s%s,"metadata":%s%s}' % (
            rank, string(member), self.score(score), b"{}" if meta is None else meta,
            HIDDEN if hidden else b"",
        )  # fmt: skip

    def entries(
        self, ranks: Sequence[int], rows: Sequence[Any], metas: Sequence[Any],
        hidden: int | None = None,
    ) -> bytes:  # fmt: skip
        """The entries of ``rows`` (member, score, ...), each with its rank and metadata,
        joined by commas; the one at index ``hidden`` (0-based) flagged."""
        if rows and not isinstance(rows[0], bytes):  # a redis-py client's decoded text
            rows, metas = [raw(x) for x in rows], [meta(x) for x in metas]
        entry = self.entry
        return b",".join(
            [
                entry(ranks[i], rows[2 * i], rows[2 * i + 1], metas[i], i == hidden)
                for i in range(len(ranks))
            ]
        )

    def page(
        self,
        head: bytes,
        ties: TieSpec,
        start: int,
        first: int,
        rows: Sequence[Any],
        metas: Sequence[Any],
        hidden: int | None = None,
    ) -> bytes:
        """A page's JSON: ``head`` (``{"board","window","period","total"`` written by the
        caller) and its entries, ranked from ``first`` (the first row's rank) by the tie
        rule (:meth:`seasons.ties.TieSpec.rank`); a rule that ranks by position needs no
        scores. The entry at ``hidden`` (0-based), if any, is flagged."""
        n = len(metas)
        ranks = list(range(first, first + n))
        if ties.shares and n > 1:
            # Compared as numbers: Redis writes -0 and 0 apart, one score all the same.
            values = [float(rows[2 * i + 1]) for i in range(n)]
            for i in range(1, n):
                ranks[i] = ties.rank(ranks[i - 1], start + i + 1, values[i] == values[i - 1])
        return head + b',"entries":[' + self.entries(ranks, rows, metas, hidden) + b"]}"


def meta(value: Any) -> bytes | None:
    """A metadata field of a reply: its stored JSON, or None (the member has none)."""
    return None if value is None else raw(value)
