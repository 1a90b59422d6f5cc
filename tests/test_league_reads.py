"""League reads and cohort reward claims (docs/leagues.md#reads), on a real redis-server.

Cohorts are written straight into Redis in the layout of seasons/keys.py (Keys.league: joined,
cohorts, open, outcome), the scores onto the period's week board; the standings every
interface answers are compared with an independent model in plain Python (below, written
from docs/contract.md#ties and docs/leagues.md's zone rules, not from seasons.leagues).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from fastapi.testclient import TestClient

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import (
    BadPeriod,
    NoLeague,
    NoReward,
    NotInLeague,
    RewardsNotReady,
    UnknownCohort,
)
from seasons.http.app import create_app
from seasons.league_reads import LeagueReads
from seasons.leagues import COHORT_SPAN, Outcome, Zone
from seasons.models import LeagueCohort, LeagueOverview

NOW = datetime(2035, 6, 13, 12, tzinfo=UTC)  # a Wednesday; week 2035-06-11 (week_start monday)
WEEK = "2035-06-11"
TIERS = ["bronze", "silver", "gold"]
TOKEN = "w-league-token-for-tests"
WRITES = {"Authorization": f"Bearer {TOKEN}"}


def league_cfg(**extra: Any) -> dict[str, Any]:
    return {"window": "week", "tiers": TIERS, "cohort_size": 30, "min_cohort": 4,
            "promote": 3, "demote": 3, **extra}  # fmt: skip


BOARDS = {
    f"{ties}_{order}": {
        "aggregate": "max", "order": order, "ties": ties, "windows": ["day", "week", "season"],
        "league": league_cfg(rewards=[{"ranks": "1-2", "reward": "chest"}]),
    }
    for ties in ("member", "shared", "dense", "earliest") for order in ("desc", "asc")
} | {"plain": {"aggregate": "sum"}}  # fmt: skip


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        namespace="lg", boards=BOARDS, week_start="monday",
        archive={"dir": str(tmp_path / "archive")}, api={"write_token": TOKEN},
    )  # fmt: skip


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as s:
        yield s


@pytest.fixture
def http(settings: Settings, clock: ManualClock) -> Iterator[TestClient]:
    with TestClient(create_app(settings, clock=clock), base_url="http://localhost") as tc:
        yield tc


# --- writing cohorts the way the join does ------------------------------------------------------


def put_cohort(
    s: Seasons, board: str, cohort: int, tier: str, members: list[tuple[str, float | None]],
    *, reached: dict[str, float] | None = None, hidden: set[str] = frozenset(),  # type: ignore[assignment]
    open_: bool = False, period: str = WEEK,
) -> None:  # fmt: skip
    k, c = s.keys, s.client
    c.hset(k.league(board, period, "cohorts"), str(cohort), json.dumps({"tier": tier, "group": ""}))
    c.hincrby(k.league(board, period, "counts"), f"cohorts:{tier}", 1)
    c.hincrby(k.league(board, period, "counts"), f"members:{tier}", len(members))
    if open_:
        c.hset(k.league(board, period, "open"), json.dumps([tier, ""]), str(cohort))
    live = k.window(board, "week", period)
    reach = k.reached(board, "week", period)
    for place, (m, score) in enumerate(members):
        c.zadd(k.league(board, period, "joined"), {m: cohort * COHORT_SPAN + place})
        if score is None:
            continue
        on = k.twin_of(live) if m in hidden else live
        c.zadd(on, {m: score})
        if reached is not None and m in reached:
            c.zadd(k.twin_of(reach) if m in hidden else reach, {m: reached[m]})
    for m in hidden:
        c.hset(k.moderation(board), m, json.dumps({"state": "hidden", "mode": "shadow"}))


# --- the independent model ------------------------------------------------------------------------


def model(
    members: list[tuple[str, float | None]], ties: str, order: str, tier: str,
    reached: dict[str, float], hidden: set[str],
) -> list[tuple[str, int, str]]:  # fmt: skip
    """(member, rank, zone) of each ranked member, best first."""
    ranked = [(m, s) for m, s in members if s is not None and m not in hidden]
    sign = -1 if order == "desc" else 1

    def better(a: tuple[str, float], b: tuple[str, float]) -> bool:
        """a strictly ahead of b in the board's order (contract.md#ties)."""
        if a[1] != b[1]:
            return sign * a[1] < sign * b[1]
        if ties == "earliest":
            ra, rb = reached.get(a[0], float("inf")), reached.get(b[0], float("inf"))
            if ra != rb:
                return ra < rb
        if ties == "earliest":
            return a[0].encode() < b[0].encode()
        if ties == "member":  # Redis's order: member bytes, reversed on a desc board
            return (
                (a[0].encode() > b[0].encode())
                if order == "desc"
                else (a[0].encode() < b[0].encode())
            )
        return False

    n = len(ranked)
    up = 0 if tier == TIERS[-1] else min(3, n)
    down = 0 if tier == TIERS[0] or n < 4 else min(3, n)
    out = []
    for x in ranked:
        ahead = sum(1 for y in ranked if better(y, x))
        if ties == "dense":
            rank = 1 + len({s for _, s in ranked if sign * s < sign * x[1]})
        else:
            rank = 1 + ahead
        zone = "promote" if ahead < up else "demote" if ahead >= n - down else "stay"
        out.append((x[0], rank, zone, ahead))
    out.sort(key=lambda t: (t[3], t[0].encode()))
    return [(m, r, z) for m, r, z, _ in out]


