"""The alltime window: one board per board that never expires, exact after its day keys are
gone, because each day close folds the closed day into the window's base (once, in order)
and the repair recomputes base + the days after the last one folded.

Simulated time runs on a ManualClock; Redis's TTLs are absolute (EXPIREAT) on its real
clock, which lies behind the simulation, so :func:`expire_due` deletes every key whose
EXPIREAT the simulation has passed, as Redis would have. Compared with the reference model
(tests/reference.py ``alltime``)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from reference import alltime, zset
from worker_support import TICK_DRIVER, Sim, checkpoints, local, today, toml_text

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BadPeriod, BatchRejected
from seasons.jobs.locks import locked
from seasons.jobs.registry import closes_of, rollup_of, sweeper_of
from seasons.jobs.rollup import DaysExpired, FoldBusy, fold_day, fold_lock
from seasons.jobs.worker import Worker

ROOT = Path(__file__).resolve().parent.parent
NS = "seasons"
ALLTIME = ["day", "week", "season", "alltime"]
BOARDS: dict[str, Any] = {
    "kills": {"windows": ALLTIME},  # sum
    "best": {"aggregate": "max", "windows": ALLTIME},
    "fastest": {"aggregate": "min", "order": "asc", "ties": "shared", "windows": ALLTIME},
    "latest": {"aggregate": "set", "windows": ALLTIME},
    "plain": {},  # no alltime window
}
KEPT = [b for b, cfg in BOARDS.items() if "alltime" in cfg.get("windows", [])]


def make_settings(factory: Any, tmp_path: Path, boards: dict[str, Any] = BOARDS,
                  **more: Any) -> Settings:  # fmt: skip
    return factory(**{
        "timezone": "Europe/Berlin", "retention": "P3D", "boards": boards,
        # Weeks begin with the seasons, on today's weekday, so the current week holds no day
        # older than the current season's first (within retention, whatever today is).
        "week_start": today().strftime("%A").lower(),
        "seasons": {"length_days": 7, "anchor": today().isoformat()},
        "archive": {"dir": str(tmp_path / "archive")}, **more,
    })  # fmt: skip


def board_key(board: str) -> str:
    return f"{NS}:{{{board}}}:alltime:all"


def base_key(board: str) -> str:
    return f"{NS}:{{{board}}}:base:alltime"


def day_key(board: str, day: date) -> str:
    return f"{NS}:{{{board}}}:day:{day}"


def folded(r: redis.Redis, board: str) -> date | None:
    found = r.hget(f"{NS}:{{{board}}}:state", "folded:alltime")
    return date.fromisoformat(found.decode()) if found else None


def expire_due(r: Any, now: datetime) -> int:
    """Delete every key whose EXPIREAT is at or before ``now`` (what Redis does at that time)."""
    stamp = now.timestamp() * 1000
    gone = [k for k in r.scan_iter(count=1000) if 0 < r.pexpiretime(k) <= stamp]
    for k in gone:
        r.delete(k)
    return len(gone)


def play(sim: Sim, r: Any, days: list[date], n: int = 6) -> None:
    for day in days:
        expire_due(r, local(day, 0.5))
        sim.play_day(day, n=n)
        expire_due(r, sim.clock())


def assert_exact(sim: Sim, r: Any, boards: list[str]) -> None:
    """Board and base of each of ``boards`` equal the reference model."""
    for b in boards:
        assert zset(r, board_key(b)) == alltime(sim.model, b), b
        through = folded(r, b)
        assert through is not None, b
        kept = [d for d in sim.model.days[b] if d <= through]
        assert zset(r, base_key(b)) == alltime(sim.model, b, kept), b
        assert r.ttl(board_key(b)) == -1 and r.ttl(base_key(b)) in (-1, -2), b


@pytest.mark.both_backends
def test_the_alltime_board_outlives_its_days_and_rebuilds_exactly(
    settings_factory, r, tmp_path: Path
) -> None:
    settings = make_settings(settings_factory, tmp_path)
    sim = Sim(settings, seed=21)
    days = [today() + timedelta(days=i) for i in range(10)]
    play(sim, r, days)
    now = sim.clock()
    # The first days' keys are gone (retention is 3 days), their events are not.
    for b in KEPT:
        for d in days[:5]:
            assert not r.exists(day_key(b, d))
        assert sim.model.days[b].get(days[0]), b
        assert folded(r, b) == days[-2]  # the day closes folded every day but today
    assert_exact(sim, r, KEPT)
    assert not r.exists(board_key("plain"), base_key("plain"))

    # A rebuild recomputes the board from base + open days: a damaged board comes back.
    rollup = rollup_of(sim.app.backend)
    for b in KEPT:
        r.zadd(board_key(b), {"intruder": 5, "p01": -1})
    done = rollup.rebuild(now, window="alltime")
    assert sorted(o.target for o in done) == sorted(board_key(b) for b in KEPT)
    assert_exact(sim, r, KEPT)
    r.zrem(board_key("kills"), "p02")
    everything = rollup.rebuild(now, board="kills")  # window "all" includes alltime
    assert board_key("kills") in [o.target for o in everything]
    for period in ("previous", str(days[3]), "S1", "all"):  # it holds every earlier day
        assert ("alltime", "all") in [
            (p.window, p.id) for p in rollup._rebuild_periods("all", period, now)
        ], period
    with pytest.raises(BadPeriod, match="one period"):
        rollup.rebuild(now, window="alltime", period="previous")

    # The CLI: a rebuild of the window, an export of its one period.
    state = CliState(clock=sim.clock, settings=settings)
    r.zadd(board_key("kills"), {"intruder": 1})
    result = CliRunner().invoke(cli, ["rebuild", "--window", "alltime", "--json"], obj=state)
    assert result.exit_code == 0, result.output
    assert r.zscore(board_key("kills"), "intruder") is None
    out = tmp_path / "alltime.jsonl"
    result = CliRunner().invoke(
        cli, ["export", "kills", "--window", "alltime", "--period", "all", "--out", str(out)],
        obj=CliState(clock=sim.clock, settings=settings),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {x["member"]: x["score"] for x in lines} == alltime(sim.model, "kills")
    assert_exact(sim, r, KEPT)

    # Reads of the window: current and its id "all" are the one period; history one point.
    for b in KEPT:
        want = alltime(sim.model, b)
        page = sim.app.top(b, "alltime", limit=100)
        assert page.period == "all" and page.total == len(want)
        assert {e.member: e.score for e in page.entries} == want
        assert sim.app.top(b, "alltime", period="all", limit=100) == page
        member = next(iter(want))
        points = sim.app.history(b, member, "alltime", last=30)
        assert [(p.period, p.score) for p in points] == [("all", want[member])]
    sim.close()


def test_a_day_that_expired_before_its_fold_is_a_gap(settings_factory, r, tmp_path, caplog):
    """The worker away longer than retention: the base misses days for good. That is logged
    and recorded; the board keeps what the write-through gave it (still exact here), and
    the repair refuses instead of recomputing it without those days."""
    settings = make_settings(settings_factory, tmp_path, boards={"kills": BOARDS["kills"]})
    sim = Sim(settings, seed=4)
    play(sim, r, [today() + timedelta(days=i) for i in range(3)])
    for i in range(3, 9):  # no worker: events only
        sim.clock.set(local(today() + timedelta(days=i), 12))
        sim.submit(sim.batch(5))
    sim.clock.set(local(today() + timedelta(days=9), 2))
    expire_due(r, sim.clock())
    caplog.set_level(logging.INFO)
    sim.worker.tick(sim.clock())
    warned = [m.getMessage() for m in caplog.records if m.levelno == logging.WARNING]
    gap = today() + timedelta(days=2)  # closed last: day 1; day 2's close never ran in time
    assert any(f"day {gap} expired before it was folded" in m for m in warned), warned
    state = f"{NS}:{{kills}}:state"
    assert r.hget(state, "gap:alltime") == str(gap).encode()
    assert folded(r, "kills") == today() + timedelta(days=8)  # the folds went on
    assert zset(r, board_key("kills")) == alltime(sim.model, "kills")  # written through
    r.zadd(board_key("kills"), {"p00": 1})
    with pytest.raises(DaysExpired, match="expired before it was folded"):
        rollup_of(sim.app.backend).rebuild(sim.clock(), window="alltime")
    assert rollup_of(sim.app.backend).run(sim.clock()) is not None  # the others still run
    assert r.zscore(board_key("kills"), "p00") == 1  # left as it was
    sim.close()


def test_backfill_of_a_folded_day_lands_in_the_base(settings_factory, r, tmp_path: Path) -> None:
    settings = make_settings(settings_factory, tmp_path)
    sim = Sim(settings, seed=8)
    days = [today() + timedelta(days=i) for i in range(4)]
    play(sim, r, days)
    yesterday = days[-2]
    assert folded(r, "kills") == yesterday
    noon = local(yesterday, 12)
    for board in ("kills", "best", "fastest"):
        events = [
            {"board": board, "member": "late-one", "value": 7, "ts": noon},
            {"board": board, "member": "p03", "value": 500, "ts": noon},
        ]
        sim.submit(events, backfill=True)
    assert zset(r, base_key("kills"))["late-one"] == 7
    assert_exact(sim, r, ["kills", "best", "fastest"])
    rollup_of(sim.app.backend).rebuild(sim.clock(), window="alltime")
    assert_exact(sim, r, ["kills", "best", "fastest"])
    # A set board's base does not know which day each value came from: refused, nothing
    # written.
    before = zset(r, base_key("latest")), zset(r, board_key("latest"))
    with pytest.raises(BatchRejected) as info:
        sim.app.submit_many(
            [{"board": "latest", "member": "p03", "value": 1, "ts": noon}], backfill=True
        )
    assert {p["code"] for p in info.value.details} == {"day_folded"}
    assert (zset(r, base_key("latest")), zset(r, board_key("latest"))) == before
    sim.close()


def test_forget_and_sweep(settings_factory, r, tmp_path: Path) -> None:
    # No season holds these days: nothing is archived, every other key runs out.
    later = today() + timedelta(days=100)
    settings = make_settings(
        settings_factory,
        tmp_path,
        boards={"kills": BOARDS["kills"]},
        seasons={"list": [{"id": "later", "start": later, "end": later}]},
    )
    sim = Sim(settings, seed=5)
    first = today()
    sim.clock.set(local(first, 10))
    for who in ("old-timer", "gone"):
        sim.submit([{"board": "kills", "member": who, "value": 3,
                     "metadata": {"name": who.upper()}}])  # fmt: skip
    play(sim, r, [first + timedelta(days=i) for i in range(1, 16)])
    now = sim.clock()
    holding = {
        k.decode() for k in r.scan_iter(match=f"{NS}:{{kills}}:*")
        if r.type(k) == b"zset" and r.zscore(k, "old-timer") is not None
    }  # fmt: skip
    assert holding == {board_key("kills"), base_key("kills")}  # every other key expired
    sweeper = sweeper_of(sim.app.backend)
    swept = sweeper.run(now)
    assert swept.unknown == []
    assert r.hget(f"{NS}:{{kills}}:meta", "old-timer") is not None
    assert r.ttl(board_key("kills")) == -1 and r.ttl(base_key("kills")) == -1
    report = sweeper.forget("gone", now)
    assert set(report["boards"]["kills"]["keys"]) == {board_key("kills"), base_key("kills")}
    for key in (board_key("kills"), base_key("kills")):
        assert r.zscore(key, "gone") is None
    assert r.hget(f"{NS}:{{kills}}:meta", "gone") is None
    rollup_of(sim.app.backend).rebuild(now, window="alltime")
    assert r.zscore(board_key("kills"), "gone") is None
    assert r.zscore(board_key("kills"), "old-timer") == 3
    sim.close()


# --- closes killed and closes meeting a repair --------------------------------------------


class Crash:
    def __init__(self, settings: Settings, env: dict[str, str], at: datetime, sim: Sim,
                 dump: dict[bytes, tuple[bytes, int]]):  # fmt: skip
        self.settings, self.env, self.at, self.sim, self.dump = settings, env, at, sim, dump

    def restore(self, r: redis.Redis) -> None:
        r.flushall()
        for k, (payload, expires) in self.dump.items():
            r.restore(k, expires if expires > 0 else 0, payload, absttl=expires > 0)

    def tick(self, fault: str | None = None, *, action: str = "kill", trace: bool = False,
             wait: bool = True) -> Any:  # fmt: skip
        env = dict(self.env)
        if fault:
            env["SEASONS_FAULT_AT"], env["SEASONS_FAULT"] = fault, action
        if trace:
            env["SEASONS_FAULT_TRACE"] = "1"
        proc = subprocess.Popen(
            [sys.executable, "-c", TICK_DRIVER, self.at.isoformat()], cwd=ROOT, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        if not wait:
            return proc
        out, err = proc.communicate(timeout=60)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


CRASH_BOARDS = {
    "kills": {"windows": ALLTIME},
    "late": {"windows": ["day", "week", "season"]},  # alltime from the crashed close on
}
LAST = 3  # the day the crashed close closes


@pytest.fixture
def crash(settings_factory, r, tmp_path: Path) -> Iterator[Crash]:
    """Days 0..3 played with a worker, on day 4 the close of day 3 is due; then the board
    ``late`` keeps alltime too (nothing folded for it yet: its first close folds every day
    still kept)."""
    before = make_settings(settings_factory, tmp_path, boards=CRASH_BOARDS,
                           worker={"lock_ttl": 1.0})  # fmt: skip
    sim = Sim(before, seed=13)
    play(sim, r, [today() + timedelta(days=i) for i in range(LAST + 1)])
    day4 = today() + timedelta(days=LAST + 1)
    sim.play_day(day4, hours=(0.5,))
    sim.app.close()
    boards = {"kills": CRASH_BOARDS["kills"], "late": {"windows": ALLTIME}}
    settings = make_settings(settings_factory, tmp_path, boards=boards, worker={"lock_ttl": 1.0})
    at = local(day4, 1.25)
    expire_due(r, at)
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    dump = {k: (r.dump(k), r.pexpiretime(k)) for k in r.scan_iter()}
    yield Crash(settings, env, at, sim, dump)


def assert_crash_exact(c: Crash, r: redis.Redis) -> None:
    model, last = c.sim.model, today() + timedelta(days=LAST)
    kept = [d for d in model.days["late"] if d >= today() + timedelta(days=1)]  # day 0 expired
    assert folded(r, "kills") == folded(r, "late") == last
    assert zset(r, base_key("kills")) == alltime(model, "kills", [d for d in model.days["kills"]
                                                                  if d <= last])  # fmt: skip
    assert zset(r, board_key("kills")) == alltime(model, "kills")
    assert zset(r, base_key("late")) == alltime(model, "late", [d for d in kept if d <= last])
    assert zset(r, board_key("late")) == alltime(model, "late", kept)
    assert r.hget(f"{NS}:job:close_day:{last}", "finished") is not None
    assert not list(r.scan_iter(match=f"{NS}:lock:*"))


def test_a_close_killed_at_every_checkpoint_folds_each_day_once(crash: Crash, r) -> None:
    clean = crash.tick(trace=True)
    assert clean.returncode == 0, clean.stderr
    assert_crash_exact(crash, r)
    last = today() + timedelta(days=LAST)
    points = [p for p in checkpoints(clean.stdout) if p.startswith(f"close_day:{last}/")]
    inner = [p for p in points if "/fold:alltime:late:" in p and not p.endswith(("start", "done"))]
    assert inner == [f"close_day:{last}/fold:alltime:late:{today() + timedelta(days=i)}"
                     for i in range(1, LAST + 1)]  # fmt: skip
    assert f"close_day:{last}/fold:alltime:kills:{last}" in points
    crash.restore(r)
    for point in points:
        killed = crash.tick(point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        for lock in r.scan_iter(match=f"{NS}:lock:*"):
            r.delete(lock)  # as if their TTLs ran out
    final = crash.tick()
    assert final.returncode == 0, final.stderr
    assert_crash_exact(crash, r)


def test_a_repair_waits_for_a_fold_in_progress(crash: Crash, r) -> None:
    """The close paused inside its fold (holding the fold lock): the rollup leaves the board
    alone, a rebuild says the board is busy; resumed, the close finishes exactly."""
    last = today() + timedelta(days=LAST)
    point = f"close_day:{last}/fold:alltime:late:{today() + timedelta(days=2)}"
    env = dict(crash.env, SEASONS_WORKER__LOCK_TTL="60")
    paused = Crash(crash.settings, env, crash.at, crash.sim, crash.dump)
    proc = paused.tick(point, action="pause", wait=False)
    try:
        assert proc.stdout.readline().strip() == f"PAUSED {point}"
        with Seasons(crash.settings, clock=ManualClock(crash.at)) as app:
            base = zset(r, base_key("late"))
            board = zset(r, board_key("late"))
            done = rollup_of(app.backend).run(crash.at)
            assert board_key("late") not in [o.target for o in done]
            assert board_key("kills") in [o.target for o in done]  # another lock
            with pytest.raises(FoldBusy):
                rollup_of(app.backend).rebuild(crash.at, board="late", window="alltime")
            assert (zset(r, base_key("late")), zset(r, board_key("late"))) == (base, board)
        out, err = proc.communicate("\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert_crash_exact(crash, r)


def test_a_fold_waits_for_a_repair_in_progress(crash: Crash, r) -> None:
    """A repair holding the lock (here: the test): the close stops before its fold and
    resumes at the next tick; the plan a repair builds is read under that lock."""
    last = today() + timedelta(days=LAST)
    with Seasons(crash.settings, clock=ManualClock(crash.at)) as app:
        worker = Worker(app)
        with locked(app.client, app.keys, fold_lock("kills", "alltime"), timedelta(seconds=60)):
            worker.tick(crash.at)
            assert folded(r, "kills") == last - timedelta(days=1)
            assert r.hget(f"{NS}:job:close_day:{last}", "finished") is None
        # The repair reads the day folded through and builds its plan with the lock held.
        rollup = rollup_of(app.backend)
        seen = []
        plan = rollup.plan

        def plan_and_look(board: str, period: Any, now: datetime, store: Any = None) -> Any:
            name = fold_lock(board, period.window)
            with locked(app.client, app.keys, name, timedelta(seconds=5)) as other:
                seen.append(other is None)
            return plan(board, period, now, store)

        rollup.plan = plan_and_look  # type: ignore[method-assign]
        rollup.rebuild(crash.at, window="alltime")
        assert seen == [True, True]
        worker.tick(crash.at + timedelta(minutes=2))
        worker.shutdown()
    assert_crash_exact(crash, r)


def test_folds_and_repairs_interleaved_count_each_day_once(settings_factory, r, tmp_path):
    """Day by day: a repair before and after each fold, writes in between, a fold run
    twice: the board is the model's after every step."""
    settings = make_settings(settings_factory, tmp_path, boards={
        b: BOARDS[b] for b in ("kills", "best", "latest")
    })  # fmt: skip
    sim = Sim(settings, seed=17)
    app = sim.app
    rollup = rollup_of(app.backend)
    closes = closes_of(app.backend, rollup=rollup)
    first = today()
    for i in range(6):
        day = first + timedelta(days=i)
        expire_due(r, local(day, 0.5))
        for hour in (0.5, 12):
            sim.clock.set(local(day, hour))
            sim.submit(sim.batch(8))
            rollup.run(sim.clock())
        sim.clock.set(local(day + timedelta(days=1), 1.5))
        for _ in range(2):  # a close run again folds nothing twice
            for d in closes.due_days(sim.clock()):
                assert closes.close_day(d, sim.clock())
            for b in settings.boards:
                assert zset(r, board_key(b)) == alltime(sim.model, b), (i, b)
                rollup.period(b, app.reads._resolve("alltime", "current", sim.clock()),
                              sim.clock())  # fmt: skip
                assert zset(r, board_key(b)) == alltime(sim.model, b), (i, b)
        assert_exact(sim, r, list(settings.boards))
    sim.close()


