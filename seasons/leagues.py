"""Leagues: the rules of a cohort, declared once (docs/leagues.md).

A board with ``[boards.<b>.league]`` puts each member, on its first accepted event of a
period of the league's window, into a cohort of at most ``cohort_size`` members of its tier
(the write script joins it: ``seasons/lua/lib/league_join.lua``). A cohort's standings are its
members' scores on the board of that period, ranked by the board's tie rule; each ranked
member is in a zone (promote, stay, demote). At the period's end the close applies the zones
(:func:`standings` is what both the reads and the close call), writes each member's
:class:`Outcome` once, and the next period's tiers come only from those outcomes.

Everything here is pure: it is given what Redis holds and answers what follows from it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple

from seasons.config.league import MAX_COHORT, LeagueSettings
from seasons.config.settings import BoardSettings
from seasons.ties import TieSpec
from seasons.ties import of as tie_rule_of

# A cohort's places in the period's `joined` sorted set (seasons.keys.Keys.league): member ->
# cohort x COHORT_SPAN + its place from 0, so that a cohort is one range of scores.
COHORT_SPAN = 1024
assert COHORT_SPAN > MAX_COHORT


class Zone(StrEnum):
    PROMOTE = "promote"
    STAY = "stay"
    DEMOTE = "demote"


class Row(NamedTuple):
    """One member of a cohort's standings: rank and zone None when it has none."""

    member: str
    score: float | None
    rank: int | None
    zone: Zone | None


@dataclass(frozen=True, slots=True)
class Standings:
    """A cohort's standings, in columns (a read ranks a cohort each time): ``order`` holds
    the positions (in join order) of its ranked members in the board's order, then of the
    unranked in join order, and ``ranks`` and ``zones`` their rank and zone; how many move
    up and down, and the score that reaches the promotion zone (the score of the last
    member in it; None when the zone is empty or not full: then any ranked member is in
    it). :attr:`rows` is the same as objects."""

    tier: str
    members: Sequence[bytes]
    scores: Sequence[float | None]
    hidden: Collection[int]
    order: list[int]
    ranks: list[int | None]
    zones: list[Zone | None]
    promote: int
    demote: int
    promotion_score: float | None

    @property
    def ranked(self) -> int:
        return sum(1 for r in self.ranks if r is not None)

    @property
    def rows(self) -> list[Row]:
        """The standings as rows, in order; a hidden member's score is None."""
        return [
            Row(self.members[i].decode("utf-8", "surrogateescape"),
                None if i in self.hidden else self.scores[i], rank, zone)
            for i, rank, zone in zip(self.order, self.ranks, self.zones, strict=True)
        ]  # fmt: skip


def quota(league: LeagueSettings, tier: str, ranked: int) -> tuple[int, int]:
    """How many of a cohort of ``tier`` with ``ranked`` ranked members move up and down: the
    tier's movement, none up from the top tier, none down from the lowest, none down when
    fewer than ``min_cohort`` are ranked."""
    up, down = league.rule_of(tier).counts(ranked)
    if tier == league.tiers[-1]:
        up = 0
    if tier == league.tiers[0] or ranked < league.min_cohort:
        down = 0
    return min(up, ranked), min(down, ranked)


def zone_of(better: int, ranked: int, up: int, down: int) -> Zone:
    """The zone of a member with ``better`` ranked members strictly ahead of it (its tie
    group starts at position better + 1): promote if that position is among the first
    ``up``, demote if it is among the last ``down``. A tie group across a boundary starts
    on the better side of it, so all of it gets the better zone; promote wins over demote
    where the two overlap (a small cohort)."""
    if better < up:
        return Zone.PROMOTE
    if better >= ranked - down:
        return Zone.DEMOTE
    return Zone.STAY


def standings(
    members: Sequence[bytes], scores: Sequence[float | None], tier: str,
    league: LeagueSettings, cfg: BoardSettings, *,
    reached: Sequence[float | None] | None = None, hidden: Collection[int] = (),
) -> Standings:  # fmt: skip
    """The standings of one cohort of ``tier`` as read from Redis: ``members`` (UTF-8) in
    join order, their ``scores`` on the period's board (None: none, e.g. erased), the times
    they reached them (``ties = "earliest"``) and the positions of the ``hidden`` ones
    (hidden or banned: no rank, no slot). Ranks follow the board's order and tie rule
    (:mod:`seasons.ties`): where the rule ranks equal scores apart (``member``,
    ``earliest``) positions decide the zones, as the ranks show; where they share a rank
    (``shared``, ``dense``) the tie group is one, and gets the better zone when it lies
    across a boundary."""
    rule = tie_rule_of(cfg)
    order = _in_board_order(members, scores, reached, hidden, cfg, rule)
    n = len(order)
    up, down = quota(league, tier, n)
    ranks: list[int | None] = []
    zones: list[Zone | None] = []
    rank = 0
    better = 0  # ranked members strictly ahead of the current tie group
    before: float | None = None  # the score of the member ranked before
    rank_of, shares = rule.rank, rule.shares
    for position, i in enumerate(order, start=1):
        score = scores[i]
        same = score == before
        rank = rank_of(rank, position, same)
        if not (same and shares):
            better = position - 1
        ranks.append(rank)
        zones.append(zone_of(better, n, up, down))
        before = score
    promotion_score = scores[order[up - 1]] if 0 < up <= n else None
    unranked = [i for i, score in enumerate(scores) if score is None or i in hidden]
    return Standings(
        tier, members, scores, hidden, order + unranked, ranks + [None] * len(unranked),
        zones + [None] * len(unranked), up, down, promotion_score,
    )  # fmt: skip


