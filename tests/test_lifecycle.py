"""Lifecycle events (docs/contract.md#lifecycle-events): the closes of a whole season append
each event once, in order, to the stream a consumer group reads; emits are idempotent per id
under concurrency; the stream and its id set stay bounded; HTTP, Python and CLI agree.

The expected events come from a plain-Python model of the season (its days and boards) and
of the archive (the reference model's final standings), not from Seasons' own code.
"""

from __future__ import annotations

import json
import threading
import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner
from worker_support import ZONE, Sim, file_rows, season_settings, today

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.config.loading import ConfigError
from seasons.http.app import create_app
from seasons.jobs.integrity import Integrity, read_safe_mode, write_disk_marker
from seasons.lifecycle import EventType, Lifecycle
from seasons.manifest import sha256_of
from seasons.restore import Restorer

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.both_backends

NS = "seasons"
STREAM = f"{NS}:lifecycle"
IDS = f"{{{STREAM}}}:ids"  # spelled from docs/contract.md#keys


def fields(entry: tuple[Any, dict[Any, Any]]) -> dict[str, str]:
    raw = entry[1]
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes)
            else v) for k, v in raw.items()}  # fmt: skip


def stream(r: Any) -> list[dict[str, str]]:
    return [fields(e) for e in r.xrange(STREAM, "-", "+")]


def read_group(r: Any, group: str) -> list[dict[str, str]]:
    """Everything new for ``group`` (one consumer), acknowledged."""
    got: list[dict[str, str]] = []
    while True:
        found = r.xreadgroup(group, "c1", {STREAM: ">"}, count=50)
        entries = found[0][1] if found else []  # RESP2: [[stream, entries]]
        if not entries:
            return got
        got += [fields(e) for e in entries]
        r.xack(STREAM, group, *[sid for sid, _ in entries])


# --- the reference: which events a season's closes append --------------------------------


def days_closed(first_tick: datetime, last_tick: datetime, settings: Settings) -> list[date]:
    """The days the worker closes between its first tick and its last: from the oldest day
    still within retention at the first tick, every day whose end + late_grace has passed."""
    zone = ZoneInfo(ZONE)
    day = (first_tick - settings.retention).astimezone(zone).date()
    out = []
    while True:
        end = datetime(day.year, day.month, day.day, tzinfo=zone) + timedelta(days=1)
        if end.astimezone(UTC) + settings.late_grace > last_tick:
            return out
        out.append(day)
        day += timedelta(days=1)


def expected_events(sim: Sim, days: list[date], archive: Path) -> list[tuple[str, str, dict]]:
    boards = sorted(sim.settings.boards)
    out: list[tuple[str, str, dict]] = [
        (f"day_closed:{d}", "day_closed", {"day": d.isoformat(), "boards": boards}) for d in days
    ]
    for board in boards:
        rows = sim.expected_rows(board, "S1")
        data = archive / NS / board / "S1.jsonl.gz"
        assert file_rows(data) == rows
        out.append((f"season_closing:{board}:S1", "season_closing",
                    {"board": board, "season": "S1"}))  # fmt: skip
        # No reward tiers here: every ranked member has a result, none a reward.
        out.append((f"rewards_ready:{board}:S1", "rewards_ready", {
            "board": board, "season": "S1", "total": len(rows), "provisional": False, "tiers": [],
        }))  # fmt: skip
        out.append((f"season_archived:{board}:S1", "season_archived", {
            "board": board, "season": "S1", "count": len(rows),
            "score_sum": float(sum(score for _, _, score, _ in rows)), "sha256": sha256_of(data),
        }))  # fmt: skip
    return out


