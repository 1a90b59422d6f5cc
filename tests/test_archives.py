"""Archives (docs/contract.md#archives): manifest, verify, restore (refusing tampered files),
export, snapshots of running and ended seasons, and erasure of a member."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from reference import key as ref_key
from reference import snapshot, zset
from worker_support import Sim, file_rows, local, season_settings, today

from seasons.cli import CliState, cli
from seasons.errors import ArchiveError, BatchRejected
from seasons.manifest import Manifest, sha256_of

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

NS = "seasons"


def closed_s1(settings_factory, tmp_path: Path, seed: int = 21) -> Sim:
    """S1 played and closed by the worker; the clock at 01:15 on S2's first day."""
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=seed)
    for i in range(7):
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 11, 19))
    sim.play_day(today() + timedelta(days=7), hours=(0.5,))
    sim.clock.set(local(today() + timedelta(days=8), 1.25))
    sim.worker.tick(sim.clock())
    return sim


def run_cli(sim: Sim, *args: str) -> Any:
    return CliRunner().invoke(cli, list(args), obj=CliState(clock=sim.clock, settings=sim.settings))


def files(sim: Sim, board: str, archive_id: str) -> tuple[Path, Path]:
    folder = sim.settings.archive.dir / NS / board
    return folder / f"{archive_id}.jsonl.gz", folder / f"{archive_id}.manifest.json"


def rewrite_gz(path: Path, edit) -> None:
    with gzip.open(path, "rt") as f:
        lines = f.readlines()
    with gzip.open(path, "wt") as f:
        f.writelines(edit(lines))


def test_manifest_and_verify(settings_factory, r, tmp_path: Path) -> None:
    sim = closed_s1(settings_factory, tmp_path)
    archives = sim.worker.archives
    for board in sim.settings.boards:
        data, manifest_path = files(sim, board, "S1")
        raw = json.loads(manifest_path.read_text())
        assert list(raw) == [
            "board", "season", "count", "score_sum", "sha256", "created_at", "tiers", "removed"
        ]  # fmt: skip
        assert raw["tiers"] == [] and raw["removed"] == []  # no reward tiers, nothing forgotten
        rows = file_rows(data)
        assert rows == sim.expected_rows(board, "S1")
        assert raw["count"] == len(rows) and raw["sha256"] == sha256_of(data)
        assert raw["score_sum"] == sum(s for _, _, s, _ in rows)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", raw["created_at"])
        assert archives.verify(board, "S1", ref_key(NS, board, "season", "S1")) == Manifest.load(
            manifest_path
        )

    board = "kills"
    data, manifest_path = files(sim, board, "S1")
    archive_key = f"{NS}:{{{board}}}:archive:S1"
    # The archive key drifts from its file: caught.
    r.zincrby(archive_key, 1, rows[0][1] if (rows := file_rows(data)) else "x")
    with pytest.raises(ArchiveError, match="differs from its file"):
        archives.verify(board, "S1")
    r.zincrby(archive_key, -1, rows[0][1])
    archives.verify(board, "S1")
    # A manifest that lies about the count: caught.
    original = manifest_path.read_text()
    manifest_path.write_text(original.replace(f'"count": {len(rows)}', f'"count": {len(rows) + 1}'))
    with pytest.raises(ArchiveError, match="its manifest says"):
        archives.verify(board, "S1")
    manifest_path.write_text(original)
    # A file changed after it was written: caught.
    rewrite_gz(data, lambda lines: [lines[0].replace('"score":', '"score":1')] + lines[1:])
    with pytest.raises(ArchiveError, match="does not match its manifest"):
        archives.verify(board, "S1")
    sim.close()


