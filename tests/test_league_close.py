"""The close of a league period (jobs/league_close.py,
docs/leagues.md#the-close-of-a-period), on a real Redis: the outcomes, tiers and archive file
equal an independent model of the issue's rules
(issue 24 §4); a SIGKILL at every checkpoint ends as the fault-free run; the worker's day
close runs it on a board's last day of the period; forget removes a member from the league.

The cohorts are written straight into Redis by :func:`put_cohorts`, in the layout of
seasons/keys.py (Keys.league): the write path's join is built apart.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from worker_support import local, toml_text

from seasons import Seasons
from seasons import windows as win
from seasons.calendar import day_start
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.connection import make_client
from seasons.jobs.league_close import COHORT_SPAN, LeagueClose, archive_paths
from seasons.jobs.state import JobState, no_checkpoint
from seasons.keys import Keys
from seasons.lifecycle import Lifecycle
from seasons.manifest import Manifest, sha256_of
from seasons.scripts import Scripts

BOARD = "xp"
TIERS = ["bronze", "silver", "gold"]
NS = "seasons"
AT = datetime(2030, 1, 20, 12, tzinfo=UTC)
ROOT = Path(__file__).resolve().parent.parent


# --- the reference model (the rules, written apart from seasons.leagues) ---------


def model_cohort(
    tier: str, members: list[dict[str, Any]], lg: dict[str, Any], order: str, ties: str,
    cohort: int,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """member -> outcome fields of one cohort. ``members``: {member, score (None: none),
    reached, hidden} in join order."""
    ranked = [m for m in members if m["score"] is not None and not m["hidden"]]

    def better_first(m: dict[str, Any]) -> Any:
        s = -m["score"] if order == "desc" else m["score"]
        b = m["member"].encode()
        if ties == "earliest":
            return (s, m["reached"], b)
        if ties == "member" and order == "desc":  # Redis's ZRANGE REV: reverse byte order
            return (s, tuple(-x for x in b) + (1,))
        return (s, b)

    ranked.sort(key=better_first)
    n = len(ranked)
    rule = next((r for r in lg.get("tier_rules", []) if r["tier"] == tier), {})

    def amount(name: str) -> int:
        for src in (rule, lg):
            if name in src:
                return int(src[name])
            if f"{name}_percent" in src:
                return int(Fraction(n) * Fraction(str(src[f"{name}_percent"])) / 100)
        return 5

    up, down = amount("promote"), amount("demote")
    if tier == TIERS[-1]:
        up = 0
    if tier == TIERS[0] or n < lg["min_cohort"]:
        down = 0
    up, down = min(up, n), min(down, n)
    out: dict[str, dict[str, Any]] = {}
    for i, m in enumerate(ranked):
        if ties in ("shared", "dense"):
            first = next(j for j in range(n) if ranked[j]["score"] == m["score"])
            distinct = len({r["score"] for r in ranked[:first]})
            rank = first + 1 if ties == "shared" else distinct + 1
        else:
            first, rank = i, i + 1
        # the tie group's first position decides: a group across a boundary gets the better zone
        zone = "promote" if first < up else "demote" if first >= n - down else "stay"
        t = TIERS.index(tier)
        after = TIERS[min(t + 1, 2)] if zone == "promote" else TIERS[max(t - 1, 0)] if (
            zone == "demote") else tier  # fmt: skip
        reward = next(
            (r["reward"] for r in lg.get("rewards", []) if r["lo"] <= rank <= r["hi"]), None
        )
        out[m["member"]] = {
            "tier_before": tier, "tier_after": after, "cohort": cohort, "rank": rank,
            "score": m["score"], "zone": zone, "reward": reward,
        }  # fmt: skip
    for m in members:
        if m["member"] not in out:
            out[m["member"]] = {
                "tier_before": tier, "tier_after": tier, "cohort": cohort, "rank": None,
                "score": None if m["hidden"] else m["score"], "zone": None, "reward": None,
            }  # fmt: skip
    return out


def model_close(world: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i, (tier, members) in enumerate(world["cohorts"], start=1):
        out |= model_cohort(tier, members, world["league"], world["order"], world["ties"], i)
    for member, tier in world["tiers"].items():
        if member not in out:  # a tier and no cohort in the period: idle
            t = TIERS.index(tier)
            down = world["league"]["idle"] == "demote" and t > 0
            out[member] = {
                "tier_before": tier, "tier_after": TIERS[t - 1] if down else tier,
                "cohort": None, "rank": None, "score": None,
                "zone": "demote" if down else "stay", "reward": None,
            }  # fmt: skip
    return out


def model_lines(outcomes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"member": m, **outcomes[m]} for m in sorted(outcomes, key=str.encode)]


# --- Redis as the join leaves it -----------------------------------------------------


def put_cohorts(client: Any, keys: Keys, world: dict[str, Any], period: win.Period,
                zone: Any) -> None:  # fmt: skip
    """The cohorts, tiers, scores, reach times and moderation of ``world``, written in the
    layout of seasons/keys.py (what the join and the write path leave)."""
    board_key = keys.window(BOARD, period.window, period.id)
    pipe = client.pipeline(transaction=False)
    pipe.hset(keys.league_state(BOARD), mapping={
        "first": period.id, "first_start": str(int(day_start(period.first, zone).timestamp())),
    })  # fmt: skip
    for i, (tier, members) in enumerate(world["cohorts"], start=1):
        pipe.hset(keys.league(BOARD, period.id, "cohorts"), str(i),
                  json.dumps({"group": "", "tier": tier}))  # fmt: skip
        for place, m in enumerate(members):
            pipe.zadd(
                keys.league(BOARD, period.id, "joined"), {m["member"]: i * COHORT_SPAN + place}
            )
            if m["score"] is not None:
                key = keys.twin_of(board_key) if m["hidden"] else board_key
                pipe.zadd(key, {m["member"]: m["score"]})
                if world["ties"] == "earliest":
                    pipe.zadd(keys.reached(BOARD, period.window, period.id),
                              {m["member"]: m["reached"]})  # fmt: skip
            if m["hidden"]:
                pipe.hset(keys.moderation(BOARD), m["member"], "hidden")
    for n, member in enumerate(world["waiting"], start=1):  # waiting for the period before
        pipe.zadd(keys.league(BOARD, period.id, "joined"), {member: -n})
    if world["tiers"]:
        pipe.hset(keys.league_tier(BOARD), mapping=world["tiers"])
    pipe.execute()


# --- worlds ------------------------------------------------------------------------------


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    ties = draw(st.sampled_from(["member", "shared", "dense", "earliest"]))
    order = draw(st.sampled_from(["desc", "asc"]))
    lg: dict[str, Any] = {"min_cohort": draw(st.integers(1, 6)), "cohort_size": 12,
                          "idle": draw(st.sampled_from(["demote", "stay"]))}  # fmt: skip
    for name in ("promote", "demote"):
        if draw(st.booleans()):
            lg[name] = draw(st.integers(0, 5))
        else:
            lg[f"{name}_percent"] = draw(st.sampled_from([0, 10, 20, 25, 33.3, 50, 100]))
    if draw(st.booleans()):
        lg["tier_rules"] = [{"tier": "gold", "demote": draw(st.integers(0, 4))}]
    if draw(st.booleans()):
        lg["rewards"] = [{"lo": 1, "hi": 1, "reward": "chest"}, {"lo": 2, "hi": 3, "reward": "box"}]
    names = iter(f"m{i:03d}" for i in range(1000))
    cohorts = []
    for _ in range(draw(st.integers(0, 4))):
        tier = draw(st.sampled_from(TIERS))
        members = []
        for _ in range(draw(st.integers(1, 12))):
            score = draw(st.one_of(st.none(), st.integers(0, 4)))  # few values: ties everywhere
            members.append({
                "member": next(names), "score": None if score is None else float(score),
                "reached": draw(st.integers(0, 3)) * 1000 + len(members),
                "hidden": draw(st.integers(0, 9)) == 0,
            })  # fmt: skip
        cohorts.append((tier, members))
    members_in = [m["member"] for _, ms in cohorts for m in ms]
    tiers = {}
    for m in members_in:  # members that had a tier before (the cohort's, as the join gives)
        if draw(st.booleans()):
            tiers[m] = next(t for t, ms in cohorts if any(x["member"] == m for x in ms))
    idle = [next(names) for _ in range(draw(st.integers(0, 5)))]
    tiers |= {m: draw(st.sampled_from(TIERS)) for m in idle}
    waiting = [m for m in idle if draw(st.booleans())]  # an event of P+... scored, no cohort
    return {"ties": ties, "order": order, "league": lg, "cohorts": cohorts, "tiers": tiers,
            "waiting": waiting}  # fmt: skip


def league_toml(world: dict[str, Any]) -> dict[str, Any]:
    lg = {k: v for k, v in world["league"].items() if k not in ("rewards",)}
    lg["tiers"] = TIERS
    lg["rewards"] = [{"ranks": f"{r['lo']}-{r['hi']}", "reward": r["reward"]}
                     for r in world["league"].get("rewards", [])]  # fmt: skip
    return lg


def board_settings(factory: Callable[..., Settings], tmp: Path, world: dict[str, Any]) -> Settings:
    return factory(
        timezone="Europe/Berlin", archive={"dir": str(tmp)},
        boards={BOARD: {"ties": world["ties"], "order": world["order"],
                        "league": league_toml(world)}},
    )  # fmt: skip


class Parts:
    def __init__(self, cfg: Settings):
        self.settings = cfg
        self.client = make_client(cfg.redis)
        self.keys = Keys(cfg.namespace)
        self.scripts = Scripts(self.client)
        self.lifecycle = Lifecycle(self.client, self.keys, cfg)
        self.close = LeagueClose(self.client, self.scripts, cfg, self.keys, self.lifecycle,
                                 lambda: AT)  # fmt: skip
        self.period = win.period_of_day("week", date(2030, 1, 9), cfg)
        assert self.period is not None


def read_outcomes(r: redis.Redis, keys: Keys, period: str) -> dict[str, dict[str, Any]]:
    found = r.hgetall(keys.league(BOARD, period, "outcome"))
    return {k.decode(): json.loads(v) for k, v in found.items()}


def read_file(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(world=worlds())
def test_the_close_equals_the_model(world, settings_factory, r, tmp_path) -> None:
    r.flushall()
    folder = tmp_path / f"a{abs(hash(json.dumps(world, sort_keys=True, default=str)))}"
    cfg = board_settings(settings_factory, folder, world)
    p = Parts(cfg)
    put_cohorts(p.client, p.keys, world, p.period, cfg.zone)
    assert p.close.due(BOARD, p.period)
    run = JobState(p.client, p.keys).run("close_day", "t", no_checkpoint, lambda: AT)
    p.close.close(run, BOARD, p.period, AT)

    expected = model_close(world)
    assert read_outcomes(r, p.keys, p.period.id) == expected
    tiers = {k.decode(): v.decode() for k, v in r.hgetall(p.keys.league_tier(BOARD)).items()}
    assert tiers == {m: o["tier_after"] for m, o in expected.items()}
    data, manifest = archive_paths(cfg, BOARD, "week", p.period.id)
    assert read_file(data) == model_lines(expected)
    m = Manifest.load(manifest)
    assert (m.count, m.sha256) == (len(expected), sha256_of(data))
    closed = json.loads(r.hget(p.keys.league_state(BOARD), f"closed:{p.period.id}"))
    zones = list(expected.values())
    moved = [o["zone"] for o in zones if o["tier_after"] != o["tier_before"]]
    assert closed == {
        "period": p.period.id, "cohorts": len(world["cohorts"]), "members": len(expected),
        "promoted": moved.count("promote"), "demoted": moved.count("demote"),
        "stayed": sum(o["tier_after"] == o["tier_before"] for o in zones),
        "idle": sum(o["cohort"] is None for o in zones),
        "rewarded": sum(o["reward"] is not None for o in zones),
    }  # fmt: skip
    events = [f for _, f in r.xrange(f"{NS}:lifecycle")]
    assert [e[b"id"].decode() for e in events] == [f"league_closed:{BOARD}:{p.period.id}"]

    # Run again from scratch (a new run record): nothing changes, the files are accepted.
    before = read_outcomes(r, p.keys, p.period.id)
    run2 = JobState(p.client, p.keys).run("close_day", "t2", no_checkpoint, lambda: AT)
    p.close.close(run2, BOARD, p.period, AT + timedelta(hours=1))
    assert read_outcomes(r, p.keys, p.period.id) == before
    assert len(r.xrange(f"{NS}:lifecycle")) == 1
    p.client.close()


def test_a_different_archive_already_there_is_an_error(settings_factory, r, tmp_path) -> None:
    world = {"ties": "shared", "order": "desc", "waiting": [], "tiers": {},
             "league": {"min_cohort": 1, "idle": "stay", "promote": 1, "demote": 1},
             "cohorts": [("silver", [
                 {"member": "a", "score": 3.0, "reached": 0, "hidden": False},
                 {"member": "b", "score": 1.0, "reached": 0, "hidden": False},
             ])]}  # fmt: skip
    cfg = board_settings(settings_factory, tmp_path, world)
    p = Parts(cfg)
    put_cohorts(p.client, p.keys, world, p.period, cfg.zone)
    data, _ = archive_paths(cfg, BOARD, "week", p.period.id)
    data.parent.mkdir(parents=True)
    data.write_bytes(gzip.compress(b'{"member":"x"}\n'))
    run = JobState(p.client, p.keys).run("close_day", "t", no_checkpoint, lambda: AT)
    from seasons.errors import ArchiveExists

    with pytest.raises(ArchiveExists):
        p.close.close(run, BOARD, p.period, AT)
    assert read_file(data) == [{"member": "x"}]  # never overwritten
    assert r.hget(p.keys.league_state(BOARD), f"closed:{p.period.id}") is None


def test_no_first_period_closes_nothing(settings_factory, r, tmp_path) -> None:
    world = {"ties": "member", "order": "desc", "league": {"min_cohort": 1, "idle": "stay"}}
    p = Parts(board_settings(settings_factory, tmp_path, world))
    assert not p.close.due(BOARD, p.period)
    r.hset(p.keys.league_state(BOARD), mapping={"first": "x", "first_start": str(2**40)})
    assert not p.close.due(BOARD, p.period)  # the period starts before the league's first


# --- through the worker's day close, and SIGKILL at every checkpoint ---------------------


DRIVER = """
import sys
from datetime import datetime
from seasons.config import load_settings
from seasons.jobs.state import fault_from_env
from seasons.jobs.worker import Worker
from seasons import Seasons
from seasons.clock import ManualClock

