"""Bounds on a value (``boards.<b>.min_value`` / ``max_value``, docs/boards.md#bounds-on-a-value):
refused at start when unusable, naming the key; an event outside them refuses its whole batch
on every way in (Python API, HTTP, ``seasons submit``, ``seasons import`` and ``--backfill``)
with one ``out_of_bounds`` problem per offending event, and nothing written. Restoring an
archive is not a new event: bounds do not apply to it.

Every board is compared with a model in plain Python of what was sent and accepted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import warnings
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result
from http_support import ADMIN_TOKEN, START, WRITE_TOKEN
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from seasons import CompositeScore, Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import ConfigError, Settings, load_settings
from seasons.errors import BatchRejected
from seasons.http.app import create_app

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

LEVEL_POWER = CompositeScore([("level", None), ("power", 10)])
POWER_MIN = LEVEL_POWER.build(level=1, power=0)
POWER_MAX = LEVEL_POWER.build(level=60, power=0)

# kills: both bounds; rating: a lower bound only; laps: none; power: a composite board, its
# bounds on the packed score. START is 2035-06-13, in season S3 (2035-06-11 ..).
TOML = f"""
[seasons]
length_days = 14
anchor = "2035-05-14"

[boards.kills]
aggregate = "sum"
min_value = 0
max_value = 100

[boards.rating]
aggregate = "set"
min_value = -50.5

[boards.laps]
aggregate = "min"
order = "asc"

[boards.power]
aggregate = "max"
composite = [{{ name = "level" }}, {{ name = "power", digits = 10 }}]
min_value = {POWER_MIN}
max_value = {POWER_MAX}
"""
# The bounds as this test states them (not read back from the settings).
BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "kills": (0, 100),
    "rating": (-50.5, None),
    "laps": (None, None),
    "power": (POWER_MIN, POWER_MAX),
}
AUTH = {"Authorization": f"Bearer {WRITE_TOKEN}"}


# --- the model --------------------------------------------------------------------------------


def broken_bound(board: str, value: float) -> tuple[str, float] | None:
    """The bound ``value`` breaks on ``board`` (inclusive bounds), or None."""
    low, high = BOUNDS[board]
    if low is not None and value < low:
        return "min_value", low
    if high is not None and value > high:
        return "max_value", high
    return None


def expected_problems(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The out_of_bounds problems of a batch, without their message."""
    out = []
    for i, ev in enumerate(events):
        broken = broken_bound(ev["board"], ev["value"])
        if broken is not None:
            bound, limit = broken
            out.append(
                {"index": i, "field": "value", "code": "out_of_bounds", "member": ev["member"],
                 "value": ev["value"], "bound": bound, "limit": limit}
            )  # fmt: skip
    return out


class Model:
    """Today's day board of each board: what the accepted events make of it."""

    def __init__(self) -> None:
        self.boards: dict[str, dict[str, float]] = {b: {} for b in BOUNDS}
        self.aggregate = {"kills": "sum", "rating": "set", "laps": "min", "power": "max"}

    def submit(self, events: list[dict[str, Any]]) -> bool:
        """Apply the batch if no value breaks a bound; whether it was accepted."""
        if any(broken_bound(e["board"], e["value"]) for e in events):
            return False
        for e in events:
            scores, member, value = self.boards[e["board"]], e["member"], e["value"]
            old = scores.get(member)
            agg = self.aggregate[e["board"]]
            if old is None or agg == "set":
                scores[member] = value
            elif agg == "sum":
                scores[member] = old + value
            else:
                scores[member] = max(old, value) if agg == "max" else min(old, value)
        return True


def day_board(app: Seasons, board: str, period: str = "current") -> dict[str, float]:
    page = app.top(board, "day", period=period, limit=1000)
    assert page.total == len(page.entries)
    return {e.member: e.score for e in page.entries}


def assert_boards(app: Seasons, model: Model) -> None:
    for board in BOUNDS:
        assert day_board(app, board) == model.boards[board], board


def digest(r: redis.Redis) -> Any:
    return r.execute_command("DEBUG", "DIGEST")


def assert_refused(details: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """``details`` are exactly the out_of_bounds problems of ``events``, each message naming
    the board's key and the bound."""
    want = expected_problems(events)
    assert want, "the batch must break a bound"
    assert [{k: v for k, v in p.items() if k != "message"} for p in details] == want
    for p, ev in zip(details, [events[w["index"]] for w in want], strict=True):
        assert f"boards.{ev['board']}.{p['bound']}" in p["message"], p


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture
def toml_path(tmp_path: Path) -> Path:
    path = tmp_path / "bounds.toml"
    path.write_text(TOML)
    return path


@pytest.fixture
def settings(toml_path: Path, redis_settings: dict[str, Any], tmp_path: Path) -> Settings:
    return load_settings(
        environ={}, path=toml_path, redis=redis_settings,
        archive={"dir": str(tmp_path / "archive")},
        api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN},
    )  # fmt: skip


