"""``seasons restore`` checks everything a file claims before it writes anything; ``restore
--all`` brings a whole namespace back after Redis lost it; ``acknowledge-loss``.

Archive files are crafted here byte by byte (json + gzip + hashlib, not Seasons' writer), so a
file can claim anything. Every refusal is asserted with DEBUG DIGEST: nothing was written.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from reference import snapshot, zset
from worker_support import BOARDS, local, season_settings, today, toml_text

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import ArchiveRejected
from seasons.files import MANIFEST_MAX
from seasons.models import RewardsPage
from seasons.restore import Restorer

NS = "seasons"
Entry = tuple[str, float, dict[str, Any]]  # member, score, metadata

# Two ended seasons (S1, S2), S3 running (its 3rd day), S4 not started.
NOW = local(today() + timedelta(days=16), 10)


def ranked(board: str, entries: list[Entry]) -> list[dict[str, Any]]:
    """Archive lines in rank order, ranked as the boards of tests/worker_support.py rank:
    kills high first, each member its own rank (equal scores in Redis's reverse member
    order); laps low first, shared ranks."""
    if board == "kills":
        order = sorted(entries, key=lambda e: (e[1], e[0].encode()), reverse=True)
        return [
            {"rank": i, "member": m, "score": s, "metadata": md}
            for i, (m, s, md) in enumerate(order, start=1)
        ]
    order = sorted(entries, key=lambda e: (e[1], e[0].encode()))
    return [
        {"rank": 1 + sum(1 for _, t, _ in order if t < s), "member": m, "score": s, "metadata": md}
        for m, s, md in order
    ]


def write_archive(
    folder: Path, name: str, lines: list[Any], *, board: str = "kills", **manifest: Any
) -> Path:
    """``<name>.jsonl.gz`` holding ``lines`` (dicts as JSON, str as they are) and a manifest
    that describes it truthfully unless ``manifest`` overrides a field."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{name}.jsonl.gz"
    text = "".join(
        (ln if isinstance(ln, str) else json.dumps(ln, ensure_ascii=False)) + "\n" for ln in lines
    )
    data.write_bytes(gzip.compress(text.encode("utf-8", "surrogatepass"), mtime=0))
    scores = [ln["score"] for ln in lines if isinstance(ln, dict) and "score" in ln]
    fields = {
        "board": board, "season": name, "count": len(lines),
        "score_sum": math.fsum(s for s in scores if isinstance(s, int | float)),
        "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "created_at": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    fields.update(manifest)
    fields = {k: v for k, v in fields.items() if v is not None}  # None: the field left out
    (folder / f"{name}.manifest.json").write_text(json.dumps(fields))
    return data


def good(board: str = "kills", n: int = 6, bonus: float = 0) -> list[dict[str, Any]]:
    entries = [
        (f"p{i:02d}", float((i * 7) % 5 + bonus), {"lvl": i} if i % 2 else {}) for i in range(n)
    ]
    return ranked(board, entries)


class Env:
    def __init__(self, settings: Settings, r: Any, tmp: Path):
        self.settings = settings
        self.r = r
        self.tmp = tmp
        self.clock = ManualClock(NOW)
        self.app = Seasons(settings, clock=self.clock)

    def cli(self, *args: str) -> Any:
        state = CliState(clock=self.clock, settings=self.settings)
        return CliRunner().invoke(cli, list(args), obj=state)

    def digest(self) -> bytes:
        """Of every key but the audit trail's (each restore done is an entry there)."""
        names = sorted(k for k in self.r.scan_iter(count=1000) if b":audit" not in k)
        values = self.r.execute_command("DEBUG", "DIGEST-VALUE", *names) if names else []
        return b"".join(n + b"=" + bytes(v) for n, v in zip(names, values, strict=True))

    def archive(self, board: str, season: str) -> str:
        return f"{NS}:{{{board}}}:archive:{season}"


@pytest.fixture
def env(settings_factory, r, tmp_path: Path):
    settings = season_settings(settings_factory, tmp_path / "archive")
    e = Env(settings, r, tmp_path)
    # Something in Redis for the digest to protect: live scores of the running S3, an archive.
    e.app.submit_many([
        {"board": b, "member": f"live{i}", "value": 10 + i, "metadata": {"x": i}}
        for b in ("kills", "laps") for i in range(4)
    ])  # fmt: skip
    result = e.cli("restore", str(write_archive(tmp_path / "in", "S1", good())))
    assert result.exit_code == 0, result.output
    yield e
    e.app.close()


def _line(i: int, member: Any, score: Any = 1, meta: Any = None) -> dict[str, Any]:
    return {"rank": i, "member": member, "score": score, "metadata": meta or {}}


def _desc(*members_scores: tuple[Any, Any]) -> list[dict[str, Any]]:
    return [_line(i, m, s) for i, (m, s) in enumerate(members_scores, start=1)]


# (name, file stem, lines, manifest overrides, text the message must hold)
BAD: list[tuple[str, str, list[Any], dict[str, Any], str]] = [
    ("running season", "S3", good(), {}, "season S3 is running"),
    ("future season", "S4", good(), {}, "season S4 has not started"),
    ("unknown season", "winter", good(), {}, "unknown season 'winter'"),
    ("snapshot of an unknown season", "winter@20260101T000000Z", good(), {}, "unknown season"),
    ("snapshot stamp", "S1@tomorrow", good(), {}, "is not <season>@<YYYYMMDDTHHMMSSZ>"),
    ("unknown board", "S2", good(), {"board": "nope"}, "board 'nope', which is not configured"),
    ("NUL and ESC", "S2", _desc(("ok", 5), ("a\x00b\x1b[31m", 4)), {},
     "line 2: member contains the control character U+0000"),
    ("307-byte member", "S2", _desc(("ok", 5), ("x", 4), ("é" * 150 + "y" * 7, 3)), {},
     "line 3: member is 307 bytes of UTF-8 (at most 128)"),
    ("empty member", "S2", _desc(("", 5)), {}, "line 1: member must not be empty"),
    ("member not a string", "S2", _desc(("ok", 5), (17, 4)), {}, "line 2: member must be a string"),
    ("NaN score", "S2", ['{"rank":1,"member":"a","score":NaN,"metadata":{}}'], {"score_sum": 0},
     "line 1: score must be finite"),
    ("infinite score", "S2", _desc(("a", 5), ("b", 1e400)), {"score_sum": 5},
     "line 2: score must be finite"),
    ("score over 2^53", "S2", _desc(("a", 2**53 + 2), ("b", 1)), {}, "line 1: score"),
    ("score a string", "S2", _desc(("a", "5")), {"score_sum": 0}, "line 1: score must be a number"),
    ("17 metadata fields", "S2", [_line(1, "a", 5, {f"f{i}": i for i in range(17)})], {},
     "line 1: metadata has 17 fields (at most 16)"),
    ("metadata over 1 KiB", "S2", [_line(1, "a", 5, {"bio": "z" * 1100})], {},
     "line 1: metadata is 1110 bytes as JSON (at most 1024)"),
    ("nested metadata", "S2", [_line(1, "a", 5), _line(2, "b", 4, {"deep": {"x": 1}})], {},
     "line 2: metadata field 'deep' is a dict"),
    ("duplicate members", "S2", _desc(("a", 5), ("b", 4), ("a", 3)), {},
     "line 3: member 'a' is already on line 1"),
    ("scores out of order", "S2", _desc(("a", 5), ("b", 9)), {},
     "line 2: score 9.0 is above the line before's (5.0)"),
    ("rank skipped", "S2", [_line(1, "a", 5), _line(3, "b", 4)], {}, "line 2: rank 3 should be 2"),
    ("rank zero", "S2", [_line(0, "a", 5)], {}, "line 1: rank 0 is not a positive integer"),
    ("ties out of Redis order", "S2", _desc(("a", 5), ("b", 5)), {},
     "line 2: member 'b' ties with 'a' on the line before"),
    ("not JSON", "S2", [_line(1, "a", 5), "{oops"], {}, "line 2: is not JSON"),
    ("extra field", "S2", [{**_line(1, "a", 5), "extra": 1}], {}, "line 1: needs exactly"),
    ("count lies", "S2", good(), {"count": 5}, "its manifest says 5"),
    ("sha256 lies", "S2", good(), {"sha256": "0" * 64}, "does not match its manifest"),
    ("score_sum lies", "S2", good(), {"score_sum": 1.5}, "its manifest says"),
    ("file renamed", "S2", good(), {"season": "S1"}, "named after 'S2'"),
    # The write path's member rule: a member the writes refuse is not restored either.
    ("invisible format character", "S2", _desc(("ok", 5), ("ad\u200bmin", 4)), {},
     "line 2: member contains the invisible format character U+200B (ZERO WIDTH SPACE)"),
    ("bidi override", "S2", _desc(("\u202enimda", 5)), {},
     "line 1: member contains the invisible format character U+202E"),
    # Every manifest field of its type and form, checked before anything is written.
    ("created_at not a time", "S2", good(), {"created_at": "not-a-time"},
     "created_at 'not-a-time' is not an ISO 8601 time"),
    ("created_at without a zone", "S2", good(), {"created_at": "2026-01-01T00:00:00"},
     "created_at '2026-01-01T00:00:00' has no zone"),
    ("created_at out of range in UTC", "S2", good(), {"created_at": "0001-01-01T00:00:00+01:00"},
     "created_at '0001-01-01T00:00:00+01:00' is out of range in UTC"),
    ("created_at a number", "S2", good(), {"created_at": 1767225600},
     "created_at must be a text, got int"),
    ("count a text", "S2", good(), {"count": "6"}, "count '6' is not an integer of 0 or more"),
    ("count a boolean", "S2", good(n=1), {"count": True}, "count True is not an integer"),
    ("count negative", "S2", [], {"count": -1}, "count -1 is not an integer of 0 or more"),
    ("score_sum a text", "S2", good(), {"score_sum": "17"}, "score_sum must be a number, got str"),
    ("score_sum a huge integer", "S2", good(), {"score_sum": 10**400},
     "score_sum is an integer of 1329 bits"),
    ("sha256 in capitals", "S2", good(), {"sha256": "AB" * 32},
     "is not 64 lowercase hexadecimal digits"),
    ("board not a text", "S2", good(), {"board": ["kills"]}, "board must be a text, got list"),
    ("season with a slash", "S2", good(), {"season": "../S2"}, "season '../S2' is not a season id"),
    ("a field missing", "S2", good(), {"created_at": None}, "lacks created_at"),
    # Rewards are recomputed, never trusted: no tiers at the close, so every reward is null.
    ("forged reward", "S2", [_line(1, "a", 5), {**_line(2, "b", 4), "reward": "gold"}],
     {"tiers": []}, "line 2: reward 'gold' is not the one rank 2 gets, None"),
    ("tiers not a list", "S2", good(), {"tiers": "gold"}, "its tiers 'gold' are not a list"),
    ("a tier backwards", "S2", good(), {"tiers": [{"ranks": "3-1", "reward": "x"}]},
     "its tiers[0]"),
    ("removed past the end", "S2", good(), {"removed": [{"line": 8, "score": 1}]},
     "its removed[0]"),
    ("removed out of order", "S2", _desc(("a", 5), ("b", 4)),
     {"removed": [{"line": 1, "score": 1}]}, "its removed line 1 has score 1.0, out of"),
    ("ranks ignore a gap", "S2", _desc(("a", 5), ("b", 4)),
     {"removed": [{"line": 1, "score": 9}]}, "line 1: rank 1 should be 2"),
]  # fmt: skip


@pytest.mark.parametrize(("stem", "lines", "manifest", "says"),
                         [b[1:] for b in BAD], ids=[b[0] for b in BAD])  # fmt: skip
def test_a_bad_file_is_refused_and_nothing_is_written(
    env: Env, stem: str, lines: list[Any], manifest: dict[str, Any], says: str
) -> None:
    live_before = env.app.top("kills", "season", period="S3", limit=100)
    before = env.digest()
    data = write_archive(env.tmp / "bad", stem, lines, **manifest)
    result = env.cli("restore", str(data))
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())  # click may wrap
    assert says in out and "nothing restored" in out, out
    assert env.digest() == before
    assert env.app.top("kills", "season", period="S3", limit=100) == live_before
    assert not env.r.exists(env.archive("kills", stem))


