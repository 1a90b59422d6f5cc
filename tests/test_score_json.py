"""One JSON for one answer: every read writes a score the same way.

Scores of every kind (integers, fractions, values past 2^53, -0, tiny and huge doubles) are put
on a plain board and on a composite board in a real Redis, on a day board and on an archived
season, then read through every read route over HTTP (the fast path and the FastAPI route
behind it), the Python API's ``model_dump_json()`` and the CLI's ``--json``. Each answer is
parsed with its numbers kept as text: all of them are the same tree, text for text, and each
score, gap and percentile is the text of :func:`reference_text`, written here from the float
alone; each entry of the composite board has the parts :func:`reference_parts` finds.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
import redis
from click.testing import CliRunner
from http_support import START
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from redis_server import RedisServer

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.composite import MAX_EXACT
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.models import Entry, score_json
from seasons.replies import number_text, score_text

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

# The composite layout of the board "power": level * 10^10 + power, level up to 900719.
LEVEL_SCALE = 10**10
MAX_LEVEL = (MAX_EXACT - (LEVEL_SCALE - 1)) // LEVEL_SCALE
MAX_COMPOSITE = MAX_LEVEL * LEVEL_SCALE + LEVEL_SCALE - 1
BOARDS: dict[str, Any] = {
    "plain": {"aggregate": "set", "order": "asc", "ties": "shared"},
    "power": {
        "aggregate": "max",
        "ties": "dense",
        "composite": [{"name": "level"}, {"name": "power", "digits": 10}],
    },
}
MEMBERS = ["ann", "bob", 'q"uo/te ü', "dee", "eve", "fay"]


def reference_text(x: float) -> str:
    """The JSON text of a score: integral values below 10^16 as integers, any other in the
    shortest digits that read back as ``x`` (Python's repr finds them), in decimal notation
    from 10^-5 up to 10^16, else ``d.ddde+x`` / ``d.ddde-x``."""
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits, point = whole + fraction, len(whole) + int(exponent or 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    sign, exp = "-" if x < 0 else "", point - 1
    if -5 <= exp < 16:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    fraction = f".{digits[1:]}" if len(digits) > 1 else ""
    return f"{sign}{digits[0]}{fraction}e{'+' if exp > 0 else '-'}{abs(exp)}"


def reference_parts(x: float) -> dict[str, str] | None:
    """The parts of a score of the board "power" (as JSON texts), or None where it splits
    into none: not an integer in 0 .. the layout's largest score."""
    if not (x.is_integer() and 0 <= x <= MAX_COMPOSITE):
        return None
    level, power = divmod(int(x), LEVEL_SCALE)
    return {"level": str(level), "power": str(power)}


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (637.0, "637"), (637.5, "637.5"), (-0.0, "0"), (0.1, "0.1"), (1e20, "1e+20"),
        (0.30000000000000004, "0.30000000000000004"), (2.0**53, "9007199254740992"),
        (1e16, "1e+16"), (9999999999999998.0, "9999999999999998"), (1e-5, "0.00001"),
        (1.5e-7, "1.5e-7"), (-2.5e-10, "-2.5e-10"), (5e-324, "5e-324"),
        (1.2345678901234568e17, "1.2345678901234568e+17"), (123456.789, "123456.789"),
    ],
)  # fmt: skip
def test_the_reference_form(x: float, text: str) -> None:
    """The form, spelt out: the reference and the models' serializer both write it."""
    assert reference_text(x) == text
    entry = Entry(rank=1, member="m", score=x)
    assert json.loads(entry.model_dump_json(), parse_float=str, parse_int=str)["score"] == text
    assert isinstance(entry.score, float) and isinstance(score_json(x), int | float)


# Scores of every kind: integers, fractions, composites, beyond 2^53, any finite double.
plain_scores = st.one_of(
    st.integers(-(10**15), 10**15).map(float),
    st.integers(-(10**6), 10**6).map(lambda n: n / 8),
    # Up to 1e300: the gap between two scores stays a finite double.
    st.floats(min_value=-1e300, max_value=1e300),
    st.sampled_from(
        [0.0, -0.0, 0.1, 0.30000000000000004, 1e20, 2.0**53, 2.0**53 + 2, 1e16, 1e-5, 9.99e-6,
         5e-324, 1e300, -1.5e-7, 123456.789, 1e15 + 0.5]
    ),
)  # fmt: skip
composites = st.builds(
    lambda level, power: float(level * LEVEL_SCALE + power),
    st.integers(0, MAX_LEVEL),
    st.integers(0, LEVEL_SCALE - 1),
)
composite_scores = st.one_of(
    composites, composites, st.sampled_from([0.0, 5.0 * LEVEL_SCALE + 117771]), plain_scores
)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def settings(settings_factory: Callable[..., Settings]) -> Settings:
    return settings_factory(seasons={"length_days": 14, "anchor": "2035-05-14"}, boards=BOARDS)


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as s:
        yield s


