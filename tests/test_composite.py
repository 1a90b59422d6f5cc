"""Composite scores: exact packing of ordered integer parts under 2^53; a board that declares
its parts in config (``boards.<name>.composite``) answers them beside each score in every read
(HTTP's fast path and FastAPI route, the Python API, the CLI's --json and tables), split here
by a reference of the test's own."""

from __future__ import annotations

import json
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
from click.testing import CliRunner
from http_support import START
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.exceptions import ResponseError
from redis_server import RedisServer

from seasons import CompositeScore, Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.composite import MAX_EXACT
from seasons.config import ConfigError, Settings, load_settings
from seasons.demo import LEVEL_POWER
from seasons.executor import Call
from seasons.http.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

TWO_53 = 9_007_199_254_740_992  # written out, not taken from the code under test

LEVEL = CompositeScore([("level", None), ("power", 10)])  # a level board: level, then power
TOWER = CompositeScore([("floor", None), ("time_left", 10)])  # floor, then the earlier clear


def test_max_exact_is_two_to_the_53() -> None:
    assert MAX_EXACT == TWO_53 == 2**53
    assert float(TWO_53) == TWO_53 and float(TWO_53 + 1) == TWO_53  # the first lossy integer


def test_level_board() -> None:
    assert LEVEL.build(level=42, power=1_234_567) == 42 * 10**10 + 1_234_567
    assert LEVEL.split(42 * 10**10 + 1_234_567) == {"level": 42, "power": 1_234_567}
    # Room left for the level: the largest level whose score stays at most 2^53.
    assert LEVEL.max_first == max(n for n in range(10**6) if n * 10**10 + 10**10 - 1 <= TWO_53)
    assert LEVEL.max_score <= TWO_53


def test_tower_board_earlier_clear_ranks_higher() -> None:
    base = 2_524_608_000  # 2050-01-01T00:00:00Z, a far-future base
    early = TOWER.build(floor=30, time_left=base - 1_700_000_000)
    late = TOWER.build(floor=30, time_left=base - 1_700_000_500)
    higher_floor = TOWER.build(floor=31, time_left=0)
    assert higher_floor > early > late


def test_mapping_and_keywords() -> None:
    assert LEVEL.build({"level": 1}, power=2) == 10**10 + 2
    assert LEVEL.names == ("level", "power")


# --- layouts that hypothesis explores --------------------------------------------------------


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[tuple[str, int | None]], int]:
    """A valid layout and the largest first-part value (computed here, independently)."""
    lower = draw(st.lists(st.integers(1, 6), min_size=0, max_size=4))
    if sum(lower) > 15:
        lower = lower[:1]
    room = 10 ** sum(lower)
    largest = (TWO_53 - (room - 1)) // room
    first: int | None = None
    if draw(st.booleans()):
        fitting = [w for w in range(1, 16) if 10**w - 1 <= largest]
        if fitting:
            first = draw(st.sampled_from(fitting))
    parts = [("p0", first)] + [(f"p{i + 1}", w) for i, w in enumerate(lower)]
    max_first = largest if first is None else 10**first - 1
    return parts, max_first


@st.composite
def layout_and_values(draw: st.DrawFn, n: int = 1) -> tuple[CompositeScore, list[dict[str, int]]]:
    parts, max_first = draw(layouts())
    comp = CompositeScore(parts)
    rows = []
    for _ in range(n):
        row = {"p0": draw(st.integers(0, max_first))}
        for name, width in parts[1:]:
            assert width is not None
            row[name] = draw(st.integers(0, 10**width - 1))
        rows.append(row)
    return comp, rows


@given(layout_and_values())
def test_build_split_round_trip(case: tuple[CompositeScore, list[dict[str, int]]]) -> None:
    comp, (values,) = case
    score = comp.build(**values)
    assert 0 <= score <= TWO_53
    assert comp.split(score) == values
    assert comp.split(float(score)) == values  # as a double read back from Redis
    assert float(score) == score


@given(layout_and_values(n=8))
def test_score_order_is_the_order_of_the_parts(
    case: tuple[CompositeScore, list[dict[str, int]]],
) -> None:
    comp, rows = case
    names = comp.names
    by_parts = sorted(rows, key=lambda v: tuple(v[n] for n in names))
    by_score = sorted(rows, key=lambda v: float(comp.build(**v)))  # ordered as doubles
    assert [tuple(v[n] for n in names) for v in by_score] == [
        tuple(v[n] for n in names) for v in by_parts
    ]


