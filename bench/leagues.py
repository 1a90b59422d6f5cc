"""``python -m bench --only leagues``: what a league costs (issue 24 §5, docs/leagues.md).

Three figures, each measured side by side in one run and believed only after its checks:

1. **Ingest on a league board** against the same board without one: two namespaces, the same
   batches of 100 events (as :mod:`bench.limits`) on a pool of members that all joined
   already, in slices alternating between the sides (:func:`bench.common.paired`). Target:
   the league side at least 0.9x the other's events/s; Redis's time per event for
   information. The seed (every member's first event: a join on the league side) is paired
   too and reported per event, for information. Checks: both sides' boards equal score by
   score; the league side holds ceil(members / cohort_size) cohorts, each member in one.
2. **The close of a period** of ``members`` members (1 000 000: 33 334 cohorts of 30), its
   state written straight into Redis with pipelines (:func:`populate`), then
   :meth:`jobs.league_close.LeagueClose.close` of it as steps of a run. Per step: wall time,
   Redis's time and the longest single command (SLOWLOG, reset before each step). Target: the
   longest command <= 10 ms. Checks: one outcome per member and idle member, the outcomes of
   a sample of cohorts equal :func:`seasons.leagues.standings` and an independent model
   (:func:`model_cohort`), the idle members' outcomes, and the tiers written.
3. **A cohort read against a page read of the same size**: ``Seasons.league(board, member)``
   (a 30-member cohort) against ``Seasons.top(board, "week", limit=30)`` at a random offset,
   paired; reads/s (target: at least as fast) and Redis's time per read.

    .venv/bin/python -m bench.leagues [--quick] [--members N]
"""

from __future__ import annotations

import json
import math
import multiprocessing
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import BOARD, Calendar, Section, make_settings, paired
from seasons import Seasons
from seasons import windows as win
from seasons.calendar import day_start
from seasons.config import Settings
from seasons.jobs.league_close import LeagueClose
from seasons.jobs.state import JobState, Run, no_checkpoint
from seasons.keys import Keys
from seasons.leagues import COHORT_SPAN, Member, cohort_outcomes, standings
from seasons.lifecycle import Lifecycle
from seasons.scripts import names as script_names
from seasons.scripts import script

NS_FREE, NS_LEAGUE = "bench-league-free", "bench-league"
NS_CLOSE, NS_READS = "bench-league-close", "bench-league-reads"
TIERS = ["bronze", "silver", "gold", "sapphire", "diamond"]
LEAGUE: dict[str, Any] = {
    "window": "week", "tiers": TIERS, "cohort_size": 30, "min_cohort": 10,
    "promote": 5, "demote": 5, "idle": "demote",
}  # fmt: skip
SIZE = LEAGUE["cohort_size"]
EVENTS_PER_BATCH = 100
CHUNKS = 20
INGEST_TARGET = 0.9  # league / no league, ingest events/s, at least (the figure)
LONGEST_TARGET_MS = 10.0  # the close's longest single command, at most
READ_TARGET = 1.0  # cohort reads/s over page reads/s, at least ("as fast")
SLOWER_THAN_US = 500  # SLOWLOG threshold during the close


@dataclass(frozen=True)
class LeagueSizes:
    members: int  # ingest: the pool every batch falls on (all joined)
    batches: int  # ingest: batches of 100 per side
    close_members: int  # the close: members in cohorts (idle ones come on top: IDLE_SHARE)
    reads: int  # cohort reads and page reads, each


FULL = LeagueSizes(10_000, 4_000, 1_000_000, 20_000)
QUICK = LeagueSizes(6_000, 120, 30_000, 2_000)
TINY = LeagueSizes(600, 4, 3_000, 40)
IDLE_SHARE = 20  # one idle member (a tier, no cohort) per this many members
NO_SCORE_EVERY = 499  # one member in this many has no score left (erased): no rank
SAMPLE = 40  # cohorts of the close checked one by one (and the last)