@pytest.fixture
def http(settings: Settings, clock: ManualClock, app: Seasons) -> Iterator[TestClient]:
    with TestClient(
        create_app(settings, clock=clock), client=("127.0.0.1", 5000), base_url="http://localhost"
    ) as tc:
        yield tc


def as_text(body: str | bytes) -> Any:
    """JSON with every number kept as its text."""
    return json.loads(body, parse_float=str, parse_int=str)


class Reader:
    """Every read route of one board and window, each answer as JSON text."""

    def __init__(self, http: TestClient, app: Seasons, settings: Settings, clock: ManualClock):
        self.http, self.app, self.settings, self.clock = http, app, settings, clock

    def get(self, path: str, query: str, routed: str) -> list[Any]:
        """The fast path's answer to ``query`` and the FastAPI route's to ``routed`` (the
        same query with a value percent-encoded, which the fast path leaves to the route):
        the same bytes."""
        fast = self.http.get(f"{path}?{query}")
        route = self.http.get(f"{path}?{routed}")
        assert fast.status_code == route.status_code == 200, (path, fast.text, route.text)
        assert fast.content == route.content, path
        return [as_text(fast.content)]

    def cli(self, *args: str) -> Any:
        state = CliState(clock=self.clock, settings=self.settings)
        result = CliRunner().invoke(cli, [*args, "--json"], obj=state)
        assert result.exit_code == 0, result.output
        return as_text(result.stdout)

    def every(self, board: str, window: str, member: str, rank: int) -> dict[str, list[Any]]:
        """Each read, as every interface answers it."""
        app, period = self.app, "period=%63urrent"  # "current", for the route
        base = f"/v1/boards/{board}/{window}"
        path_member = f"{base}/members/{quote(member, safe='')}"
        history = f"/v1/boards/{board}/members/{quote(member, safe='')}/history"
        top = app.top(board, window, limit=20)
        around = app.around(board, member, window, size=3)
        entry = app.rank(board, member, window)
        climb = app.climb(board, member, window, to=[1, 2, 4, 50])
        hist = app.run(app.reads.history(board, member, window, last=2))
        assert around is not None and entry is not None and climb is not None
        members = [member, *MEMBERS[:3], "nobody"]
        lookup = [
            as_text(self.http.post(f"{base}/lookup", json={"members": members}).content),
            as_text(self.http.post(f"{base}/lookup?{period}", json={"members": members}).content),
            [as_text(e.model_dump_json()) for e in app.lookup(board, members, window)],
        ]
        w = ["-w", window]
        return {
            "top": [
                *self.get(base, "limit=20", f"limit=20&{period}"),
                as_text(top.model_dump_json()),
                self.cli("top", board, *w, "--limit", "20"),
            ],
            "around_rank": [
                *self.get(f"{base}/ranks/{rank}/around", "size=3", f"size=3&{period}"),
                as_text(app.around_rank(board, rank, window, size=3).model_dump_json()),
            ],
            "around": [
                *self.get(f"{path_member}/around", "size=3", f"size=3&{period}"),
                as_text(around.model_dump_json()),
                self.cli("around", board, member, *w, "--size", "3"),
            ],
            "entry": [
                *self.get(path_member, "", period),
                as_text(entry.model_dump_json()),
                self.cli("rank", board, member, *w),
            ],
            "climb": [
                *self.get(f"{path_member}/climb", "to=1,2,4,50", f"to=1,2,4,50&{period}"),
                as_text(climb.model_dump_json()),
                self.cli("climb", board, member, *w, "--to", "1,2,4,50"),
            ],
            "history": [
                *self.get(history, f"window={window}&last=2", f"window={window}&last=%32"),
                as_text(hist.model_dump_json()),
                self.cli("history", board, member, *w, "--last", "2"),
            ],
            "lookup": lookup,
        }


def place(app: Seasons, board: str, window: str, scores: dict[str, float]) -> None:
    """Put ``scores`` on the board that reads of ``window`` (current) read: the day's board,
    or the archive of the current season (what reads of an archived season read)."""
    r = app.client
    _, live, archive = app.reads.target(board, window, "current")
    key = archive if window == "season" else live
    r.delete(key)
    r.zadd(key, {m: s for m, s in scores.items()})
    r.hset(app.keys.meta(board), mapping={m: json.dumps({"n": i}) for i, m in enumerate(scores)})


def check_scores(got: Any, scores: dict[str, float], composite: bool) -> None:
    """Each entry's score is the reference text of its member's score, with its parts."""
    entries = got["entries"] if isinstance(got, dict) and "entries" in got else got
    for e in entries if isinstance(entries, list) else [entries]:
        x = scores[e["member"]]
        assert e["score"] == reference_text(x), (e, x)
        want = reference_parts(x) if composite else None
        assert e.get("parts") == want, (e, x)
        assert "parts" in e or want is None