@pytest.mark.parametrize("board", [b for b in BOARDS if b != "plain"])
def test_standings_match_an_independent_model(app: Seasons, board: str) -> None:
    ties, order = board.split("_")
    rng = random.Random(board)
    for cohort, tier in enumerate(TIERS * 3, start=1):
        size = rng.choice([1, 3, 4, 9, 12])
        names = [f"m{cohort}-{i}" for i in range(size)]
        # Few distinct scores: ties at every boundary; some members without score.
        members = [(m, rng.choice([None, 5.0, 7.0, 7.0, 9.0, 9.0, -1.0])) for m in names]
        reached = {m: float(rng.choice([100, 200, 200, 300])) for m in names}
        hidden = {m for m in names if rng.random() < 0.15}
        put_cohort(app, board, cohort, tier, members, reached=reached, hidden=hidden)
        got = app.league(board, cohort=cohort, period=WEEK)
        assert isinstance(got, LeagueCohort)
        assert (got.tier, got.final, got.cohort) == (tier, False, cohort)
        ranked = [(r.member, r.rank, r.zone) for r in got.rows if r.rank is not None]
        want = model(members, ties, order, tier, reached, hidden)
        # Rows sharing a rank may come in any order: compare as sets per rank, then in full.
        assert sorted(ranked, key=str) == sorted(want, key=str)
        assert [r for _, r, _ in ranked] == sorted(r for _, r, _ in want)
        unranked = [r.member for r in got.rows if r.rank is None]
        assert unranked == [m for m, s in members if s is None and m not in hidden]
        assert not {r.member for r in got.rows} & hidden  # public: hidden members left out
        for r in got.rows:
            if r.rank is not None:
                assert r.reward == ("chest" if r.rank <= 2 else None)
        # A hidden member sees itself, ranked as if visible (shadow mode).
        for h in hidden:
            mine = app.league(board, h, period=WEEK)
            assert isinstance(mine, LeagueCohort)
            score = dict(members)[h]
            rows = {r.member: r for r in mine.rows}
            assert h in rows and (rows[h].rank is not None) == (score is not None)
            assert not rows[h].hidden


def test_final_rows_are_the_close_outcomes(app: Seasons) -> None:
    board = "shared_desc"
    put_cohort(app, board, 1, "silver", [("a", 3), ("b", 9), ("c", 5)])
    outcome = {
        "a": {"rank": 2, "zone": "stay", "tier_after": "silver", "reward": "chest", "score": 3},
        "b": {"rank": 1, "zone": "promote", "tier_after": "gold", "reward": "chest", "score": 9},
        "c": {"rank": 3, "zone": "demote", "tier_after": "bronze", "reward": None, "score": 1},
    }
    for m, o in outcome.items():
        value = {"tier_before": "silver", "cohort": 1, **o}
        app.client.hset(app.keys.league(board, WEEK, "outcome"), m, json.dumps(value))
    app.client.hset(app.keys.league_tier(board), "b", "gold")
    got = app.league(board, "b", period=WEEK)
    assert isinstance(got, LeagueCohort) and got.final and got.member_tier == "gold"
    assert [(r.member, r.rank, r.zone, r.tier_after, r.score) for r in got.rows] == [
        ("b", 1, "promote", "gold", 9), ("a", 2, "stay", "silver", 3),
        ("c", 3, "demote", "bronze", 1),
    ]  # fmt: skip
    assert got.resets_at == "2035-06-18T00:00:00Z"  # the week ends on Monday 00:00 UTC