def test_every_bad_line_is_counted_and_the_first_are_shown(env: Env) -> None:
    lines = [_line(i, f"m\x07{i}", 100 - i) for i in range(1, 9)]  # 8 bad members
    before = env.digest()
    result = env.cli("restore", str(write_archive(env.tmp / "bad", "S2", lines)))
    assert result.exit_code == 2
    out = " ".join(result.output.split())  # rich/click may wrap
    assert "8 problems on 8 lines" in out
    assert "line 1: member contains the control character U+0007" in out
    assert "line 5:" in out and "line 6:" not in out and "(and 3 more)" in out
    assert env.digest() == before


def test_running_season_reads_keep_coming_from_the_live_board(env: Env) -> None:
    want = [(e.member, e.score) for e in env.app.top("kills", "season", limit=100).entries]
    assert want  # the fixture wrote live scores of S3
    before = env.digest()
    fake = ranked("kills", [("intruder", 1e6, {})])
    result = env.cli("restore", str(write_archive(env.tmp / "bad", "S3", fake)))
    assert result.exit_code == 2 and "running" in result.output
    assert env.digest() == before
    env.app.submit("kills", "newcomer", 3)
    got = [(e.member, e.score) for e in env.app.top("kills", "season", limit=100).entries]
    assert sorted(got) == sorted(want + [("newcomer", 3.0)])


