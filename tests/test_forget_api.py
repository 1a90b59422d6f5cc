"""``Seasons.forget``: the erasure of a member from the Python API, answering what ``seasons
forget --json`` prints and ``DELETE /v1/admin/members/{member}`` sends.

Three members with the same history on every board ("twins") are erased through the three
interfaces; each answer must name the same keys (those the reference model puts the member
on, and the archive), and afterwards the member is on no key, in no metadata and in no
archive file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from reference import Model, key, names, snapshot, zset
from worker_support import file_rows

from seasons import Seasons
from seasons.archives import Archives
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.erasure import Forgotten, ForgottenBoard
from seasons.errors import InvalidMember
from seasons.http.app import create_app

pytestmark = pytest.mark.both_backends

NS = "fgt"
NOW = datetime(2099, 3, 11, 15, tzinfo=UTC)  # S3 of a 28-day cycle from 2099-01-05
BOARDS: dict[str, dict[str, Any]] = {
    "kills": {"aggregate": "sum", "windows": ["day", "week", "month", "season"]},
    # Untrimmed: on a trimmed board equal scores would let in one twin and not another.
    "laps": {"aggregate": "min", "order": "asc"},
}
TWINS = ("twin-a", "twin-b", "twin-c")
OTHERS = ("p1", "p2", "p3")


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        namespace=NS, timezone="UTC", seasons={"length_days": 28, "anchor": "2099-01-05"},
        boards=BOARDS, archive={"dir": str(tmp_path / "archive")},
    )  # fmt: skip


@pytest.fixture
def app(settings: Settings) -> Iterator[Seasons]:
    with Seasons(settings, clock=ManualClock(NOW)) as facade:
        yield facade


@pytest.fixture
def model(app: Seasons, settings: Settings) -> Model:
    """Events from S2 into S3, the same for each twin; S2 of ``kills`` archived with files."""
    m = Model(settings)
    events = []
    for n in range(12):
        day = date(2099, 2, 27) + timedelta(days=n)
        ts = datetime(day.year, day.month, day.day, 10, tzinfo=UTC)
        for i, member in enumerate(TWINS + OTHERS):
            value = 1 + (n + (0 if member in TWINS else i)) % 5
            meta = {"name": member.upper()} if n == 0 else None
            for board in BOARDS:
                events.append({"board": board, "member": member, "value": value, "ts": ts,
                               "metadata": meta})  # fmt: skip
    m.submit(events, NOW, backfill=True)
    app.submit_many([{**e, "ts": e["ts"].isoformat()} for e in events], backfill=True)
    archives = Archives(app.client, app.scripts, app.settings, app.keys)
    archives.copy("kills", app.keys.season("kills", "S2"), "S2")
    archives.write_files("kills", "S2", NOW)
    return m


def expected_keys(model: Model, member: str) -> dict[str, list[str]]:
    """Per board, the keys the model puts ``member`` on (live boards, trimmed), and the
    archive of S2 on ``kills``."""
    out: dict[str, list[str]] = {}
    for board in BOARDS:
        found = [
            key(NS, board, w, pid) for w, pid in model.periods(board)
            if member in model.board(board, w, pid)
        ]  # fmt: skip
        if board == "kills":
            found.append(f"{NS}:{{kills}}:archive:S2")
        out[board] = sorted(found)
    return out


def on_nothing(r: redis.Redis, member: str) -> bool:
    for name in names(r, f"{NS}:*"):
        kind = r.type(name)
        if kind == b"zset" and member in zset(r, name):
            return False
        if name.endswith(":meta") and r.hexists(name, member):
            return False
    return True


def cli_json(settings: Settings, *args: str) -> Any:
    result = CliRunner().invoke(
        cli, ["forget", *args], obj=CliState(clock=ManualClock(NOW), settings=settings)
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_forget_answers_one_json_on_every_interface(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings, tmp_path: Path
) -> None:
    from starlette.testclient import TestClient

    archive_file = tmp_path / "archive" / NS / "kills" / "S2.jsonl.gz"
    assert {row[1] for row in file_rows(archive_file)} >= set(TWINS)
    py = app.forget("twin-a")
    assert isinstance(py, Forgotten) and all(
        isinstance(b, ForgottenBoard) for b in py.boards.values()
    )
    printed = json.loads(cli_json(settings, "twin-b", "--json"))
    loopback = ("127.0.0.1", 50000)  # no admin token configured: loopback may administer
    with TestClient(
        create_app(settings, app=app), client=loopback, base_url="http://localhost"
    ) as http:
        resp = http.delete("/v1/admin/members/twin-c")
    assert resp.status_code == 200, resp.text
    sent = resp.json()
    answers = {"twin-a": py.model_dump(), "twin-b": printed, "twin-c": sent}
    for member, answer in answers.items():
        assert answer["member"] == member
        assert {b: sorted(r["keys"]) for b, r in answer["boards"].items()} == expected_keys(
            model, member
        )
        assert all(r["metadata"] for r in answer["boards"].values())
        assert answer["boards"]["kills"]["files_rewritten"] == [str(archive_file)]
        assert answer["boards"]["laps"]["files_rewritten"] == []
        assert on_nothing(r, member)
    # One answer for one erasure: the same JSON from all three, but for the member's name.
    assert {json.dumps({**a, "member": None}, sort_keys=True) for a in answers.values()} == {
        json.dumps({**py.model_dump(), "member": None}, sort_keys=True)
    }
    assert {row[1] for row in file_rows(archive_file)} == set(OTHERS)
    # The others are where they were.
    for member in OTHERS:
        assert app.rank("kills", member, "season") is not None


def test_forget_of_a_member_on_no_board(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings
) -> None:
    before = snapshot(r)
    assert app.forget("nobody") == Forgotten(member="nobody", boards={})
    nothing = {"member": "nobody", "boards": {}, "lifecycle": 0}
    assert json.loads(cli_json(settings, "nobody", "--json")) == nothing
    assert cli_json(settings, "nobody").strip() == "'nobody' was on no board"
    # Nothing changed but the audit trail, where each forget asked is one entry.
    audit = {k for k in snapshot(r) if b":audit" in k}
    assert {k: v for k, v in snapshot(r).items() if k not in audit} == before
    assert [e.action for e in app.audit().entries] == ["forget"] * 3


def test_forget_prints_a_line_per_board(app: Seasons, model: Model, settings: Settings) -> None:
    text = cli_json(settings, "p1").splitlines()
    kills = len(expected_keys(model, "p1")["kills"])
    laps = len(expected_keys(model, "p1")["laps"])
    assert text == [
        f"kills: removed from {kills} keys, metadata, rewrote 1 archive file",
        f"laps: removed from {laps} keys, metadata",
    ]


@pytest.mark.parametrize(
    ("member", "why"),
    [("", "empty"), ("a\x00b", "U+0000"), ("x" * 129, "129 bytes"), ("\ud800", "surrogate")],
)
def test_a_bad_member_is_refused_before_any_redis_call(
    settings_factory: Callable[..., Settings], app: Seasons, r: redis.Redis, model: Model,
    member: str, why: str,
) -> None:  # fmt: skip
    before = snapshot(r)
    with pytest.raises(InvalidMember) as err:
        app.forget(member)
    assert why in err.value.message and err.value.code == "invalid_member"
    assert snapshot(r) == before
    # No Redis at all: still the member's error, not the backend's.
    gone = settings_factory(namespace=NS, redis={"url": "redis://127.0.0.1:1/0", "cluster": False})
    with Seasons(gone, clock=ManualClock(NOW)) as offline, pytest.raises(InvalidMember):
        offline.forget(member)


def test_a_member_stored_before_the_format_character_rule_is_still_erased(
    app: Seasons, r: redis.Redis, model: Model
) -> None:
    legacy = "zw\u200bj"  # a zero-width space: refused by writes and reads today
    day = app.keys.day("kills", "2099-03-10")
    r.zadd(day, {legacy: 3})
    result = app.forget(legacy)
    assert result.boards["kills"].keys == [day] and not result.boards["kills"].metadata
    assert legacy.encode() not in {m for m, _ in r.zrange(day, 0, -1, withscores=True)}