def test_overview_counts_the_joins_of_each_tier(app: Seasons) -> None:
    """Members join cohorts of the tiers the tier hash gives them (a tier no longer configured
    joins the lowest), through the write script; the overview counts them per tier, from
    the counts the joins kept, not from the cohorts."""
    board = "member_desc"  # cohort_size 30
    rng = random.Random(9)
    tier_of = {f"m{i:03d}": rng.choice([*TIERS, "retired"]) for i in range(140)}
    app.client.hset(app.keys.league_tier(board), mapping=tier_of)
    members = list(tier_of)
    rng.shuffle(members)
    for i in range(0, len(members), 45):
        app.submit_many([{"board": board, "member": m, "value": rng.randint(1, 9)}
                         for m in members[i : i + 45]])  # fmt: skip
    joined = {t: sum(1 for x in tier_of.values() if (x if x in TIERS else TIERS[0]) == t)
              for t in TIERS}  # fmt: skip
    got = app.league(board, period=WEEK)
    assert isinstance(got, LeagueOverview) and not got.final
    assert [(t.tier, t.members, t.cohorts) for t in got.tiers] == [
        (t, joined[t], -(-joined[t] // 30)) for t in TIERS
    ]
    # Events of members who joined already join nothing more.
    app.submit_many([{"board": board, "member": m, "value": 1} for m in members[:50]])
    again = app.league(board, period=WEEK)
    assert isinstance(again, LeagueOverview) and again.tiers == got.tiers
    # Counted as they joined: the overview reads no cohort (their hashes gone, it is the same).
    app.client.delete(*(app.keys.league(board, WEEK, p) for p in ("cohorts", "open", "joined")))
    assert app.league(board, period=WEEK) == again


def test_python_http_and_cli_answer_the_same(
    app: Seasons, http: TestClient, settings: Settings, clock: ManualClock
) -> None:
    board = "earliest_desc"
    put_cohort(app, board, 1, "silver", [("ann", 5), ("bob", 5), ("cy", 2), ("dee", None)],
               reached={"ann": 20, "bob": 10, "cy": 5})  # fmt: skip

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), obj=CliState(clock=clock, settings=settings))

    py = app.league(board, "ann", period="current")
    assert isinstance(py, LeagueCohort) and [r.member for r in py.rows][:2] == ["bob", "ann"]
    body = http.get(f"/v1/leagues/{board}/members/ann?period={WEEK}")
    assert body.status_code == 200 and body.json() == py.model_dump(mode="json")
    cli_out = run("league", board, "ann", "--period", WEEK, "--json")
    assert cli_out.exit_code == 0 and json.loads(cli_out.output) == body.json()
    by_id = http.get(f"/v1/leagues/{board}/{WEEK}/cohorts/1").json()
    assert by_id["rows"] == body.json()["rows"] and by_id["member"] is None
    cli_id = run("league", board, "--cohort", "1", "--period", WEEK, "--json")
    assert json.loads(cli_id.output) == by_id
    over = http.get(f"/v1/leagues/{board}?period={WEEK}").json()
    assert json.loads(run("league", board, "--period", WEEK, "--json").output) == over
    table = run("league", board, "ann", "--period", WEEK)
    assert table.exit_code == 0 and "bob" in table.output and "promote" in table.output


