"""Joining league cohorts inside the write script (docs/leagues.md#joining): the joined,
cohorts and open keys against a plain-Python model of the join rule on random batches; 64
concurrent first events; the join_closes boundary; waiting for the previous period's close
and the waiting joins (seasons.league_joins.join_waiting); duplicates, held, banned and
hidden members; a backfill after the close started; a Redis Cluster.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from seasons import Seasons
from seasons import windows as win
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.keys import Keys
from seasons.league_joins import join_waiting
from seasons.leagues import COHORT_SPAN

NS = "lj"
Make = Callable[..., Settings]
TIERS = ["bronze", "silver", "gold"]
# A Saturday, far ahead (EXPIREAT from the manual clock must lie ahead of Redis's clock).
START = datetime(2035, 6, 16, 6, tzinfo=UTC)
MONDAY = date(2035, 6, 11)  # the first day of START's week (week_start: monday)


def league_settings(make: Make, **league: Any) -> Settings:
    board: dict[str, Any] = {"windows": ["day", "week", "season"]}
    for name in ("member_rate",):
        if name in league:
            board[name] = league.pop(name)
    board["league"] = {"window": "week", "tiers": TIERS, "min_cohort": 1, **league}
    return make(namespace=NS, timezone="UTC", late_grace="P3D", boards={"b": board})


def text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def week_of(ts: float) -> date:
    day = datetime.fromtimestamp(ts, UTC).date()
    return day - timedelta(days=day.weekday())


def epoch(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


# --- the model ------------------------------------------------------------------------------


@dataclass
class Model:
    """The join rule of docs/leagues.md#joining, in plain Python (weeks of UTC days)."""

    size: int
    join_closes: float  # seconds
    group_by: str
    tier: dict[str, str] = field(default_factory=dict)  # the tier hash
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    first: date | None = None
    closed: set[date] = field(default_factory=set)
    closing: set[date] = field(default_factory=set)
    waiting: dict[date, int] = field(default_factory=dict)
    joined: dict[date, dict[str, int]] = field(default_factory=dict)
    cohorts: dict[date, dict[int, dict[str, str]]] = field(default_factory=dict)
    open: dict[date, dict[tuple[str, str], int]] = field(default_factory=dict)
    seen_ids: set[str] = field(default_factory=set)

    def group(self, member: str) -> str:
        value = self.meta.get(member, {}).get(self.group_by) if self.group_by else None
        return value if isinstance(value, str) else ""

    def place(self, p: date, member: str) -> None:
        tier = self.tier.get(member)
        tier = tier if tier in TIERS else TIERS[0]
        pair = (tier, self.group(member))
        joined, cohorts, opened = (
            self.joined.setdefault(p, {}), self.cohorts.setdefault(p, {}),
            self.open.setdefault(p, {}),
        )  # fmt: skip
        cid = opened.get(pair)
        fill = 0
        if cid is not None:
            fill = sum(
                1 for s in joined.values() if cid * COHORT_SPAN <= s < (cid + 1) * COHORT_SPAN
            )
        if cid is None or fill >= self.size:
            cid, fill = len(cohorts) + 1, 0
            cohorts[cid] = {"tier": pair[0], "group": pair[1]}
            opened[pair] = cid
        joined[member] = cid * COHORT_SPAN + fill

    def event(self, member: str, ts: float, event_id: str | None, meta: dict[str, Any]) -> None:
        if event_id is not None:
            if event_id in self.seen_ids:
                return  # a duplicate: not accepted
            self.seen_ids.add(event_id)
        if meta:
            merged = {**self.meta.get(member, {}), **meta}
            self.meta[member] = {k: v for k, v in merged.items() if v is not None}
        p = week_of(ts)
        joined = self.joined.setdefault(p, {})
        end = epoch(p + timedelta(days=7))
        if member in joined or ts >= end - self.join_closes or p in self.closed | self.closing:
            return
        if self.first is None:
            self.first = p
        elif p != self.first:
            if p < self.first:
                return
            if p - timedelta(days=7) not in self.closed:
                self.waiting[p] = self.waiting.get(p, 0) + 1
                joined[member] = -self.waiting[p]
                return
        self.place(p, member)

    def join_waiting(self, p: date) -> None:
        nxt = p + timedelta(days=7)
        joined = self.joined.setdefault(nxt, {})
        for member, _ in sorted(((m, s) for m, s in joined.items() if s < 0), key=lambda x: -x[1]):
            del joined[member]
            self.place(nxt, member)
        self.closed.add(p)
        self.waiting.pop(nxt, None)