def test_a_consumer_group_gets_each_event_of_a_season_once(settings_factory, r, tmp_path) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    # Two groups, created before anything happens ($: only what comes after).
    for group in ("app", "audit"):
        r.xgroup_create(STREAM, group, id="$", mkstream=True)
    sim = Sim(settings, seed=5)
    first_tick = sim.clock()
    first = today()
    for i in range(7):
        sim.play_day(first + timedelta(days=i))
    day8 = first + timedelta(days=7)
    sim.play_day(day8, hours=(0.5,))
    sim.clock.set(sim.clock() + timedelta(hours=0.75))  # past the grace: S1 closes
    sim.worker.tick(sim.clock())
    last_tick = sim.clock()
    sim.clock.advance(timedelta(hours=3))  # more ticks: nothing more is due
    sim.worker.tick(sim.clock())

    expected = expected_events(
        sim, days_closed(first_tick, last_tick, settings), tmp_path / "archive"
    )
    for group in ("app", "audit"):
        got = read_group(r, group)
        assert [(e["id"], e["type"], json.loads(e["data"])) for e in got] == expected
        assert all(e["at"].endswith("Z") for e in got)
        assert read_group(r, group) == []  # nothing twice
    assert [e["id"] for e in stream(r)] == [eid for eid, _, _ in expected]
    sim.close()


# --- emit -----------------------------------------------------------------------------------

AT = datetime(2035, 6, 13, 12, tzinfo=UTC)


def test_eight_threads_emitting_one_id_append_it_once(settings_factory, connect) -> None:
    settings = settings_factory()
    start = threading.Barrier(8)
    results: list[str | None] = []

    def emit() -> None:
        client = connect(decode_responses=True)
        lifecycle = Lifecycle(client, Seasons(settings, client=client).keys, settings)
        start.wait()
        results.append(lifecycle.emit(EventType.DAY_CLOSED, "day_closed:2035-06-12",
                                      {"day": "2035-06-12", "boards": []}, AT))  # fmt: skip

    threads = [threading.Thread(target=emit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8
    assert len([x for x in results if x is not None]) == 1
    r = connect()
    assert [e["id"] for e in stream(r)] == ["day_closed:2035-06-12"]
    assert r.zcard(IDS) == 1


def test_the_stream_and_its_ids_stay_bounded(settings_factory, connect) -> None:
    settings = settings_factory(lifecycle={"max_len": 10})
    app = Seasons(settings)
    lifecycle = Lifecycle(app.client, app.keys, settings)
    emitted = []
    for i in range(600):
        eid = f"data_loss:{i}"
        emitted.append(eid)
        data = {"reason": "data_loss", "message": "m", "detected_at": str(i), "worker": "w"}
        assert lifecycle.emit(EventType.DATA_LOSS, eid, data, AT) is not None
    r = connect()
    entries = r.xrange(STREAM, "-", "+")
    # MAXLEN ~ 10: at least 10 kept, at most one stream node (100 entries) more.
    assert 10 <= len(entries) <= 110
    kept = [fields(e)["id"] for e in entries]
    assert kept == emitted[-len(kept) :]  # the newest, in order
    ids = {m.decode(): s for m, s in r.zrange(IDS, 0, -1, withscores=True)}
    oldest_ms = int(entries[0][0].decode().split("-")[0])
    assert set(kept) <= set(ids)
    # What the trim dropped left the id set too (but ids of the oldest kept millisecond).
    assert all(score == oldest_ms for eid, score in ids.items() if eid not in kept)
    # A kept id emitted again adds nothing; the stream gone, the ids go with it.
    assert lifecycle.emit(EventType.DATA_LOSS, kept[-1], data, AT) is None
    r.delete(STREAM)
    assert lifecycle.emit(EventType.DATA_LOSS, kept[-1], data, AT) is not None
    assert r.zcard(IDS) == 1 and r.xlen(STREAM) == 1
    app.close()


def test_max_len_is_validated(settings_factory) -> None:
    with pytest.raises(ConfigError, match=r"lifecycle\.max_len: 0 is too small"):
        settings_factory(lifecycle={"max_len": 0})


# --- data loss, restore ----------------------------------------------------------------------


def test_data_loss_and_restore_are_events(settings_factory, r, tmp_path) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=3)
    for i in range(8):
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 12))
    sim.clock.set(sim.clock() + timedelta(hours=13))
    sim.worker.tick(sim.clock())
    assert r.hget("seasons:{kills}:state", "season:S1") == b"archived"
    before = {e["id"] for e in stream(r)}

    # Redis forgets everything: the next check enters safe mode, with one data_loss event,
    # which neither a second check nor a new worker adopting the record appends again.
    r.flushall()
    now = sim.clock()
    integrity = Integrity(sim.app.client, settings, sim.app.keys, "w1")
    integrity.seen_marker = True
    write_disk_marker(settings, '{"id":"x","created_at":"2035-01-01T00:00:00Z"}')
    integrity.check(now)
    safe = read_safe_mode(sim.app.client, sim.app.keys)
    assert safe is not None and safe["reason"] == "data_loss"
    integrity.check(now + timedelta(minutes=1))
    Integrity(sim.app.client, settings, sim.app.keys, "w2").check(now + timedelta(minutes=2))
    got = stream(r)
    assert [e["id"] for e in got] == [f"data_loss:{safe['detected_at']}"]
    record = ("reason", "message", "detected_at", "worker")
    assert json.loads(got[0]["data"]) == {k: safe[k] for k in record}
    assert not before & {e["id"] for e in got}

    # A restore of each board's archive: one restore_done each, with the file's figures.
    restorer = Restorer(sim.app.client, settings, sim.app.keys)
    report = restorer.restore_all(now)
    assert report.ok
    done = [e for e in stream(r) if e["type"] == "restore_done"]
    assert sorted(e["id"].rsplit(":", 1)[0] for e in done) == [
        f"restore_done:{b}:S1" for b in sorted(settings.boards)
    ]
    for e in done:
        data = json.loads(e["data"])
        board = data["board"]
        rows = sim.expected_rows(board, "S1")
        path = tmp_path / "archive" / NS / board / "S1.jsonl.gz"
        assert (data["season"], data["count"], data["sha256"], data["action"]) == (
            "S1", len(rows), sha256_of(path), "restored",
        )  # fmt: skip
        assert data["score_sum"] == sum(s for _, _, s, _ in rows)
    sim.close()


