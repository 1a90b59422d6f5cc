"""What an operator reads about the worker and the seasons, and the wording of refusals:

- ``GET /v1/jobs`` and ``seasons status --json``: JSON numbers for numbers, every instant in
  UTC, one shape for both; a job's ``next_run`` is when the worker's scheduler fires it next;
- ``seasons status`` in 80 columns, in local time, the zone named once;
- each board's state in each season (upcoming, live, closing, archived, empty);
- ``invalid_json`` (400) for a body that is not JSON, on every JSON route and both HTTP paths;
- counts printed in the right number; the ``import --backfill`` hint only where it helps.

Expectations come from the data the tests write and the definitions, not from the code.
"""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from apscheduler.events import (
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    EVENT_JOB_SUBMITTED,
    JobEvent,
)
from click.testing import CliRunner, Result
from http_support import SETTINGS, START, seed

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.cli.text import plural
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.jobs import registry
from seasons.jobs.state import JobState
from seasons.jobs.worker import Worker

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

# A zone 9 hours ahead of UTC all year (no DST): local times are easy to state here.
ZONE = "Asia/Tokyo"
TOKYO = ZoneInfo(ZONE)
# Seasons of 14 days from 2035-05-14: S1 05-14..05-27, S2 05-28..06-10, S3 06-11..06-24 (START
# is 2035-06-13 21:00 in Tokyo), S4 upcoming.
SEASON_DAYS = {
    "S1": (date(2035, 5, 14), date(2035, 5, 27)),
    "S2": (date(2035, 5, 28), date(2035, 6, 10)),
}


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        **{**SETTINGS, "timezone": ZONE}, archive={"dir": str(tmp_path / "archive")}
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as s:
        yield s


def _client(settings: Settings, clock: ManualClock) -> TestClient:
    return TestClient(
        create_app(settings, clock=clock), client=("127.0.0.1", 5000), base_url="http://localhost"
    )


@pytest.fixture
def http(settings: Settings, clock: ManualClock, app: Seasons) -> Iterator[TestClient]:
    with _client(settings, clock) as tc:
        yield tc