clock = ManualClock(datetime.fromisoformat(sys.argv[1]))
worker = Worker(Seasons(load_settings(), clock=clock), fault=fault_from_env())
worker.tick(clock())
worker.shutdown()
print("TICKED", flush=True)
"""


def today() -> date:
    from zoneinfo import ZoneInfo

    return datetime.now(ZoneInfo("Europe/Berlin")).date()


@pytest.fixture
def played(settings_factory, r, tmp_path) -> dict[str, Any]:
    """A league board played through the current week with real events (its cohorts put in
    place as the join would), the week's last day not yet closed."""
    lg = {"tiers": TIERS, "min_cohort": 2, "cohort_size": 4, "promote": 1, "demote": 1,
          "idle": "demote", "rewards": [{"ranks": "1", "reward": "chest"}]}  # fmt: skip
    cfg = settings_factory(
        timezone="Europe/Berlin", archive={"dir": str(tmp_path / "archive")},
        worker={"lock_ttl": 1.0},
        boards={BOARD: {"windows": ["day", "week", "season"], "ties": "shared", "league": lg}},
    )  # fmt: skip
    period = win.period_of_day("week", today(), cfg)
    assert period is not None
    clock = ManualClock(local(period.first, 10))
    app = Seasons(cfg, clock=clock)
    keys = Keys(cfg.namespace)
    members = [f"p{i}" for i in range(10)]
    scores = [5, 3, 3, 9, 1, 7, 7, 2, 2, 4]
    pairs = zip(members, scores, strict=True)
    app.submit_many([{"board": BOARD, "member": m, "value": v} for m, v in pairs])
    cohorts = [("silver", members[0:4]), ("bronze", members[4:8]), ("gold", members[8:10])]
    world = {"ties": "shared", "order": "desc", "waiting": ["late"],
             "tiers": {"p0": "silver", "p9": "gold", "idle1": "gold", "idle2": "bronze"},
             "cohorts": [(t, [{"member": m, "score": None, "reached": 0, "hidden": False}
                              for m in ms]) for t, ms in cohorts]}  # fmt: skip
    put_cohorts(app.client, keys, world, period, cfg.zone)
    app.close()
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    at = local(period.last + timedelta(days=1), 3)  # the week's last day closes
    for w in world["cohorts"]:
        for m in w[1]:
            m["score"] = float(scores[members.index(m["member"])])
    world["league"] = {**lg, "rewards": [{"lo": 1, "hi": 1, "reward": "chest"}]}
    return {"settings": cfg, "period": period, "env": env, "at": at, "world": world,
            "keys": keys}  # fmt: skip