@pytest.mark.parametrize("final", [False, True])
def test_the_bytes_sent_are_what_the_model_writes(
    app: Seasons, http: TestClient, final: bool
) -> None:
    """The cohort JSON is written by hand on the read path (seasons/league_reads.py): it is
    byte for byte what the model writes of itself, for any member name and score."""
    board = "shared_desc"
    members = [("\u00e9l\u00e8ve \"q\"", 2.5), ("\U0001f600", -0.0), ("b\\s", 1e17),
               ("tab\tx", 1e-07), ("plain", None), ("w", 3.0)]  # fmt: skip
    put_cohort(app, board, 1, "silver", members)
    if final:
        for i, (m, score) in enumerate(members):
            value = {"tier_before": "silver", "cohort": 1, "rank": i + 1, "zone": "stay",
                     "tier_after": "silver", "reward": "ch\u00e9st", "score": score}  # fmt: skip
            app.client.hset(app.keys.league(board, WEEK, "outcome"), m, json.dumps(value))
    for path in (f"/v1/leagues/{board}/{WEEK}/cohorts/1",
                 f"/v1/leagues/{board}/members/w?period={WEEK}"):  # fmt: skip
        raw = http.get(path).content
        model = LeagueCohort.model_validate_json(raw)
        assert model.final is final and len(model.rows) >= 5
        assert model.model_dump_json().encode() == raw


def test_the_fast_path_answers_as_the_routes(app: Seasons, http: TestClient) -> None:
    """The league reads are on the HTTP fast path (seasons.http.fast): each answer, errors
    included, is the FastAPI route's (a percent-encoded query sends a request to the route)
    and the Python API's."""
    board = "dense_desc"
    put_cohort(app, board, 1, "silver", [("ann", 5), ("bob", 5), ("cy", 2), ("dee", None)])

    def both(path: str, query: str) -> Any:
        name, _, value = query.partition("=")
        routed = f"{name}=%{ord(value[0]):02X}{value[1:]}"
        fast, slow = http.get(f"{path}?{query}"), http.get(f"{path}?{routed}")
        assert (fast.status_code, fast.content) == (slow.status_code, slow.content), path
        return fast

    got = both(f"/v1/leagues/{board}/members/ann", f"period={WEEK}")
    assert got.json() == app.league(board, "ann", period=WEEK).model_dump(mode="json")
    got = both(f"/v1/leagues/{board}", f"period={WEEK}")
    assert got.json() == app.league(board, period=WEEK).model_dump(mode="json")
    by_id = http.get(f"/v1/leagues/{board}/{WEEK}/cohorts/1")
    assert by_id.json() == app.league(board, cohort=1, period=WEEK).model_dump(mode="json")
    for path, query, status, code in [
        (f"/v1/leagues/{board}/members/nobody", f"period={WEEK}", 404, "not_in_league"),
        ("/v1/leagues/plain/members/ann", f"period={WEEK}", 422, "no_league"),
        ("/v1/leagues/nope/members/ann", f"period={WEEK}", 404, "unknown_board"),
        (f"/v1/leagues/{board}/members/ann", "period=someday", 422, "bad_period"),
        (f"/v1/leagues/{board}", "period=someday", 422, "bad_period"),
    ]:
        resp = both(path, query)
        assert (resp.status_code, resp.json()["error"]) == (status, code), resp.text
    for cohort in ("7", "0", "x1"):  # unknown; not an id: the route's validation words it
        resp = http.get(f"/v1/leagues/{board}/{WEEK}/cohorts/{cohort}")
        assert resp.status_code in (404, 422) and "error" in resp.json(), resp.text


