"""The ``seasons`` CLI (docs/cli.md) against a real Redis, through click's CliRunner.

The CLI is given a manual clock (``obj=CliState(clock=...)``), so every test reads the same
"now" as the Python API it is compared with.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, cast
from zoneinfo import ZoneInfo

import pytest
import redis
from click.testing import CliRunner, Result
from redis_server import free_port

from seasons import Seasons, WriteResult
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.demo import LEVEL_POWER, seed_demo
from seasons.keys import Keys

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

NS = "clitest"
# A Wednesday in season S3 (2099-03-02 ..). Far in the future on purpose: Redis expires keys by
# its own clock, so the EXPIREAT of a day of the test's "now" must not be in the real past.
NOW = datetime(2099, 3, 11, 15, 0, tzinfo=UTC)
TODAY = date(2099, 3, 11)
TOML = f"""
namespace = "{NS}"
timezone = "UTC"

[seasons]
length_days = 28
anchor = "2099-01-05"

[boards.kills]
aggregate = "sum"
week_weights = [1, 1, 1, 1, 1, 2, 2]
season_weights = [1, 1, 2]

[boards.lap]
aggregate = "min"
order = "asc"
ties = "shared"
"""

Run = Callable[..., Result]


@pytest.fixture
def env(redis_settings: dict[str, Any], tmp_path: Path) -> dict[str, str | None]:
    toml = tmp_path / "seasons.toml"
    toml.write_text(TOML)
    # Nothing of the developer's own SEASONS_* environment may leak in.
    cleared: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SEASONS_")}
    return cleared | {
        "SEASONS_REDIS__URL": redis_settings["url"],
        "SEASONS_REDIS__CLUSTER": "true" if redis_settings["cluster"] else "false",
        "SEASONS_CONFIG": str(toml),
    }


@pytest.fixture
def run(env: dict[str, str | None]) -> Run:
    """``run(*args, input=None, **env)``: invoke the CLI; unexpected exceptions propagate."""

    def invoke(*args: str, input: str | None = None, **extra_env: str | None) -> Result:
        result = CliRunner().invoke(
            cli, list(args), input=input, env=env | extra_env, obj=CliState(clock=ManualClock(NOW))
        )
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert "Traceback" not in result.output
        return result

    return invoke


@pytest.fixture
def api(env: dict[str, str | None]) -> Iterator[Seasons]:
    environ = {k: v for k, v in env.items() if v is not None}
    with Seasons(load_settings(environ=environ), clock=ManualClock(NOW)) as app:
        yield app


def out_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def names_line(result: Result, line: int) -> bool:
    return re.search(rf"\bline {line}\b", result.stderr) is not None


def contents(r: redis.Redis) -> dict[bytes, tuple[Any, ...]]:
    """Every key with its type, its contents read back and its expiry; not the batch-id
    records (keyed by batch ids, which are new for each batch)."""
    out: dict[bytes, tuple[Any, ...]] = {}
    for key in sorted(r.scan_iter()):
        if key.endswith((b":batches", b":batch_results")):
            continue
        kind = r.type(key)
        if kind == b"zset":
            value: Any = r.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            value = sorted(r.hgetall(key).items())
        else:
            value = r.dump(key)
        out[key] = (kind, value, r.pexpiretime(key))
    return out


def dumps(r: redis.Redis) -> tuple[int, dict[bytes, Any]]:
    return r.dbsize(), {k: (r.dump(k), r.pexpiretime(k)) for k in r.scan_iter()}


def at(day: date, hour: int, minute: int = 0) -> str:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC).isoformat()


def events_today(n: int, seed: int = 1) -> list[dict[str, Any]]:
    """``n`` events of today (before NOW) on both boards, some with ids, some repeated."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        board = rng.choice(["kills", "lap"])
        ev: dict[str, Any] = {
            "board": board,
            "member": f"m{rng.randint(1, 25):02d}",
            "value": rng.randint(0, 20) if board == "kills" else round(rng.uniform(60, 90), 1),
            "ts": at(TODAY, rng.randint(0, 14), rng.randint(0, 59)),
        }
        if i % 3 == 0:
            ev["event_id"] = f"ev-{i % 25}"  # ids repeat from i = 75 on
        if i % 5 == 0:
            ev["metadata"] = {"name": f"Player {i}", "level": i % 9}
        out.append(ev)
    return out