@hsettings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_read_writes_each_score_alike(
    http: TestClient, app: Seasons, settings: Settings, clock: ManualClock, data: st.DataObject
) -> None:
    reader = Reader(http, app, settings, clock)
    for board, strategy in (("plain", plain_scores), ("power", composite_scores)):
        composite = board == "power"
        window = data.draw(st.sampled_from(["day", "season"]), label="window")
        values = data.draw(st.lists(strategy, min_size=1, max_size=len(MEMBERS)), label=board)
        scores = dict(zip(MEMBERS, values, strict=False))
        place(app, board, window, scores)
        member = data.draw(st.sampled_from(sorted(scores)), label="member")
        rank = data.draw(st.integers(1, len(scores)), label="rank")
        answers = reader.every(board, window, member, rank)
        for read, texts in answers.items():
            # Every interface: the same tree, number text for number text.
            assert all(t == texts[0] for t in texts), (read, texts)
        check_scores(answers["top"][0], scores, composite)
        check_scores(answers["around"][0], scores, composite)
        check_scores(answers["around_rank"][0], scores, composite)
        check_scores(answers["lookup"][0], scores, composite)
        check_scores(answers["entry"][0], scores, composite)
        check_details(answers["entry"][0], scores, settings.boards[board].order)
        check_climb(answers["climb"][0], scores, settings.boards[board], member, composite)
        point = answers["history"][0]["history"][-1]  # the current period's
        assert point["score"] == reference_text(scores[member])
        assert point.get("parts") == (reference_parts(scores[member]) if composite else None)


def ordered(scores: dict[str, float], order: str) -> list[float]:
    return sorted(scores.values(), reverse=order == "desc")


def better(a: float, b: float, order: str) -> bool:
    return a > b if order == "desc" else a < b


def check_details(got: dict[str, Any], scores: dict[str, float], order: str) -> None:
    """The percentile and the gap up of one member, from the scores."""
    x = scores[got["member"]]
    worse = sum(1 for s in scores.values() if better(x, s, order))
    assert got["percentile"] == reference_text(100 * worse / len(scores))
    above = [s for s in scores.values() if better(s, x, order)]
    nearest = (min if order == "desc" else max)(above) if above else None
    assert got["gap_up"] == (None if nearest is None else reference_text(abs(nearest - x)))


def check_climb(
    got: dict[str, Any], scores: dict[str, float], cfg: Any, member: str, composite: bool
) -> None:
    """The member's score and each target's score and gap, from the scores."""
    x = scores[member]
    assert got["score"] == reference_text(x)
    assert got.get("parts") == (reference_parts(x) if composite else None)
    if cfg.ties == "dense":
        at_rank = sorted(set(scores.values()), reverse=cfg.order == "desc")
        rank = 1 + sum(1 for s in at_rank if better(s, x, cfg.order))
    else:
        at_rank = ordered(scores, cfg.order)
        rank = 1 + sum(1 for s in scores.values() if better(s, x, cfg.order))
    for target in got["targets"]:
        k = int(target["rank"])
        if k > len(at_rank):
            assert target["score"] is None and target["gap"] == "0" and "parts" not in target
            continue
        there = at_rank[k - 1]
        assert target["score"] == reference_text(there)
        assert target.get("parts") == (reference_parts(there) if composite else None)
        if rank > k:
            assert target["gap"] == reference_text(abs(there - x))
        else:
            assert target["gap"] == "0"


powers_of_two = st.integers(-1074, 1023).map(lambda n: math.ldexp(1.0, n))


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            powers_of_two,
            powers_of_two.map(lambda x: -x),
            st.integers(-(10**17), 10**17).map(lambda n: n / 10 ** (n % 23)),
        ),
        min_size=200,
        max_size=400,
    )
)
def test_the_reads_write_every_double_as_the_reference(
    redis_server: RedisServer, values: list[float]
) -> None:
    """Every finite double, powers of two (whose shortest digits lie above them) included,
    from Redis's own text of it as a score (what the read scripts gather)."""
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.delete("doubles")
        members = [f"m{i}" for i in range(len(values))]
        client.zadd("doubles", dict(zip(members, values, strict=True)))
        # Redis's text of each score (redis-py would turn ZMSCORE's into floats).
        texts = client.eval(
            "return redis.call('ZMSCORE', KEYS[1], unpack(ARGV))", 1, "doubles", *members
        )
    finally:
        client.close()
    assert [score_text(t).decode() for t in texts] == [reference_text(x) for x in values]
    assert [number_text(x).decode() for x in values] == [reference_text(x) for x in values]


def test_reference_agrees_with_python_repr_on_its_digits() -> None:
    """The reference reads back as the same double (a check of the check)."""
    for x in (0.1, 1e20, 5e-324, 1.7976931348623157e308, -1.5e-7, 2.0**53 + 2, 2.0**-24):
        assert float(reference_text(x)) == x
        assert math.copysign(1, float(reference_text(x))) == math.copysign(1, x)
