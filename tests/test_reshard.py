"""``seasons reshard`` (docs/sharding.md#changing-the-shard-count): a board's keys moved from
1 to 3 shards, 3 to 5, 5 to 2 and back to 1; after each move every read answers as before
(a hidden member's self-view and a banned member's records included), every member's keys,
twins and moderation records are on its store under the new count, nothing is left on the
old stores, the event ids still refuse a resend, and the archive of the closed season stays.
A running season is refused without --force, changing nothing.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from seasons import Seasons, shards
from seasons.cli import cli
from seasons.cli.common import CliState
from seasons.clock import ManualClock
from seasons.config import load_settings
from seasons.jobs.rollup import Rollup

NS = "rs"
# Season S1 is 2099-01-05 .. 2099-01-11; S2 begins 2099-01-12.
ANCHOR = date(2099, 1, 5)
BOUNDARY = datetime(2099, 1, 12, 6, tzinfo=UTC)


def toml(shards_count: int, archive: Path) -> str:
    return f"""
namespace = "{NS}"
timezone = "UTC"
[archive]
dir = "{archive}"
[seasons]
length_days = 7
anchor = "{ANCHOR}"
[boards.kills]
week_weights = [1, 1, 1, 1, 1, 2, 2]
windows = ["day", "week", "season", "alltime"]
shards = {shards_count}
[boards.laps]
aggregate = "min"
order = "asc"
ties = "shared"
max_entries = 12
shards = {shards_count}
[boards.first]
ties = "earliest"
shards = {shards_count}
"""


# The boards moved: all-time, shared ties and trimmed, earliest ties (reach sets).
BOARDS = ("kills", "laps", "first")


class Board:
    def __init__(self, redis_settings: dict[str, Any], tmp_path: Path):
        self.path, self.archive = tmp_path / "seasons.toml", tmp_path / "archive"
        self.env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SEASONS_")}
        self.env |= {
            "SEASONS_REDIS__URL": redis_settings["url"],
            "SEASONS_REDIS__CLUSTER": "true" if redis_settings["cluster"] else "false",
            "SEASONS_CONFIG": str(self.path),
        }
        self.clock = ManualClock(datetime(2099, 1, 9, 12, tzinfo=UTC))

    def app(self, count: int) -> Seasons:
        self.path.write_text(toml(count, self.archive))
        environ = {k: v for k, v in self.env.items() if v is not None}
        return Seasons(load_settings(environ=environ), clock=self.clock)

    def cli(self, count: int, *args: str) -> Any:
        self.path.write_text(toml(count, self.archive))
        return CliRunner().invoke(
            cli, list(args), env=self.env, obj=CliState(clock=ManualClock(self.clock()))
        )


def reads(app: Seasons) -> list[Any]:
    out: list[Any] = []
    for board in BOARDS:
        windows = [
            ("day", "2099-01-09"),
            ("day", "2099-01-12"),
            ("week", "current"),
            ("season", "S1"),
            ("season", "S2"),
        ]
        if board == "kills":
            windows.append(("alltime", "current"))
        for window, period in windows:
            out.append(app.top(board, window, period=period, limit=50))
            for member in ("p1", "p7", "p3", "Ünï", "nobody"):
                out.append(app.rank(board, member, window, period=period))
                out.append(app.around(board, member, window, period=period, size=3))
    out += [app.moderation(m) for m in ("p7", "p3", "p1")]
    return [None if x is None else x.model_dump(mode="json") for x in out]


def placed(app: Seasons, count: int) -> None:
    """Every member of every live board key is on its store under ``count``, and no key
    of another store holds entries."""
    client = app.client
    for board in BOARDS:
        stores = [board] if count == 1 else [shards.store(board, i) for i in range(count)]
        for key in client.scan_iter(match=f"{NS}:{{{board}*"):
            parsed = app.keys.parse(key)
            assert parsed is not None and parsed.board is not None
            if parsed.kind == "hidden" and parsed.ident.startswith(
                ("archive:", "reached:archive:")
            ):
                continue  # the board's own: an archive's twin, its reach set's twin
            if parsed.kind == "reached" and parsed.ident.startswith("archive:"):
                continue  # the board's own: an archive's reach set
            if parsed.kind in ("day", "week", "season", "hidden", "moderation", "reached"):
                assert parsed.board in stores or parsed.kind == "moderation", key
                found = client.hkeys(key) if parsed.kind == "moderation" else client.zrange(
                    key, 0, -1)  # fmt: skip
                if parsed.board == board and parsed.kind == "moderation":
                    continue  # the board's copy of every record (seasons.moderation)
                for m in found:
                    assert shards.member_store(board, app.settings.boards[board], m) == parsed.board


def test_resharding_moves_every_key_and_changes_no_answer(
    redis_settings: dict[str, Any], tmp_path: Path, r: Any
) -> None:
    b = Board(redis_settings, tmp_path)
    with b.app(1) as app:
        events = []
        for day in range(5):  # 2099-01-05 .. 01-09, S1
            at = datetime(2099, 1, 5 + day, 10, tzinfo=UTC)
            for i in range(40):
                member = "Ünï" if i == 39 else f"p{(i * 7 + day) % 23}"
                ts = at + timedelta(seconds=i % 3)  # reach times that tie, and differ
                events += [
                    {"board": board, "member": member, "value": (i * 13 + day) % 17,
                     "ts": ts, "event_id": f"{board}-{day}-{i}", "metadata": {"n": i}}
                    for board in BOARDS
                ]  # fmt: skip
        app.submit_many(events, backfill=True)
        b.clock.set(BOUNDARY)
        from seasons.jobs.worker import Worker

        Worker(app).tick(b.clock())  # S1 closed and archived
        app.submit_many([{"board": "kills", "member": "p1", "value": 3, "event_id": "late"}])
        app.moderate("p7", "hidden", mode="open", reason="smurfing")
        app.moderate("p3", "banned", boards=["kills", "first"], reason="cheating")
        day = app.keys.window("kills", "day", "2099-01-09")
        assert app.client.zscore(app.keys.twin_of(day), "p7") is not None  # on the twin
        before = reads(app)
        archived = [app.top(b_, "season", period="S1", limit=50) for b_ in BOARDS]
    # A running season: S2 holds p1's entry. Refused, nothing changed.
    refused = b.cli(3, "reshard", "--board", "kills", "--from", "1")
    assert refused.exit_code == 1 and "running" in refused.output
    with b.app(1) as app:
        assert reads(app) == before
    for old, new in ((1, 3), (3, 5), (5, 2), (2, 1)):
        for board in BOARDS:
            done = b.cli(new, "reshard", "--board", board, "--from", str(old), "--force", "--json")
            assert done.exit_code == 0, done.output
            assert json.loads(done.stdout)["to"] == new
        with b.app(new) as app:
            assert reads(app) == before, (old, new)
            # Recomputed from the moved days and all-time bases, the boards are the same.
            Rollup(app.client, app.scripts, app.settings, app.keys).run(b.clock())
            assert reads(app) == before, (old, new)
            placed(app, new)
            assert [app.top(b_, "season", period="S1", limit=50) for b_ in BOARDS] == archived
            again = app.submit_many([
                {"board": "kills", "member": "p1", "value": 3, "event_id": "late"}
            ])  # fmt: skip
            assert (again.applied, again.duplicates) == (0, 1)  # its id still known
    # Wrong counts are refused, naming the option.
    same = b.cli(1, "reshard", "--board", "kills", "--from", "1")
    assert same.exit_code == 2 and "--from" in same.output
    unknown = b.cli(1, "reshard", "--board", "nope", "--from", "2")
    assert unknown.exit_code == 2


@pytest.mark.parametrize(("old", "new", "step"), [(1, 3, "_move"), (3, 2, "_evict")])
def test_a_reshard_killed_midway_is_finished_by_running_it_again(
    redis_settings: dict[str, Any], tmp_path: Path, r: Any, old: int, new: int, step: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from seasons import reshard as module

    b = Board(redis_settings, tmp_path)
    with b.app(1) as app:
        ts = datetime(2099, 1, 9, 10, tzinfo=UTC)
        app.submit_many([
            {"board": "kills", "member": f"m{i}", "value": i % 9, "ts": ts, "metadata": {"i": i}}
            for i in range(300)
        ], backfill=True)  # fmt: skip
        before = reads(app)
    b.clock.set(BOUNDARY + timedelta(days=7))  # S3, empty: a season boundary
    if old != 1:
        assert b.cli(old, "reshard", "--board", "kills", "--from", "1").exit_code == 0
    calls = {"n": 0}
    real = getattr(module, step)

    def dying(*args: Any) -> Any:  # the process dies in the middle of the move
        calls["n"] += 1
        if calls["n"] == 2:
            raise SystemExit(137)
        return real(*args)

    monkeypatch.setattr(module, step, dying)
    assert b.cli(new, "reshard", "--board", "kills", "--from", str(old)).exit_code != 0
    assert calls["n"] == 2
    monkeypatch.setattr(module, step, real)
    done = b.cli(new, "reshard", "--board", "kills", "--from", str(old))
    assert done.exit_code == 0, done.output
    b.clock.set(datetime(2099, 1, 9, 12, tzinfo=UTC))
    with b.app(new) as app:
        assert reads(app) == before
        placed(app, new)


def test_held_events_under_review_refuse_a_reshard(
    redis_settings: dict[str, Any], tmp_path: Path, r: Any
) -> None:
    b = Board(redis_settings, tmp_path)
    b.clock.set(BOUNDARY + timedelta(days=7))  # S3, empty: a season boundary
    rate = '\nmember_rate = { events = 1, per = "PT1H" }\n'
    toml_text = toml(1, b.archive).replace(
        "shards = 1\n[boards.laps]", f"shards = 1{rate}[boards.laps]"
    )
    b.path.write_text(toml_text)
    environ = {k: v for k, v in b.env.items() if v is not None}
    with Seasons(load_settings(environ=environ), clock=b.clock) as app:
        got = app.submit_many([{"board": "kills", "member": "p1", "value": 1}] * 2)
        assert got.held == 1
        held = app.held("kills").events[0].event_id
    runner = CliRunner()
    argv = ["reshard", "--board", "kills", "--from", "1", "--force"]
    state = CliState(clock=ManualClock(b.clock()))
    b.path.write_text(toml_text.replace("shards = 1" + rate, "shards = 3" + rate, 1))
    refused = runner.invoke(cli, argv, env=b.env, obj=state)
    assert refused.exit_code == 1 and "held" in refused.output
    assert r.exists(f"{NS}:{{kills}}:day:{b.clock().date()}")  # nothing moved
    b.path.write_text(toml_text)
    with Seasons(load_settings(environ=environ), clock=b.clock) as app:
        app.reject("kills", held)
    b.path.write_text(toml_text.replace("shards = 1" + rate, "shards = 3" + rate, 1))
    done = runner.invoke(cli, argv, env=b.env, obj=state)
    assert done.exit_code == 0, done.output
    assert not r.exists(f"{NS}:{{kills}}:day:{b.clock().date()}")