def settings(url: str, ns: str, calendar: Calendar, league: bool, archive: Path | None = None
             ) -> Settings:  # fmt: skip
    return make_settings(url, ns, calendar.today, league=LEAGUE if league else None,
                         archive=archive)  # fmt: skip


def week_of(s: Seasons, calendar: Calendar) -> win.Period:
    period = win.period_of_day("week", calendar.today, s.settings)
    assert period is not None
    return period


def pool(members: int) -> list[str]:
    return [f"player:{m:06d}" for m in range(members)]


# --- 1. ingest ------------------------------------------------------------------------------


def run_ingest(url: str, sizes: LeagueSizes, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Leagues: ingest on a league board",
        f"batches of {EVENTS_PER_BATCH} on a sum board (day, week, season) of "
        f"{sizes.members:,} members, without and with a weekly league (cohorts of {SIZE}), "
        f"every member joined; {sizes.batches} batches per side, in {CHUNKS} slices "
        "alternating between the sides",
        "µs/event",
    )
    sides = {
        "no league": Seasons(settings(url, NS_FREE, calendar, False), clock=calendar.clock()),
        "league": Seasons(settings(url, NS_LEAGUE, calendar, True), clock=calendar.clock()),
    }
    names = pool(sizes.members)
    try:
        rnd = random.Random(7)
        seed = [
            [{"board": BOARD, "member": m, "value": rnd.randint(1, 50)}
             for m in names[i : i + EVENTS_PER_BATCH]]
            for i in range(0, sizes.members, EVENTS_PER_BATCH)
        ]  # fmt: skip
        work = [
            [{"board": BOARD, "member": rnd.choice(names), "value": rnd.randint(1, 50)}
             for _ in range(EVENTS_PER_BATCH)]
            for _ in range(sizes.batches)
        ]  # fmt: skip

        def submit(s: Seasons, batches: list[list[dict[str, Any]]]) -> Callable[[int], object]:
            return lambda i: s.submit_many(batches[i])

        client = sides["no league"].client
        first = paired(client, {n: submit(s, seed) for n, s in sides.items()}, len(seed), CHUNKS)
        cost = paired(client, {n: submit(s, work) for n, s in sides.items()}, len(work), CHUNKS)
        boards = {name: week_boards(s, calendar) for name, s in sides.items()}
        joined = cohorts_of(sides["league"], week_of(sides["league"], calendar))
    finally:
        for s in sides.values():
            s.close()
    section.check("both sides' day, week and season boards equal, score by score",
                  boards["no league"] == boards["league"])  # fmt: skip
    expected = math.ceil(sizes.members / SIZE)
    section.check(
        f"the league side holds ceil({sizes.members:,} / {SIZE}) = {expected:,} cohorts, "
        "none over the size, each member of the pool in one",
        len(joined) == expected
        and all(0 < len(ms) <= SIZE for ms in joined.values())
        and sorted(m for ms in joined.values() for m in ms) == names,
    )
    events = sizes.batches * EVENTS_PER_BATCH
    for name in sides:
        section.row(name, cost.total(name) / events)
    for name in sides:
        section.row(f"{name}: ingest", events / cost.total(name, wall=True), "events/s")
    for name in sides:
        section.row(f"{name}: first events", first.total(name) / sizes.members,
                    "µs/event, every member new (joins)")  # fmt: skip
    ingest = 1 / cost.ratio("league", "no league", wall=True)
    section.ratio("league / no league, ingest events/s", ingest, ">=", INGEST_TARGET)
    section.ratio("league / no league, Redis time per event", cost.ratio("league", "no league"))
    section.ratio(
        "first events: league / no league, Redis time", first.ratio("league", "no league")
    )
    return section


def week_boards(s: Seasons, calendar: Calendar) -> dict[str, Any]:
    keys, out = Keys(s.settings.namespace), {}
    for window in win.board_windows(s.settings.boards[BOARD]):
        period = window.period_of_day(calendar.today, s.settings)
        assert period is not None
        key = keys.window(BOARD, window.name, period.id)
        out[window.name] = s.client.zrange(key, 0, -1, withscores=True)
    return out