def test_restore_loads_the_file_and_reads_return_it(env: Env) -> None:
    for board in ("kills", "laps"):
        lines = ranked(board, [
            ("ann", 50, {"clan": "a"}), ("bob", 40, {}), ("cid", 40, {"n": 1.5}),
            ("dan", 7, {"ok": True}), ("üñ/ quo\"te", 61.5, {}),
        ])  # fmt: skip
        data = write_archive(env.tmp / "in" / board, "S2", lines, board=board)
        result = env.cli("restore", str(data), "--json")
        assert result.exit_code == 0, result.output
        out = json.loads(result.output)
        assert out["action"] == "restored" and out["restored"]["count"] == 5
        assert zset(env.r, env.archive(board, "S2")) == {ln["member"]: ln["score"] for ln in lines}
        assert env.r.ttl(env.archive(board, "S2")) == -1
        assert env.r.hget(f"{NS}:{{{board}}}:state", "season:S2") == b"archived"
        page = env.app.top(board, "season", period="S2", limit=100)
        got = [(e.rank, e.member, e.score, e.metadata) for e in page.entries]
        assert got == [(ln["rank"], ln["member"], ln["score"], ln["metadata"]) for ln in lines]
    assert not list(env.r.scan_iter(match="*:tmp:*"))


def test_an_archive_key_with_other_standings_needs_force(env: Env) -> None:
    # The fixture restored good() as kills S1.
    other = good(bonus=100)
    data = write_archive(env.tmp / "other", "S1", other)
    before = env.digest()
    result = env.cli("restore", str(data))
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert f"archive key {env.archive('kills', 'S1')} holds 6 members that differ" in text
    assert "--force" in text
    assert env.digest() == before

    result = env.cli("restore", str(data), "--force", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["action"] == "replaced"
    assert zset(env.r, env.archive("kills", "S1")) == {ln["member"]: ln["score"] for ln in other}


def test_the_same_standings_again_change_nothing(env: Env) -> None:
    before = env.digest()
    again = write_archive(env.tmp / "again", "S1", good())  # the fixture's file, once more
    for _ in range(2):
        result = env.cli("restore", str(again), "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["action"] == "unchanged"
        assert env.digest() == before


def test_a_snapshot_loads_only_into_its_own_key(env: Env) -> None:
    live = env.app.top("kills", "season", period="S3", limit=100)
    stamp = (NOW - timedelta(days=1)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    sid = f"S3@{stamp}"
    lines = ranked("kills", [("snap", 99, {}), ("shot", 98, {})])
    result = env.cli("restore", str(write_archive(env.tmp / "snap", sid, lines)))
    assert result.exit_code == 0, result.output
    assert zset(env.r, env.archive("kills", sid)) == {"snap": 99.0, "shot": 98.0}
    assert env.r.hget(f"{NS}:{{kills}}:state", f"season:{sid}") is None
    assert env.app.top("kills", "season", period="S3", limit=100) == live
    # A snapshot dated after now is refused.
    later = (NOW + timedelta(hours=1)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    result = env.cli("restore", str(write_archive(env.tmp / "snap", f"S3@{later}", lines)))
    assert result.exit_code == 2 and "dated in the future" in result.output


def test_file_and_all_are_one_or_the_other(env: Env) -> None:
    data = write_archive(env.tmp / "x", "S2", good())
    assert env.cli("restore").exit_code == 2
    assert env.cli("restore", str(data), "--all").exit_code == 2


def _namespace(env: Env) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Archive files of two boards and two ended seasons (and a snapshot) in the archive
    folder; returns what each holds, from the lists written."""
    root = env.settings.archive.dir / NS
    written = {}
    for board in ("kills", "laps"):
        for season, n in (("S1", 5), ("S2", 9)):
            entries = [
                (f"{board[0]}{season}-{i}", float((i * 13) % 7), {"i": i} if i % 3 else {})
                for i in range(n)
            ]
            lines = ranked(board, entries)
            write_archive(root / board, season, lines, board=board)
            written[(board, season)] = lines
    sid = "S3@" + (NOW - timedelta(hours=5)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    lines = ranked("laps", [("early", 12.5, {}), ("bird", 12.5, {"w": "x"})])
    write_archive(root / "laps", sid, lines, board="laps")
    written[("laps", sid)] = lines
    return written


@pytest.mark.both_backends
def test_restore_all_after_flushall_brings_back_every_archive(env: Env) -> None:
    written = _namespace(env)
    env.r.flushall()  # Redis lost everything
    env.r.set(f"{NS}:safe_mode", json.dumps({"reason": "data_loss", "message": "gone"}))
    result = env.cli("restore", "--all", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["recovered"] is True and out["failed"] == []
    reported = {(x["board"], x["season"]): x["count"] for x in out["restored"]}
    assert reported == {k: len(v) for k, v in written.items()}
    for (board, season), lines in written.items():
        assert zset(env.r, env.archive(board, season)) == {
            ln["member"]: ln["score"] for ln in lines
        }
        page = env.app.top(board, "season", period=season, limit=100)
        got = [(e.rank, e.member, e.score, e.metadata) for e in page.entries]
        assert got == [(ln["rank"], ln["member"], ln["score"], ln["metadata"]) for ln in lines]
        state = env.r.hget(f"{NS}:{{{board}}}:state", f"season:{season}")
        assert state == (None if "@" in season else b"archived")
    assert not env.r.exists(f"{NS}:safe_mode")
    assert env.r.exists(f"{NS}:marker")
    # Again: every file unchanged; only the marker is renewed (and the run is one more
    # entry of the audit trail).
    before = snapshot(env.r)
    result = env.cli("restore", "--all")
    assert result.exit_code == 0, result.output
    assert result.output.count("unchanged") == len(written)
    after = snapshot(env.r)
    marker, audit = f"{NS}:marker".encode(), f"{NS}:audit".encode()
    assert after[marker] != before.pop(marker)
    assert env.r.xlen(audit) == 2
    before.pop(audit)
    assert {k: v for k, v in after.items() if k not in (marker, audit)} == before


def test_restore_all_writes_nothing_when_any_file_fails(env: Env) -> None:
    _namespace(env)
    root = env.settings.archive.dir / NS
    bad = ranked("laps", [("ok", 1, {}), ("tab\there", 2, {})])
    write_archive(root / "laps", "S0", bad, board="laps")  # unknown season too
    # A laps file in the folder of kills:
    write_archive(root / "kills", "S2", ranked("laps", [("a", 1, {})]), board="laps")
    env.r.flushall()
    env.r.set(f"{NS}:safe_mode", json.dumps({"reason": "data_loss", "message": "gone"}))
    before = env.digest()
    result = env.cli("restore", "--all", "--json")
    assert result.exit_code == 2, result.output
    out = json.loads(result.output)
    assert out["restored"] == [] and out["recovered"] is False
    failed = {Path(f["file"]).relative_to(root).as_posix(): f["message"] for f in out["failed"]}
    assert set(failed) == {"laps/S0.jsonl.gz", "kills/S2.jsonl.gz"}
    assert "unknown season 'S0'" in failed["laps/S0.jsonl.gz"]
    assert (
        "names board 'laps', but the file is in the folder of board 'kills'"
        in failed["kills/S2.jsonl.gz"]
    )
    assert env.digest() == before  # safe mode still on, nothing loaded


def test_restore_all_with_no_archives_fails(env: Env) -> None:
    result = env.cli("restore", "--all")
    assert result.exit_code == 1
    assert "no archive files" in result.output


def test_acknowledge_loss_ends_safe_mode(env: Env) -> None:
    record = {"reason": "data_loss", "message": "Redis lost Seasons' data", "worker": "w1",
              "detected_at": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    env.r.set(f"{NS}:safe_mode", json.dumps(record))
    result = env.cli("acknowledge-loss", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"safe_mode": record, "acknowledged": True}
    assert not env.r.exists(f"{NS}:safe_mode")
    marker = json.loads(env.r.get(f"{NS}:marker"))
    assert marker["reason"] == "acknowledged"
    result = env.cli("acknowledge-loss")
    assert result.exit_code == 0 and "not in safe mode" in result.output


def test_cli_time_is_the_clock(env: Env) -> None:
    # S2 ended one minute ago by this test's clock: restorable now, refused a minute earlier.
    end = local(today() + timedelta(days=14), 0)
    data = write_archive(env.tmp / "edge", "S2", good())
    env.clock.set(end - timedelta(minutes=1))
    assert env.cli("restore", str(data)).exit_code == 2
    env.clock.set(end + timedelta(minutes=1))
    assert env.cli("restore", str(data)).exit_code == 0


def test_progress_counts_rows_up_to_the_total(env: Env) -> None:
    entries = [(f"m{i:05d}", float(i % 97), {}) for i in range(2500)]
    data = write_archive(env.tmp / "big", "S2", ranked("kills", entries))
    seen: list[tuple[int, int]] = []
    restorer = Restorer(env.app.client, env.settings, env.app.keys)
    done = restorer.restore(data, NOW, progress=lambda n, total: seen.append((n, total)))
    assert done.count == 2500 and done.action == "restored"
    assert seen[-1] == (2500, 2500) and len(seen) >= 3
    assert [n for n, _ in seen] == sorted(n for n, _ in seen)
    assert len(zset(env.r, env.archive("kills", "S2"))) == 2500


RAW_MANIFESTS: list[tuple[str, bytes, str]] = [
    ("not an object", b'["kills", "S2"]', "it is a JSON list, not an object"),
    ("not JSON", b'{"board": "kills",', "is invalid: Expecting property name"),
    ("not UTF-8", b'{"board": "k\xffills"}', "is invalid: 'utf-8' codec can't decode"),
    ("over the limit", b'{"board": "kills"' + b" " * MANIFEST_MAX + b"}",
     f"larger than {MANIFEST_MAX} bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "says"), [m[1:] for m in RAW_MANIFESTS],
                         ids=[m[0] for m in RAW_MANIFESTS])  # fmt: skip
def test_a_manifest_that_is_not_one_is_refused(env: Env, raw: bytes, says: str) -> None:
    data = write_archive(env.tmp / "bad", "S2", good())
    data.with_name("S2.manifest.json").write_bytes(raw)
    before = snapshot(env.r)
    result = env.cli("restore", str(data))
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert says in out and "nothing restored" in out, out
    assert snapshot(env.r) == before


def test_restore_all_loads_nothing_when_one_manifest_has_a_bad_created_at(env: Env) -> None:
    # Every file is checked, the manifest's fields too, before any is loaded: the others
    # are good and come first in the order of loading (kills before laps, S1 before S3).
    written = _namespace(env)
    root = env.settings.archive.dir / NS
    write_archive(root / "laps", "S2", written[("laps", "S2")], board="laps",
                  created_at="not-a-time")  # fmt: skip
    env.r.flushall()
    env.r.set(f"{NS}:safe_mode", json.dumps({"reason": "data_loss", "message": "gone"}))
    before = snapshot(env.r)
    result = env.cli("restore", "--all", "--json")
    assert result.exit_code == 2, result.output
    out = json.loads(result.output)
    assert out["restored"] == [] and out["recovered"] is False
    assert [Path(f["file"]).relative_to(root).as_posix() for f in out["failed"]] == [
        "laps/S2.jsonl.gz"
    ]
    assert "created_at 'not-a-time' is not an ISO 8601 time" in out["failed"][0]["message"]
    assert snapshot(env.r) == before


def test_restore_all_follows_no_link_out_of_the_archive_folder(env: Env) -> None:
    written = _namespace(env)
    root = env.settings.archive.dir / NS
    # A good archive outside archive.dir, linked into the folder of kills (data and manifest).
    outside = write_archive(env.tmp / "elsewhere", "S2", good(bonus=50))
    for name in ("S2.jsonl.gz", "S2.manifest.json"):
        (root / "kills" / name).unlink()
        (root / "kills" / name).symlink_to(outside.with_name(name))
    env.r.flushall()
    before = snapshot(env.r)
    result = env.cli("restore", "--all", "--json")
    assert result.exit_code == 2, result.output
    out = json.loads(result.output)
    assert out["restored"] == [] and len(out["failed"]) == 1
    message = out["failed"][0]["message"]
    assert "kills/S2.manifest.json is a link to" in message and "outside" in message
    assert snapshot(env.r) == before
    # A link that stays inside archive.dir is followed.
    for name in ("S2.jsonl.gz", "S2.manifest.json"):
        (root / "kills" / name).unlink()
        (env.settings.archive.dir / name).write_bytes(outside.with_name(name).read_bytes())
        (root / "kills" / name).symlink_to(env.settings.archive.dir / name)
    result = env.cli("restore", "--all", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["restored"]) == len(written)
    assert zset(env.r, env.archive("kills", "S2")) == {
        ln["member"]: ln["score"] for ln in good(bonus=50)
    }


def test_a_file_of_duplicate_lines_stops_being_read_once_it_is_clearly_bad(env: Env) -> None:
    # 200 000 copies of one line: each after the first repeats a member and a rank.
    n = 200_000
    data = write_archive(env.tmp / "dup", "S2", [_line(1, "same", 5)] * n)
    before = snapshot(env.r)
    restorer = Restorer(env.app.client, env.settings, env.app.keys)
    with pytest.raises(ArchiveRejected) as caught:
        restorer.check(data, NOW)
    details = caught.value.details
    assert details["stopped"] == "reading stopped at line 1001: 1000 bad lines"
    assert details["lines"] == 1000 and details["problems"] == 2000
    assert len(details["first"]) == 100
    assert details["first"][:2] == [
        {"line": 2, "problem": "member 'same' is already on line 1"},
        {"line": 2, "problem": "rank 1 should be 2 (ties='member')"},
    ]
    result = env.cli("restore", str(data))
    assert result.exit_code == 2, result.output
    assert "reading stopped at line 1001" in " ".join(result.output.split())
    assert snapshot(env.r) == before


def test_lines_past_the_manifests_count_are_not_read(env: Env) -> None:
    lines = good(n=6)
    data = write_archive(env.tmp / "long", "S2", lines, count=3)
    restorer = Restorer(env.app.client, env.settings, env.app.keys)
    with pytest.raises(ArchiveRejected) as caught:
        restorer.check(data, NOW)
    assert caught.value.details["first"] == [
        {"line": 4, "problem": "is past the end: its manifest says 3 members"}
    ]


# --- files that would hang or exhaust a restore: `seasons restore` as a real process --------

ROOT = Path(__file__).resolve().parent.parent
RUN_CLI = """
import resource, sys
from datetime import datetime

resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # read without bound: fail fast
from seasons.cli import cli
from seasons.cli.common import CliState
from seasons.clock import ManualClock
from seasons.config import load_settings

state = CliState(clock=ManualClock(datetime.fromisoformat(sys.argv[1])), settings=load_settings())
try:
    cli.main(sys.argv[2:], obj=state, prog_name="seasons")
finally:
    with open("/proc/self/status") as f:  # the peak resident size of this process
        sys.stderr.write("\\n" + next(x for x in f if x.startswith("VmHWM:")))
"""


@dataclass
class Run:
    code: int
    output: str  # stdout and stderr
    peak_mib: float  # VmHWM


def run_restore(env: Env, *args: str, timeout: float = 60) -> Run:
    """``seasons restore ARGS`` in a process of its own, at the tests' NOW. A restore that
    hangs is killed after ``timeout`` seconds and fails the test; its address space is
    capped (2 GiB), so one reading without bound fails fast instead of taking the machine."""
    config = env.tmp / "seasons.toml"
    config.write_text(toml_text(env.settings))
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    environ["SEASONS_CONFIG"] = str(config)

    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN_CLI, NOW.isoformat(), "restore", *args], cwd=ROOT,
            env=environ, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"seasons restore {' '.join(args)} still running after {timeout} s")
    peak = re.search(r"VmHWM:\s+(\d+) kB", done.stderr)
    assert peak is not None, done.stderr
    return Run(done.returncode, done.stdout + done.stderr, int(peak.group(1)) / 1024)


def test_a_line_of_100_mb_is_refused_without_reading_it(env: Env) -> None:
    folder = env.tmp / "huge"
    folder.mkdir()
    data = folder / "S2.jsonl.gz"
    with gzip.GzipFile(data, "wb", mtime=0) as gz:  # 100 MB of "a" in ~100 KB of gzip
        block = b"a" * (1 << 20)
        for _ in range(100):
            gz.write(block)
        gz.write(b"\n")
    assert data.stat().st_size < 1 << 20
    write_manifest(data, count=1)
    before = snapshot(env.r)
    small = run_restore(env, str(write_archive(env.tmp / "small", "S2", ["{oops"])))
    assert small.code == 2, small.output
    huge = run_restore(env, str(data))
    assert huge.code == 2, huge.output
    assert "line 1: is longer than 65536 bytes" in huge.output and "Traceback" not in huge.output
    # Reading it whole would take 100 MB for the bytes, as much again for the text.
    assert huge.peak_mib - small.peak_mib < 50, (huge.peak_mib, small.peak_mib)
    assert snapshot(env.r) == before


def write_manifest(data: Path, **fields: Any) -> None:
    """A truthful manifest of the data file ``data`` of kills, with ``fields`` overriding."""
    season = data.name.removesuffix(".jsonl.gz")
    manifest = {
        "board": "kills", "season": season, "count": 0, "score_sum": 0.0,
        "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "created_at": "2026-01-01T00:00:00Z", **fields,
    }  # fmt: skip
    data.with_name(f"{season}.manifest.json").write_text(json.dumps(manifest))


SPECIAL = ["manifest a FIFO", "manifest a link to /dev/zero", "data a link to /dev/zero",
           "data a FIFO"]  # fmt: skip


@pytest.mark.parametrize("case", SPECIAL)
def test_a_file_that_is_not_a_regular_file_is_refused_at_once(env: Env, case: str) -> None:
    data = write_archive(env.tmp / "special", "S2", good())
    target = data if case.startswith("data") else data.with_name("S2.manifest.json")
    target.unlink()
    if case.endswith("FIFO"):
        os.mkfifo(target)  # nobody writes it: a plain open for reading blocks
        kind = "a FIFO"
    else:
        target.symlink_to("/dev/zero")  # never ends
        kind = "a character device"
    before = snapshot(env.r)
    run = run_restore(env, str(data))
    assert run.code == 2, run.output
    assert f"is not a regular file ({kind})" in run.output, run.output
    assert "nothing restored" in run.output and "Traceback" not in run.output
    assert snapshot(env.r) == before


# --- rewards and claims as they stood at the close (seasons.closed, seasons.claimlog) -------

TIERS = [{"ranks": "1", "reward": "gold"}, {"ranks": "2-3", "reward": "silver"}]


def with_rewards(lines: list[dict[str, Any]], rewards: dict[int, str]) -> list[dict[str, Any]]:
    """The lines with the reward of each rank (null below the tiers), as a close writes them."""
    return [{**ln, "reward": rewards.get(ln["rank"])} for ln in lines]


@pytest.fixture
def tiered(settings_factory, r, tmp_path: Path):
    boards = {"kills": {**BOARDS["kills"], "rewards": TIERS}, "laps": BOARDS["laps"]}
    e = Env(season_settings(settings_factory, tmp_path / "archive", boards=boards), r, tmp_path)
    yield e
    e.app.close()


def test_a_forged_reward_is_refused_with_force_too(tiered: Env) -> None:
    lines = with_rewards(good(), {1: "gold", 2: "silver", 3: "silver"})
    data = write_archive(tiered.tmp / "in", "S1", lines, tiers=TIERS)
    result = tiered.cli("restore", str(data))
    assert result.exit_code == 0, result.output
    assert tiered.app.rewards("kills", "S1", lines[3]["member"]).reward is None
    before = tiered.digest()
    # Rank 4 made gold, the file's sha256 and the manifest written to match.
    forged = [dict(ln) for ln in lines]
    forged[3]["reward"] = "gold"
    folder = tiered.tmp / "forged"
    for standings in (forged, [{**ln, "score": ln["score"] + 100} for ln in forged]):
        data = write_archive(folder, "S1", standings, tiers=TIERS)
        for flags in ((), ("--force",)):
            result = tiered.cli("restore", str(data), *flags)
            assert result.exit_code == 2, result.output
            text = " ".join(result.output.split())
            assert "line 4: reward 'gold' is not the one rank 4 gets, None" in text
            assert tiered.digest() == before


def test_an_old_manifest_gets_rewards_recomputed_not_read(tiered: Env) -> None:
    # A manifest written before "tiers": the configured tiers give the rewards, whatever the
    # lines say (a forget before then left rewards that no longer match their lines' ranks).
    lines = with_rewards(good(), {1: "silver", 4: "gold"})
    result = tiered.cli("restore", str(write_archive(tiered.tmp / "in", "S1", lines)), "--force")
    assert result.exit_code == 0, result.output
    got = [tiered.app.rewards("kills", "S1", ln["member"]).reward for ln in lines]
    assert got == ["gold", "silver", "silver", None, None, None]


def test_the_tiers_of_the_close_stand_over_the_configured_ones(tiered: Env) -> None:
    # The close's tiers (recorded in the manifest) granted gold to ranks 1-3; the board's
    # configuration says otherwise now. Restore gives the results of the close.
    then = [{"ranks": "1-3", "reward": "gold"}]
    lines = with_rewards(good(), {1: "gold", 2: "gold", 3: "gold"})
    data = write_archive(tiered.tmp / "in", "S2", lines, tiers=then)
    result = tiered.cli("restore", str(data))
    assert result.exit_code == 0, result.output
    got = [tiered.app.rewards("kills", "S2", ln["member"]).reward for ln in lines]
    assert got == ["gold", "gold", "gold", None, None, None]
    page = tiered.app.rewards("kills", "S2")
    assert isinstance(page, RewardsPage)
    summary = page.summary
    assert [(t.tier, t.reward, t.count) for t in summary.tiers] == [("1-3", "gold", 3)]
    # The same lines under the configured tiers are refused: line 2 would be silver.
    other = write_archive(tiered.tmp / "other", "S2", lines, tiers=TIERS)
    result = tiered.cli("restore", str(other))
    assert result.exit_code == 2 and "line 2: reward 'gold'" in " ".join(result.output.split())


def test_the_claims_log_is_checked_and_loaded_back(tiered: Env) -> None:
    lines = with_rewards(good(), {1: "gold", 2: "silver", 3: "silver"})
    data = write_archive(tiered.tmp / "in", "S1", lines)
    log = data.with_name("S1.claims.jsonl")

    def claim(n: int, claim_id: str, **over: Any) -> str:
        ln = lines[n]
        row = {
            "board": "kills", "season": "S1", "member": ln["member"], "reward": ln["reward"],
            "rank": ln["rank"], "claim_id": claim_id, "claimed_at": f"2026-01-0{n + 2}T00:00:00Z",
        }  # fmt: skip
        return json.dumps({**row, **over}) + "\n"

    claims = claim(0, "c-0") + claim(0, "c-0") + claim(1, "c-1", member="gone") + claim(2, "c-2")
    # A claim whose reward is not the member's result: refused, naming the line.
    log.write_text(claims + claim(1, "c-1", reward="gold"))
    before = tiered.digest()
    result = tiered.cli("restore", str(data))
    assert result.exit_code == 2, result.output
    assert "line 5: claims 'gold' at rank 2, but member" in " ".join(result.output.split())
    assert tiered.digest() == before
    # A member forgotten since (no line), a resend, and a last line cut off (never answered).
    log.write_text(claims + claim(1, "c-9")[:30])
    result = tiered.cli("restore", str(data))
    assert result.exit_code == 0, result.output
    stored = tiered.r.hgetall(f"{NS}:{{kills}}:claims:S1")
    assert {k.decode(): json.loads(v) for k, v in stored.items()} == {
        lines[n]["member"]: {
            "claimed_at": f"2026-01-0{n + 2}T00:00:00Z", "reward": lines[n]["reward"],
            "rank": lines[n]["rank"], "claim_id": f"c-{n}",
        }
        for n in (0, 2)
    }  # fmt: skip
    assert (
        tiered.app.claim("kills", "S1", lines[0]["member"], claim_id="c-0").already_claimed is False
    )
    assert tiered.app.claim("kills", "S1", lines[0]["member"]).already_claimed is True
    assert tiered.app.claim("kills", "S1", lines[1]["member"]).already_claimed is False