# --- the three ways to read them --------------------------------------------------------------


def test_http_python_and_cli_return_the_same_events(settings_factory, tmp_path) -> None:
    settings = settings_factory()
    clock = ManualClock(AT)
    app = Seasons(settings, clock=clock)
    lifecycle = Lifecycle(app.client, app.keys, settings)
    for i in range(30):
        day = (date(2035, 5, 1) + timedelta(days=i)).isoformat()
        lifecycle.emit(EventType.DAY_CLOSED, f"day_closed:{day}", {"day": day, "boards": ["k"]},
                       AT + timedelta(days=i))  # fmt: skip
    python = app.lifecycle(limit=20).model_dump()
    assert [e["id"] for e in python["events"]] == [
        f"day_closed:{date(2035, 5, 1) + timedelta(days=i)}" for i in range(29, 9, -1)
    ]  # newest first
    assert python["events"][0]["data"] == {"day": "2035-05-30", "boards": ["k"]}
    assert python["events"][0]["at"] == "2035-07-12T12:00:00Z"
    last = python["events"][-1]["stream_id"]
    rest = app.lifecycle(limit=20, after=last).model_dump()
    assert len(rest["events"]) == 10
    assert [e["id"] for e in python["events"] + rest["events"]] == [
        f"day_closed:{date(2035, 5, 1) + timedelta(days=i)}" for i in range(29, -1, -1)
    ]

    with TestClient(create_app(settings, clock=clock), client=("127.0.0.1", 50000),
                    base_url="http://localhost") as http:  # fmt: skip
        assert http.get("/v1/lifecycle").json() == python
        assert http.get("/v1/lifecycle", params={"after": last, "limit": 20}).json() == rest
        assert http.get("/v1/lifecycle", params={"after": "0-0"}).json() == {"events": []}
        too_big = "18446744073709551616-0"  # past a stream id's 64 bits
        for bad in ({"limit": 0}, {"limit": 1001}, {"after": "yesterday"}, {"after": too_big}):
            answer = http.get("/v1/lifecycle", params=bad)
            assert answer.status_code == 422, bad
            assert answer.json()["error"] == "invalid_input"

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), obj=CliState(clock=clock, settings=settings))

    out = run("events", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == python
    table = run("events", "--limit", "3")
    assert table.exit_code == 0 and "day_closed:2035-05-30" in table.output
    assert run("events", "--limit", "0").exit_code == 2
    assert run("events", "--after", "x").exit_code == 2
    app.close()
