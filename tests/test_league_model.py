"""Leagues end to end against the reference model (tests/league_reference.py): seeded runs over
several weeks of real writes through ``Seasons.submit_many`` and real closes by the worker's
close job (``Closes.catch_up``), in a zone with DST and across a year's end, with ties at every
boundary (few distinct values), percents to round, cohorts of 1 to 30, members reaching the top
and the lowest tier, idle members, ``group_by``, first events after the join deadline and
events of the next week arriving before the close: after every close the outcomes, the tiers,
the next week's cohorts and the reads equal the model's."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.jobs.registry import closes_of
from seasons.keys import Keys
from seasons.leagues import COHORT_SPAN
from seasons.models import LeagueCohort, LeagueOverview
from tests.league_reference import LeagueModel, Rules

ZONE = ZoneInfo("Europe/Berlin")
BOARD = "xp"
TIERS = ["bronze", "silver", "gold"]


@dataclass(frozen=True)
class Run:
    seed: int
    first_monday: date  # 2027-10-25: DST ends on the 31st; 2027-12-20: the year's end
    weeks: int
    members: int
    ties: str
    order: str
    league: dict[str, Any]


RUNS = [
    Run(1, date(2027, 10, 25), 4, 70, "member", "desc",
        {"cohort_size": 10, "min_cohort": 9, "promote": 3, "demote": 3}),
    Run(2, date(2027, 12, 20), 4, 75, "shared", "desc",
        {"cohort_size": 30, "min_cohort": 10, "promote_percent": 20, "demote_percent": 15,
         "group_by": "region", "idle": "stay"}),
    Run(3, date(2027, 12, 20), 4, 40, "dense", "asc",
        {"cohort_size": 9, "min_cohort": 9, "promote_percent": 34, "demote": 2,
         "tier_rules": [{"tier": "gold", "demote": 4}]}),
    Run(4, date(2027, 10, 25), 4, 60, "earliest", "desc",
        {"cohort_size": 30, "min_cohort": 10, "promote": 10, "demote": 10}),
    Run(5, date(2027, 12, 20), 3, 12, "member", "asc",
        {"cohort_size": 1, "min_cohort": 1, "promote": 1, "demote": 0}),
]  # fmt: skip


def at(day: date, hour: float) -> datetime:
    return datetime.combine(day, time(0), ZONE) + timedelta(hours=hour)


def week_end(monday: date) -> datetime:
    """The instant the week ends, in local time (a DST week is 167 or 169 hours long)."""
    return datetime.combine(monday + timedelta(days=7), time(0), ZONE)


def rules_of(run: Run) -> Rules:
    lg = run.league

    def move(name: str) -> tuple[str, float]:
        if name in lg:
            return ("count", lg[name])
        if f"{name}_percent" in lg:
            return ("percent", lg[f"{name}_percent"])
        return ("count", 5)

    rules = Rules(
        tiers=TIERS, cohort_size=lg["cohort_size"], min_cohort=lg["min_cohort"],
        promote=move("promote"), demote=move("demote"), idle=lg.get("idle", "demote"),
        ties=run.ties, order=run.order, rewards=[(1, 1, "crown"), (2, 3, "chest")],
    )  # fmt: skip
    return rules


class TierRulesModel(LeagueModel):
    """The model with the run's per-tier rules (gold's own demote count)."""

    def __init__(self, rules: Rules, per_tier: dict[str, dict[str, Any]]):
        super().__init__(rules)
        base = rules.moving

        def moving(tier: str, ranked: int) -> tuple[int, int]:
            up, down = base(tier, ranked)
            if "demote" in per_tier.get(tier, {}) and tier != rules.tiers[0]:
                down = min(per_tier[tier]["demote"], ranked) if ranked >= rules.min_cohort else 0
            return up, down

        rules.moving = moving  # type: ignore[method-assign]


def settings_of(run: Run, make: Callable[..., Settings], archive: Path) -> Settings:
    league = {"window": "week", "tiers": TIERS, **run.league}
    league["rewards"] = [{"ranks": "1", "reward": "crown"}, {"ranks": "2-3", "reward": "chest"}]
    board = {"ties": run.ties, "order": run.order, "aggregate": "sum", "league": league}
    return make(
        boards={BOARD: board}, timezone=str(ZONE), retention="P9D", late_grace="PT1H",
        archive={"dir": str(archive)},
    )  # fmt: skip


def outcomes_in_redis(r: redis.Redis, keys: Keys, week: str) -> dict[str, dict[str, Any]]:
    raw = r.hgetall(keys.league(BOARD, week, "outcome"))
    return {m.decode(): json.loads(v) for m, v in raw.items()}


def cohorts_in_redis(r: redis.Redis, keys: Keys, week: str) -> dict[int, list[str]]:
    out: dict[int, list[tuple[float, str]]] = {}
    for m, score in r.zrange(keys.league(BOARD, week, "joined"), 0, -1, withscores=True):
        if score >= 0:
            out.setdefault(int(score) // COHORT_SPAN, []).append((score, m.decode()))
    return {c: [m for _, m in sorted(ms)] for c, ms in out.items()}


@pytest.mark.both_backends  # and a 3x1 cluster: every league key in the board's slot
@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.ties}-{r.order}-{r.first_monday}")
def test_weeks_of_writes_and_closes_equal_the_model(
    run: Run, settings_factory: Callable[..., Settings], r: redis.Redis, tmp_path: Path
) -> None:
    r.flushall()
    settings = settings_of(run, settings_factory, tmp_path / "archive")
    per_tier = {t["tier"]: t for t in run.league.get("tier_rules", [])}
    model = TierRulesModel(rules_of(run), per_tier)
    rng = random.Random(run.seed)
    members = [f"p{i:03d}" for i in range(run.members)]
    region = {m: rng.choice(["eu", "us", "asia"]) for m in members}
    clock = ManualClock(at(run.first_monday, 0.5))
    keys = Keys(settings.namespace)
    first_rank = [0]
    scores: dict[str, dict[str, float]] = {}
    mondays = [run.first_monday + timedelta(weeks=k) for k in range(run.weeks + 1)]
    sent: set[str] = set()  # the members with any event so far (the reads' check)

    # In the future: keys are given EXPIREATs by this clock, which Redis compares with its own.
    assert clock() > datetime.now(ZONE)
    with Seasons(settings, clock=clock) as s:
        closes = closes_of(s.backend)
        closes.catch_up(clock())  # the days before the run: nothing in them

        def send(k: int, member: str, value: float, when: datetime) -> None:
            monday = mondays[k]
            week = monday.isoformat()
            prev = mondays[k - 1].isoformat() if k > 0 else None
            batch = [{"board": BOARD, "member": member, "value": value,
                      "ts": when.timestamp(), "metadata": {"region": region[member]}}]  # fmt: skip
            result = s.submit_many(batch)
            assert result.applied == 1, result
            total = scores.setdefault(week, {}).get(member, 0.0) + value
            scores[week][member] = total
            # join_closes is a duration: 24 real hours before the end, DST or not.
            join_until = week_end(monday).timestamp() - 86_400
            model.event(
                week, prev, k, member, total, ts=when.timestamp(), join_until=join_until,
                group=region[member] if run.league.get("group_by") else "",
                first_rank=first_rank,
            )  # fmt: skip
            sent.add(member)

        for k in range(run.weeks):
            monday = mondays[k]
            active = [m for m in members if rng.random() < 0.75]
            n_events = len(active) * 2
            times = sorted(rng.uniform(1, 7 * 24 - 1) for _ in range(n_events))
            # A few first events inside the last day: after the join deadline.
            for when_h in times:
                member = rng.choice(active)
                when = at(monday, when_h)
                if when >= week_end(monday) - timedelta(minutes=1):
                    continue
                clock.set(max(clock(), when + timedelta(seconds=1)))
                send(k, member, float(rng.choice([1, 2, 2, 3])), when)
            # The next week's first events before this week closes: they wait for it.
            end = week_end(monday)
            if k + 1 < run.weeks:
                for member in rng.sample(members, 5):
                    when = end + timedelta(minutes=rng.uniform(1, 40))
                    clock.set(max(clock(), when + timedelta(seconds=1)))
                    send(k + 1, member, float(rng.choice([1, 2])), when)

            week = monday.isoformat()
            # Live: a member's cohort as the reads show it equals the model's zones.
            for cohort in model.period(week).cohorts[:3]:
                member = cohort.members[0]
                live = s.league(BOARD, member, period=week)
                assert isinstance(live, LeagueCohort)
                want = {m: (rank, zone) for m, _, rank, zone in model.ranked(week, cohort)}
                got = {row.member: (row.rank, row.zone) for row in live.rows if row.rank}
                assert got == want, (week, cohort.tier)

            assert overview_of(s, week) == model_overview(model, week), week

            clock.set(end + timedelta(hours=1, minutes=5))  # past late_grace: the week closes
            closes.catch_up(clock())
            nxt = mondays[k + 1].isoformat()
            want_out = model.close(week, nxt)

            got_out = outcomes_in_redis(r, keys, week)
            assert set(got_out) == set(want_out), week
            for m, o in want_out.items():
                g = got_out[m]
                got = (g["tier_before"], g["tier_after"], g["cohort"], g["rank"], g["zone"],
                       g["reward"])  # fmt: skip
                assert got == (o.tier_before, o.tier_after, o.cohort, o.rank, o.zone, o.reward), (
                    week, m, g, o,
                )  # fmt: skip
            tiers = {m.decode(): t.decode() for m, t in r.hgetall(keys.league_tier(BOARD)).items()}
            assert tiers == model.tier, week
            # The next week's cohorts: the waiting members joined, in arrival order.
            want_next = {cid: c.members for cid, c in enumerate(model.period(nxt).cohorts, start=1)}
            assert cohorts_in_redis(r, keys, nxt) == want_next, nxt
            assert overview_of(s, nxt) == model_overview(model, nxt), nxt
            # The final read of a cohort is the close's decision.
            for cid, cohort in enumerate(model.period(week).cohorts[:2], start=1):
                final = s.league(BOARD, cohort=cid, period=week)
                assert isinstance(final, LeagueCohort) and final.final
                assert {row.member: row.zone for row in final.rows} == {
                    m: want_out[m].zone for m in cohort.members
                }

    # The run reached the top and the lowest tiers, and had idle members and several cohorts.
    assert TIERS[-1] in model.tier.values() or run.league.get("promote") == 0
    assert any(o.cohort is None for outs in model.outcomes.values() for o in outs.values())


def overview_of(s: Seasons, week: str) -> dict[str, tuple[int, int]]:
    """The league overview of ``week``: tier -> (members, cohorts), tiers with any."""
    got = s.league(BOARD, period=week)
    assert isinstance(got, LeagueOverview)
    return {t.tier: (t.members, t.cohorts) for t in got.tiers if t.members or t.cohorts}


def model_overview(model: LeagueModel, week: str) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for cohort in model.period(week).cohorts:
        members, cohorts = out.get(cohort.tier, (0, 0))
        out[cohort.tier] = (members + len(cohort.members), cohorts + 1)
    return out