def test_errors_are_4xx_never_5xx(
    app: Seasons, http: TestClient, settings: Settings, clock: ManualClock
) -> None:
    board = "member_desc"
    put_cohort(app, board, 1, "bronze", [("ann", 1)])
    app.client.zadd(app.keys.league(board, WEEK, "joined"), {"late": -1})
    with pytest.raises(NotInLeague):
        app.league(board, "nobody", period=WEEK)
    with pytest.raises(NotInLeague, match="waiting"):
        app.league(board, "late", period=WEEK)
    with pytest.raises(UnknownCohort):
        app.league(board, cohort=7, period=WEEK)
    with pytest.raises(BadPeriod):
        app.league(board, "ann", period="2035-13")
    with pytest.raises(NoLeague):
        app.league("plain", "ann")
    for path, status, code in (
        (f"/v1/leagues/{board}/members/nobody?period={WEEK}", 404, "not_in_league"),
        (f"/v1/leagues/{board}/members/late?period={WEEK}", 404, "not_in_league"),
        (f"/v1/leagues/{board}/{WEEK}/cohorts/7", 404, "unknown_cohort"),
        (f"/v1/leagues/{board}/members/ann?period=nope", 422, "bad_period"),
        (f"/v1/leagues/{board}/nope/cohorts/1", 422, "bad_period"),
        ("/v1/leagues/plain?period=current", 422, "no_league"),
        ("/v1/leagues/ghost", 404, "unknown_board"),  # as every unknown board
    ):
        got = http.get(path)
        assert (got.status_code, got.json()["error"]) == (status, code), path

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), obj=CliState(clock=clock, settings=settings))

    assert run("league", board, "nobody", "--period", WEEK).exit_code == 3
    assert run("league", board, "ann", "--period", "x").exit_code == 2
    assert run("league", "plain").exit_code == 2


def test_claims_exactly_once(
    app: Seasons, http: TestClient, settings: Settings, clock: ManualClock
) -> None:
    board = "shared_desc"
    put_cohort(app, board, 1, "silver", [("a", 3), ("b", 9)])
    for m, o in {"a": (2, None), "b": (1, "chest")}.items():
        value = {"tier_before": "silver", "tier_after": "silver", "cohort": 1, "rank": o[0],
                 "score": 1, "zone": "stay", "reward": o[1]}  # fmt: skip
        app.client.hset(app.keys.league(board, WEEK, "outcome"), m, json.dumps(value))
    with pytest.raises(RewardsNotReady):
        app.claim_league(board, WEEK, "b")
    got = http.post(f"/v1/leagues/{board}/{WEEK}/rewards/b/claim", headers=WRITES)
    assert (got.status_code, got.json()["error"]) == (409, "rewards_not_ready")
    assert app.client.exists(app.keys.league(board, WEEK, "claims")) == 0
    app.client.hset(app.keys.league_state(board), f"closed:{WEEK}", "{}")
    with pytest.raises(NoReward):
        app.claim_league(board, WEEK, "a")
    with pytest.raises(NoReward):
        app.claim_league(board, WEEK, "nobody")
    first = app.claim_league(board, WEEK, "b", claim_id="c-1")
    assert (first.reward, first.rank, first.already_claimed) == ("chest", 1, False)
    resent = app.claim_league(board, WEEK, "b", claim_id="c-1")
    assert resent == first
    other = http.post(
        f"/v1/leagues/{board}/{WEEK}/rewards/b/claim", headers={**WRITES, "Idempotency-Key": "c-2"}
    )
    assert other.status_code == 200
    assert other.json() == {**first.model_dump(mode="json"), "already_claimed": True}
    log = Path(settings.archive.dir) / "lg" / board / f"league-{WEEK}.claims.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(x["member"], x["claim_id"], x["season"]) for x in lines] == [
        ("b", "c-1", f"league-{WEEK}")
    ] * 2  # the first claim and its resend; never the other id's
    assert http.post(f"/v1/leagues/{board}/{WEEK}/rewards/b/claim").status_code in (401, 403)
    out = CliRunner().invoke(cli, ["league-claim", board, "b", "--period", WEEK],
                             obj=CliState(clock=clock, settings=settings))  # fmt: skip
    assert out.exit_code == 0 and "already claimed" in out.output


# --- one round trip per read ----------------------------------------------------------------------


def _commands_sent(r: redis.Redis, action: Callable[[], Any]) -> list[str]:
    """Commands clients sent to Redis while ``action`` ran (not those run inside scripts)."""
    marker = "end-of-read-marker"
    with r.monitor() as monitor:
        action()
        r.echo(marker)
        seen = []
        while True:
            command = monitor.next_command()
            seen.append(command)
            if marker in command["command"]:
                break
    ours = seen[-1]["client_port"]
    return [
        c["command"].split(" ", 1)[0].upper()
        for c in seen[:-1]
        if c["client_type"] != "lua" and c["client_port"] != ours
    ]


