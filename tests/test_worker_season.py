"""A whole season driven by a ManualClock: events every day, worker ticks (rollups, day closes,
the season close), compared with the reference model (tests/reference.py)."""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from reference import key as ref_key
from reference import zset
from worker_support import Sim, file_rows, local, season_settings, today

from seasons.cli import CliState, cli
from seasons.errors import BatchRejected
from seasons.jobs import registry
from seasons.manifest import Manifest, sha256_of

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends


def rejection_codes(sim: Sim, events: list[dict], *, backfill: bool = False) -> set[str]:
    with pytest.raises(BatchRejected) as info:
        sim.app.submit_many(events, backfill=backfill)
    return {p["code"] for p in info.value.details}


# The board kinds: latest-wins boards (set; trimmed, and with dense ranks), dense and earliest
# ties: their archives too are the model's final standings.
KINDS = {
    "latest": {"aggregate": "set", "max_entries": 5, "week_weights": [1, 1, 1, 1, 1, 2, 2]},
    "rating": {"aggregate": "set", "ties": "dense"},
    "levels": {"aggregate": "max", "ties": "dense", "order": "asc"},
    # the first to reach a score ranks higher: the archive keeps that order (and its reach set)
    "first": {"aggregate": "max", "ties": "earliest"},
    "steady": {"aggregate": "set", "ties": "earliest", "week_weights": [1, 1, 1, 1, 1, 2, 2]},
}


@pytest.mark.parametrize("boards", [None, KINDS], ids=["sum-max", "set-dense"])
def test_a_whole_season(settings_factory, r, tmp_path: Path, boards) -> None:
    more = {} if boards is None else {"boards": boards}
    settings = season_settings(settings_factory, tmp_path / "archive", **more)
    sim = Sim(settings, seed=7)
    first = today()
    s1_days = [first + timedelta(days=i) for i in range(7)]
    for day in s1_days:
        sim.play_day(day)
        # Rollups keep week and season boards equal to the formula, day after day.
        for board in settings.boards:
            for window in ("week", "season"):
                pid = sim.model.cal.period_id(window, day)
                assert zset(r, ref_key("seasons", board, window, pid)) == sim.model.board(
                    board, window, pid
                ), (board, window, pid)

    # Nothing is closed before the last day's end + late_grace; S1 is still live.
    last = s1_days[-1]
    ns = "seasons"
    for board in settings.boards:
        assert r.hget(f"{ns}:{{{board}}}:state", "season:S1") is None
        assert not r.exists(f"{ns}:{{{board}}}:archive:S1")

    # The first day of S2: events, then the tick after 01:00 closes the last day and S1.
    day8 = last + timedelta(days=1)
    sim.play_day(day8, hours=(0.5,))
    sim.clock.set(sim.clock() + timedelta(hours=0.75))  # 01:15, past the grace
    sim.worker.tick(sim.clock())

    for board in settings.boards:
        state = {k.decode(): v.decode() for k, v in r.hgetall(f"{ns}:{{{board}}}:state").items()}
        assert state["season:S1"] == "archived"
        assert all(f"closed:{d}" in state for d in s1_days)
        folder = tmp_path / "archive" / ns / board
        data, manifest_path = folder / "S1.jsonl.gz", folder / "S1.manifest.json"
        # The archive file's lines are the reference model's final standings.
        rows = file_rows(data)
        assert rows == sim.expected_rows(board, "S1")
        manifest = Manifest.load(manifest_path)
        assert (manifest.board, manifest.season, manifest.count) == (board, "S1", len(rows))
        assert manifest.sha256 == sha256_of(data)
        assert manifest.score_sum == sum(score for _, _, score, _ in rows)
        assert sorted(p.name for p in folder.iterdir()) == ["S1.jsonl.gz", "S1.manifest.json"]
        # The archive key has no TTL; the live key keeps its EXPIREAT and runs out later.
        archive = f"{ns}:{{{board}}}:archive:S1"
        assert zset(r, archive) == sim.model.board(board, "season", "S1")
        if settings.boards[board].ties == "earliest":  # its reach set went along, no TTL
            reached = f"{ns}:{{{board}}}:reached:archive:S1"
            assert zset(r, reached) == sim.model.reach(board, "season", "S1")
            assert r.ttl(reached) == -1
        assert r.ttl(archive) == -1
        live = ref_key(ns, board, "season", "S1")
        assert r.expiretime(live) == sim.model.cal.expire_at("season", "S1")
        # Reads of the season read the archive.
        page = sim.app.top(board, "season", period="S1", limit=100)
        assert [(e.rank, e.member, e.score, e.metadata) for e in page.entries] == rows
        # The next season's boards were rebuilt and match the model.
        assert zset(r, ref_key(ns, board, "season", "S2")) == sim.model.board(board, "season", "S2")
        assert r.hget(f"{ns}:{{{board}}}:state", "season:S2") is None

    # Late events for the closed season are rejected: late_event by time, and
    # season_closed even for a backfill (which may write closed days of unarchived seasons).
    late = sim.batch(3, ts=sim.clock() - timedelta(hours=2))  # S1's last day
    assert rejection_codes(sim, late) == {"late_event"}
    assert rejection_codes(sim, late, backfill=True) == {"season_closed"}
    # S2 keeps taking events.
    sim.submit(sim.batch(4))

    # The close is done once: more ticks change no archive.
    before = {b: sha256_of(tmp_path / "archive" / ns / b / "S1.jsonl.gz") for b in settings.boards}
    sim.clock.advance(timedelta(hours=3))
    sim.worker.tick(sim.clock())
    after = {b: sha256_of(tmp_path / "archive" / ns / b / "S1.jsonl.gz") for b in settings.boards}
    assert before == after
    sim.close()