@given(layouts())
def test_largest_values_stay_within_2_53(case: tuple[list[tuple[str, int | None]], int]) -> None:
    parts, max_first = case
    comp = CompositeScore(parts)
    top = {"p0": max_first} | {n: 10**w - 1 for n, w in parts[1:] if w is not None}
    assert comp.build(**top) == comp.max_score <= TWO_53
    with pytest.raises(ValueError, match="'p0'"):
        comp.build(**(top | {"p0": max_first + 1}))


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "named"),
    [
        ([("a", 8), ("b", 8)], "'a'"),  # 16 digits: up to 10^16 - 1 > 2^53
        ([("a", None), ("b", 16)], "'b'"),  # no room at all for the first part
        ([("a", 1), ("b", 15)], "'a'"),  # 9 * 10^15 + ... > 2^53
        ([("a", 5), ("b", None)], "'b'"),  # only the first part may be open-ended
        ([("a", 0)], "'a'"),
        ([("a", 3), ("a", 3)], "'a'"),
        ([("not a name", 3)], "not a name"),
    ],
)
def test_bad_layouts_are_refused(parts: list[tuple[str, int | None]], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        CompositeScore(parts)


def test_empty_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one part"):
        CompositeScore([])


def test_fifteen_digits_fit() -> None:
    comp = CompositeScore([("a", 7), ("b", 8)])
    assert comp.max_score == 10**15 - 1


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"level": -1, "power": 0}, "'level'"),
        ({"level": 1, "power": -5}, "'power'"),
        ({"level": 1, "power": 10**10}, "'power'"),  # 11 digits in a 10-digit part
        ({"level": LEVEL.max_first + 1, "power": 0}, "'level'"),  # past 2^53
        ({"level": 1}, "'power'"),  # missing
        ({"level": 1, "power": 1, "guild": 2}, "'guild'"),  # unknown
        ({"level": 1.5, "power": 1}, "'level'"),
        ({"level": True, "power": 1}, "'level'"),
    ],
)
def test_bad_values_are_refused(values: dict[str, int], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        LEVEL.build(**values)


@pytest.mark.parametrize("score", [-1, 0.5, float("inf"), LEVEL.max_score + 1, "12"])
def test_split_refuses_what_no_build_makes(score: object) -> None:
    with pytest.raises(ValueError):
        LEVEL.split(score)  # type: ignore[arg-type]


# --- through real Redis -------------------------------------------------------------------


@given(layout_and_values(n=6))
def test_scores_survive_redis_exactly(
    redis_server: RedisServer, case: tuple[CompositeScore, list[dict[str, int]]]
) -> None:
    comp, rows = case
    client = redis.Redis.from_url(redis_server.url)
    key = "test:composite"
    try:
        client.delete(key)
        scores = {f"m{i}": comp.build(**v) for i, v in enumerate(rows)}
        client.zadd(key, scores)  # type: ignore[arg-type]
        for member, score in scores.items():
            stored = client.zscore(key, member)
            assert stored is not None
            assert int(stored) == score and stored == score
            assert comp.split(stored) == rows[int(member[1:])]
        # Redis's own order (score, then member) equals the order of the parts.
        expected = sorted(scores, key=lambda m: (tuple(rows[int(m[1:])].values()), m))
        assert client.zrange(key, 0, -1) == [m.encode() for m in expected]
    finally:
        client.delete(key)
        client.close()


def test_max_score_survives_redis(r: redis.Redis) -> None:
    r.zadd("k", {"top": LEVEL.max_score, "next": LEVEL.max_score - 1})
    assert int(r.zscore("k", "top") or 0) == LEVEL.max_score
    assert int(r.zscore("k", "next") or 0) == LEVEL.max_score - 1
    assert r.zrange("k", 0, -1, desc=True) == [b"top", b"next"]


# --- boards that declare their parts ------------------------------------------------------

Layout = list[tuple[str, int | None]]


def reference_split(parts: Layout, score: int) -> dict[str, int]:
    """The parts of ``score``, least significant first peeled off by its digits."""
    values: dict[str, int] = {}
    for name, digits in reversed(parts[1:]):
        assert digits is not None
        score, values[name] = divmod(score, 10**digits)
    values[parts[0][0]] = score
    return {name: values[name] for name, _ in parts}


def reference_build(parts: Layout, row: dict[str, int]) -> int:
    score = 0
    for name, digits in parts:
        score = score * 10 ** (digits or 0) + row[name] if digits else score + row[name]
    return score


def composite_setting(parts: Layout) -> list[dict[str, Any]]:
    return [{"name": n} if d is None else {"name": n, "digits": d} for n, d in parts]


def cli_json(state: CliState, *args: str) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json"], obj=state)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_read_answers_the_parts(
    settings_factory: Callable[..., Settings], data: st.DataObject
) -> None:
    layout, max_first = data.draw(layouts(), label="layout")
    rows = []
    for _ in range(data.draw(st.integers(1, 6), label="members")):
        row = {"p0": data.draw(st.integers(0, max_first))}
        for name, width in layout[1:]:
            assert width is not None
            row[name] = data.draw(st.integers(0, 10**width - 1))
        rows.append(row)
    order = data.draw(st.sampled_from(["desc", "asc"]), label="order")
    cfg = settings_factory(
        seasons={"length_days": 14, "anchor": "2035-05-14"},
        boards={"b": {"aggregate": "max", "order": order, "composite": composite_setting(layout)}},
    )
    clock = ManualClock(START)
    scores = {f"m{i}": reference_build(layout, row) for i, row in enumerate(rows)}
    with Seasons(cfg, clock=clock) as app:
        app.client.flushdb()
        ts = START.isoformat()
        app.submit_many(
            [{"board": "b", "member": m, "value": v, "ts": ts} for m, v in scores.items()]
        )
        page = app.top("b", "day", limit=10)
        assert {e.member: e.parts for e in page.entries} == {
            m: reference_split(layout, v) for m, v in scores.items()
        }
        # The parts, most significant first, as the layout names them.
        assert all(list(e.parts or {}) == [n for n, _ in layout] for e in page.entries)
        state = CliState(clock=clock, settings=cfg)
        member = data.draw(st.sampled_from(sorted(scores)), label="member")
        want = reference_split(layout, scores[member])
        with TestClient(create_app(cfg, clock=clock), client=("127.0.0.1", 5000)) as http:
            base, path = "/v1/boards/b/day", f"/v1/boards/b/day/members/{quote(member)}"
            for query in ("limit=10", "limit=10&period=%63urrent"):  # fast path, FastAPI route
                got = http.get(f"{base}?{query}").json()["entries"]
                assert [e["parts"] for e in got] == [e.parts for e in page.entries]
                assert http.get(f"{path}?{query[9:]}").json()["parts"] == want
                climb = http.get(f"{path}/climb?to=1&{query[9:]}").json()
                assert climb["parts"] == want
                assert climb["targets"][0]["parts"] == page.entries[0].parts
                looked = http.post(f"{base}/lookup?{query[9:]}", json={"members": [member]})
                assert looked.json()[0]["parts"] == want
            history = http.get(f"/v1/boards/b/members/{member}/history?last=1").json()
            assert history["history"][0]["parts"] == want
        assert [e["parts"] for e in cli_json(state, "top", "b", "-w", "day")["entries"]] == [
            e.parts for e in page.entries
        ]
        assert cli_json(state, "rank", "b", member, "-w", "day")["parts"] == want
        assert cli_json(state, "history", "b", member, "--last", "1")["history"][0]["parts"] == want