def test_each_league_read_is_one_round_trip(app: Seasons, r: redis.Redis) -> None:
    board = "earliest_asc"
    put_cohort(app, board, 1, "gold", [("a", 1), ("b", 2)], hidden={"b"}, open_=True)
    reads = {
        "member": lambda: app.league(board, "a", period=WEEK),
        "hidden member": lambda: app.league(board, "b", period=WEEK),
        "cohort": lambda: app.league(board, cohort=1, period=WEEK),
        "overview": lambda: app.league(board, period=WEEK),
    }
    for name, read in reads.items():
        read()  # the script is loaded (EVALSHA may meet NOSCRIPT once)
        assert _commands_sent(r, read) == ["EVALSHA"], name


# --- reads planned from the last read (seasons.plans.CohortPlan) ---------------------------------


def _script_body(app: Seasons, board: str, member: str | None, cohort: int | None) -> bytes:
    """The read's JSON as its script answers it: a new LeagueReads, which guesses nothing."""
    fresh = LeagueReads(app.settings, app.keys, app.clock)
    read = (fresh.member(board, member, WEEK) if member is not None
            else fresh.cohort(board, cohort or 0, WEEK))  # fmt: skip
    assert read.plan is None
    return read.body(app.executor.run(read.call, None))


def _app_body(app: Seasons, board: str, member: str | None, cohort: int | None) -> bytes:
    reads = app.league_reads
    read = (reads.member(board, member, WEEK) if member is not None
            else reads.cohort(board, cohort or 0, WEEK))  # fmt: skip
    return read.body(app.executor.run(read.call, read.plan))


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("board", [b for b in BOARDS if b != "plain" and "earliest" not in b])
def test_reads_planned_from_the_last_read_answer_as_the_script(
    app: Seasons, board: str, seed: int
) -> None:
    """Random steps change the cohorts under reads that are planned from the last read and
    answered from the rows rendered last while the scores stay the same: scores move (ties),
    members join, are hidden and shown again, erased, and a cohort's outcome is written.
    After each step every read answers byte for byte what the script answers, and its
    ranks and zones are the model's."""
    ties, order = board.split("_")
    rng = random.Random(f"{board}-{seed}")
    k, c = app.keys, app.client
    live, joined = k.window(board, "week", WEEK), k.league(board, WEEK, "joined")
    cohorts: dict[int, list[str]] = {1: [], 2: []}
    hidden: set[str] = set()
    serial = 0

    def join(cohort: int) -> None:
        nonlocal serial
        serial += 1
        m = f"p{serial}-é"
        c.zadd(joined, {m: cohort * COHORT_SPAN + serial})  # in join order
        c.zadd(live, {m: rng.choice([1, 2, 2, 3])})
        cohorts[cohort].append(m)

    for cohort, tier in ((1, "silver"), (2, "bronze")):
        put_cohort(app, board, cohort, tier, [], open_=True)
        for _ in range(6):
            join(cohort)
    for step in range(24):
        everyone = [m for ms in cohorts.values() for m in ms]
        action = rng.choice(["score", "score", "score", "join", "hide", "show", "erase"])
        if step == 18:
            action = "outcome"
        m = rng.choice(everyone)
        if action == "score" and m not in hidden:
            c.zadd(live, {m: rng.choice([1, 2, 2, 3, 4])})
        elif action == "join":
            join(rng.choice([1, 2]))
        elif action == "hide" and m not in hidden:
            score = c.zscore(live, m)
            c.zrem(live, m)
            c.zadd(k.twin_of(live), {m: score or 0})
            c.hset(k.moderation(board), m, json.dumps({"state": "hidden", "mode": "open"}))
            hidden.add(m)
        elif action == "show" and hidden:
            m = sorted(hidden)[0]
            c.zadd(live, {m: c.zscore(k.twin_of(live), m) or 0})
            c.zrem(k.twin_of(live), m)
            c.hdel(k.moderation(board), m)
            hidden.discard(m)
        elif action == "erase" and m not in hidden and len(everyone) > 4:
            c.zrem(joined, m)
            c.zrem(live, m)
            for ms in cohorts.values():
                if m in ms:
                    ms.remove(m)
        elif action == "outcome":  # the close wrote cohort 2's outcome
            for place, m in enumerate(cohorts[2]):
                o = Outcome(m, "bronze", "bronze", 2, place + 1, 1.0, Zone.STAY, None)
                c.hset(k.league(board, WEEK, "outcome"), m, o.to_json())
        for _ in range(2):  # the second read of each is planned (a first learns)
            for cohort, ms in cohorts.items():
                assert _app_body(app, board, None, cohort) == _script_body(
                    app, board, None, cohort
                ), (step, action, cohort)
                for m in ms[:: 1 + len(ms) // 4]:
                    assert _app_body(app, board, m, None) == _script_body(app, board, m, None)
        got = app.league(board, cohort=1, period=WEEK)
        assert isinstance(got, LeagueCohort)
        scores = dict(zip(cohorts[1], c.zmscore(live, cohorts[1]) if cohorts[1] else [],
                          strict=True))  # fmt: skip
        members = [(m, scores[m]) for m in cohorts[1]]
        want = model(members, ties, order, "silver", {}, hidden)
        ranked = [(r.member, r.rank, r.zone) for r in got.rows if r.rank is not None]
        assert sorted(ranked, key=str) == sorted(want, key=str), step
        assert [r for _, r, _ in ranked] == sorted(r for _, r, _ in want), step


def test_a_cohort_read_again_is_one_transaction(
    app: Seasons, r: redis.Redis, http: TestClient
) -> None:
    board = "member_desc"
    put_cohort(app, board, 1, "gold", [("a", 1), ("b", 2), ("c", 2)], open_=True)
    k = app.keys
    read = lambda: app.league(board, "a", period=WEEK)  # noqa: E731
    tx = ["MULTI", "EXISTS", "HGET", "HGET", "ZRANGEBYSCORE", "ZMSCORE", "EXEC"]
    read()  # the script is loaded (EVALSHA may meet NOSCRIPT once)
    app.league_reads._guesses.forget_cohort(k.league(board, WEEK, "joined"), 1)
    assert _commands_sent(r, read) == ["EVALSHA"]  # no guess yet: the script
    assert _commands_sent(r, read) == tx  # the cohort read last: one transaction
    by_id = ["MULTI", "EXISTS", "HGET", "ZRANGEBYSCORE", "ZMSCORE", "EXEC"]  # no tier to read
    assert _commands_sent(r, lambda: app.league(board, cohort=1, period=WEEK)) == by_id
    # A member joins the cohort: the guess is wrong once (learned), then right again.
    app.client.zadd(k.league(board, WEEK, "joined"), {"d": COHORT_SPAN + 3})
    app.client.zadd(k.window(board, "week", WEEK), {"d": 9})
    got = None

    def read_d() -> None:
        nonlocal got
        got = app.league(board, "a", period=WEEK)

    assert _commands_sent(r, read_d) == tx + tx
    assert isinstance(got, LeagueCohort) and [x.member for x in got.rows] == ["d", "c", "b", "a"]
    assert _commands_sent(r, read) == tx
    # The HTTP server plans its reads alike, and answers the same.
    assert http.get(f"/v1/leagues/{board}/members/a?period={WEEK}").json() == json.loads(
        _script_body(app, board, "a", None)
    )
    # A hidden member in the cohort: its score is on the twin key, the script answers.
    app.client.hset(k.moderation(board), "zz", "{}")  # a member elsewhere changes nothing
    assert _commands_sent(r, read) == tx
    app.client.zrem(k.window(board, "week", WEEK), "c")
    app.client.zadd(k.twin_of(k.window(board, "week", WEEK)), {"c": 2})
    app.client.hset(k.moderation(board), "c", json.dumps({"state": "hidden", "mode": "shadow"}))
    assert _commands_sent(r, read) == tx + ["EVALSHA"]
    assert _commands_sent(r, read) == ["EVALSHA"]  # learned: no plan while it is hidden
    # The close has begun (outcomes exist): reads of the period go to the script.
    app.client.hdel(k.moderation(board), "c")
    app.client.zadd(k.window(board, "week", WEEK), {"c": 2})
    read()
    assert _commands_sent(r, read) == tx
    app.client.hset(k.league(board, WEEK, "outcome"), "someone", "{}")
    assert _commands_sent(r, read) == tx + ["EVALSHA"]
    assert _commands_sent(r, read) == ["EVALSHA"]