def tick(played: dict[str, Any], *, fault: str | None = None, trace: bool = False) -> Any:
    env = dict(played["env"])
    if fault:
        env["SEASONS_FAULT_AT"] = fault
    if trace:
        env["SEASONS_FAULT_TRACE"] = "1"
    return subprocess.run(
        [sys.executable, "-c", DRIVER, played["at"].isoformat()], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def state_of(r: redis.Redis, played: dict[str, Any]) -> Any:
    keys, pid = played["keys"], played["period"].id
    data, manifest = archive_paths(played["settings"], BOARD, "week", pid)
    events = [
        (f[b"id"].decode(), json.loads(f[b"data"]))
        for _, f in r.xrange(f"{NS}:lifecycle")
        if f[b"type"] == b"league_closed"
    ]
    return (
        read_outcomes(r, keys, pid),
        {k.decode(): v.decode() for k, v in r.hgetall(keys.league_tier(BOARD)).items()},
        data.read_bytes(),
        json.loads(manifest.read_text())["sha256"],
        events,
        r.hget(keys.league_state(BOARD), f"closed:{pid}"),
    )


def test_the_day_close_runs_the_league_close_and_survives_a_kill_anywhere(played, r) -> None:
    from worker_support import dump_db, load_db

    # A first tick before the week's last day ends: the worker's first start (its namespace
    # marker) and the days before are behind it, so a reload of this dump is no data loss.
    warm = tick({**played, "at": local(played["period"].last, 12)})
    assert warm.returncode == 0, warm.stderr
    assert r.hget(played["keys"].league_state(BOARD), "close:" + played["period"].id) is None
    before = dump_db(r)
    clean = tick(played, trace=True)
    assert clean.returncode == 0, clean.stderr
    points = [ln.split(" ", 1)[1] for ln in clean.stdout.splitlines()
              if ln.startswith("CHECKPOINT ")]  # fmt: skip
    league_points = [p for p in points if "/league:" in p]
    assert any(":cohorts:" in p for p in league_points)
    assert any(":idle:" in p for p in league_points)
    expected = state_of(r, played)
    assert expected[0] == model_close(played["world"])
    assert len(expected[4]) == 1

    data, manifest = archive_paths(played["settings"], BOARD, "week", played["period"].id)
    first = points.index(league_points[0]) - 1  # from the step before the league's
    for point in points[first:]:
        load_db(r, before)
        data.unlink(missing_ok=True)
        manifest.unlink(missing_ok=True)
        # killed at this checkpoint, then killed again at each later one, then finished
        killed = tick(played, fault=point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        for lock in r.scan_iter(match=f"{NS}:lock:*"):
            r.delete(lock)  # as if the dead worker's lock ran out
        final = tick(played)
        assert final.returncode == 0, (point, final.stderr)
        assert state_of(r, played) == expected, point


def test_forget_removes_the_member_from_the_league(settings_factory, r, tmp_path) -> None:
    world = {"ties": "member", "order": "desc", "waiting": ["w"], "tiers": {"a": "gold"},
             "league": {"min_cohort": 1, "idle": "stay"},
             "cohorts": [("gold", [{"member": m, "score": 1.0, "reached": 0, "hidden": False}
                                   for m in ("a", "b", "w")])]}  # fmt: skip
    cfg = board_settings(settings_factory, tmp_path, world)
    p = Parts(cfg)
    put_cohorts(p.client, p.keys, world, p.period, cfg.zone)
    later = p.period.id.replace("2030", "2031")  # another period still in Redis
    r.zadd(p.keys.league(BOARD, later, "joined"), {"a": COHORT_SPAN, "w": -1})
    run = JobState(p.client, p.keys).run("close_day", "t", no_checkpoint, lambda: AT)
    p.close.close(run, BOARD, p.period, AT)
    assert b"a" in r.hkeys(p.keys.league(BOARD, p.period.id, "outcome"))

    app = Seasons(cfg, clock=ManualClock(AT))
    found = app.forget("a")
    app.close()
    assert found.boards[BOARD].league
    assert r.hget(p.keys.league_tier(BOARD), "a") is None
    assert r.hget(p.keys.league(BOARD, p.period.id, "outcome"), "a") is None
    for pid in (p.period.id, later):
        assert r.zscore(p.keys.league(BOARD, pid, "joined"), "a") is None
    # the others stay
    assert r.hexists(p.keys.league_tier(BOARD), "b")
    assert r.hexists(p.keys.league(BOARD, p.period.id, "outcome"), "b")
    assert r.zscore(p.keys.league(BOARD, later, "joined"), "w") == -1