def test_boards_without_parts_answer_none(settings_factory: Callable[..., Settings]) -> None:
    cfg = settings_factory(boards={"plain": {}})
    with Seasons(cfg, clock=ManualClock(START)) as app:
        app.submit("plain", "ann", 5)
        entry = app.top("plain", "day").entries[0]
        assert entry.parts is None and "parts" not in json.loads(entry.model_dump_json())
        with TestClient(create_app(cfg, clock=app.clock), client=("127.0.0.1", 5000)) as http:
            for query in ("limit=1", "limit=1&period=%63urrent"):
                assert "parts" not in http.get(f"/v1/boards/plain/day?{query}").json()["entries"][0]


def test_cli_tables_show_the_parts(settings_factory: Callable[..., Settings]) -> None:
    """A column per part; the history's title on one line of an 80-column terminal."""
    parts = composite_setting(list(LEVEL_POWER.parts))
    cfg = settings_factory(boards={"power": {"aggregate": "max", "composite": parts}})
    member = "a-player-with-a-long-name"
    with Seasons(cfg, clock=ManualClock(START)) as app:
        app.submit("power", member, 5 * 10**10 + 117771)
        app.submit("power", "bo", 12 * 10**10 + 3)
    runner = CliRunner(env={"COLUMNS": "80"})
    state = CliState(clock=ManualClock(START), settings=cfg)
    top = runner.invoke(cli, ["top", "power", "-w", "day"], obj=state).stdout
    header = next(line for line in top.splitlines() if line.startswith("┃"))
    assert header.split("┃")[1:-1] and [c.strip() for c in header.split("┃")[1:6]] == [
        "rank", "member", "score", "level", "power"
    ]  # fmt: skip
    row = next(line for line in top.splitlines() if member in line)
    assert [c.strip() for c in row.split("│")[1:6]] == ["2", member, "50000117771", "5", "117771"]
    history = runner.invoke(
        cli, ["history", "power", member], obj=CliState(clock=ManualClock(START), settings=cfg)
    ).stdout
    assert f"power · {member} · last 14 days" in [line.rstrip() for line in history.splitlines()]
    assert all(len(line) <= 80 for line in history.splitlines())
    assert "5" in next(line for line in history.splitlines() if START.date().isoformat() in line)
    climb = runner.invoke(
        cli,
        ["climb", "power", member, "--to", "1"],
        obj=CliState(clock=ManualClock(START), settings=cfg),
    ).stdout
    assert "score 50000117771" in climb and "level 5 · power 117771" in climb.splitlines()