def redis_league(r: redis.Redis, keys: Keys, p: date) -> tuple[Any, Any, Any]:
    def key(part: str) -> str:
        return keys.league("b", p.isoformat(), part)

    joined = {text(m): int(s) for m, s in r.zrange(key("joined"), 0, -1, withscores=True)}
    cohorts = {int(k): json.loads(v) for k, v in r.hgetall(key("cohorts")).items()}
    opened = {tuple(json.loads(k)): int(v) for k, v in r.hgetall(key("open")).items()}
    return joined, cohorts, opened


def close_week(s: Seasons, p: date, closed: str, chunk: int = 500) -> None:
    """The close's last step for week ``p``: its waiting members of the next week join."""
    period = win.period_of_day("week", p, s.settings)
    after = win.period_of_day("week", p + timedelta(days=7), s.settings)
    assert period is not None and after is not None
    join_waiting(s.client, s.scripts, s.settings, s.keys, "b", period, after, closed, chunk)


def assert_same(r: redis.Redis, keys: Keys, model: Model, weeks: list[date]) -> None:
    for p in weeks:
        assert redis_league(r, keys, p) == (
            model.joined.get(p, {}), model.cohorts.get(p, {}), model.open.get(p, {}),
        ), p  # fmt: skip
    state = {text(k): text(v) for k, v in r.hgetall(keys.league_state("b")).items()}
    assert state.get("first") == (model.first.isoformat() if model.first else None)
    if model.first is not None:
        assert int(state["first_start"]) == epoch(model.first)
    assert {k for k in state if k.startswith("closed:")} == {
        f"closed:{p.isoformat()}" for p in model.closed
    }


# --- random batches against the model -------------------------------------------------------

MEMBERS = ("a", "b", "c", "d", "e", "f", "g", "é")
WEEKS = [MONDAY - timedelta(days=7), MONDAY, MONDAY + timedelta(days=7)]

an_event = st.fixed_dictionaries(
    {
        "member": st.sampled_from(MEMBERS),
        "back": st.one_of(st.integers(0, 60 * 3600), st.sampled_from([0, 6 * 3600, 30 * 3600])),
        "event_id": st.one_of(st.none(), st.sampled_from(["x", "y", "z"])),
        # The join_closes boundary of START's week: its instant (edge 0) or a second before.
        "edge": st.one_of(st.none(), st.none(), st.sampled_from([-1, 0])),
        "meta": st.dictionaries(
            st.sampled_from(["region", "lvl"]),
            st.one_of(st.sampled_from(["eu", "us"]), st.none(), st.integers(1, 3)),
            max_size=2,
        ),
    }
)
a_step = st.one_of(
    st.tuples(st.just("batch"), st.lists(an_event, min_size=1, max_size=6)),
    # At most 3 hours a step: the batch's event ids stay within the 48 hours of dedupe.
    st.tuples(st.just("advance"), st.integers(1, 3 * 3600)),
    st.tuples(st.just("tier"), st.sampled_from(MEMBERS), st.sampled_from([*TIERS, "gone"])),
    st.tuples(st.just("close"), st.sampled_from(WEEKS[:2]), st.integers(1, 3)),
    st.tuples(st.just("closing"), st.sampled_from(WEEKS)),
)


