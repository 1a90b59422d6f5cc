"""The tie rules, declared once: :data:`SPECS` holds a :class:`TieSpec` per rule (member,
shared, dense, earliest) and every layer reads it: the reads and their plans, the JSON of a
page, the standings of archives and exports, the results, restore's checks, archive copies,
rollups, clears and forgets.

A rule says how a rank follows from the one before (:meth:`TieSpec.rank`), which set it keeps
beside each board (a reach set or a distinct set, :meth:`TieSpec.beside`), in which order equal
scores stand (Redis's, member bytes; or the order they were reached), what a restore checks of
equal scores in a file, and which reads plain commands can answer (:mod:`seasons.plans`).
Ranks on Redis's side are computed by the ``tie_*`` functions of ``seasons/lua/lib/ranks.lua``
(a rank, a position, a page's first rank, the score a rank needs, the set kept beside a
board), which the read scripts and the write's standings call with the rule's name. Adding a
rule means its name in :data:`seasons.vocabulary.Ties` (what the settings accept), a spec
here, its branches there and its tests.

(docs/boards.md#ties says what each rule answers.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from seasons.config.settings import BoardSettings
from seasons.keys import Keys
from seasons.vocabulary import Ties

# The reads a plan of plain commands may answer (seasons.reads names them): a page from any
# row, a page from the first row, around a rank, around a member, an entry, a climb, a
# lookup, and a history (of a window without archives).
Planned = Literal[
    "page", "top", "around_rank", "around_member", "entry", "climb", "lookup", "history"
]


@dataclass(frozen=True, slots=True)
class TieSpec:
    """One tie rule.

    ``shares``: equal scores share the rank of the first of them (else every member ranks
    apart, by position). ``dense``: a new score ranks one after the rank before it (else at
    its position). ``reach_set``: equal scores stand in the order their members reached
    them, kept in a reach set beside each board (member -> epoch seconds), which writes,
    rollups, archive copies, restores, exports, forgets and clears carry with the board.
    ``distinct_set``: a distinct set beside each board (one member per distinct score), kept
    exact by the same. ``member_order``: equal scores rank by Redis's order of them (member
    bytes), so a restored file must list them in it. ``planned``: the reads plain commands
    answer (the others are scripts)."""

    name: Ties
    shares: bool
    dense: bool
    reach_set: bool
    distinct_set: bool
    member_order: bool
    planned: frozenset[Planned]

    @property
    def positions(self) -> bool:
        """Every member its own rank: a rank is a position in the board's order."""
        return not self.shares

    def rank(self, before: int, position: int, same: bool) -> int:
        """The rank at ``position`` (from 1) in the board's order, after rank ``before``
        (0 for the first), ``same`` when its score equals the one before."""
        if self.shares and same:
            return before
        return before + 1 if self.dense else position

    def beside(self, keys: Keys) -> Callable[[str, str, str], str] | None:
        """How the key of the set this rule keeps beside each board is named, from the
        board's (board, window, period id; window ``archive`` for an archive's): its reach
        set or its distinct set; None for a rule that keeps none."""
        if self.reach_set:
            return keys.reached
        if self.distinct_set:
            return keys.distinct
        return None


SPECS: dict[Ties, TieSpec] = {
    spec.name: spec
    for spec in (
        TieSpec(
            "member",  # 1, 2, 3: equal scores in member byte order
            shares=False,
            dense=False,
            reach_set=False,
            distinct_set=False,
            member_order=True,
            planned=frozenset(get_args(Planned)),
        ),
        TieSpec(
            "shared",  # 1, 1, 3: 1 + the members strictly better
            shares=True,
            dense=False,
            reach_set=False,
            distinct_set=False,
            member_order=False,
            planned=frozenset(("top", "entry")),
        ),
        TieSpec(
            "dense",  # 1, 1, 2: 1 + the distinct scores strictly better
            shares=True,
            dense=True,
            reach_set=False,
            distinct_set=True,
            member_order=False,
            planned=frozenset(("top",)),
        ),
        TieSpec(
            "earliest",  # 1, 2, 3: equal scores in the order they were reached
            shares=False,
            dense=False,
            reach_set=True,
            distinct_set=False,
            member_order=False,
            planned=frozenset(),
        ),
    )
}


assert set(SPECS) == set(get_args(Ties)), "Ties and SPECS must name the same rules"


def of(cfg: BoardSettings) -> TieSpec:
    """The tie rule of a board."""
    return SPECS[cfg.ties]


def ranks(scores: Sequence[float], spec: TieSpec) -> list[int]:
    """The ranks of ``scores`` in the board's order by the rule ``spec``."""
    out: list[int] = []
    prev: float | None = None
    for position, score in enumerate(scores, start=1):
        out.append(spec.rank(out[-1] if out else 0, position, score == prev))
        prev = score
    return out
