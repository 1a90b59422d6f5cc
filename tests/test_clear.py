"""Clearing one period of a board (``Seasons.clear``, ``seasons clear``, ``POST
/v1/admin/boards/{board}/clear``), compared with the reference model.

The model is told what a clear means in its own terms: the cleared days' scores are dropped
from ``Model.days``; every board of every window must then equal what the model computes
from the days it has left, read raw from Redis.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from reference import Model, alltime, key, names, snapshot, zset

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BadPeriod, BadWindow, Conflict, InvalidInput, UnknownBoard
from seasons.http.app import create_app
from seasons.jobs import registry
from seasons.jobs.clear import DayFolded, RunIdReused, SeasonClosed
from seasons.jobs.rollup import DaysExpired
from seasons.keys import STATE_FOLDED, Keys
from seasons.windows import WINDOWS

pytestmark = pytest.mark.both_backends

ROOT = Path(__file__).resolve().parent.parent
NS = "clr"
# A Wednesday of season S3 (2099-03-02 .. 03-29), far ahead: Redis expires keys by its own
# clock. The events run from 2099-02-22 (S2, February, the week of 02-16) to today, across a
# month, a season and three week boundaries.
NOW = datetime(2099, 3, 11, 15, tzinfo=UTC)
FIRST = date(2099, 2, 22)
TODAY = date(2099, 3, 11)
BOARDS: dict[str, dict[str, Any]] = {
    "kills": {
        "aggregate": "sum",
        "windows": ["day", "week", "month", "season"],
        "week_weights": [1, 1, 1, 1, 1, 2, 2],
        "season_weights": [1, 2, 3],
        "month_weights": [2, 1, 1],
    },
    # Trimmed, min, ascending: a cleared day can only make scores worse, so members trimmed
    # away before must come back.
    "laps": {"aggregate": "min", "order": "asc", "ties": "shared", "max_entries": 3},
}
ADMIN_TOKEN = "clear-admin-token-for-tests"
MEMBERS = [f"p{i}" for i in range(7)]
HAS_ALLTIME = "alltime" in WINDOWS


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        namespace=NS, timezone="UTC", seasons={"length_days": 28, "anchor": "2099-01-05"},
        boards=BOARDS, archive={"dir": str(tmp_path / "archive")},
        retention="P60D", worker={"lock_ttl": 1.0}, api={"admin_token": ADMIN_TOKEN},
    )  # fmt: skip


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as facade:
        yield facade


def events_for(days: list[date], seed: int, boards: tuple[str, ...] = ("kills", "laps")) -> list:
    """A few events per board per day, deterministic: the same for Redis and the model."""
    out = []
    for n, day in enumerate(days):
        for i, member in enumerate(MEMBERS):
            if (n + i + seed) % 3 == 0:
                continue
            ts = datetime(day.year, day.month, day.day, 1 + (i + seed) % 12, tzinfo=UTC)
            for board in boards:
                value = 1 + (n * 7 + i * 3 + seed) % 11
                out.append({"board": board, "member": member, "value": value, "ts": ts})
    return out


def submit(app: Seasons, model: Model, events: list[dict[str, Any]]) -> None:
    """Backfilled (the days before today are past their grace), to Redis and to the model."""
    model.submit(events, app.clock(), backfill=True)
    app.submit_many([{**e, "ts": e["ts"].isoformat()} for e in events], backfill=True)


@pytest.fixture
def model(app: Seasons, settings: Settings) -> Model:
    m = Model(settings)
    days = [FIRST + timedelta(days=i) for i in range((TODAY - FIRST).days + 1)]
    submit(app, m, events_for(days, seed=1))
    return m


def forget_days(model: Model, board: str, days: list[date]) -> None:
    for d in days:
        model.days[board].pop(d, None)


def assert_boards_match(
    r: redis.Redis, model: Model, boards: tuple[str, ...] = tuple(BOARDS)
) -> None:
    """Every live board of every window equals the model, and no other key of a window
    exists (a board left with no day has no key)."""
    for board in boards:
        expected = {
            key(NS, board, w, pid): model.board(board, w, pid) for w, pid in model.periods(board)
            if w != "alltime"
        }  # fmt: skip
        for name, scores in expected.items():
            assert zset(r, name) == scores, name
        found = {
            n for n in names(r, f"{NS}:{{{board}}}:*")
            if n.split(":")[2] in ("day", "week", "month", "season")
        }  # fmt: skip
        assert found == {n for n, s in expected.items() if s}


def days_between(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


# --- clearing a day ---------------------------------------------------------------------------


def test_the_events_match_the_model_before_any_clear(r: redis.Redis, model: Model) -> None:
    assert_boards_match(r, model)


@pytest.mark.parametrize(
    "day",
    [
        date(2099, 3, 1),  # the last day of S2, of February and of the week of 02-23
        date(2099, 3, 2),  # the first day of S3 and of its first week
        date(2099, 2, 22),  # the first day with events, alone in its week (02-16)
        TODAY,  # a day still taking events
    ],
)
def test_clearing_a_day_recomputes_every_board_holding_it(
    app: Seasons, r: redis.Redis, model: Model, day: date
) -> None:
    result = app.clear("kills", "day", day.isoformat())
    assert zset(r, key(NS, "kills", "day", day.isoformat())) == {}
    forget_days(model, "kills", [day])
    assert_boards_match(r, model)
    assert result.board == "kills" and result.window == "day" and result.period == str(day)
    assert result.deleted[0] == key(NS, "kills", "day", str(day))
    rebuilt = {o.target for o in result.rebuilt}
    holding = {
        key(NS, "kills", w, pid) for w, pid in model.periods("kills")
    } | {key(NS, "kills", "week", "2099-02-16")}  # fmt: skip
    assert rebuilt <= holding and key(NS, "kills", "day", str(day)) not in rebuilt
    # The other board is untouched.
    laps = app.clear("laps", "day", day.isoformat())
    forget_days(model, "laps", [day])
    assert_boards_match(r, model)
    assert laps.run_id != result.run_id


def test_a_board_left_with_no_entry_has_no_key_until_a_write(
    app: Seasons, r: redis.Redis, model: Model
) -> None:
    week = key(NS, "kills", "week", "2099-02-16")
    assert r.exists(week)
    result = app.clear("kills", "day", "2099-02-22")  # the week's only day with events
    assert week in {o.target for o in result.rebuilt} and not r.exists(week)
    # A write afterwards starts the boards again from itself alone, like the day key.
    late = [{"board": "kills", "member": "new", "value": 5,
             "ts": datetime(2099, 2, 22, 9, tzinfo=UTC)}]  # fmt: skip
    forget_days(model, "kills", [date(2099, 2, 22)])
    submit(app, model, late)
    assert_boards_match(r, model)


def test_boards_whose_every_day_is_cleared_go_with_the_days(
    app: Seasons, r: redis.Redis, model: Model
) -> None:
    """Clearing S3 with its days: its weeks hold no other day up to now, so they are
    deleted in the transaction that deletes the days; February and S2 are recomputed."""
    result = app.clear("kills", "month", "2099-03", with_days=True)
    emptied = [key(NS, "kills", w, p) for w, p in
               [("week", "2099-03-02"), ("week", "2099-03-09"), ("season", "S3")]]  # fmt: skip
    assert set(emptied) < set(result.deleted)
    assert {o.target for o in result.rebuilt} == {
        key(NS, "kills", "week", "2099-02-23"), key(NS, "kills", "season", "S2")
    }  # fmt: skip
    forget_days(model, "kills", days_between(date(2099, 3, 1), TODAY))
    assert_boards_match(r, model)


# --- clearing a rolled-up board ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "period"),
    [("week", "2099-02-23"), ("month", "2099-02"), ("season", "S3"), ("season", "S2")],
)
def test_clearing_a_rolled_up_board_rebuilds_it_from_its_days(
    app: Seasons, r: redis.Redis, model: Model, window: str, period: str
) -> None:
    target = key(NS, "kills", window, period)
    r.zadd(target, {"intruder": 1000, "p1": -5})  # a board gone wrong
    before = {d: dict(s) for d, s in model.days["kills"].items()}
    result = app.clear("kills", window, period)
    assert [o.target for o in result.rebuilt] == [target] and result.deleted == []
    assert model.days["kills"] == before
    assert_boards_match(r, model)


@pytest.mark.parametrize(
    ("window", "period", "first", "last"),
    [
        ("week", "2099-02-23", date(2099, 2, 23), date(2099, 3, 1)),
        ("week", "2099-03-09", date(2099, 3, 9), TODAY),  # the current week
        ("month", "2099-03", date(2099, 3, 1), TODAY),  # its seasons: S2 rebuilt, S3 emptied
        ("season", "S2", date(2099, 2, 2), date(2099, 3, 1)),
        ("season", "S3", date(2099, 3, 2), TODAY),
    ],
)
def test_clearing_with_days_clears_each_day(
    app: Seasons, r: redis.Redis, model: Model, window: str, period: str, first: date, last: date
) -> None:
    result = app.clear("kills", window, period, with_days=True)
    forget_days(model, "kills", days_between(first, last))
    assert_boards_match(r, model)
    assert not r.exists(key(NS, "kills", window, period))
    assert result.with_days and key(NS, "kills", window, period) in result.deleted
    for d in days_between(first, last):
        assert not r.exists(key(NS, "kills", "day", str(d)))


def test_a_period_is_named_like_a_read_names_it(app: Seasons, r: redis.Redis, model: Model) -> None:
    assert app.clear("kills", "week", "2099-02-25").period == "2099-02-23"  # any day of it
    assert app.clear("kills", "day", "current").period == str(TODAY)
    assert app.clear("kills", "week", "previous", with_days=True).period == "2099-03-02"
    forget_days(model, "kills", [TODAY, *days_between(date(2099, 3, 2), date(2099, 3, 8))])
    assert_boards_match(r, model)


# --- refused, changing nothing ----------------------------------------------------------------


@pytest.mark.parametrize("season_state", ["archived", "closing"])
@pytest.mark.parametrize(
    ("window", "period", "with_days"),
    [
        ("day", "2099-03-01", False),  # a day of S2
        ("season", "S2", False),
        ("season", "S2", True),
        ("week", "2099-02-23", True),  # its days are in S2
        ("month", "2099-03", True),  # 03-01 is in S2
    ],
)
def test_a_closing_or_archived_season_is_refused(
    app: Seasons, r: redis.Redis, model: Model, season_state: str, window: str, period: str,
    with_days: bool,
) -> None:  # fmt: skip
    for board in BOARDS:
        r.hset(Keys(NS).state(board), "season:S2", season_state)
    before = snapshot(r)
    with pytest.raises(SeasonClosed) as err:
        app.clear("kills", window, period, with_days=with_days)
    assert "S2" in err.value.message and season_state in err.value.message
    assert isinstance(err.value, Conflict) and err.value.details["season"] == "S2"
    assert snapshot(r) == before


def test_an_archived_season_leaves_its_neighbours_clearable(
    app: Seasons, r: redis.Redis, model: Model
) -> None:
    r.hset(Keys(NS).state("kills"), "season:S2", "archived")
    app.clear("kills", "week", "2099-02-23")  # a rebuild deletes nothing: allowed
    app.clear("kills", "day", "2099-03-02")  # a day of S3
    forget_days(model, "kills", [date(2099, 3, 2)])
    assert_boards_match(r, model)


@pytest.mark.parametrize(
    ("board", "window", "period", "error"),
    [
        ("nope", "day", "2099-03-01", UnknownBoard),
        ("kills", "hour", "2099-03-01", BadWindow),
        ("laps", "month", "2099-03", BadWindow),  # laps keeps no month
        ("kills", "day", "2099-3-1", BadPeriod),
        ("kills", "season", "S0", InvalidInput),
        ("kills", "week", "tomorrow", BadPeriod),
    ],
)
def test_bad_input_is_refused_by_name(
    app: Seasons, r: redis.Redis, model: Model, board: str, window: str, period: str,
    error: type[Exception],
) -> None:  # fmt: skip
    before = snapshot(r)
    with pytest.raises(error):
        app.clear(board, window, period)
    with pytest.raises(InvalidInput):
        app.clear("kills", "day", "2099-03-01", run_id="")
    assert snapshot(r) == before


def test_a_day_past_retention_is_refused(
    settings_factory: Callable[..., Settings], r: redis.Redis, tmp_path: Path
) -> None:
    settings = settings_factory(
        namespace=NS, timezone="UTC", seasons={"length_days": 28, "anchor": "2099-01-05"},
        boards=BOARDS, retention="P3D", late_grace="PT1H",
    )  # fmt: skip
    clock = ManualClock(datetime(2099, 3, 8, 12, tzinfo=UTC))
    with Seasons(settings, clock=clock) as app:
        model = Model(settings)
        submit(app, model, events_for(days_between(date(2099, 3, 6), date(2099, 3, 8)), seed=2))
        clock.set(NOW)
        submit(app, model, events_for(days_between(date(2099, 3, 9), TODAY), seed=2))
        before = snapshot(r)
        with pytest.raises(DaysExpired):
            app.clear("kills", "day", "2099-03-06")  # expired at the end of 03-09
        # 03-09 is kept, but its month holds 03-08, past retention: not rebuilt from part of it.
        with pytest.raises(DaysExpired) as err:
            app.clear("kills", "day", "2099-03-09")
        assert "2099-03" in err.value.message
        assert snapshot(r) == before


@pytest.mark.skipif(not HAS_ALLTIME, reason="no alltime window")
def test_a_day_folded_into_the_alltime_base_is_refused(
    settings_factory: Callable[..., Settings], r: redis.Redis
) -> None:
    boards = {"kills": {**BOARDS["kills"], "windows": ["day", "week", "season", "alltime"]}}
    settings = settings_factory(
        namespace=NS, timezone="UTC", seasons={"length_days": 28, "anchor": "2099-01-05"},
        boards=boards,
    )  # fmt: skip
    with Seasons(settings, clock=ManualClock(NOW)) as app:
        model = Model(settings)
        submit(
            app, model, events_for(days_between(date(2099, 3, 2), TODAY), seed=3, boards=("kills",))
        )
        keys = Keys(NS)
        # Clearing a day nothing was folded of: the alltime board loses it too.
        app.clear("kills", "day", "2099-03-04")
        forget_days(model, "kills", [date(2099, 3, 4)])
        assert zset(r, keys.window("kills", "alltime", "all")) == alltime(model, "kills")
        assert_boards_match(r, model, ("kills",))
        # The days through 03-05 folded into the base (as the day close does it).
        r.zadd(keys.base("kills", "alltime"), {"p1": 1.0})
        r.hset(keys.state("kills"), STATE_FOLDED + "alltime", "2099-03-05")
        before = snapshot(r)
        for window, period, with_days in [
            ("day", "2099-03-05", False), ("week", "2099-03-02", True), ("season", "S3", True),
        ]:  # fmt: skip
            with pytest.raises(DayFolded) as err:
                app.clear("kills", window, period, with_days=with_days)
            assert "2099-03-05" in err.value.message and "alltime" in err.value.message
        assert snapshot(r) == before
        # The whole board with its days: the base goes too, and every board with it.
        result = app.clear("kills", "alltime", "all", with_days=True)
        assert keys.base("kills", "alltime") in result.deleted
        assert not r.exists(keys.base("kills", "alltime"))
        assert r.hget(keys.state("kills"), STATE_FOLDED + "alltime") is None
        left = {n.split(":")[2] for n in names(r, f"{NS}:{{kills}}:*")}
        assert left.isdisjoint({"day", "week", "month", "season", "alltime", "base"}), left


# --- run ids: exactly once, resumable ---------------------------------------------------------


def test_the_same_id_again_answers_the_first_clear_and_keeps_newer_events(
    app: Seasons, r: redis.Redis, model: Model
) -> None:
    first = app.clear("kills", "day", str(TODAY), run_id="incident-7")
    forget_days(model, "kills", [TODAY])
    later = [{"board": "kills", "member": m, "value": 4,
              "ts": datetime(2099, 3, 11, 14, tzinfo=UTC)} for m in ("p1", "late")]  # fmt: skip
    submit(app, model, later)
    again = app.clear("kills", "day", "current", run_id="incident-7")
    assert again == first
    assert zset(r, key(NS, "kills", "day", str(TODAY))) == {"p1": 4.0, "late": 4.0}
    assert_boards_match(r, model)
    # The same id for another clear is refused; a new id clears again.
    with pytest.raises(RunIdReused) as err:
        app.clear("kills", "day", "2099-03-10", run_id="incident-7")
    assert "incident-7" in err.value.message
    with pytest.raises(RunIdReused):
        app.clear("kills", "week", str(TODAY), run_id="incident-7")
    app.clear("kills", "day", str(TODAY), run_id="incident-8")
    forget_days(model, "kills", [TODAY])
    assert_boards_match(r, model)


def test_a_clear_of_the_board_running_makes_another_wait(
    app: Seasons, r: redis.Redis, model: Model
) -> None:
    before = snapshot(r)
    held = r.set(Keys(NS).lock("clear:kills"), "someone", px=60_000)
    assert held
    with pytest.raises(Conflict) as err:
        app.clear("kills", "day", "2099-03-03")
    assert "another clear" in err.value.message
    r.delete(Keys(NS).lock("clear:kills"))
    assert snapshot(r) == before
    # A season being closed holds off a clear that would change it.
    r.set(Keys(NS).lock("close_season:S2"), "worker", px=60_000)
    with pytest.raises(Conflict) as err:
        app.clear("kills", "day", "2099-03-01")
    assert "S2" in err.value.message
    app.clear("laps", "day", "2099-03-03")  # S3 only
    forget_days(model, "laps", [date(2099, 3, 3)])
    assert_boards_match(r, model)


class Stop(Exception):
    pass


def checkpoints_of(app: Seasons, *args: Any, **kwargs: Any) -> list[str]:
    seen: list[str] = []
    registry.clear_of(app.backend, checkpoint=seen.append).run(*args, app.clock(), **kwargs)
    return seen


@pytest.mark.parametrize("with_days", [False, True])
def test_a_clear_stopped_at_any_step_resumes_exactly(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings, with_days: bool
) -> None:
    """Stopped between any two steps (an exception from the checkpoint: the process lives on,
    the run's locks are released), then called again with the same id after new events."""
    what = ("kills", "week", "2099-02-23") if with_days else ("kills", "day", "2099-03-01")
    cleared = days_between(date(2099, 2, 23), date(2099, 3, 1)) if with_days else [date(2099, 3, 1)]
    with Seasons(settings, clock=ManualClock(NOW)) as probe:  # the points, on a copy of the plan
        points = checkpoints_of(probe, "laps", *what[1:], with_days=with_days, run_id="probe")
    assert any(p.endswith("delete:done") for p in points) and len(points) >= 6
    forget_days(model, "laps", cleared)
    for n, point in enumerate(points):
        run_id = f"stopped-{n}"
        name = point.split("/", 1)[1]

        wanted = point.replace("clear:probe/", f"clear:{run_id}/")

        def stop(at: str, wanted: str = wanted) -> None:
            if at == wanted:
                raise Stop(at)

        with pytest.raises(Stop):
            registry.clear_of(app.backend, checkpoint=stop).run(
                *what, app.clock(), with_days=with_days, run_id=run_id
            )
        # New events for a cleared day between the stop and the resume: a deletion done
        # before the stop must not take them.
        late = [{"board": "kills", "member": f"n{n}", "value": n + 1,
                 "ts": datetime(2099, 3, 1, 20, tzinfo=UTC)}]  # fmt: skip
        deleted = name not in ("delete:start",)
        if deleted:
            forget_days(model, "kills", cleared)
        submit(app, model, late)
        app.clear(*what, with_days=with_days, run_id=run_id)
        if not deleted:
            forget_days(model, "kills", cleared)  # the resumed run deletes them, new ones too
        assert_boards_match(r, model)
        assert r.hgetall(Keys(NS).state("kills")) == {}  # no mark of a run left behind
        # One audit entry for the run, wherever it stopped (its "audit" step included).
        runs = [e.after["run_id"] for e in app.audit(action="clear", limit=1000).entries]
        assert runs.count(run_id) == 1, point


DRIVER = """
import sys
from datetime import datetime
from seasons.cli import CliState, cli
from seasons.clock import ManualClock

clock = ManualClock(datetime.fromisoformat(sys.argv[1]))
cli.main(sys.argv[2:], prog_name="seasons", obj=CliState(clock=clock))
"""


@pytest.mark.parametrize(
    "point", ["delete:done", "rebuild:week:2099-02-23:start", "rebuild:season:S2:done"]
)
def test_a_clear_killed_between_steps_resumes_on_the_next_call_with_its_id(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings, tmp_path: Path, point: str
) -> None:
    """``seasons clear`` SIGKILLs itself at a checkpoint (SEASONS_FAULT_AT); the same command
    again, with the same id, finishes the run once the dead run's locks expire."""
    config = tmp_path / "seasons.toml"
    config.write_text(
        f'namespace = "{NS}"\ntimezone = "UTC"\nretention = "P60D"\n'
        f'[redis]\nurl = "{settings.redis.url}"\n'
        f"cluster = {'true' if settings.redis.cluster else 'false'}\n"
        '[seasons]\nlength_days = 28\nanchor = "2099-01-05"\n'
        "[worker]\nlock_ttl = 1.0\n"
        + "".join(f"[boards.{b}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in c.items())
                  for b, c in BOARDS.items())
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    args = ["clear", "kills", "-w", "day", "-p", "2099-03-01", "--yes", "--id", "k1", "--json"]

    def cli_run(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", DRIVER, NOW.isoformat(), *args], cwd=ROOT,
            env={**env, **extra}, text=True, capture_output=True, timeout=60,
        )  # fmt: skip

    killed = cli_run(SEASONS_FAULT_AT=f"clear:k1/{point}")
    assert killed.returncode == -9, killed.stderr
    assert r.hget(f"{NS}:job:clear:k1", "finished") is None
    assert not r.exists(key(NS, "kills", "day", "2099-03-01"))
    late = [{"board": "kills", "member": "after", "value": 9,
             "ts": datetime(2099, 3, 1, 22, tzinfo=UTC)}]  # fmt: skip
    forget_days(model, "kills", [date(2099, 3, 1)])
    submit(app, model, late)
    deadline = time.monotonic() + 30
    while True:
        done = cli_run()
        if done.returncode == 0 or time.monotonic() > deadline or "lock" not in done.stderr:
            break
        time.sleep(0.2)  # the dead run's locks expire after worker.lock_ttl
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["run_id"] == "k1" and result["period"] == "2099-03-01"
    assert zset(r, key(NS, "kills", "day", "2099-03-01")) == {"after": 9.0}
    assert_boards_match(r, model)


# --- the CLI and HTTP -------------------------------------------------------------------------


def invoke(
    clock: ManualClock, settings: Settings, args: list[str], input: str | None = None
) -> Any:
    return CliRunner().invoke(cli, args, obj=CliState(clock=clock, settings=settings), input=input)


def test_the_cli_asks_first_and_a_no_changes_nothing(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings, clock: ManualClock
) -> None:
    before = snapshot(r)
    args = ["clear", "kills", "--window", "day", "--period", "2099-03-01"]
    no = invoke(clock, settings, args, input="n\n")
    assert no.exit_code == 1 and "Aborted" in no.output, no.output
    assert "delete the day keys of 1 day(s): 2099-03-01" in no.output
    assert "recompute from their day keys: week 2099-02-23, month 2099-02, month" not in no.output
    assert "week 2099-02-23" in no.output and "season S2" in no.output
    assert snapshot(r) == before
    nothing = invoke(clock, settings, args, input="")  # no answer at all: no
    assert nothing.exit_code == 1 and snapshot(r) == before
    yes = invoke(clock, settings, args, input="y\n")
    assert yes.exit_code == 0, yes.output
    assert f"deleted {key(NS, 'kills', 'day', '2099-03-01')}" in yes.output
    # The generated id is named before the run, so that a stopped run can be resumed.
    named = yes.output.split("clear id ", 1)[1].split(" ", 1)[0]
    assert f"clear {named}: day 2099-03-01 of kills" in yes.output
    forget_days(model, "kills", [date(2099, 3, 1)])
    assert_boards_match(r, model)


@pytest.mark.parametrize(
    "args",
    [
        ["clear", "nope", "-w", "day", "-p", "2099-03-01"],
        ["clear", "kills", "-w", "hour", "-p", "2099-03-01"],
        ["clear", "kills", "-w", "day", "-p", "March"],
        ["clear", "kills", "-w", "day"],
        ["clear", "kills", "-w", "day", "-p", "2099-03-01", "--yes", "--id", ""],
    ],
)
def test_the_cli_exits_2_on_bad_input(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings, clock: ManualClock,
    args: list[str],
) -> None:  # fmt: skip
    before = snapshot(r)
    result = invoke(clock, settings, args, input="y\n")
    assert result.exit_code == 2, result.output
    assert snapshot(r) == before


def test_the_cli_exits_1_on_a_refusal(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings, clock: ManualClock
) -> None:
    r.hset(Keys(NS).state("kills"), "season:S2", "archived")
    before = snapshot(r)
    result = invoke(clock, settings, ["clear", "kills", "-w", "season", "-p", "S2"], input="y\n")
    assert result.exit_code == 1 and "archived" in result.output
    assert snapshot(r) == before


def test_http_needs_the_admin_token_and_answers_what_the_cli_prints(
    app: Seasons, r: redis.Redis, model: Model, settings: Settings, clock: ManualClock
) -> None:
    from starlette.testclient import TestClient

    path = "/v1/admin/boards/kills/clear"
    body = {"window": "week", "period": "2099-02-23", "with_days": True}
    with TestClient(create_app(settings, app=app), base_url="http://localhost") as http:
        before = snapshot(r)
        assert http.post(path, json=body).status_code == 401
        wrong = {"Authorization": "Bearer not-it"}
        assert http.post(path, json=body, headers=wrong).status_code == 401
        assert snapshot(r) == before
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        resp = http.post(path, json=body, headers={**auth, "Idempotency-Key": "h-1"})
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        assert answer["run_id"] == "h-1" and answer["with_days"] is True
        forget_days(model, "kills", days_between(date(2099, 2, 23), date(2099, 3, 1)))
        assert_boards_match(r, model)
        # The CLI (same id) and the Python API answer the same JSON.
        cli_args = ["clear", "kills", "-w", "week", "-p", "2099-02-23", "--with-days", "--yes",
                    "--id", "h-1", "--json"]  # fmt: skip
        printed = invoke(clock, settings, cli_args)
        assert printed.exit_code == 0, printed.output
        assert json.loads(printed.output) == answer
        assert app.clear("kills", "week", "2099-02-23", True, run_id="h-1").model_dump() == answer
        again = http.post(path, json=body, headers={**auth, "Idempotency-Key": "h-1"})
        assert again.json() == answer
        # Refusals and bad input, by status.
        r.hset(Keys(NS).state("kills"), "season:S2", "archived")
        refused = http.post(path, json={"window": "season", "period": "S2"}, headers=auth)
        assert refused.status_code == 409 and refused.json()["error"] == "season_closed"
        reused = http.post(
            path, json={"window": "day", "period": "2099-03-05"},
            headers={**auth, "Idempotency-Key": "h-1"},
        )  # fmt: skip
        assert reused.status_code == 409 and reused.json()["error"] == "run_id_reused"
        for bad in ({"window": "day"}, {"window": "day", "period": "x"},
                    {"window": "hour", "period": "2099-03-05"},
                    {"window": "day", "period": "2099-03-05", "extra": 1}):  # fmt: skip
            assert http.post(path, json=bad, headers=auth).status_code == 422, bad
        unknown = http.post("/v1/admin/boards/nope/clear", json=body, headers=auth)
        assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_board"
        assert_boards_match(r, model)