def test_a_day_is_folded_once_and_in_order(settings_factory, r, tmp_path: Path) -> None:
    """The fold script itself refuses a day folded already, or older than the last one
    folded, whoever calls it: the check and the record are one atomic call."""
    boards = {b: BOARDS[b] for b in ("kills", "best", "latest")}
    settings = make_settings(settings_factory, tmp_path, boards=boards)
    with Seasons(settings) as app:
        d1, d2 = today(), today() + timedelta(days=1)
        for b in boards:
            r.zadd(day_key(b, d1), {"a": 5, "b": 1})
            r.zadd(day_key(b, d2), {"a": 2, "c": 4})
        want = {
            "kills": {"a": 7, "b": 1, "c": 4},
            "best": {"a": 5, "b": 1, "c": 4},
            "latest": {"a": 2, "b": 1, "c": 4},  # the later day's value
        }
        for b in boards:
            fold = [fold_day(app.client, app.scripts, app.keys, settings, b, "alltime", d)
                    for d in (d1, d1, d2, d2, d1)]  # fmt: skip
            assert fold == [True, False, True, False, False], b
            assert zset(r, base_key(b)) == want[b], b
            assert folded(r, b) == d2 and r.ttl(base_key(b)) == -1
        assert not r.exists(f"{NS}:{{latest}}:tmp:union")