def write_jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def write_csv(path: Path, events: list[dict[str, Any]]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["board", "member", "value", "ts", "event_id", "metadata"])
    for e in events:
        meta = json.dumps(e["metadata"]) if "metadata" in e else ""
        w.writerow(
            [e["board"], e["member"], e["value"], e.get("ts", ""), e.get("event_id", ""), meta]
        )
    path.write_text(buf.getvalue())
    return path


# --- reads: --json is exactly the API's JSON ---------------------------------------------------


def test_read_commands_print_the_api_json(run: Run, api: Seasons) -> None:
    events = events_today(120)
    api.submit_many(events)
    sums: dict[str, float] = defaultdict(float)
    seen: set[str] = set()
    for e in events:  # an independent day total of kills; event ids are per board
        if e["board"] == "kills" and e.get("event_id") not in seen:
            sums[e["member"]] += e["value"]
            if "event_id" in e:
                seen.add(e["event_id"])
    best = max(sums, key=lambda m: (sums[m], m))

    for window in ("day", "week", "season"):
        top = out_json(run("top", "kills", "--window", window, "--limit", "7", "--json"))
        assert top == api.top("kills", window, limit=7).model_dump()
        assert top["total"] == len(sums) and len(top["entries"]) == 7
        page = out_json(run("top", "lap", "-w", window, "--offset", "3", "--limit", "4", "--json"))
        assert page == api.top("lap", window, offset=3, limit=4).model_dump()
        for member in ("m03", best):
            got = out_json(run("rank", "kills", member, "--window", window, "--json"))
            entry = api.rank("kills", member, window)
            assert entry is not None and got == entry.model_dump()
            got = out_json(run("around", "kills", member, "-w", window, "--size", "3", "--json"))
            around = api.around("kills", member, window, size=3)
            assert around is not None and got == around.model_dump()

    day = out_json(run("top", "kills", "--window", "day", "--limit", "1", "--json"))
    assert day["period"] == TODAY.isoformat()
    assert day["entries"][0]["member"] == best and day["entries"][0]["score"] == sums[best]
    # Wednesday of the season's second week: weight 1 in both week and season boards.
    season = out_json(run("rank", "kills", best, "--json"))
    assert season["score"] == sums[best] and season["rank"] == 1


def test_explicit_and_previous_periods(run: Run, api: Seasons) -> None:
    api.submit_many(events_today(30))
    for period in ("2099-03-11", "2099-03-09", "previous", "current"):
        got = out_json(run("top", "lap", "-w", "week", "--period", period, "--json"))
        assert got == api.top("lap", "week", period=period).model_dump()
    got = out_json(run("top", "kills", "--period", "S3", "--json"))
    assert got["period"] == "S3" and got == api.top("kills", period="S3").model_dump()


def test_history_prints_the_history_json(run: Run, api: Seasons) -> None:
    api.submit_many(events_today(60))
    for window, last in (("day", 5), ("week", 3), ("season", 4)):
        args = ["history", "kills", "m07", "--window", window, "--last", str(last), "--json"]
        got = out_json(run(*args))
        expected = {
            "board": "kills",
            "window": window,
            "member": "m07",
            "history": [p.model_dump() for p in api.history("kills", "m07", window, last=last)],
        }
        assert got == expected
        assert len(got["history"]) == (3 if window == "season" else last)  # S1..S3 so far
    day = out_json(run("history", "kills", "m07", "--json"))  # default: day, last 14
    assert day["window"] == "day" and len(day["history"]) == 14
    assert day["history"][-1]["period"] == TODAY.isoformat()
    assert [p["period"] for p in day["history"]] == [
        (TODAY - timedelta(days=13 - i)).isoformat() for i in range(14)
    ]
    week = out_json(run("history", "kills", "m07", "--window", "week", "--json"))
    assert len(week["history"]) == 12  # a week's history shows 12 weeks by default
    assert "· last 12 weeks" in run("history", "kills", "m07", "--window", "week").output