def test_the_demo_declares_the_layout_it_builds() -> None:
    demo = Path(__file__).parent.parent / "config" / "demo.toml"
    board = tomllib.loads(demo.read_text())["boards"]["power"]
    declared = [(p["name"], p.get("digits")) for p in board["composite"]]
    assert declared == list(LEVEL_POWER.parts)


def toml_value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(map(toml_value, v)) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


@pytest.mark.parametrize(
    ("composite", "says"),
    [
        ([["level", 0], ["power", 10]], "each part is a table of its name and digits"),
        ([{"name": "level"}, {"name": "power", "digits": 16}], "take 16 digits"),
        ([{"name": "level"}, {"name": "level", "digits": 3}], "'level' is named twice"),
        ([{"name": "level"}, {"name": "power"}], "only the first (most significant) part"),
        ([{"name": "x-y"}], "must be a Python identifier"),
        ([{"name": "level", "digits": 0}], "digits must be a positive integer"),
        ([{"name": "level", "digit": 3}], "digit"),
    ],
)
def test_bad_layouts_are_refused_at_start(tmp_path: Path, composite: list[Any], says: str) -> None:
    toml = tmp_path / "seasons.toml"
    toml.write_text(f"[boards.power]\ncomposite = {toml_value(composite)}\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(environ={}, path=toml)
    assert "boards.power.composite" in str(raised.value) and says in str(raised.value)
    result = CliRunner().invoke(cli, ["--config", str(toml), "top", "power"], env={})
    assert result.exit_code == 2 and "boards.power.composite" in result.output


def test_weights_that_are_not_whole_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        weights = [1, 1, 1, 1, 1, 1.5, 2]
        load_settings(
            environ={}, boards={"power": {"composite": [{"name": "a"}], "week_weights": weights}}
        )
    assert "boards.power" in str(raised.value) and "weight 6 = 1.5 of week_weights" in str(
        raised.value
    )


def test_a_read_call_of_other_arguments_is_refused_by_the_script(
    settings_factory: Callable[..., Settings],
) -> None:
    cfg = settings_factory(boards={"b": {}})
    with Seasons(cfg, clock=ManualClock(START)) as app:
        read = app.reads.page("b", "day", "current", limit=1, offset=0)
        args = list(read.call.args)
        with pytest.raises(ResponseError, match="must be 6 arguments, got 5"):
            app.executor.run(Call(read.call.script, read.call.keys, args[:-1]))