@pytest.mark.both_backends
def test_http_reads_and_the_boards_listing(settings_factory, r, tmp_path: Path) -> None:
    import warnings

    from seasons.http.app import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    settings = make_settings(settings_factory, tmp_path)
    sim = Sim(settings, seed=3)
    play(sim, r, [today() + timedelta(days=i) for i in range(2)])
    with TestClient(create_app(settings, clock=sim.clock), base_url="http://localhost") as http:
        resp = http.get("/v1/boards/kills/alltime", params={"limit": 100})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert (body["window"], body["period"]) == ("alltime", "all")
        assert {e["member"]: e["score"] for e in body["entries"]} == alltime(sim.model, "kills")
        assert http.get("/v1/boards/kills/alltime", params={"period": "all"}).json() == body
        for bad in ("previous", "2026-01-01", "S1"):
            resp = http.get("/v1/boards/kills/alltime", params={"period": bad})
            assert resp.status_code == 422 and resp.json()["error"] == "bad_period", bad
        previous = http.get("/v1/boards/kills/alltime", params={"period": "previous"})
        assert "one period" in previous.json()["message"]
        assert http.get("/v1/boards/plain/alltime").status_code in (400, 404, 422)
        listing = http.get("/v1/boards").json()
        table = {w["window"]: w for w in listing["windows"]}
        assert table["alltime"]["expires"] is False and table["alltime"]["rolled_up"] is True
        assert [p["period"] for p in table["alltime"]["recent"]] == ["all"]
        assert table["alltime"]["recent"][0]["resets_at"] is None
        boards = {b["board"]: b for b in listing["boards"]}
        assert "alltime" in boards["kills"]["windows"]
        assert "alltime" not in boards["plain"]["windows"]
        assert boards["kills"]["current"]["alltime"]["period"] == "all"
        member = body["entries"][0]["member"]
        hist = http.get(f"/v1/boards/kills/members/{member}/history",
                        params={"window": "alltime", "last": 20})  # fmt: skip
        assert hist.status_code == 200, hist.text
        assert [p["period"] for p in hist.json()["history"]] == ["all"]
    sim.close()
