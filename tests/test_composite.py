"""Composite scores (seed 001): exact packing of ordered integer parts under 2^53."""

from __future__ import annotations

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from redis_server import RedisServer

from seasons import CompositeScore
from seasons.composite import MAX_EXACT

TWO_53 = 9_007_199_254_740_992  # written out, not taken from the code under test

LEVEL = CompositeScore([("level", None), ("power", 10)])  # seed 001's level board
TOWER = CompositeScore([("floor", None), ("time_left", 10)])  # seed 001's tower board


def test_max_exact_is_two_to_the_53() -> None:
    assert MAX_EXACT == TWO_53 == 2**53
    assert float(TWO_53) == TWO_53 and float(TWO_53 + 1) == TWO_53  # the first lossy integer


def test_seed_001_level_board() -> None:
    assert LEVEL.build(level=42, power=1_234_567) == 42 * 10**10 + 1_234_567
    assert LEVEL.split(42 * 10**10 + 1_234_567) == {"level": 42, "power": 1_234_567}
    # Room left for the level: the largest level whose score stays at most 2^53.
    assert LEVEL.max_first == max(n for n in range(10**6) if n * 10**10 + 10**10 - 1 <= TWO_53)
    assert LEVEL.max_score <= TWO_53


def test_seed_001_tower_board_earlier_clear_ranks_higher() -> None:
    base = 2_524_608_000  # 2050-01-01T00:00:00Z, the seed's far-future base
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
