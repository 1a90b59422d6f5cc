"""Archives are write-once: a rerun keeps the files it finds, other content is refused.

Each test puts standings into an archive key directly, writes the files, then changes Redis
or the disk and writes again; the expectations are the bytes on disk before and the rows the
test put in, never figures copied from the code under test.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from worker_support import BOARDS, file_rows, season_settings

from seasons import Seasons
from seasons.archives import Archives
from seasons.errors import ArchiveExists

BOARD = "kills"
SEASON = "S1"
T1 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T2 = T1 + timedelta(hours=5)
ROWS = {"ann": 30.0, "bob": 20.0, "cid": 10.0}
META = {"ann": {"team": "red"}, "bob": {"team": "blue"}}


class Crash(Exception):
    """Stands for a SIGKILL at a checkpoint of write_files."""


@pytest.fixture
def env(settings_factory, r: redis.Redis, tmp_path: Path) -> Any:
    settings = season_settings(
        settings_factory, tmp_path / "archive", boards={BOARD: BOARDS[BOARD]}
    )
    app = Seasons(settings)
    archives = Archives(app.client, app.scripts, app.settings, app.keys)
    r.zadd(app.keys.archive(BOARD, SEASON), ROWS)
    for member, meta in META.items():
        r.hset(app.keys.meta(BOARD), member, json.dumps(meta))
    yield archives
    app.close()


def files(archives: Archives) -> tuple[Path, Path]:
    return archives.paths(BOARD, SEASON)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of the folder (temporary ones too) with its bytes."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def expected_rows(rows: dict[str, float], meta: dict[str, dict[str, str]]) -> list[Any]:
    ranked = sorted(rows.items(), key=lambda kv: -kv[1])
    return [(i, m, s, meta.get(m, {})) for i, (m, s) in enumerate(ranked, start=1)]


def crash_after_data(name: str) -> None:
    if name == "archive:data-written":
        raise Crash(name)


def test_a_rerun_keeps_both_files_and_the_first_created_at(env: Archives) -> None:
    data, manifest = files(env)
    env.write_files(BOARD, SEASON, T1)
    assert file_rows(data) == expected_rows(ROWS, META)
    before = snapshot(data.parent)
    again = env.write_files(BOARD, SEASON, T2)
    assert snapshot(data.parent) == before
    assert again.created_at == json.loads(before[manifest.name])["created_at"]
    assert again.sha256 == hashlib.sha256(before[data.name]).hexdigest()


def test_other_standings_are_refused_and_nothing_is_written(env: Archives, r: redis.Redis) -> None:
    data, _ = files(env)
    env.write_files(BOARD, SEASON, T1)
    before = snapshot(data.parent)
    r.zadd(env.keys.archive(BOARD, SEASON), {"dan": 5.0})  # Redis now holds other standings
    with pytest.raises(ArchiveExists) as caught:
        env.write_files(BOARD, SEASON, T2)
    message = caught.value.message
    assert str(data) in message
    assert f"{len(ROWS)} members" in message and f"{len(ROWS) + 1} members" in message
    assert hashlib.sha256(before[data.name]).hexdigest() in message
    assert caught.value.code == "archive_exists"
    assert snapshot(data.parent) == before  # no replaced file, no temporary file left


def test_an_emptied_archive_key_cannot_overwrite_the_files(env: Archives, r: redis.Redis) -> None:
    data, _ = files(env)
    env.write_files(BOARD, SEASON, T1)
    before = snapshot(data.parent)
    r.flushall()  # the finding: Redis came back empty and the close ran again
    with pytest.raises(ArchiveExists, match="0 members"):
        env.write_files(BOARD, SEASON, T2)
    assert snapshot(data.parent) == before


def test_killed_between_data_and_manifest_the_rerun_completes(env: Archives) -> None:
    data, manifest = files(env)
    with pytest.raises(Crash):
        env.write_files(BOARD, SEASON, T1, crash_after_data)
    assert data.exists() and not manifest.exists()
    written = data.read_bytes()
    result = env.write_files(BOARD, SEASON, T2)
    assert data.read_bytes() == written
    on_disk = json.loads(manifest.read_text())
    assert on_disk["sha256"] == hashlib.sha256(written).hexdigest() == result.sha256
    assert on_disk["count"] == len(ROWS) and on_disk["score_sum"] == sum(ROWS.values())
    assert sorted(p.name for p in data.parent.iterdir()) == [data.name, manifest.name]


def test_same_standings_with_newer_metadata_keep_the_file_written_first(
    env: Archives, r: redis.Redis
) -> None:
    data, manifest = files(env)
    with pytest.raises(Crash):
        env.write_files(BOARD, SEASON, T1, crash_after_data)
    written = data.read_bytes()
    # Between the crash and the rerun the member wrote again with new metadata.
    r.hset(env.keys.meta(BOARD), "cid", json.dumps({"team": "green"}))
    env.write_files(BOARD, SEASON, T2)
    assert data.read_bytes() == written
    assert file_rows(data) == expected_rows(ROWS, META)
    assert json.loads(manifest.read_text())["sha256"] == hashlib.sha256(written).hexdigest()
    env.verify(BOARD, SEASON)


def test_a_missing_data_file_is_written_again_when_its_manifest_agrees(env: Archives) -> None:
    data, manifest = files(env)
    env.write_files(BOARD, SEASON, T1)
    before = snapshot(data.parent)
    data.unlink()
    env.write_files(BOARD, SEASON, T2)
    assert snapshot(data.parent) == before


def test_a_manifest_of_other_content_is_refused(env: Archives, r: redis.Redis) -> None:
    data, manifest = files(env)
    env.write_files(BOARD, SEASON, T1)
    data.unlink()
    kept = manifest.read_bytes()
    r.zrem(env.keys.archive(BOARD, SEASON), "cid")
    with pytest.raises(ArchiveExists) as caught:
        env.write_files(BOARD, SEASON, T2)
    assert str(manifest) in caught.value.message
    assert f"count {len(ROWS)}" in caught.value.message
    assert snapshot(data.parent) == {manifest.name: kept}  # no data file written


def test_an_unreadable_data_file_is_left_alone(env: Archives) -> None:
    data, manifest = files(env)
    data.parent.mkdir(parents=True)
    data.write_bytes(gzip.compress(b"not json\n", mtime=0))
    with pytest.raises(ArchiveExists, match="unreadable"):
        env.write_files(BOARD, SEASON, T1)
    assert snapshot(data.parent) == {data.name: gzip.compress(b"not json\n", mtime=0)}


def test_erasure_still_rewrites_with_replace(env: Archives, r: redis.Redis) -> None:
    data, manifest = files(env)
    env.write_files(BOARD, SEASON, T1)
    r.zrem(env.keys.archive(BOARD, SEASON), "bob")
    env.write_files(BOARD, SEASON, T2, replace=True)
    rest = {m: s for m, s in ROWS.items() if m != "bob"}
    # The others keep their ranks at the close: bob leaves a gap at line 2, recorded with
    # its score (what shared or dense ranks after it depend on), not its id.
    closed = expected_rows(ROWS, META)
    assert file_rows(data) == [row for row in closed if row[1] != "bob"]
    written = json.loads(manifest.read_text())
    assert written["count"] == len(rest)
    assert written["removed"] == [{"line": 2, "score": ROWS["bob"]}]
    assert written["created_at"] == "2026-03-01T12:00:00Z"  # the close's (T1), kept
    env.verify(BOARD, SEASON)