@pytest.fixture
def app(settings: Settings) -> Iterator[Seasons]:
    with Seasons(settings, clock=ManualClock(START)) as s:
        yield s


def run_cli(settings: Settings, *args: str) -> Result:
    state = CliState(clock=ManualClock(START), settings=settings)
    result = CliRunner().invoke(cli, list(args), obj=state)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    return result


# --- settings ---------------------------------------------------------------------------------


def _load(path: Path, toml: str, environ: dict[str, str] | None = None) -> Settings:
    path.write_text(toml)
    return load_settings(environ=environ or {}, path=path)


COMPOSITE = '[boards.power]\ncomposite = [{ name = "level" }, { name = "power", digits = 10 }]\n'
SMALL_COMPOSITE = (
    '[boards.power]\ncomposite = [{ name = "level", digits = 2 }, { name = "power", digits = 3 }]\n'
)


@pytest.mark.parametrize(
    ("toml", "key", "named"),
    [
        ("[boards.kills]\nmin_value = 10\nmax_value = 5\n", "boards.kills.max_value", "min_value"),
        ("[boards.kills]\nmin_value = nan\n", "boards.kills.min_value", "finite"),
        ("[boards.kills]\nmax_value = inf\n", "boards.kills.max_value", "finite"),
        ("[boards.kills]\nmin_value = -inf\n", "boards.kills.min_value", "finite"),
        ("[boards.kills]\nmax_value = 9007199254740993\n", "boards.kills.max_value", "2^53"),
        ("[boards.kills]\nmin_value = -1e300\n", "boards.kills.min_value", "2^53"),
        ("[boards.kills]\nmax_value = true\n", "boards.kills.max_value", "not a number"),
        ('[boards.kills]\nmax_value = "lots"\n', "boards.kills.max_value", "not a number"),
        (COMPOSITE + "min_value = -1\n", "boards.power.min_value", "composite"),
        (SMALL_COMPOSITE + "max_value = 100000\n", "boards.power.max_value", "0 to 99999"),
    ],
)
def test_unusable_bounds_are_refused_at_start_naming_the_key(
    tmp_path: Path, toml: str, key: str, named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path / "s.toml", toml)
    (problem,) = info.value.problems
    assert problem.startswith(f"{key}: "), problem
    assert named in problem, problem


def test_a_bound_from_the_environment_is_named_by_its_variable(tmp_path: Path) -> None:
    variable = "SEASONS_BOARDS__KILLS__MAX_VALUE"
    with pytest.raises(ConfigError) as info:
        _load(tmp_path / "s.toml", "[boards.kills]\n", {variable: "9007199254740993"})
    (problem,) = info.value.problems
    assert problem.startswith(variable) and "2^53" in problem, problem
    fine = _load(tmp_path / "s.toml", "[boards.kills]\n", {variable: "12.5"})
    assert fine.boards["kills"].max_value == 12.5


def test_usable_bounds_load(tmp_path: Path) -> None:
    one_value = _load(tmp_path / "s.toml", "[boards.kills]\nmin_value = 7\nmax_value = 7\n")
    assert (one_value.boards["kills"].min_value, one_value.boards["kills"].max_value) == (7, 7)
    edges = _load(tmp_path / "s.toml", SMALL_COMPOSITE + "min_value = 0\nmax_value = 99999\n")
    assert (edges.boards["power"].min_value, edges.boards["power"].max_value) == (0, 99999)
    none = _load(tmp_path / "s.toml", "[boards.kills]\n")
    assert (none.boards["kills"].min_value, none.boards["kills"].max_value) == (None, None)


def test_the_cli_refuses_unusable_bounds_with_status_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[boards.kills]\nmin_value = 10\nmax_value = 5\n")
    result = CliRunner().invoke(cli, ["--config", str(path), "config"], obj=CliState())
    assert result.exit_code == 2, result.output
    assert "boards.kills.max_value" in result.stderr
    assert "Traceback" not in result.output


# --- Python API -------------------------------------------------------------------------------