def test_restore_checks_the_manifest_then_loads(settings_factory, r, tmp_path: Path) -> None:
    sim = closed_s1(settings_factory, tmp_path)
    board = "laps"
    data, manifest_path = files(sim, board, "S1")
    backup = tmp_path / "backup"
    backup.mkdir()
    shutil.copy(data, backup / data.name)
    shutil.copy(manifest_path, backup / manifest_path.name)
    want = file_rows(data)
    r.flushall()  # Redis lost everything

    # A tampered copy is refused, with a clear message, and nothing is written.
    tampered = tmp_path / "tampered"
    shutil.copytree(backup, tampered)
    rewrite_gz(tampered / data.name, lambda lines: lines[:-1])  # drop the last member
    result = run_cli(sim, "restore", str(tampered / data.name))
    assert result.exit_code == 2  # a bad file is bad input
    assert "does not match its manifest" in result.output
    assert snapshot(r) == {}
    # A missing manifest too.
    (tampered / manifest_path.name).unlink()
    result = run_cli(sim, "restore", str(tampered / data.name))
    assert result.exit_code == 2 and "manifest" in result.output

    result = run_cli(sim, "restore", str(backup / data.name), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["restored"]["count"] == len(want)
    assert zset(r, f"{NS}:{{{board}}}:archive:S1") == {m: s for _, m, s, _ in want}
    assert r.ttl(f"{NS}:{{{board}}}:archive:S1") == -1
    assert r.hget(f"{NS}:{{{board}}}:state", "season:S1") == b"archived"
    page = sim.app.top(board, "season", period="S1", limit=100)
    assert [(e.rank, e.member, e.score, e.metadata) for e in page.entries] == want
    assert not list(r.scan_iter(match="*:tmp:*"))
    # Late events for a restored season are refused.
    with pytest.raises(BatchRejected) as info:
        sim.app.submit_many(
            [{"board": board, "member": "x", "value": 1, "ts": local(today(), 12)}], backfill=True
        )
    assert {p["code"] for p in info.value.details} == {"season_closed"}
    sim.close()


def test_export(settings_factory, r, tmp_path: Path) -> None:
    sim = closed_s1(settings_factory, tmp_path)
    model = sim.model
    week = model.cal.period_id("week", model.cal.local_date(sim.clock()))
    for board in sim.settings.boards:
        ranked = model.ranked(board, "week", week)
        want = [(k, m, s, model.metadata(board, m)) for k, m, s in ranked]
        for name in ("week.jsonl", "week.jsonl.gz"):
            out = tmp_path / board / name
            count = sim.worker.archives.export(board, "week", "current", out, sim.clock())
            assert count == len(want)
            assert file_rows(out) == want
        # On stdout through the CLI, and an archived season reads as its archive.
        result = run_cli(sim, "export", board, "--window", "season", "--period", "S1")
        assert result.exit_code == 0, result.output
        lines = [json.loads(ln) for ln in result.output.splitlines()]
        got = [(d["rank"], d["member"], d["score"], d["metadata"]) for d in lines]
        assert got == file_rows(files(sim, board, "S1")[0])
    assert not list(r.scan_iter(match="*:tmp:*"))
    sim.close()


def test_snapshot_of_a_running_season_changes_nothing_else(settings_factory, r, tmp_path):
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=8)
    for i in range(3):
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 13))
    before = snapshot(r)
    result = run_cli(sim, "snapshot", "--season", "S1", "--json")
    assert result.exit_code == 0, result.output
    stamp = sim.clock().strftime("%Y%m%dT%H%M%SZ")
    sid = f"S1@{stamp}"
    reported = json.loads(result.output)["snapshots"]
    assert [(s["board"], s["season"], s["action"]) for s in reported] == [
        ("kills", sid, "snapshot"), ("laps", sid, "snapshot"),
    ]  # fmt: skip
    after = snapshot(r)
    new = {k.decode() for k in set(after) - set(before)}
    assert new == {
        f"{NS}:{{{board}}}:{kind}:{sid}" for board in ("kills", "laps")
        for kind in ("archive", "results")  # results: provisional (seasons.results)
    }  # fmt: skip
    assert {k: v for k, v in after.items() if k.decode() not in new} == before
    for board in settings.boards:
        assert after[f"{NS}:{{{board}}}:archive:{sid}".encode()][1] == -1  # no TTL
        data, manifest = files(sim, board, sid)
        assert file_rows(data) == sim.expected_rows(board, "S1")
        assert Manifest.load(manifest).season == sid
        page = sim.app.top(board, "season", period=sid, limit=100)
        assert [(e.rank, e.member, e.score, e.metadata) for e in page.entries] == file_rows(data)
    # The season runs on.
    sim.submit(sim.batch(3))
    sim.close()


def test_snapshot_of_an_ended_season_closes_it_now(settings_factory, r, tmp_path: Path) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=12)
    for i in range(7):
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 18))
    # 00:20 after S1's last day: still in its late grace, the day is not closed yet.
    sim.clock.set(local(today() + timedelta(days=7), 1 / 3))
    late = sim.batch(2, ts=sim.clock() - timedelta(hours=1))
    sim.submit(late)  # accepted: the grace is not over
    result = run_cli(sim, "snapshot", "--season", "S1", "--json")
    assert result.exit_code == 0, result.output
    assert {s["action"] for s in json.loads(result.output)["snapshots"]} == {"archived"}
    shas = {}
    for board in settings.boards:
        assert r.hget(f"{NS}:{{{board}}}:state", "season:S1") == b"archived"
        data, _ = files(sim, board, "S1")
        assert file_rows(data) == sim.expected_rows(board, "S1")
        shas[board] = sha256_of(data)
    # From then on late events for it are rejected, grace or not.
    with pytest.raises(BatchRejected) as info:
        sim.app.submit_many(sim.batch(2, ts=sim.clock() - timedelta(hours=1)))
    assert {p["code"] for p in info.value.details} == {"season_closed"}
    # Already archived: left as it is, also by the worker's own close later on.
    result = run_cli(sim, "snapshot", "--season", "S1", "--json")
    assert {s["action"] for s in json.loads(result.output)["snapshots"]} == {"already_archived"}
    sim.clock.set(local(today() + timedelta(days=7), 2))
    sim.worker.tick(sim.clock())
    for board in settings.boards:
        assert sha256_of(files(sim, board, "S1")[0]) == shas[board]
        assert sorted(p.name for p in (tmp_path / "archive" / NS / board).iterdir()) == [
            "S1.jsonl.gz", "S1.manifest.json",
        ]  # fmt: skip
    sim.close()


def test_forget_removes_a_member_everywhere(settings_factory, r, tmp_path: Path) -> None:
    sim = closed_s1(settings_factory, tmp_path)
    board = "kills"
    victim = next(m for _, m, _, _ in sim.expected_rows(board, "S1"))
    sim.submit([{"board": board, "member": victim, "value": 3, "metadata": {"name": "V"}}])
    assert r.hexists(f"{NS}:{{{board}}}:meta", victim)

    result = run_cli(sim, "forget", victim, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["boards"][board]["metadata"] is True
    assert report["boards"][board]["files_rewritten"] == [str(files(sim, board, "S1")[0])]
    for raw in r.scan_iter(count=1000):
        if r.type(raw) == b"zset":
            assert r.zscore(raw, victim) is None, raw
        elif r.type(raw) == b"hash" and raw.endswith(b":meta"):
            assert not r.hexists(raw, victim)
    for b in sim.settings.boards:
        data, _ = files(sim, b, "S1")
        assert victim not in {m for _, m, _, _ in file_rows(data)}
        sim.worker.archives.verify(b, "S1")
    sim.close()