def test_human_output_is_a_table(run: Run, api: Seasons) -> None:
    api.submit("kills", "ann", 12, metadata={"name": "Ann"})
    api.submit("kills", "bob", 7)
    result = run("top", "kills")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    ann = next(i for i, ln in enumerate(lines) if "ann" in ln)
    bob = next(i for i, ln in enumerate(lines) if "bob" in ln)
    assert ann < bob and "12" in lines[ann] and "name=Ann" in lines[ann]
    assert "S3" in result.stdout
    for args in (["rank", "kills", "bob"], ["around", "kills", "bob"], ["history", "kills", "bob"]):
        result = run(*args)
        assert result.exit_code == 0 and "bob" in result.stdout, args


# --- submit -----------------------------------------------------------------------------------


def test_submit_writes_like_the_api(run: Run, api: Seasons, r: redis.Redis) -> None:
    result = run(
        "submit",
        "kills",
        "ann",
        "5",
        "--ts",
        at(TODAY, 9),
        "--event-id",
        "e1",
        "--meta",
        "name=Ann Lee",
        "--meta",
        "level=3",
        "--meta",
        "vip=true",
        "--meta",
        "ratio=0.5",
        "--meta",
        "tag=007",
        "--meta",
        'quoted="42"',
        "--meta",
        "x=NaN",
        "--json",
    )
    assert out_json(result) == {"applied": 1, "duplicates": 0}
    assert out_json(run("submit", "kills", "ann", "5", "--event-id", "e1", "--json")) == {
        "applied": 0,
        "duplicates": 1,
    }
    run("submit", "kills", "bob", "-2.5")  # a negative value is a value, not an option
    entry = out_json(run("rank", "kills", "ann", "-w", "day", "--json"))
    assert entry["score"] == 5 and entry["rank"] == 1
    assert entry["metadata"] == {
        "name": "Ann Lee",
        "level": 3,
        "vip": True,
        "ratio": 0.5,
        "tag": "007",
        "quoted": "42",
        "x": "NaN",
    }
    bob = api.rank("kills", "bob", "day")
    assert bob is not None and bob.score == -2.5 and bob.rank == 2
    day_key = Keys(NS).day("kills", TODAY)
    assert r.zscore(day_key, "ann") == 5.0  # the public key holds the plain score


def test_meta_null_deletes_a_field(run: Run, api: Seasons) -> None:
    run("submit", "kills", "ann", "1", "--meta", "name=Ann", "--meta", "level=2")
    run("submit", "kills", "ann", "1", "--meta", "level=null")
    entry = api.rank("kills", "ann")
    assert entry is not None and entry.metadata == {"name": "Ann"}