def test_inclusive_edges_are_accepted_and_just_outside_refused(
    app: Seasons, r: redis.Redis
) -> None:
    model = Model()
    edges = [
        {"board": "kills", "member": "lo", "value": 0},
        {"board": "kills", "member": "hi", "value": 100},
        {"board": "rating", "member": "lo", "value": -50.5},
        {"board": "rating", "member": "hi", "value": 2**53},  # no upper bound
        {"board": "laps", "member": "any", "value": -(2**53)},  # no bound at all
        {"board": "power", "member": "lo", "value": POWER_MIN},
        {"board": "power", "member": "hi", "value": POWER_MAX},
    ]
    assert model.submit(edges)
    assert app.submit_many(edges).applied == len(edges)
    assert_boards(app, model)
    outside = [
        ("kills", math.nextafter(0, -1)),
        ("kills", math.nextafter(100, 200)),
        ("kills", -1),
        ("rating", -50.50000000000001),
        ("power", POWER_MIN - 1),  # level 0 with the most power: below level 1
        ("power", POWER_MAX + 1),
    ]
    for board, value in outside:
        before = digest(r)
        event = {"board": board, "member": "lo", "value": value}
        with pytest.raises(BatchRejected) as caught:
            app.submit(board, "lo", value)
        assert_refused(caught.value.details, [event])
        assert caught.value.code == "invalid_events"
        assert digest(r) == before
    assert_boards(app, model)


def test_a_batch_names_every_offending_event_and_writes_nothing(
    app: Seasons, r: redis.Redis
) -> None:
    model = Model()
    first = [{"board": "kills", "member": f"p{i}", "value": 10 * i} for i in range(5)]
    assert model.submit(first) and app.submit_many(first).applied == 5
    before = digest(r)
    batch = [
        {"board": "laps", "member": "ann", "value": 61.5},
        {"board": "kills", "member": "ann", "value": 101},
        {"board": "kills", "member": "bob", "value": 50},
        {"board": "rating", "member": "cy", "value": -51},
        {"board": "power", "member": "dee", "value": LEVEL_POWER.build(level=61, power=3)},
        {"board": "kills", "member": "eve", "value": -0.5, "event_id": "e1"},
    ]
    assert not model.submit(batch)
    with pytest.raises(BatchRejected) as caught:
        app.submit_many(batch, batch_id="b-1")
    assert_refused(caught.value.details, batch)
    assert [p["index"] for p in caught.value.details] == [1, 3, 4, 5]
    assert digest(r) == before
    assert_boards(app, model)
    # Nothing was recorded under the batch id nor the event id: the corrected batch is new.
    fixed = {1: 100, 3: -50, 4: LEVEL_POWER.build(level=60, power=0), 5: 0.5}
    corrected = [{**ev, "value": fixed.get(i, ev["value"])} for i, ev in enumerate(batch)]
    assert model.submit(corrected)
    assert app.submit_many(corrected, batch_id="b-1").applied == len(corrected)
    assert_boards(app, model)


def test_a_board_without_bounds_in_a_batch_with_one_that_has_them(
    app: Seasons, r: redis.Redis
) -> None:
    model = Model()
    batch = [
        {"board": "laps", "member": "ann", "value": 10**15},
        {"board": "laps", "member": "bob", "value": -(10**15)},
        {"board": "kills", "member": "ann", "value": 100},
    ]
    assert model.submit(batch) and app.submit_many(batch).applied == 3
    before = digest(r)
    refused = [*batch[:2], {"board": "kills", "member": "ann", "value": 100.25}]
    with pytest.raises(BatchRejected) as caught:
        app.submit_many(refused)
    assert_refused(caught.value.details, refused)
    assert digest(r) == before  # the laps events, in no bound's way, were not written either
    assert_boards(app, model)


def test_backfill_is_bounded_too(app: Seasons, r: redis.Redis) -> None:
    day = (START - timedelta(days=1)).date()
    ts = (START - timedelta(days=1)).isoformat()
    batch = [
        {"board": "kills", "member": "ann", "value": 5, "ts": ts},
        {"board": "kills", "member": "bob", "value": 500, "ts": ts},
    ]
    before = digest(r)
    with pytest.raises(BatchRejected) as caught:
        app.submit_many(batch, backfill=True)
    assert_refused(caught.value.details, batch)
    assert digest(r) == before
    assert app.submit_many(batch[:1], backfill=True).applied == 1
    assert day_board(app, "kills", day.isoformat()) == {"ann": 5}


# --- HTTP -------------------------------------------------------------------------------------


@pytest.fixture
def client(settings: Settings, app: Seasons) -> Iterator[TestClient]:
    with TestClient(create_app(settings, app=app), raise_server_exceptions=False) as tc:
        yield tc


def test_http_422_lists_every_offending_event(
    client: TestClient, app: Seasons, r: redis.Redis
) -> None:
    model = Model()
    good = [
        {"board": "kills", "member": "ann", "value": 40},
        {"board": "power", "member": "ann", "value": LEVEL_POWER.build(level=3, power=77)},
    ]
    response = client.post("/v1/scores", json={"events": good}, headers=AUTH)
    assert response.status_code == 200, response.text
    assert model.submit(good) and response.json()["applied"] == 2
    before = digest(r)
    bad = [
        {"board": "kills", "member": "ann", "value": 1000},
        {"board": "laps", "member": "bob", "value": 1000},
        {"board": "rating", "member": "cy", "value": -100},
        {"board": "power", "member": "dee", "value": 5},
    ]
    response = client.post("/v1/scores", json={"events": bad}, headers=AUTH)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid_events"
    assert_refused(body["details"], bad)
    assert digest(r) == before
    assert_boards(app, model)