@hsettings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    size=st.sampled_from([1, 2, 3]),
    join_closes=st.sampled_from([0, 6 * 3600, 86_400]),
    group_by=st.sampled_from(["", "region"]),
    steps=st.lists(a_step, min_size=3, max_size=14),
)
def test_joins_are_the_models(
    size: int, join_closes: int, group_by: str, steps: list[tuple[Any, ...]],
    settings_factory: Make, r: redis.Redis,
) -> None:  # fmt: skip
    r.flushall()
    settings = league_settings(
        settings_factory, cohort_size=size, join_closes=f"PT{join_closes}S", group_by=group_by
    )
    keys = Keys(NS)
    clock = ManualClock(START + timedelta(hours=39))  # Sunday 21:00: the next week is near
    model = Model(size, join_closes, group_by)
    with Seasons(settings, clock=clock) as s:
        for step in steps:
            if step[0] == "batch":
                now = clock().timestamp()
                events = []
                for ev in step[1]:
                    ts = now - ev["back"]
                    if ev["edge"] is not None:
                        edge = epoch(MONDAY + timedelta(days=7)) - join_closes + ev["edge"]
                        ts = edge if edge <= now else ts
                    e: dict[str, Any] = {"board": "b", "member": ev["member"], "value": 1, "ts": ts}
                    if ev["event_id"] is not None:
                        e["event_id"] = ev["event_id"]
                    if ev["meta"]:
                        e["metadata"] = ev["meta"]
                    events.append(e)
                s.submit_many(events)
                for e in events:
                    model.event(e["member"], e["ts"], e.get("event_id"), e.get("metadata", {}))
            elif step[0] == "advance":
                clock.advance(timedelta(seconds=step[1]))
            elif step[0] == "tier":
                r.hset(keys.league_tier("b"), step[1], step[2])
                model.tier[step[1]] = step[2]
            elif step[0] == "close":
                close_week(s, step[1], '{"members":0}', chunk=step[2])
                if step[1] not in model.closed:
                    model.join_waiting(step[1])
            else:
                r.hset(keys.league_state("b"), f"close:{step[1].isoformat()}", "{}")
                model.closing.add(step[1])
            assert_same(r, keys, model, WEEKS)


# --- by hand --------------------------------------------------------------------------------


def joined_of(r: redis.Redis, p: date = MONDAY) -> dict[str, int]:
    return redis_league(r, Keys(NS), p)[0]