def _in_board_order(
    members: Sequence[bytes], scores: Sequence[float | None],
    reached: Sequence[float | None] | None, hidden: Collection[int], cfg: BoardSettings,
    rule: TieSpec,
) -> list[int]:  # fmt: skip
    """The positions of the members with a score and not hidden, in the board's order
    (docs/contract.md#ties): by score, then equal scores in Redis's order (member bytes,
    reversed on a ``desc`` board, as ``ZRANGE ... REV``), or with ``earliest`` by the time
    each reached its score, then member bytes ascending. Members are unique, so no
    comparison reaches the position."""
    desc = cfg.order == "desc"
    if rule.reach_set:
        sign = -1.0 if desc else 1.0
        times = reached or [None] * len(members)
        timed = [
            (sign * s, math.inf if (t := times[i]) is None else t, members[i], i)
            for i, s in enumerate(scores)
            if s is not None and i not in hidden
        ]  # fmt: skip
        timed.sort()
        return [k[-1] for k in timed]
    # Score, then member bytes, the whole key reversed on a desc board: Redis's order.
    keyed = [(s, members[i], i) for i, s in enumerate(scores) if s is not None and i not in hidden]
    keyed.sort(reverse=desc)
    return [k[-1] for k in keyed]


def moved(league: LeagueSettings, tier: str, zone: Zone | None) -> str:
    """The tier after ``zone`` from ``tier`` (one up, one down, or the same)."""
    i = league.tiers.index(tier) if tier in league.tiers else 0
    if zone is Zone.PROMOTE:
        i = min(i + 1, len(league.tiers) - 1)
    elif zone is Zone.DEMOTE:
        i = max(i - 1, 0)
    return league.tiers[i]


def current_tier(league: LeagueSettings, stored: str | None) -> str:
    """A member's tier from the tier hash: the lowest for a new member, and for a tier no
    longer configured."""
    return stored if stored in league.tiers else league.tiers[0]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a period's close decided for one member: its tier before and after, its cohort
    (None for an idle member, one with a tier that joined none), rank and score in it, zone
    and reward. Written once per member and period (JSON, :meth:`to_json`)."""

    member: str
    tier_before: str
    tier_after: str
    cohort: int | None
    rank: int | None
    score: float | None
    zone: Zone | None
    reward: str | None

    @property
    def idle(self) -> bool:
        return self.cohort is None

    def fields(self) -> dict[str, Any]:
        return {
            "tier_before": self.tier_before, "tier_after": self.tier_after,
            "cohort": self.cohort, "rank": self.rank, "score": self.score,
            "zone": None if self.zone is None else self.zone.value, "reward": self.reward,
        }  # fmt: skip

    def to_json(self) -> str:
        return json.dumps(self.fields(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, member: str, text: str | bytes) -> Outcome:
        d = json.loads(text)
        zone = d.get("zone")
        return cls(
            member, d["tier_before"], d["tier_after"], d.get("cohort"), d.get("rank"),
            d.get("score"), None if zone is None else Zone(zone), d.get("reward"),
        )  # fmt: skip


def cohort_outcomes(cohort: int, table: Standings, league: LeagueSettings) -> list[Outcome]:
    """The outcome of each member of one cohort, from its final standings: a ranked member
    moves by its zone and gets the reward of its rank; an unranked one (hidden, banned, or
    with no score left) stays."""
    out = []
    for row in table.rows:
        tier_after = moved(league, table.tier, row.zone)
        reward = league.reward_of(row.rank) if row.rank is not None else None
        out.append(
            Outcome(row.member, table.tier, tier_after, cohort, row.rank, row.score,
                    row.zone, reward)
        )  # fmt: skip
    return out


def idle_outcome(member: str, tier: str, league: LeagueSettings) -> Outcome:
    """The outcome of a member with a tier and no cohort in the period: one tier down with
    ``idle = "demote"`` (not below the lowest), else the same tier."""
    zone = Zone.DEMOTE if league.idle == "demote" and tier != league.tiers[0] else Zone.STAY
    return Outcome(member, tier, moved(league, tier, zone), None, None, None, zone, None)


def counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """The counts a ``league_closed`` event carries."""
    out = {"members": 0, "promoted": 0, "demoted": 0, "stayed": 0, "idle": 0, "rewarded": 0}
    for o in outcomes:
        out["members"] += 1
        out["idle"] += o.idle
        out["rewarded"] += o.reward is not None
        if o.tier_after == o.tier_before:
            out["stayed"] += 1
        elif o.zone is Zone.PROMOTE:
            out["promoted"] += 1
        else:
            out["demoted"] += 1
    return out


def group_of(league: LeagueSettings, metadata: Mapping[str, Any] | None) -> str:
    """The cohort group of a member with ``metadata`` (at its join): the text value of its
    ``group_by`` field; "" (the group of every member without one) when the board has no
    ``group_by`` or the field is absent or not text. Cohorts only mix equal groups."""
    if not league.group_by or not metadata:
        return ""
    value = metadata.get(league.group_by)
    return value if isinstance(value, str) else ""