# --- CLI --------------------------------------------------------------------------------------


def test_cli_submit_out_of_bounds_is_status_2(
    settings: Settings, app: Seasons, r: redis.Redis
) -> None:
    before = digest(r)
    result = run_cli(settings, "submit", "kills", "ann", "100.5")
    assert result.exit_code == 2, result.output
    assert "boards.kills.max_value" in result.stderr and "100.5" in result.stderr
    assert digest(r) == before
    result = run_cli(settings, "submit", "kills", "ann", "100")
    assert result.exit_code == 0, result.output
    assert day_board(app, "kills") == {"ann": 100}


def _jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


@pytest.mark.parametrize("backfill", [False, True])
def test_cli_import_out_of_bounds_is_status_2(
    settings: Settings, app: Seasons, r: redis.Redis, tmp_path: Path, backfill: bool
) -> None:
    when = START - timedelta(days=2) if backfill else START - timedelta(minutes=5)
    events: list[dict[str, Any]] = [
        {"board": "kills", "member": f"p{i}", "value": (37 * i) % 140 - 10, "ts": when.isoformat()}
        for i in range(40)
    ]
    bad_lines = [i + 1 for i, e in enumerate(events) if broken_bound("kills", e["value"])]
    assert len(bad_lines) > 1
    flags = ["--backfill"] if backfill else []
    before = digest(r)
    result = run_cli(settings, "import", str(_jsonl(tmp_path / "e.jsonl", events)), *flags)
    assert result.exit_code == 2, result.output
    for line in bad_lines:
        assert f"line {line}:" in result.stderr, result.stderr
    assert "boards.kills." in result.stderr
    assert digest(r) == before
    kept = [e for e in events if not broken_bound("kills", e["value"])]
    result = run_cli(settings, "import", str(_jsonl(tmp_path / "k.jsonl", kept)), *flags)
    assert result.exit_code == 0, result.output
    want: dict[str, float] = {}
    for e in kept:
        want[e["member"]] = want.get(e["member"], 0) + e["value"]
    assert day_board(app, "kills", when.date().isoformat()) == want


# --- restore: not a new event -----------------------------------------------------------------


def test_restoring_an_archive_ignores_the_bounds(settings: Settings, app: Seasons) -> None:
    """A season's archived scores are aggregates of many events (a sum may pass max_value):
    a restore brings them back as archived."""
    folder = settings.archive.dir / "in"
    folder.mkdir(parents=True)
    lines = [
        {"rank": 1, "member": "ann", "score": 5000.0, "metadata": {}},
        {"rank": 2, "member": "bob", "score": -7.0, "metadata": {}},
    ]
    data = folder / "S2.jsonl.gz"
    text = "".join(json.dumps(ln) + "\n" for ln in lines)
    data.write_bytes(gzip.compress(text.encode(), mtime=0))
    manifest = {
        "board": "kills", "season": "S2", "count": 2, "score_sum": 4993.0,
        "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "created_at": "2035-06-11T00:00:00Z",
    }  # fmt: skip
    (folder / "S2.manifest.json").write_text(json.dumps(manifest))
    result = run_cli(settings, "restore", str(data))
    assert result.exit_code == 0, result.output
    page = app.top("kills", "season", period="S2", limit=10)
    assert [(e.member, e.score) for e in page.entries] == [("ann", 5000.0), ("bob", -7.0)]


# --- property ---------------------------------------------------------------------------------

_VALUES = st.one_of(
    st.integers(-60, 130),
    st.sampled_from([0, 100, -50.5, -50.50000000000001, 100.00000000000001, -1e-9]),
)
_EVENT = st.fixed_dictionaries(
    {
        "board": st.sampled_from(["kills", "rating", "laps"]),
        "member": st.sampled_from(["ann", "bob", "cy"]),
        "value": _VALUES,
    }
)


@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(st.lists(_EVENT, min_size=1, max_size=6), min_size=1, max_size=5))
def test_accepted_iff_every_value_within_bounds(
    batches: list[list[dict[str, Any]]], settings: Settings, r: redis.Redis
) -> None:
    r.flushall()
    model = Model()
    with Seasons(settings, clock=ManualClock(START)) as app:
        for batch in batches:
            if model.submit(batch):
                assert app.submit_many(batch).applied == len(batch)
            else:
                with pytest.raises(BatchRejected) as caught:
                    app.submit_many(batch)
                assert_refused(caught.value.details, batch)
            assert_boards(app, model)