# --- exit statuses ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["top", "nope"], "nope"),
        (["rank", "nope", "ann"], "nope"),
        (["submit", "nope", "ann", "1"], "nope"),
        (["submit", "kills", "ann", "abc"], "abc"),
        (["submit", "kills", "ann", "nan"], "finite"),
        (["submit", "kills", "ann", str(2**53 + 2)], "2^53"),
        (["submit", "kills", "ann", "1", "--ts", "yesterday"], "yesterday"),
        (["submit", "kills", "ann", "1", "--ts", at(TODAY - timedelta(days=2), 9)], "late"),
        (["submit", "kills", "ann", "1", "--meta", "novalue"], "novalue"),
        (["top", "kills", "--limit", "5000"], "limit"),
        (["top", "kills", "--limit", "ten"], "ten"),
        (["top", "kills", "--window", "month"], "month"),
        (["top", "kills", "--period", "S0"], "S0"),
        (["top", "kills", "-w", "day", "--period", "2026-13-01"], "2026-13-01"),
        (["around", "kills", "ann", "--size", "500"], "size"),
        (["history", "kills", "ann", "--last", "0"], "last"),
        (["import", "/no/such/file.jsonl"], "file.jsonl"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_bad_input_is_status_2(
    run: Run, api: Seasons, r: redis.Redis, args: list[str], named: str
) -> None:
    api.submit("kills", "ann", 1)
    before = dumps(r)
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert named in result.stderr
    assert result.stdout == ""
    assert dumps(r) == before


def test_unknown_setting_in_env_is_status_2(run: Run) -> None:
    result = run("top", "kills", SEASONS_BOGUS="1")
    assert result.exit_code == 2
    assert "SEASONS_BOGUS" in result.stderr and "unknown setting" in result.stderr


def test_bad_config_file_is_status_2(run: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[boards.kills]\naggregate = "avg"\n')
    result = run("top", "kills", SEASONS_CONFIG=str(bad))
    assert result.exit_code == 2 and "aggregate" in result.stderr
    result = run("--config", str(tmp_path / "missing.toml"), "config")
    assert result.exit_code == 2 and "missing.toml" in result.stderr


def test_help_works_with_a_broken_config(run: Run) -> None:
    result = run("top", "--help", SEASONS_BOGUS="1")
    assert result.exit_code == 0 and "--window" in result.stdout


@pytest.mark.parametrize("command", ["rank", "around"])
def test_not_ranked_is_status_3(run: Run, api: Seasons, command: str) -> None:
    api.submit("kills", "ann", 1)
    result = run(command, "kills", "zed", "--json")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert "'zed'" in result.stderr and "not ranked" in result.stderr


def test_an_empty_namespace_is_named_on_each_backend(run: Run, api: Seasons) -> None:
    """No key of the namespace on any master (a cluster is scanned node by node): the read
    says so, exit status 1; one write on any board, and an empty board is just empty."""
    result = run("top", "lap", "--json")
    assert result.exit_code == 1 and result.stdout == ""
    assert f"no Seasons data in namespace '{NS}'" in result.stderr
    api.submit("kills", "ann", 1)
    result = run("top", "lap", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["total"] == 0


def test_unreachable_redis_is_status_1(run: Run) -> None:
    result = run("top", "kills", SEASONS_REDIS__URL=f"redis://127.0.0.1:{free_port()}/0")
    assert result.exit_code == 1
    assert "unreachable" in result.stderr


# --- import -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "stdin-jsonl", "stdin-csv", "sniffed"])
def test_import_equals_submit_many(
    run: Run, api: Seasons, r: redis.Redis, tmp_path: Path, fmt: str
) -> None:
    events = events_today(150, seed=5)
    ids = [(e["board"], e["event_id"]) for e in events if "event_id" in e]
    expected_duplicates = len(ids) - len(set(ids))
    assert expected_duplicates > 0
    writer = write_csv if fmt.endswith("csv") else write_jsonl
    path = writer(tmp_path / f"events.{fmt.rsplit('-', 1)[-1]}", events)
    if fmt == "sniffed":
        path = write_jsonl(tmp_path / "events.txt", events)  # no telling extension: sniffed
    if fmt.startswith("stdin"):
        result = run("import", "-", "--json", input=path.read_text())
    else:
        result = run("import", str(path), "--json")
    assert out_json(result) == {
        "applied": len(events) - expected_duplicates,
        "duplicates": expected_duplicates,
    }
    imported = contents(r)
    assert any(b":day:" in k for k in imported)

    r.flushall()
    api.submit_many(events)
    assert contents(r) == imported


def test_import_csv_minimal_columns(run: Run, api: Seasons, tmp_path: Path) -> None:
    path = tmp_path / "few.csv"
    path.write_text("member,value,board\r\nann,3,kills\r\n\r\nbob, 4,kills\r\nann,2.5,kills\r\n")
    result = run("import", str(path))
    assert result.exit_code == 0, result.output
    assert "3 applied" in result.stdout
    ann = api.rank("kills", "ann")
    assert ann is not None and ann.score == 5.5


def test_import_reports_in_batches_and_across_boards(
    run: Run, api: Seasons, tmp_path: Path
) -> None:
    events: list[dict[str, Any]] = [
        {
            "board": "kills" if i % 2 else "lap",
            "member": f"p{i % 300}",
            "value": i % 11,
            "ts": at(TODAY, i % 15),
        }
        for i in range(2600)  # three import batches
    ]
    result = run("import", str(write_jsonl(tmp_path / "many.jsonl", events)))
    assert result.exit_code == 0, result.output
    assert "imported 2600 events" in result.stdout and "2600 applied" in result.stdout
    totals: dict[str, float] = defaultdict(float)
    for e in events:
        if e["board"] == "kills":
            totals[e["member"]] += e["value"]
    page = api.top("kills", "day", limit=1000)
    assert {e.member: e.score for e in page.entries} == totals


def _bad_files(tmp_path: Path) -> Iterator[tuple[str, Path, int | None, str]]:
    good = events_today(12, seed=9)
    lines = [json.dumps(e) for e in good]
    bad_json = lines[:4] + ['{"board": "kills", "member": "x", "value": 1'] + lines[4:]
    p = tmp_path / "bad_json.jsonl"
    p.write_text("\n".join(bad_json) + "\n")
    yield "bad JSON on line 5", p, 5, "JSON"

    bad_event = lines[:6] + [json.dumps({"board": "kills", "member": "x", "value": "ten"})]
    p = tmp_path / "bad_event.jsonl"
    p.write_text("\n".join(bad_event + lines[6:]) + "\n")
    yield "bad event on line 7", p, 7, "value"

    p = tmp_path / "unknown_board.ndjson"
    p.write_text("\n".join(lines[:6] + [json.dumps({**good[0], "board": "nope"})]) + "\n")
    yield "unknown board on line 7", p, 7, "nope"

    p = tmp_path / "array.jsonl"
    p.write_text("\n".join(lines[:2] + ["[1, 2]"]) + "\n")
    yield "not an object on line 3", p, 3, "object"

    p = tmp_path / "no_value.csv"
    p.write_text("board,member,ts\nkills,ann,2099-03-11T10:00:00Z\n")
    yield "CSV without a value column", p, 1, "'value'"

    p = tmp_path / "short_row.csv"
    p.write_text("board,member,value\nkills,ann,1\nkills,bob,2\nkills,carl\n")
    yield "CSV row with too few fields", p, 4, "fields"

    p = tmp_path / "bad_number.csv"
    p.write_text("board,member,value\nkills,ann,1\nkills,bob,lots\n")
    yield "CSV value not a number", p, 3, "lots"

    p = tmp_path / "unknown_column.csv"
    p.write_text("board,member,value,colour\nkills,ann,1,red\n")
    yield "CSV unknown column", p, 1, "colour"

    p = tmp_path / "late.jsonl"
    late = {"board": "kills", "member": "x", "value": 1, "ts": at(TODAY - timedelta(days=3), 8)}
    p.write_text("\n".join([*lines[:8], json.dumps(late)]) + "\n")
    yield "late event without --backfill on line 9", p, 9, "backfill"

    many = [
        {"board": "kills", "member": f"p{i}", "value": 1, "ts": at(TODAY, 8)} for i in range(2500)
    ]
    many[2344]["value"] = float("inf")  # json.dumps writes Infinity: parses, then invalid
    p = write_jsonl(tmp_path / "late_in_file.jsonl", many)
    yield "bad event on line 2345, after two good batches", p, 2345, "finite"

    p = tmp_path / "not_utf8.csv"
    p.write_bytes(b"board,member,value\nkills,ann,1\nkills,\xff\xfe,2\n")
    yield "invalid UTF-8 on line 3", p, 3, "UTF-8"


def test_a_bad_file_writes_nothing(run: Run, api: Seasons, r: redis.Redis, tmp_path: Path) -> None:
    api.submit_many(events_today(20, seed=3))  # so that "unchanged" is not "empty"
    before = dumps(r)
    assert before[0] > 0
    for what, path, line, named in _bad_files(tmp_path):
        result = run("import", str(path))
        assert result.exit_code == 2, (what, result.output)
        assert named in result.stderr, (what, result.stderr)
        if line is not None:
            assert names_line(result, line), (what, result.stderr)
        assert "nothing written" in result.stderr or "column" in result.stderr, what
        assert dumps(r) == before, what


def test_every_bad_line_is_named(run: Run, tmp_path: Path) -> None:
    lines = [json.dumps({"board": "kills", "member": f"p{i}", "value": 1}) for i in range(30)]
    for bad in (3, 11, 27):
        lines[bad - 1] = "{oops"
    path = tmp_path / "three.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run("import", str(path))
    assert result.exit_code == 2
    assert "3 bad line" in result.stderr
    assert all(names_line(result, n) for n in (3, 11, 27))


def test_import_into_an_archived_season_writes_nothing(
    run: Run, r: redis.Redis, tmp_path: Path
) -> None:
    r.hset(Keys(NS).state("kills"), "season:S2", "archived")
    before = dumps(r)
    events = [
        {"board": "kills", "member": f"p{i}", "value": 1, "ts": at(TODAY, 8)} for i in range(1500)
    ]
    events.append({"board": "kills", "member": "old", "value": 1, "ts": at(date(2099, 2, 20), 8)})
    result = run("import", str(write_jsonl(tmp_path / "s2.jsonl", events)), "--backfill")
    assert result.exit_code == 2, result.output
    assert names_line(result, 1501) and "S2" in result.stderr
    assert dumps(r) == before


def test_backfill_import_of_past_days(run: Run, api: Seasons, tmp_path: Path) -> None:
    past = [TODAY - timedelta(days=d) for d in (1, 3, 6)]
    events: list[dict[str, Any]] = [
        {
            "board": "kills",
            "member": f"p{i % 4}",
            "value": i,
            "ts": at(day, i % 20),
            "event_id": f"bf-{day}-{i}",
        }
        for day in past
        for i in range(10)
    ]
    path = write_jsonl(tmp_path / "past.jsonl", events)
    refused = run("import", str(path))
    assert refused.exit_code == 2 and "late" in refused.stderr and names_line(refused, 1)

    result = run("import", str(path), "--backfill", "--json")
    assert out_json(result) == {"applied": 30, "duplicates": 0}
    for day in past:
        expected: dict[str, float] = defaultdict(float)
        for e in events:
            if e["ts"].startswith(day.isoformat()):
                expected[e["member"]] += e["value"]
        page = out_json(run("top", "kills", "-w", "day", "-p", day.isoformat(), "--json"))
        assert {e["member"]: e["score"] for e in page["entries"]} == expected
        assert page == api.top("kills", "day", period=day.isoformat()).model_dump()
    again = run("import", str(path), "--backfill", "--json")
    assert out_json(again) == {"applied": 0, "duplicates": 30}


def test_an_empty_file_imports_nothing(run: Run, r: redis.Redis, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    result = run("import", str(path), "--json")
    assert out_json(result) == {"applied": 0, "duplicates": 0}
    assert r.dbsize() == 0


# --- config -------------------------------------------------------------------------------------


def test_config_json_redacts_secrets(run: Run, redis_url: str) -> None:
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    secrets = {
        "SEASONS_API__WRITE_TOKEN": "write-tok-1234",
        "SEASONS_API__ADMIN_TOKEN": "admin-tok-5678",
        "SEASONS_REDIS__URL": f"redis://app:url-pass-9012@127.0.0.1:{port}/0",
        "SEASONS_REDIS__PASSWORD": "field-pass-3456",
    }
    result = run("config", "--json", **secrets)
    data = out_json(result)
    human = run("config", **secrets)
    assert human.exit_code == 0
    for secret in ("write-tok-1234", "admin-tok-5678", "url-pass-9012", "field-pass-3456"):
        assert secret not in result.output and secret not in human.output
    assert data["api"]["write_token"] == data["api"]["admin_token"] == "<redacted>"
    assert data["redis"]["password"] == "<redacted>"
    assert data["redis"]["url"] == f"redis://app:<redacted>@127.0.0.1:{port}/0"
    assert data["namespace"] == NS
    assert data["boards"]["kills"]["week_weights"] == [1, 1, 1, 1, 1, 2, 2]
    assert data["boards"]["lap"]["ties"] == "shared"
    assert data["late_grace"] == "PT1H"
    assert 'boards.lap.order = "asc"' in human.stdout


def test_config_keeps_empty_tokens_visible(run: Run) -> None:
    data = out_json(run("config", "--json"))
    assert data["api"]["write_token"] == "" and data["redis"]["password"] is None
    assert data["redis"]["url"].startswith("redis://127.0.0.1:")


# --- the demo data set --------------------------------------------------------------------------

DEMO_TOML = Path(__file__).resolve().parent.parent / "config" / "demo.toml"
DEMO_ZONE = ZoneInfo("Europe/Istanbul")
DEMO_NOW = datetime(2099, 3, 11, 12, 0, tzinfo=UTC)  # 15:00 in Istanbul (UTC+3, no DST)
DEMO_TODAY = date(2099, 3, 11)


@pytest.fixture
def demo_settings(redis_settings: dict[str, Any], tmp_path: Path) -> Settings:
    # The namespace marker's disk copy goes beside the archives: not in the checkout's var/.
    return load_settings(
        environ={}, path=DEMO_TOML, redis=redis_settings, archive={"dir": tmp_path / "archive"}
    )


def demo_day_keys(r: redis.Redis, board: str) -> set[str]:
    prefix = f"demo:{{{board}}}:day:"
    return {k.decode() for k in r.scan_iter() if k.decode().startswith(prefix)}


def test_demo_config_is_as_documented(redis_settings: dict[str, Any]) -> None:
    s = load_settings(environ={}, path=DEMO_TOML, redis=redis_settings)
    assert (s.namespace, s.timezone, s.week_start) == ("demo", "Europe/Istanbul", "monday")
    assert (s.seasons.length_days, s.seasons.anchor) == (28, date(2026, 1, 5))
    assert s.archive.dir == Path("var/archive")
    kills, lap, power = s.boards["kills"], s.boards["best_lap"], s.boards["power"]
    assert (kills.aggregate, kills.order) == ("sum", "desc")
    assert kills.week_weights == (1, 1, 1, 1, 1, 2, 2) and kills.season_weights == (1, 1, 1, 2)
    assert (lap.aggregate, lap.order, lap.ties) == ("min", "asc", "shared")
    assert (power.aggregate, power.order, power.max_entries) == ("max", "desc", 100)
    rating = s.boards["rating"]
    assert (rating.aggregate, rating.order, rating.ties) == ("set", "desc", "dense")
    assert "alltime" in kills.windows and "alltime" not in rating.windows


def test_seed_demo_fills_every_board_for_several_days(
    demo_settings: Settings, r: redis.Redis
) -> None:
    with Seasons(demo_settings, clock=ManualClock(DEMO_NOW)) as app:
        result = seed_demo(app, days=6, players=40)
        assert result.applied > 0 and result.duplicates == 0
        first = contents(r)
        keys = Keys("demo")
        for board in ("kills", "best_lap", "power", "rating"):
            expected = {keys.day(board, DEMO_TODAY - timedelta(days=i)) for i in range(6)}
            assert demo_day_keys(r, board) == expected
            for key in expected:
                members = [m.decode() for m in cast("list[bytes]", r.zrange(key, 0, -1))]
                assert len(members) >= 10, key
                assert all(re.fullmatch(r"player-0[0-4][0-9]", m) for m in members)
            page = app.top(board, "season", limit=1000)
            assert 10 <= page.total <= 40
            for entry in page.entries:
                assert set(entry.metadata) == {"name", "country", "level"}
                assert re.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+", entry.metadata["name"])
        lap = app.top("best_lap", "day", limit=1000).entries
        assert [e.score for e in lap] == sorted(e.score for e in lap)  # fastest first
        for entry in app.top("power", "season", limit=20).entries:  # level * 10^10 + power
            assert LEVEL_POWER.split(entry.score)["level"] == entry.metadata["level"]
        # Ratings: dense ranks, one more at each lower rating.
        ratings = app.top("rating", "season", limit=1000).entries
        distinct = sorted({e.score for e in ratings}, reverse=True)
        assert len(distinct) < len(ratings)  # some ratings are shared
        assert [e.rank for e in ratings] == [distinct.index(e.score) + 1 for e in ratings]

        again = seed_demo(app, days=6, players=40)  # event ids make it idempotent
        assert again == WriteResult(applied=0, duplicates=result.applied)
        assert contents(r) == first

    # The namespace marker (a random id) is created on the fresh namespace, so that the CLI
    # knows it holds Seasons data.
    marker = Keys("demo").marker().encode()
    assert marker in first
    r.flushall()
    with Seasons(demo_settings, clock=ManualClock(DEMO_NOW)) as app:
        assert seed_demo(app, days=6, players=40) == result
    again_contents = contents(r)
    assert marker in again_contents
    del first[marker], again_contents[marker]
    assert again_contents == first  # deterministic


# Seasons of the demo cycle: 28 days from Monday 2026-01-05.
def demo_season_start(day: date) -> date:
    anchor = date(2026, 1, 5)
    return anchor + timedelta(days=28 * ((day - anchor).days // 28))


@pytest.mark.parametrize(
    "now",
    [DEMO_NOW, datetime(2099, 2, 26, 12, 0, tzinfo=UTC)],  # day 17, day 4 of a season
    ids=["late-in-a-season", "early-in-a-season"],
)
def test_seed_demo_leaves_out_days_it_cannot_write(
    demo_settings: Settings, r: redis.Redis, now: datetime
) -> None:
    """Left out: days past retention, days of a week, month (kills keeps months) or season
    that reaches back past retention (the worker could not recompute it: its final rollup
    would be skipped with a warning), and days of an archived season."""
    today = now.astimezone(DEMO_ZONE).date()
    archived_start = demo_season_start(demo_season_start(today) - timedelta(days=1))
    archived = f"S{(archived_start - date(2026, 1, 5)).days // 28 + 1}"
    r.hset(Keys("demo").state("kills"), f"season:{archived}", "archived")
    # More days than the retention keeps, so that the rule has days to leave out.
    retention = demo_settings.retention
    span = retention.days + 10
    days = [today - timedelta(days=i) for i in range(span)]
    # A day's key lives until local midnight after it + retention; the seeding keeps an hour
    # of margin for the worker that starts after it.
    oldest = min(
        d
        for d in days
        if datetime.combine(d + timedelta(days=1), time(0), DEMO_ZONE) + retention
        > now + timedelta(hours=1)
    )

    def recomputable(day: date, board: str) -> bool:
        starts = [day - timedelta(days=day.weekday()), demo_season_start(day)]  # Monday weeks
        if board == "kills":
            starts.append(day.replace(day=1))
        return all(start >= oldest for start in [day, *starts])

    with Seasons(demo_settings, clock=ManualClock(now)) as app:
        seed_demo(app, days=span, players=30)
    keys = Keys("demo")
    for board in ("best_lap", "power", "rating"):
        expected = {d for d in days if recomputable(d, board)}
        assert len(expected) >= 7 and min(expected) > oldest  # the rule leaves days out
        assert demo_day_keys(r, board) == {keys.day(board, d) for d in expected}
    kills = {d for d in days if recomputable(d, "kills") and demo_season_start(d) != archived_start}
    assert demo_day_keys(r, "kills") == {keys.day("kills", d) for d in kills}
    if now != DEMO_NOW:  # early in a season, the archived one would have been seeded
        assert any(demo_season_start(d) == archived_start for d in days if recomputable(d, "kills"))