def test_64_concurrent_first_events_fill_cohorts_in_order(
    settings_factory: Make, r: redis.Redis
) -> None:
    size = 10
    settings = league_settings(settings_factory, cohort_size=size)
    members = [f"m{n:02d}" for n in range(64)]
    barrier = threading.Barrier(len(members))
    errors: list[BaseException] = []
    with Seasons(settings, clock=ManualClock(START)) as s:

        def first_event(member: str) -> None:
            try:
                barrier.wait()
                s.submit("b", member, 1)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=first_event, args=(m,)) for m in members]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    joined = joined_of(r)
    assert sorted(joined) == members  # each member once
    by_cohort: dict[int, list[int]] = {}
    for score in joined.values():
        by_cohort.setdefault(score // COHORT_SPAN, []).append(score % COHORT_SPAN)
    assert sorted(by_cohort) == list(range(1, math.ceil(64 / size) + 1))
    # Every cohort holds places 0.. without a gap, none over cohort_size, all but the last full.
    for cid, places in by_cohort.items():
        assert sorted(places) == list(range(len(places)))
        assert len(places) == (size if cid < 7 else 64 - 6 * size)


def test_join_closes_is_the_boundary(settings_factory: Make, r: redis.Redis) -> None:
    settings = league_settings(settings_factory, join_closes="P1D")
    join_until = epoch(MONDAY + timedelta(days=6))  # the week's end minus a day
    clock = ManualClock(datetime.fromtimestamp(join_until + 3600, UTC))
    with Seasons(settings, clock=clock) as s:
        s.submit("b", "early", 5, ts=join_until - 1)
        s.submit("b", "late", 7, ts=join_until)
        assert set(joined_of(r)) == {"early"}
        top = s.top("b", window="week", period="current")
        assert {(e.member, e.score) for e in top.entries} == {("early", 5), ("late", 7)}


def test_an_event_waits_for_the_previous_close(settings_factory: Make, r: redis.Redis) -> None:
    settings = league_settings(settings_factory, cohort_size=2)
    keys = Keys(NS)
    prev = MONDAY - timedelta(days=7)
    clock = ManualClock(datetime(2035, 6, 9, 12, tzinfo=UTC))  # the previous Saturday
    with Seasons(settings, clock=clock) as s:
        s.submit("b", "old", 1)  # the league's first period: joins at once
        assert joined_of(r, prev) == {"old": COHORT_SPAN}
        clock.set(START)
        s.submit_many([{"board": "b", "member": m, "value": 3} for m in ("x", "y", "z")])
        assert joined_of(r) == {"x": -1, "y": -2, "z": -3}  # arrival order
        top = s.top("b", window="week", period="current")
        assert {e.member for e in top.entries} == {"x", "y", "z"}  # scored at once
        r.hset(keys.league_tier("b"), mapping={"y": "gold", "z": "gold"})
        close_week(s, prev, '{"members":1}', chunk=1)
        # x (bronze) alone; y and z (gold) in one cohort, in arrival order.
        assert joined_of(r) == {"x": COHORT_SPAN, "y": 2 * COHORT_SPAN, "z": 2 * COHORT_SPAN + 1}
        state = r.hgetall(keys.league_state("b"))
        assert state[f"closed:{prev.isoformat()}".encode()] == b'{"members":1}'
        assert f"waiting:{MONDAY.isoformat()}".encode() not in state
        s.submit("b", "w", 1)  # P is closed now: joins at once
        assert joined_of(r)["w"] == COHORT_SPAN + 1
        # Run again (after a crash): nothing changes.
        before = redis_league(r, keys, MONDAY)
        close_week(s, prev, "{}")
        assert redis_league(r, keys, MONDAY) == before


def test_duplicate_held_and_banned_events_join_nothing_hidden_ones_join(
    settings_factory: Make, r: redis.Redis
) -> None:
    settings = league_settings(settings_factory, member_rate={"events": 1, "per": "PT1H"})
    with Seasons(settings, clock=ManualClock(START)) as s:
        joined = Keys(NS).league("b", MONDAY.isoformat(), "joined")
        s.submit("b", "dup", 1, event_id="e1")
        r.zrem(joined, "dup")  # as if it had not joined: its duplicate must not join either
        assert s.submit("b", "dup", 1, event_id="e1").duplicates == 1
        s.moderate("banned", "banned", reason="test")
        s.moderate("hidden", "hidden", reason="test")
        assert s.submit("b", "banned", 1).banned == 1
        s.submit("b", "hidden", 1)
        # "held": its first event is accepted (and joins), so a fresh member's event is held
        # only past the rate; drop its join to see that the held one adds none.
        s.submit("b", "held", 1)
        r.zrem(joined, "held")
        assert s.submit("b", "held", 1).held == 1
        assert set(joined_of(r)) == {"hidden"}


def test_a_backfill_after_the_close_started_joins_nothing(
    settings_factory: Make, r: redis.Redis
) -> None:
    settings = league_settings(settings_factory)
    keys = Keys(NS)
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit("b", "a", 1)
        r.hset(keys.league_state("b"), f"close:{MONDAY.isoformat()}", "{}")
        result = s.submit_many(
            [{"board": "b", "member": "late", "value": 2, "ts": START.timestamp() - 60}],
            backfill=True,
        )
        assert result.applied == 1
        s.submit("b", "new", 1)
        assert set(joined_of(r)) == {"a"}


@pytest.mark.both_backends
def test_a_write_with_a_league_joins_on_one_slot(
    settings_factory: Make, r: redis.Redis, backend: str
) -> None:
    settings = league_settings(settings_factory, cohort_size=2, group_by="region")
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit_many(
            [
                {"board": "b", "member": m, "value": 1, "metadata": {"region": g}}
                for m, g in [("a", "eu"), ("b", "us"), ("c", "eu"), ("d", "eu")]
            ]
        )
    assert joined_of(r) == {
        "a": COHORT_SPAN, "c": COHORT_SPAN + 1, "b": 2 * COHORT_SPAN, "d": 3 * COHORT_SPAN,
    }  # fmt: skip
    assert redis_league(r, Keys(NS), MONDAY)[1] == {
        1: {"group": "eu", "tier": "bronze"}, 2: {"group": "us", "tier": "bronze"},
        3: {"group": "eu", "tier": "bronze"},
    }  # fmt: skip


def test_an_event_before_the_first_period_joins_nothing(
    settings_factory: Make, r: redis.Redis
) -> None:
    settings = league_settings(settings_factory)
    clock = ManualClock(START + timedelta(days=2))  # Monday of the next week
    with Seasons(settings, clock=clock) as s:
        s.submit("b", "a", 1)  # the league begins with the next week
        s.submit("b", "b", 1, ts=START.timestamp())  # of START's week: before it began
        assert joined_of(r, MONDAY + timedelta(days=7)) == {"a": COHORT_SPAN}
        assert joined_of(r) == {}
        state = r.hgetall(Keys(NS).league_state("b"))
        assert state[b"first"] == (MONDAY + timedelta(days=7)).isoformat().encode()