def test_catching_up_after_downtime(settings_factory, r, tmp_path: Path, caplog) -> None:
    """The worker was down for the whole season and beyond: one tick runs every close that
    fell due, in order (each day, then the season after its last day), and the archives
    still equal the reference model."""
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=3)
    first = today()
    sim.worker.tick(sim.clock())  # the worker's first start, then it goes away
    for i in range(16):  # S1, S2 and two days of S3, without a worker
        day = first + timedelta(days=i)
        for hour in (0.5, 12, 20):
            sim.clock.set(local(day, hour))
            sim.submit(sim.batch(5))
    caplog.set_level(logging.INFO, logger="seasons.jobs.closes")
    sim.worker.tick(sim.clock())
    closed = [rec.getMessage() for rec in caplog.records if rec.getMessage().startswith("closed")]
    want = [f"closed day {first - timedelta(days=1)}"]  # not yet due at the first tick
    for i in range(15):
        day = first + timedelta(days=i)
        want.append(f"closed day {day}")
        if i in (6, 13):
            want.append(f"closed season S{(i + 1) // 7}")
    assert closed == want
    for board in settings.boards:
        for season in ("S1", "S2"):
            rows = file_rows(tmp_path / "archive" / "seasons" / board / f"{season}.jsonl.gz")
            assert rows == sim.expected_rows(board, season)
        assert zset(r, ref_key("seasons", board, "season", "S3")) == sim.model.board(
            board, "season", "S3"
        )
    sim.close()


def test_status_reports_heartbeat_jobs_and_seasons(settings_factory, r, tmp_path: Path) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=2)
    for i in range(8):
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 12))
    state = CliState(clock=sim.clock, settings=settings)
    result = CliRunner().invoke(cli, ["status", "--json"], obj=state)
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["worker"]["pid"] == os.getpid()
    assert set(status["jobs"]) == {"heartbeat", "closes", "rollup", "sweep", "hooks"}
    assert status["hooks"] == {}  # no [[hooks]] configured
    for name, job in status["jobs"].items():
        assert job["last_status"] == "ok" and job["runs"] >= 1
        # Driven tick by tick (no scheduler): a job that runs on every tick has no time of its
        # own; the others are due one interval after their last start.
        spec = registry.BY_NAME[name]
        expected = None if spec.every_tick else (
            datetime.fromisoformat(job["last_start"]) + spec.every(settings)
        )  # fmt: skip
        assert (job["next_run"] and datetime.fromisoformat(job["next_run"])) == expected
    seasons = {s["season"]: s for s in status["seasons"]["seasons"]}
    assert seasons["S1"]["status"] == "archived"
    assert seasons["S1"]["boards"]["kills"]["archive"]["count"] == len(
        sim.expected_rows("kills", "S1")
    )
    assert seasons["S2"]["status"] == "running"
    plain = CliRunner().invoke(cli, ["status"], obj=CliState(clock=sim.clock, settings=settings))
    assert plain.exit_code == 0 and "S1" in plain.output
    # A stopped worker deletes its heartbeat: status then says no worker is alive.
    sim.worker.shutdown()
    result = CliRunner().invoke(cli, ["status", "--json"], obj=CliState(settings=settings))
    assert json.loads(result.output)["worker"] is None


def test_a_season_that_expired_before_its_archive_is_reported_loudly(
    settings_factory, r, tmp_path: Path, caplog
) -> None:
    """The worker was away longer than retention: the live season key is gone (deleted here,
    as Redis would have expired it), so S1 cannot be archived. That is logged as an error
    and recorded; the closes after it still run."""
    settings = season_settings(settings_factory, tmp_path / "archive", retention="P2D")
    sim = Sim(settings, seed=6)
    sim.worker.tick(sim.clock())
    for i in range(14):
        sim.clock.set(local(today() + timedelta(days=i), 12))
        sim.submit(sim.batch(4))
    for board in settings.boards:
        r.delete(ref_key("seasons", board, "season", "S1"))
    caplog.set_level(logging.INFO, logger="seasons.jobs.closes")
    sim.clock.set(local(today() + timedelta(days=14), 2))
    sim.worker.tick(sim.clock())
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert len(errors) == len(settings.boards)
    assert all("SEASON NOT ARCHIVED" in e and "S1" in e for e in errors)
    assert r.hget("seasons:job:close_season:S1", "outcome") == b"expired:kills,laps"
    for board in settings.boards:
        assert r.hget(f"seasons:{{{board}}}:state", "season:S1") == b"closing"  # not archived
        assert not (tmp_path / "archive" / "seasons" / board / "S1.jsonl.gz").exists()
        rows = file_rows(tmp_path / "archive" / "seasons" / board / "S2.jsonl.gz")
        assert rows == sim.expected_rows(board, "S2")
    sim.close()