def _cli(settings: Settings, clock: ManualClock, *args: str, **env: str) -> Result:
    result = CliRunner().invoke(
        cli, list(args), obj=CliState(clock=clock, settings=settings), env=env or None
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


# --- /v1/jobs and status --json ------------------------------------------------------------

# The worker's records as it may leave them: strings in Redis, instants in several offsets.
JOB_FIELDS = {
    "last_start": "2035-06-13T14:59:00+03:00",
    "last_end": "2035-06-13T11:59:02.5+00:00",
    "last_status": "error",
    "last_error": "RuntimeError: " + "x" * 150,
    "next_run": "2035-06-13T21:00:00+09:00",
    "runs": "7",
    "failures": "2",
    "total_duration": "0.0252920659999063",
}
BEAT = {"worker": "host:1:ab", "pid": 1, "host": "host", "at": "2035-06-13T14:59:58+03:00",
        "interval_seconds": 10}  # fmt: skip
SAFE = {"reason": "data_loss", "message": "gone", "detected_at": "2035-06-13T13:00:00+01:00",
        "worker": "host:1:ab"}  # fmt: skip

# The JSON types each field must have (JSON Schema's names): numbers are never strings.
JOB_SCHEMA = {
    "last_start": {"string"}, "last_end": {"string"}, "last_status": {"string"},
    "last_error": {"string"}, "next_run": {"string"}, "runs": {"integer"},
    "failures": {"integer"}, "total_duration": {"number", "integer"},
}  # fmt: skip
BEAT_SCHEMA = {
    "worker": {"string"}, "pid": {"integer"}, "host": {"string"}, "at": {"string"},
    "interval_seconds": {"number", "integer"}, "age_seconds": {"number", "integer"},
    "expires_in_seconds": {"number", "integer"},
}  # fmt: skip
INSTANTS = ("last_start", "last_end", "next_run", "at", "detected_at")


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return {float: "number", str: "string", type(None): "null", list: "array"}.get(
        type(value), "object"
    )


def _conforms(obj: dict[str, Any], schema: dict[str, set[str]], nullable: bool = True) -> None:
    assert set(schema) <= set(obj), (schema, obj)
    for name, types in schema.items():
        found = _json_type(obj[name])
        assert found in types or (nullable and found == "null"), (name, obj[name])


def _instants(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key in INSTANTS and value is not None:
                yield value
            else:
                yield from _instants(value)
    elif isinstance(data, list):
        for item in data:
            yield from _instants(item)


def test_jobs_json_has_numbers_and_utc_instants(
    http: TestClient, app: Seasons, settings: Settings, clock: ManualClock
) -> None:
    app.client.hset(app.keys.job_state("closes"), mapping=JOB_FIELDS)
    app.client.set(app.keys.heartbeat(), json.dumps(BEAT), ex=30)
    app.client.set(app.keys.safe_mode(), json.dumps(SAFE))
    body = http.get("/v1/jobs").json()
    assert set(body["jobs"]) == set(registry.NAMES)
    closes = body["jobs"]["closes"]
    _conforms(closes, JOB_SCHEMA, nullable=False)
    for job in body["jobs"].values():
        _conforms(job, JOB_SCHEMA)
    _conforms(body["worker"], BEAT_SCHEMA)
    assert (closes["runs"], closes["failures"]) == (7, 2)
    assert closes["total_duration"] == float(JOB_FIELDS["total_duration"])
    assert body["worker"]["age_seconds"] == 2.0  # 14:59:58+03:00 is START less 2 seconds
    # Every instant is UTC, and the same instant as written.
    written = {**{k: JOB_FIELDS[k] for k in ("last_start", "last_end", "next_run")},
               "at": BEAT["at"], "detected_at": SAFE["detected_at"]}  # fmt: skip
    shown = {
        "last_start": closes["last_start"], "last_end": closes["last_end"],
        "next_run": closes["next_run"], "at": body["worker"]["at"],
        "detected_at": body["safe_mode"]["detected_at"],
    }  # fmt: skip
    for name, text in shown.items():
        parsed = datetime.fromisoformat(text)
        assert parsed.utcoffset() == timedelta(0), (name, text)
        assert parsed == datetime.fromisoformat(written[name]), name
    assert {datetime.fromisoformat(t).utcoffset() for t in _instants(body)} == {timedelta(0)}
    # The published schema says so too.
    schema = http.get("/openapi.json").json()["components"]["schemas"]
    props = schema["JobSummary"]["properties"]
    assert props["runs"]["type"] == "integer" and props["failures"]["type"] == "integer"
    assert props["total_duration"]["type"] == "number"
    # status --json is exactly the HTTP JSON, with GET /v1/seasons as "seasons".
    result = _cli(settings, clock, "status", "--json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status.pop("seasons") == http.get("/v1/seasons").json()
    body = http.get("/v1/jobs").json()
    for report in (status, body):  # the fields that move with Redis's own clock and memory
        report["worker"].pop("expires_in_seconds")
        report.pop("redis")
    assert status == body


def test_next_run_is_when_the_scheduler_fires_the_job_next(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    """The worker runs with its scheduler (whole-second intervals, so that its fire times are
    exact); after each pass of each job, the next_run it recorded must be the time the
    scheduler then fired that job (APScheduler's own submission events say when)."""
    settings = settings_factory(
        **SETTINGS, archive={"dir": str(tmp_path / "archive")},
        worker={"heartbeat_interval": "PT1S", "rollup_interval": "PT1S",
                "sweep_interval": "PT2S", "hooks_interval": "PT1S"},
    )  # fmt: skip
    clock = ManualClock(START)
    worker = Worker(Seasons(settings, clock=clock))
    reader = Seasons(settings, clock=clock)
    state = JobState(reader.client, reader.keys)
    seen: dict[str, list[tuple[str, datetime]]] = {job: [] for job in registry.NAMES}
    lock = threading.Lock()

    def listen(event: JobEvent) -> None:
        if event.code == EVENT_JOB_SUBMITTED:
            found = ("fired", event.scheduled_run_times[-1])
        elif event.code in (EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED):
            # A starved machine can skip a fire time (the run before still going): the time
            # recorded for it is then not followed by its fire, so no pair is made across it.
            found = ("skipped", None)
        else:
            found = ("next", datetime.fromisoformat(state.get(event.job_id)["next_run"]))
        with lock:
            seen[event.job_id].append(found)

    def pairs(job: str) -> list[tuple[datetime, datetime]]:
        with lock:
            events = list(seen[job])
        return [(a[1], b[1]) for a, b in zip(events, events[1:], strict=False)
                if a[0] == "next" and b[0] == "fired"]  # fmt: skip

    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 20
        while worker.scheduler is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert worker.scheduler is not None
        worker.scheduler.add_listener(
            listen,
            EVENT_JOB_SUBMITTED | EVENT_JOB_EXECUTED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED,
        )
        deadline = time.monotonic() + 30
        while any(len(pairs(job)) < 2 for job in registry.NAMES) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop.set()
        runner.join(20)
        reader.close()
    assert not runner.is_alive()
    for job in registry.NAMES:
        found = pairs(job)
        assert len(found) >= 2, (job, seen[job])
        interval = worker.intervals[job]
        for recorded, fired in found:
            # Equal, unless a starved scheduler woke past several fire times and coalesced
            # them into the last one: then the recorded time is an earlier fire time of the
            # same trigger.
            assert recorded == fired or (
                recorded < fired and (fired - recorded) % interval == timedelta(0)
            ), (job, recorded, fired)
            assert recorded.utcoffset() == timedelta(0)
        assert any(recorded == fired for recorded, fired in found), (job, found)


# --- seasons status in 80 columns ------------------------------------------------------------


def test_status_fits_80_columns_in_local_time(
    app: Seasons, settings: Settings, clock: ManualClock
) -> None:
    seed(app)
    registry.closes_of(app.backend).snapshot("S2", clock())  # an archived season among the rows
    app.client.hset(app.keys.job_state("closes"), mapping=JOB_FIELDS)
    app.client.set(app.keys.heartbeat(), json.dumps(BEAT), ex=30)
    app.client.set(app.keys.safe_mode(), json.dumps(SAFE))
    result = _cli(settings, clock, "status", COLUMNS="80")
    assert result.exit_code == 0, result.output
    text = result.output
    assert "…" not in text and "..." not in text  # no cell cut short
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert text.count(ZONE) == 1  # the zone, named once
    assert not re.search(r"\d:\d\d\.\d", text)  # no fractions of seconds
    # 2035-06-13T11:59:02.5Z and 12:00:00Z (next run) in Tokyo, to the second.
    assert "06-13 20:59:02" in text and "06-13 21:00:00" in text
    assert "7 (2 failed)" in text
    assert "x" * 150 in re.sub(r"[\s│]", "", text)  # the whole error, folded over lines
    rows = {line.split()[1]: line for line in text.splitlines() if re.match(r"│ S\d+ ", line)}
    assert "kills=archived" in rows["S2"] and "kills=empty" in rows["S1"]
    assert "kills=upcoming" in rows["S4"] and "kills=live" in rows["S3"]


# --- season states -----------------------------------------------------------------------------


def _members(events: list[dict[str, Any]], board: str, season: str) -> set[str]:
    first, last = SEASON_DAYS[season]
    return {
        e["member"] for e in events if e["board"] == board
        and first <= datetime.fromisoformat(e["ts"]).astimezone(TOKYO).date() <= last
    }  # fmt: skip


def test_season_states(http: TestClient, app: Seasons, clock: ManualClock) -> None:
    events = seed(app, days=14)
    assert _members(events, "kills", "S2") and not _members(events, "kills", "S1")

    def listed() -> dict[str, Any]:
        body = http.get("/v1/seasons").json()
        assert body["current"] == "S3"
        return {s["season"]: s for s in body["seasons"]}

    def states(season: dict[str, Any]) -> dict[str, str]:
        return {board: info["state"] for board, info in season["boards"].items()}

    seasons = listed()
    assert list(seasons) == ["S1", "S2", "S3", "S4"]
    assert all(set(s["boards"]) == {"kills", "laps"} for s in seasons.values())
    # Ended without any data or archive: empty, not live.
    assert seasons["S1"]["status"] == "ended"
    assert states(seasons["S1"]) == {"kills": "empty", "laps": "empty"}
    # Ended with its standings in Redis, not closed yet: live until the close.
    assert seasons["S2"]["status"] == "ended"
    assert states(seasons["S2"]) == {"kills": "live", "laps": "live"}
    assert seasons["S3"]["status"] == "running"
    assert states(seasons["S3"]) == {"kills": "live", "laps": "live"}
    assert seasons["S4"]["status"] == "upcoming"
    assert states(seasons["S4"]) == {"kills": "upcoming", "laps": "upcoming"}
    registry.closes_of(app.backend).snapshot("S2", clock())
    seasons = listed()
    assert seasons["S2"]["status"] == "archived"
    assert states(seasons["S2"]) == {"kills": "archived", "laps": "archived"}
    for board in ("kills", "laps"):
        assert seasons["S2"]["boards"][board]["archive"]["count"] == len(
            _members(events, board, "S2")
        )
    # The route documents every state it may give.
    doc = http.get("/openapi.json").json()["paths"]["/v1/seasons"]["get"]["description"]
    for state in ("upcoming", "live", "closing", "archived", "empty", "running", "ended"):
        assert f"`{state}`" in doc


# --- invalid_json -------------------------------------------------------------------------------

NOT_JSON = [b"hello", b'{"events": [', b"{'board': 'kills'}", b"\xff\xfe\xfd", b"[1, 2,]"]


def _json_routes(http: TestClient) -> list[tuple[str, str, bool]]:
    """(method, path, body required) of every operation that takes a JSON body."""
    paths = http.get("/openapi.json").json()["paths"]
    found = []
    for path, operations in paths.items():
        for method, op in operations.items():
            if "requestBody" in op:
                assert method in ("post", "put"), (method, path)
                concrete = (
                    path.replace("{board}", "kills").replace("{window}", "day")
                    .replace("{member}", "p1")
                )  # fmt: skip
                found.append((method, concrete, bool(op["requestBody"].get("required"))))
    return found


def test_a_body_that_is_not_json_is_invalid_json_on_every_route_and_path(
    settings: Settings, clock: ManualClock, app: Seasons, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seasons.http import fast

    def answers() -> dict[tuple[str, bytes], tuple[int, Any]]:
        out = {}
        with _client(settings, clock) as tc:
            routes = _json_routes(tc)
            assert {"/v1/scores", "/v1/admin/rollup", "/v1/admin/snapshot", "/v1/admin/rebuild",
                    "/v1/boards/kills/day/lookup"} <= {p for _, p, _ in routes}  # fmt: skip
            for method, path, required in routes:
                for body in [*NOT_JSON, *([b""] if required else []), b"[1]", b'"x"']:
                    resp = tc.request(method, path, content=body,
                                      headers={"content-type": "application/json"})  # fmt: skip
                    out[(path, body)] = (resp.status_code, resp.json())
        return out

    with_fast = answers()
    for (path, body), (status, answer) in with_fast.items():
        if body in (b"[1]", b'"x"'):  # JSON, of the wrong shape: names the body
            kind = "an array" if body == b"[1]" else "a string"
            assert (status, answer["error"]) == (422, "invalid_input"), (path, body)
            assert f"body: must be a JSON object, not {kind}" in answer["message"]
            continue
        assert (status, answer["error"]) == (400, "invalid_json"), (path, body, answer)
        assert "not JSON" in answer["message"] or "empty" in answer["message"]
    # Where the JSON breaks, by json.loads: the same line and column.
    bad = with_fast[("/v1/scores", b'{"events": [')][1]
    try:
        json.loads(b'{"events": [')
    except json.JSONDecodeError as exc:
        assert bad["details"] == {"line": exc.lineno, "column": exc.colno, "position": exc.pos}
    # The same answers without the fast path (every request served by the FastAPI routes).
    for route in list(fast.FAST):
        monkeypatch.delitem(fast.FAST, route)
    assert answers() == with_fast
    # JSON of the wrong shape names the field.
    with _client(settings, clock) as tc:
        resp = tc.post("/v1/scores", json={"events": "x"})
        assert resp.status_code == 422 and "events" in resp.json()["message"]


# --- pluralisation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "noun", "expected"),
    [(0, "event", "0 events"), (1, "event", "1 event"), (2, "event", "2 events"),
     (1, "entry", "1 entry"), (2, "entry", "2 entries"), (1, "bad line", "1 bad line"),
     (3, "bad line", "3 bad lines")],
)  # fmt: skip
def test_plural(count: int, noun: str, expected: str) -> None:
    assert plural(count, noun) == expected


def test_import_counts_are_in_the_right_number(
    app: Seasons, settings: Settings, clock: ManualClock, tmp_path: Path
) -> None:
    def write(name: str, n: int, bad: int = 0) -> str:
        lines = [json.dumps({"board": "kills", "member": f"m{i}", "value": 1,
                             "event_id": f"{name}-{i}"}) for i in range(n)]  # fmt: skip
        lines += ["{nope"] * bad
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    one, two = write("one", 1), write("two", 2)
    expected = [
        (one, "imported 1 event from", "1 applied, 0 duplicates"),
        (one, "imported 1 event from", "0 applied, 1 duplicate"),
        (two, "imported 2 events from", "2 applied, 0 duplicates"),
        (two, "imported 2 events from", "0 applied, 2 duplicates"),
    ]
    for path, head, tail in expected:
        result = _cli(settings, clock, "import", path)
        assert result.exit_code == 0, result.output
        assert head in result.output and result.output.rstrip().endswith(tail), result.output
    for bad, words in ((1, "1 bad line,"), (2, "2 bad lines,")):
        result = _cli(settings, clock, "import", write(f"bad{bad}", 1, bad))
        assert result.exit_code == 2 and words in result.output, result.output


# --- the backfill hint --------------------------------------------------------------------------


def test_the_backfill_hint_is_given_exactly_where_backfill_writes(
    app: Seasons, settings: Settings, clock: ManualClock, tmp_path: Path
) -> None:
    registry.closes_of(app.backend).snapshot("S1", clock())  # S1 archived (ended, no data)
    # (day, whether `import --backfill` may write it, by the rules: within retention (35
    # days after its end) and its season not archived)
    cases = [
        (date(2035, 6, 12), True),  # yesterday, in the running season S3
        (date(2035, 6, 1), True),  # in S2: ended, not archived
        (date(2035, 5, 20), False),  # in S1: archived
        (date(2035, 4, 1), False),  # past retention
        (date(2020, 1, 1), False),  # long past
    ]
    for n, (day, writable) in enumerate(cases):
        ts = datetime(day.year, day.month, day.day, 12, tzinfo=TOKYO).astimezone(UTC)
        submitted = _cli(settings, clock, "submit", "kills", "ann", "1", "--ts", ts.isoformat())
        assert submitted.exit_code == 2, submitted.output
        hinted = "--backfill" in submitted.output and "not even" not in submitted.output
        path = tmp_path / f"late{n}.jsonl"
        event = {"board": "kills", "member": "ann", "value": 1, "ts": ts.isoformat(),
                 "event_id": f"late-{n}"}  # fmt: skip
        path.write_text(json.dumps(event) + "\n")
        backfilled = _cli(settings, clock, "import", "--backfill", str(path))
        accepted = backfilled.exit_code == 0
        assert accepted == writable, (day, backfilled.output)
        assert hinted == accepted, (day, submitted.output, backfilled.output)
        if not writable:  # the true reason instead
            reason = "archived" if day == date(2035, 5, 20) else "retention"
            assert reason in submitted.output, submitted.output
