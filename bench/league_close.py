"""The close figure of ``python -m bench --only leagues`` (:mod:`bench.leagues`), and the league
the bench's league figures use.

Period P (the current week) of ``members`` members in cohorts of 30, its state written
straight into Redis with pipelines (:func:`populate`), then
:meth:`jobs.league_close.LeagueClose.close` of it as steps of a run, each step measured
(:class:`MeasuredRun`): wall time, Redis's time and the longest single command (SLOWLOG,
reset before each step). Target: the longest command <= 10 ms. Checks: one outcome per member
and idle member, the outcomes of a sample of cohorts equal :func:`seasons.leagues.standings`
and an independent model (:func:`model_cohort`), the idle members' outcomes, the tiers
written.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import BOARD, Calendar, Section, make_settings
from seasons import Seasons
from seasons import windows as win
from seasons.calendar import day_start
from seasons.config import Settings
from seasons.jobs.league_close import LeagueClose
from seasons.jobs.state import JobState, Run, no_checkpoint
from seasons.keys import Keys
from seasons.leagues import COHORT_SPAN, cohort_outcomes, standings
from seasons.lifecycle import Lifecycle
from seasons.models import LeagueOverview
from seasons.scripts import names as script_names
from seasons.scripts import script

NS_CLOSE = "bench-league-close"
TIERS = ["bronze", "silver", "gold", "sapphire", "diamond"]
LEAGUE: dict[str, Any] = {
    "window": "week", "tiers": TIERS, "cohort_size": 30, "min_cohort": 10,
    "promote": 5, "demote": 5, "idle": "demote",
}  # fmt: skip
SIZE = LEAGUE["cohort_size"]
LONGEST_TARGET_MS = 10.0  # the close's longest single command, at most
SLOWER_THAN_US = 500  # SLOWLOG threshold during the close
OVERVIEW_READS = 50
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
    week board, ``joined``, ``cohorts``, ``counts``, the tier hash (each member its cohort's
    tier; a bronze member every other time none: new), the idle members' tiers, and the
    league state's ``first``/``first_start``."""
    keys = Keys(s.settings.namespace)
    board = keys.window(BOARD, period.window, period.id)
    part = {p: keys.league(BOARD, period.id, p) for p in ("joined", "cohorts", "counts")}
    tiers = keys.league_tier(BOARD)
    pipe = s.client.pipeline(transaction=False)
    start = int(day_start(period.first, s.settings.zone).timestamp())
    pipe.hset(keys.league_state(BOARD), mapping={"first": period.id, "first_start": start})
    for cohort, (tier, rows) in world.cohorts.items():
        pipe.hset(part["cohorts"], str(cohort), json.dumps({"group": "", "tier": tier}))
        pipe.hincrby(part["counts"], f"cohorts:{tier}", 1)
        pipe.hincrby(part["counts"], f"members:{tier}", len(rows))
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
            overview = measure_overview(s, period, world)
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
    overview_ok, overview_us = overview
    section.check("the overview's members and cohorts per tier are the world's", overview_ok)
    for label, ok in checks:
        section.check(label, ok)
    section.row("overview read: Redis time", overview_us / 1000,
                "Seasons.league(board, period=P), before the close")  # fmt: skip
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


def measure_overview(s: Seasons, period: win.Period, world: World) -> tuple[bool, float]:
    """Whether the league overview of ``period`` counts the world's members and cohorts per
    tier, and its Redis time per read (µs, INFO commandstats over OVERVIEW_READS reads)."""
    want: dict[str, tuple[int, int]] = {}
    for tier, rows in world.cohorts.values():
        members, cohorts = want.get(tier, (0, 0))
        want[tier] = (members + len(rows), cohorts + 1)
    s.client.config_resetstat()
    for _ in range(OVERVIEW_READS):
        got = s.league(BOARD, period=period.id)
    usec = int(s.client.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))
    assert isinstance(got, LeagueOverview)
    counted = {t.tier: (t.members, t.cohorts) for t in got.tiers if t.members or t.cohorts}
    return counted == want, usec / OVERVIEW_READS


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
        table = standings([m.encode() for m, _ in rows], [sc for _, sc in rows], tier, league, cfg)
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