def cohorts_of(s: Seasons, period: win.Period) -> dict[int, list[str]]:
    """Cohort id -> its members, from the ``joined`` set (a waiting member: cohort 0)."""
    keys = Keys(s.settings.namespace)
    out: dict[int, list[str]] = {}
    for member, place in s.client.zrange(keys.league(BOARD, period.id, "joined"), 0, -1,
                                         withscores=True):  # fmt: skip
        out.setdefault(max(0, int(place) // COHORT_SPAN), []).append(member)
    ids = s.client.hkeys(keys.league(BOARD, period.id, "cohorts"))
    return out if sorted(int(i) for i in ids) == sorted(out) else {}


# --- 2. the close -------------------------------------------------------------------------


@dataclass
class World:
    """What :func:`populate` wrote: cohort -> (tier, [(member, score or None)]), idle members
    -> tier."""

    cohorts: dict[int, tuple[str, list[tuple[str, float | None]]]]
    idle: dict[str, str]

    @property
    def members(self) -> int:
        return sum(len(ms) for _, ms in self.cohorts.values())


def make_world(members: int, seed: int = 5) -> World:
    """Cohorts of SIZE in order (the last one partial), tiers in turn, scores 0..199 (ties at
    every boundary; one member in NO_SCORE_EVERY without: erased), and one idle member per
    IDLE_SHARE, tiers in turn."""
    rnd = random.Random(seed)
    world = World({}, {})
    for at in range(0, members, SIZE):
        cohort = at // SIZE + 1
        rows = [(f"player-{m:07d}", None if m % NO_SCORE_EVERY == 7 else float(rnd.randrange(200)))
                for m in range(at, min(at + SIZE, members))]  # fmt: skip
        world.cohorts[cohort] = (TIERS[cohort % len(TIERS)], rows)
    world.idle = {f"idle-{i:07d}": TIERS[i % len(TIERS)] for i in range(members // IDLE_SHARE)}
    return world


def populate(s: Seasons, period: win.Period, world: World) -> None:
    """Period ``period`` of the league as the joins leave it, written with pipelines: the
    week board, ``joined``, ``cohorts``, the tier hash (each member its cohort's tier; a
    bronze member every other time none: new), the idle members' tiers, and the league
    state's ``first``/``first_start``."""
    keys = Keys(s.settings.namespace)
    board = keys.window(BOARD, period.window, period.id)
    part = {p: keys.league(BOARD, period.id, p) for p in ("joined", "cohorts")}
    tiers = keys.league_tier(BOARD)
    pipe = s.client.pipeline(transaction=False)
    start = int(day_start(period.first, s.settings.zone).timestamp())
    pipe.hset(keys.league_state(BOARD), mapping={"first": period.id, "first_start": start})
    for cohort, (tier, rows) in world.cohorts.items():
        pipe.hset(part["cohorts"], str(cohort), json.dumps({"group": "", "tier": tier}))
        pipe.zadd(part["joined"], {m: cohort * COHORT_SPAN + place
                                   for place, (m, _) in enumerate(rows)})  # fmt: skip
        scores = {m: sc for m, sc in rows if sc is not None}
        if scores:
            pipe.zadd(board, scores)
        known = {m: tier for i, (m, _) in enumerate(rows) if tier != TIERS[0] or i % 2}
        if known:
            pipe.hset(tiers, mapping=known)
        if cohort % 300 == 0:
            pipe.execute()
    names = list(world.idle)
    for i in range(0, len(names), 10_000):
        pipe.hset(tiers, mapping={m: world.idle[m] for m in names[i : i + 10_000]})
    pipe.execute()


def model_cohort(cohort: int, tier: str, rows: list[tuple[str, float | None]]
                 ) -> dict[str, dict[str, Any]]:  # fmt: skip
    """member -> outcome fields of one cohort, by the issue's rules for LEAGUE (desc board,
    ties by member bytes, reversed as ZRANGE REV lists them), written apart from
    seasons.leagues."""
    ranked = sorted(((sc, m) for m, sc in rows if sc is not None),
                    key=lambda x: (x[0], x[1].encode()), reverse=True)  # fmt: skip
    n, i = len(ranked), TIERS.index(tier)
    up = 0 if i == len(TIERS) - 1 else min(LEAGUE["promote"], n)
    down = 0 if i == 0 or n < LEAGUE["min_cohort"] else min(LEAGUE["demote"], n)
    out = {}
    for pos, (sc, m) in enumerate(ranked):
        zone = "promote" if pos < up else "demote" if pos >= n - down else "stay"
        after = TIERS[i + 1] if zone == "promote" else TIERS[i - 1] if zone == "demote" else tier
        out[m] = {"tier_before": tier, "tier_after": after, "cohort": cohort, "rank": pos + 1,
                  "score": sc, "zone": zone, "reward": None}  # fmt: skip
    for m, sc in rows:
        if sc is None:
            out[m] = {"tier_before": tier, "tier_after": tier, "cohort": cohort, "rank": None,
                      "score": None, "zone": None, "reward": None}  # fmt: skip
    return out


def model_idle(tier: str) -> dict[str, Any]:
    i = TIERS.index(tier)
    zone = "stay" if i == 0 else "demote"
    return {"tier_before": tier, "tier_after": TIERS[max(0, i - 1)], "cohort": None,
            "rank": None, "score": None, "zone": zone, "reward": None}  # fmt: skip


# The close's scripts: the commands they run count in their EVALSHA's time (and on their own
# lines of INFO commandstats besides), so in a step that ran a script those lines are left out.
CLOSE_SCRIPTS = ("league_outcome", "league_waiting", "lifecycle_emit")
_CALL = re.compile(r"redis\.p?call\(\s*'([A-Za-z]+)'")


def script_commands(names: tuple[str, ...] = CLOSE_SCRIPTS) -> frozenset[str]:
    return frozenset(c.lower() for n in names for c in _CALL.findall(script(n).source))


@dataclass
class StepCost:
    wall: float
    usec: int
    longest_us: int
    longest: str
    over_10ms: int  # commands of the step longer than 10 ms
    mean_us: float  # the mean time of the longest command's kind in the step (commandstats)


class MeasuredRun(Run):
    """A :class:`Run` whose steps are measured: wall time, Redis's time and SLOWLOG's longest
    command of each step's action (the SLOWLOG reset before each)."""

    def __init__(self, run: Run, admin: Any):
        super().__init__(run.client, run.key, run.name, run.checkpoint, run.clock)
        self.admin = admin
        self.costs: dict[str, StepCost] = {}
        self.inner = script_commands()
        self.shas = {script(n).sha: n for n in script_names()}

    def step(self, step: str, action: Callable[[], Any]) -> bool:
        def measured() -> Any:
            self.admin.slowlog_reset()
            before = calls_and_usec(self.admin)
            started = time.perf_counter()
            out = action()
            wall = time.perf_counter() - started
            after = calls_and_usec(self.admin)
            usec = self._usec({n: u for n, (_, u) in before.items()},
                              {n: u for n, (_, u) in after.items()})  # fmt: skip
            log = [e for e in self.admin.slowlog_get(100_000) if not _own(e["command"])]
            worst = max(log, key=lambda e: e["duration"], default=None)
            label = self._name(worst["command"]) if worst else "-"
            us = int(worst["duration"]) if worst else 0
            over = sum(1 for e in log if e["duration"] > LONGEST_TARGET_MS * 1000)
            name = label.split()[0].lower() if worst else ""
            calls = after.get(name, (0, 0))[0] - before.get(name, (0, 0))[0]
            total = after.get(name, (0, 0))[1] - before.get(name, (0, 0))[1]
            mean = total / calls if calls else 0.0
            self.costs[step.rsplit(":", 1)[-1]] = StepCost(wall, usec, us, label, over, mean)
            return out

        return super().step(step, measured)

    def _usec(self, before: dict[str, int], after: dict[str, int]) -> int:
        delta = {n: u - before.get(n, 0) for n, u in after.items()}
        scripted = any(delta.get(n, 0) > 0 for n in ("evalsha", "eval"))
        skip = {"exec", "info", "slowlog|get", "slowlog|reset"}
        return sum(u for n, u in delta.items()
                   if n not in skip and not (scripted and n in self.inner))  # fmt: skip

    def _name(self, command: Any) -> str:
        words = (command.decode() if isinstance(command, bytes) else str(command)).split()
        if not words:
            return "?"
        if words[0].upper() == "EVALSHA" and len(words) > 1:
            return f"EVALSHA {self.shas.get(words[1], words[1][:8])}"
        return words[0].upper()


class Stalls:
    """Another process that sleeps 1 ms over and over and keeps the longest delay past it:
    how long this machine leaves a runnable process waiting (other work on its CPUs). A
    command's SLOWLOG time holds such a wait too, when Redis's thread was the one kept."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._worst = ctx.Value("d", 0.0)
        self._proc = ctx.Process(target=_oversleep, args=(self._stop, self._worst))

    @property
    def worst(self) -> float:
        return float(self._worst.value)

    def __enter__(self) -> Stalls:
        self._proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join()


def _oversleep(stop: Any, worst: Any) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        time.sleep(0.001)
        late = time.perf_counter() - started - 0.001
        if late > worst.value:
            worst.value = late


def run_close(url: str, members: int, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Leagues: the close of a period",
        f"{members:,} members in cohorts of {SIZE} and {members // IDLE_SHARE:,} idle, "
        f"written straight into Redis; LeagueClose.close, step by step (SLOWLOG over "
        f"{SLOWER_THAN_US} µs, reset before each step)",
        "ms",
    )
    with tempfile.TemporaryDirectory(prefix="seasons-bench-league-") as tmp:
        cfg = settings(url, NS_CLOSE, calendar, True, Path(tmp))
        with Seasons(cfg, clock=calendar.clock()) as s:
            admin = s.client
            period = week_of(s, calendar)
            world = make_world(members)
            populate(s, period, world)
            clock: Callable[[], datetime] = calendar.clock()
            close = LeagueClose(s.client, s.scripts, cfg, s.keys,
                                Lifecycle(s.client, s.keys, cfg), clock)  # fmt: skip
            section.check("the period is due for its close", close.due(BOARD, period))
            run = MeasuredRun(
                JobState(s.client, s.keys).run("close_day", period.id, no_checkpoint, clock),
                admin,
            )
            kept = admin.config_get("slowlog-*")
            admin.config_set("slowlog-log-slower-than", SLOWER_THAN_US)
            admin.config_set("slowlog-max-len", 100_000)
            try:
                with Stalls() as stalls:
                    started = time.perf_counter()
                    close.close(run, BOARD, period, calendar.now)
                    wall = time.perf_counter() - started
            finally:
                for name, value in kept.items():
                    admin.config_set(name, value)
            checks = check_close(s, period, world)
    for label, ok in checks:
        section.check(label, ok)
    for step, cost in run.costs.items():
        section.row(f"{step}: wall", cost.wall * 1000)
        section.row(f"{step}: Redis time", cost.usec / 1000)
        note = (f"{cost.longest} (mean {cost.mean_us / 1000:.2f} ms); "
                f"{cost.over_10ms} commands over 10 ms")  # fmt: skip
        section.row(f"{step}: longest command", cost.longest_us / 1000, note)
    longest = max(run.costs.values(), key=lambda c: c.longest_us)
    section.row("close: wall", wall * 1000)
    section.row("close: Redis time", sum(c.usec for c in run.costs.values()) / 1000)
    over = sum(c.over_10ms for c in run.costs.values())
    section.row("close: longest command", longest.longest_us / 1000,
                f"{longest.longest}; {over} commands over 10 ms")  # fmt: skip
    section.row("machine: longest wait of a runnable process", stalls.worst * 1000,
                "a 1 ms sleep's delay in another process, during the close")  # fmt: skip
    section.ratio("longest command / 10 ms", longest.longest_us / 1000 / LONGEST_TARGET_MS,
                  "<=", 1.0)  # fmt: skip
    section.notes.append(
        "Redis time: INFO commandstats, each command once (in a step that ran a script, "
        "the commands the close's scripts call are counted in the script's time only)"
    )
    return section


def check_close(s: Seasons, period: win.Period, world: World) -> list[tuple[str, bool]]:
    keys = Keys(s.settings.namespace)
    outcome = keys.league(BOARD, period.id, "outcome")
    cfg = s.settings.boards[BOARD]
    league = cfg.league
    assert league is not None
    total = int(s.client.hlen(outcome))
    rnd = random.Random(11)
    sample = sorted(set(rnd.sample(sorted(world.cohorts), min(SAMPLE, len(world.cohorts))))
                    | {max(world.cohorts)})  # fmt: skip
    by_model = by_standings = True
    for cohort in sample:
        tier, rows = world.cohorts[cohort]
        names = [m for m, _ in rows]
        got = {m: json.loads(raw) for m, raw in zip(names, s.client.hmget(outcome, names),
                                                   strict=True) if raw}  # fmt: skip
        by_model &= got == model_cohort(cohort, tier, rows)
        table = standings([Member(m, sc) for m, sc in rows], tier, league, cfg)
        ours = {o.member: o.fields() for o in cohort_outcomes(cohort, table, league)}
        by_standings &= got == ours
    idle = sorted(world.idle)[:: max(1, len(world.idle) // 200)]
    found = s.client.hmget(outcome, idle) if idle else []
    idle_ok = all(raw and json.loads(raw) == model_idle(world.idle[m])
                  for m, raw in zip(idle, found, strict=True))  # fmt: skip
    names = [m for c in sample for m, _ in world.cohorts[c][1]] + idle
    tiers = s.client.hmget(keys.league_tier(BOARD), names) if names else []
    after = [json.loads(raw)["tier_after"] for raw in s.client.hmget(outcome, names)] if names \
        else []  # fmt: skip
    closed = s.client.hget(keys.league_state(BOARD), f"closed:{period.id}")
    count = world.members + len(world.idle)
    return [
        (f"outcomes: {total:,} = {world.members:,} members + {len(world.idle):,} idle",
         total == count),
        (f"{len(sample)} cohorts' outcomes equal an independent model", by_model),
        (f"{len(sample)} cohorts' outcomes equal seasons.leagues.standings", by_standings),
        (f"{len(idle)} idle members demoted one tier (bronze stays)", idle_ok),
        ("the tier hash holds each sampled member's tier_after", tiers == after),
        ("closed:<P> counts every member",
         closed is not None and json.loads(closed)["members"] == count),
    ]  # fmt: skip


def _own(command: Any) -> bool:
    """A command the bench sends itself (SLOWLOG RESET, INFO), not the close."""
    text = command.decode() if isinstance(command, bytes) else str(command)
    return text.split(" ", 1)[0].upper() in ("SLOWLOG", "INFO", "CONFIG")


def calls_and_usec(client: Any) -> dict[str, tuple[int, int]]:
    """Calls of and microseconds in each command so far (``INFO commandstats``)."""
    stats = client.info("commandstats")
    return {n.removeprefix("cmdstat_"): (int(r["calls"]), int(r["usec"])) for n, r in stats.items()}


# --- 3. reads -----------------------------------------------------------------------------


def run_reads(url: str, sizes: LeagueSizes, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Leagues: a cohort read against a page read",
        f"one client, sequential reads on a league board of {sizes.members:,} members (week "
        f"board, cohorts of {SIZE}): Seasons.league(board, member) of a random member "
        f"against Seasons.top(board, 'week', limit={SIZE}) at a random offset; "
        f"{sizes.reads:,} reads each, in {CHUNKS} slices alternating",
        "reads/s",
    )
    with Seasons(settings(url, NS_READS, calendar, True), clock=calendar.clock()) as s:
        names = pool(sizes.members)
        rnd = random.Random(3)
        for i in range(0, sizes.members, 1000):
            s.submit_many([{"board": BOARD, "member": m, "value": rnd.randint(1, 500)}
                           for m in names[i : i + 1000]])  # fmt: skip
        asked = [rnd.choice(names) for _ in range(sizes.reads)]
        offsets = [rnd.randrange(0, sizes.members - SIZE + 1) for _ in range(sizes.reads)]
        sides: dict[str, Callable[[int], object]] = {
            "cohort read": lambda i: s.league(BOARD, asked[i]),
            "page read": lambda i: s.top(BOARD, "week", limit=SIZE, offset=offsets[i]),
        }
        cost = paired(s.client, sides, sizes.reads, CHUNKS)
        period = week_of(s, calendar)
        checks = check_reads(s, period, asked[:20], offsets[:20])
    for label, ok in checks:
        section.check(label, ok)
    for name in sides:
        section.row(name, sizes.reads / cost.total(name, wall=True))
    for name in sides:
        section.row(f"{name}: Redis time", cost.total(name) / sizes.reads, "µs/read")
    section.decimals = 1
    speed = 1 / cost.ratio("cohort read", "page read", wall=True)
    section.ratio("cohort / page, reads/s", speed, ">=", READ_TARGET)
    section.ratio("cohort / page, Redis time per read", cost.ratio("cohort read", "page read"))
    return section


def check_reads(s: Seasons, period: win.Period, asked: list[str], offsets: list[int]
                ) -> list[tuple[str, bool]]:  # fmt: skip
    """Each cohort read holds its member's cohort (from ``joined``) with the board's scores,
    in the board's order; each page read is ZRANGE REV's slice."""
    keys = Keys(s.settings.namespace)
    board = keys.window(BOARD, "week", period.id)
    joined = keys.league(BOARD, period.id, "joined")
    cohorts_ok = pages_ok = True
    for member in asked:
        read = s.league(BOARD, member)
        place = s.client.zscore(joined, member)
        assert place is not None
        c = int(place) // COHORT_SPAN
        names = s.client.zrangebyscore(joined, c * COHORT_SPAN, c * COHORT_SPAN + COHORT_SPAN - 1)
        scores = s.client.zmscore(board, names)
        want = sorted(zip(scores, names, strict=True), key=lambda x: (x[0], x[1].encode()),
                      reverse=True)  # fmt: skip
        rows = getattr(read, "rows", [])
        cohorts_ok &= len(names) == SIZE and [(r.score, r.member) for r in rows] == want
    for offset in offsets:
        page = s.top(BOARD, "week", limit=SIZE, offset=offset)
        raw = s.client.zrange(board, offset, offset + SIZE - 1, desc=True, withscores=True)
        pages_ok &= [(e.member, e.score) for e in page.entries] == [(m, x) for m, x in raw]
    return [
        (f"{len(asked)} cohort reads: {SIZE} members, the board's scores, in its order",
         cohorts_ok),
        (f"{len(offsets)} page reads: ZRANGE REV's {SIZE} members and scores", pages_ok),
    ]  # fmt: skip


def run(url: str, sizes: LeagueSizes, calendar: Calendar | None = None) -> list[Section]:
    """The three figures, each on an emptied server (``python -m bench --only leagues``)."""
    import redis

    calendar = calendar or Calendar.for_today()
    out = []
    for figure in (
        lambda: run_ingest(url, sizes, calendar),
        lambda: run_close(url, sizes.close_members, calendar),
        lambda: run_reads(url, sizes, calendar),
    ):
        redis.Redis.from_url(url).flushall()
        out.append(figure())
    return out


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a command
    import argparse

    from bench.common import own_redis

    parser = argparse.ArgumentParser(prog="python -m bench.leagues",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--members", type=int, default=None, help="of the close")
    opts = parser.parse_args(argv)
    sizes = QUICK if opts.quick else FULL
    if opts.members:
        sizes = LeagueSizes(sizes.members, sizes.batches, opts.members, sizes.reads)
    with own_redis() as server:
        sections = run(server.url, sizes)
    for section in sections:
        print(section.render() + "\n", flush=True)
    return 0 if all(s.correct for s in sections) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
