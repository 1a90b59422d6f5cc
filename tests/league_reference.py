"""A reference model of leagues in plain Python, written from the rules of docs/leagues.md
and not from the code (it imports nothing of seasons.leagues): who joins which cohort, the
zones, the outcome of a close and the tiers after it.

Members join in arrival order on their first event of a period that is before the period's
join deadline, in the open cohort of their (tier, group), a full cohort giving way to a new
one; while the period before has not closed, a join waits and happens, in arrival order, at
that close. At a close: the top ``promote`` of a cohort's ranked members move up a tier (none
above the top), the bottom ``demote`` down (none below the lowest, nobody when fewer than
``min_cohort`` are ranked), members sharing a rank across a boundary all get the better zone,
a percent is of the ranked members rounded down, idle members (a tier, no cohort) move per
``idle``; the next tiers come from the outcomes only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any


@dataclass
class Rules:
    tiers: list[str]
    cohort_size: int
    min_cohort: int
    promote: tuple[str, float]  # ("count", n) or ("percent", p)
    demote: tuple[str, float]
    idle: str  # demote | stay
    ties: str  # member | shared | dense | earliest
    order: str  # desc | asc
    rewards: list[tuple[int, int, str]] = field(default_factory=list)

    def moving(self, tier: str, ranked: int) -> tuple[int, int]:
        def count(rule: tuple[str, float]) -> int:
            kind, x = rule
            if kind == "count":
                return int(x)
            return (ranked * Fraction(str(x)) / 100).__floor__()

        up, down = count(self.promote), count(self.demote)
        if tier == self.tiers[-1]:
            up = 0
        if tier == self.tiers[0] or ranked < self.min_cohort:
            down = 0
        return min(up, ranked), min(down, ranked)


@dataclass
class Cohort:
    tier: str
    group: str
    members: list[str] = field(default_factory=list)


@dataclass
class PeriodModel:
    cohorts: list[Cohort] = field(default_factory=list)  # id = index + 1
    open: dict[tuple[str, str], int] = field(default_factory=dict)
    cohort_of: dict[str, int] = field(default_factory=dict)
    waiting: list[tuple[str, str]] = field(default_factory=list)  # (member, group) by arrival
    scores: dict[str, float] = field(default_factory=dict)
    reached: dict[str, float] = field(default_factory=dict)
    closing: bool = False


@dataclass(frozen=True)
class Outcome:
    tier_before: str
    tier_after: str
    cohort: int | None
    rank: int | None
    zone: str | None
    reward: str | None


class LeagueModel:
    def __init__(self, rules: Rules):
        self.rules = rules
        self.tier: dict[str, str] = {}
        self.periods: dict[str, PeriodModel] = {}
        self.order: list[str] = []  # periods in time order, as first seen or closed
        self.first: str | None = None
        self.closed: set[str] = set()
        self.outcomes: dict[str, dict[str, Outcome]] = {}
        self.hidden: set[str] = set()

    def period(self, p: str) -> PeriodModel:
        return self.periods.setdefault(p, PeriodModel())

    def _tier_of(self, member: str) -> str:
        t = self.tier.get(member)
        return t if t in self.rules.tiers else self.rules.tiers[0]

    def _join(self, p: str, member: str, group: str) -> None:
        pm = self.period(p)
        tier = self._tier_of(member)
        at = pm.open.get((tier, group))
        if at is None or len(pm.cohorts[at - 1].members) >= self.rules.cohort_size:
            pm.cohorts.append(Cohort(tier, group))
            at = len(pm.cohorts)
            pm.open[(tier, group)] = at
        pm.cohorts[at - 1].members.append(member)
        pm.cohort_of[member] = at

    def event(
        self, p: str, prev: str | None, p_rank: int, member: str, score: float, *,
        ts: float, join_until: float, group: str, first_rank: list[int],
    ) -> None:  # fmt: skip
        """An accepted event of period ``p`` (``p_rank``: its index in time), giving the
        member ``score`` on the period's board (the caller aggregates)."""
        pm = self.period(p)
        old = pm.scores.get(member)
        pm.scores[member] = score
        if old != score:
            pm.reached[member] = ts
        if member in pm.cohort_of or any(m == member for m, _ in pm.waiting):
            return
        if ts >= join_until or pm.closing or p in self.closed:
            return
        if self.first is None:
            self.first = p
            first_rank[0] = p_rank
        elif p_rank < first_rank[0]:
            return
        if p == self.first or (prev is not None and prev in self.closed):
            self._join(p, member, group)
        else:
            pm.waiting.append((member, group))

    def ranked(self, p: str, cohort: Cohort) -> list[tuple[str, float, int, str]]:
        """(member, score, rank, zone) of the cohort's ranked members, best first."""
        pm = self.period(p)
        ms = [m for m in cohort.members if m in pm.scores and m not in self.hidden]
        sign = -1 if self.rules.order == "desc" else 1

        def key(m: str) -> tuple[Any, ...]:
            b = m.encode("utf-8", "surrogatepass")
            if self.rules.ties == "earliest":
                return (sign * pm.scores[m], pm.reached[m], b)
            # Redis's order of equal scores: member bytes, reversed on a desc board.
            return (sign * pm.scores[m], tuple(-x for x in b) + (1,) if sign < 0 else b)

        ms.sort(key=key)
        n = len(ms)
        up, down = self.rules.moving(cohort.tier, n)
        out = []
        for i, m in enumerate(ms):
            s = pm.scores[m]
            better = sum(1 for x in ms if sign * pm.scores[x] < sign * s)
            if self.rules.ties in ("member", "earliest"):
                rank, first = i + 1, i + 1
            elif self.rules.ties == "shared":
                rank, first = better + 1, better + 1
            else:
                rank = len({pm.scores[x] for x in ms if sign * pm.scores[x] < sign * s}) + 1
                first = better + 1
            if first <= up:
                zone = "promote"
            elif first > n - down:
                zone = "demote"
            else:
                zone = "stay"
            out.append((m, s, rank, zone))
        return out

    def _up(self, tier: str, zone: str | None) -> str:
        i = self.rules.tiers.index(tier)
        if zone == "promote":
            i = min(i + 1, len(self.rules.tiers) - 1)
        elif zone == "demote":
            i = max(i - 1, 0)
        return self.rules.tiers[i]

    def _reward(self, rank: int | None) -> str | None:
        for lo, hi, reward in self.rules.rewards:
            if rank is not None and lo <= rank <= hi:
                return reward
        return None

    def close(self, p: str, nxt: str) -> dict[str, Outcome]:
        pm = self.period(p)
        pm.closing = True
        out: dict[str, Outcome] = {}
        for cid, cohort in enumerate(pm.cohorts, start=1):
            rows = {m: (rank, zone) for m, _, rank, zone in self.ranked(p, cohort)}
            for m in cohort.members:
                rank, zone = rows.get(m, (None, None))
                out[m] = Outcome(
                    cohort.tier, self._up(cohort.tier, zone), cid, rank, zone, self._reward(rank)
                )
        for m, tier in self.tier.items():
            if m in out:
                continue
            lowest = tier == self.rules.tiers[0]
            zone = "demote" if self.rules.idle == "demote" and not lowest else "stay"
            out[m] = Outcome(tier, self._up(tier, zone), None, None, zone, None)
        for m, o in out.items():
            self.tier[m] = o.tier_after
        self.outcomes[p] = out
        self.closed.add(p)
        waiting = self.period(nxt).waiting
        self.period(nxt).waiting = []
        for m, group in waiting:
            self._join(nxt, m, group)
        return out
