"""The standings a write answers (``standing=True``, ``"return": "standing"``): each event's
member's rank and score after its batch, read by the write script itself, against the
reference model (tests/reference.py) on random streams for every tie rule, and by hand: a
day outside every season, a member trimmed away, a resent batch, the window rules, the CLI.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import Model
from streams import play, step_of

from seasons import Seasons
from seasons.cli import cli
from seasons.cli.common import CliState
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BadWindow, InvalidInput

NS = "stand"
Make = Callable[..., Settings]
WINDOWS = ["day", "week", "month", "season"]
TIES = ("member", "shared", "dense", "earliest")
MEMBERS = ("a", "b", "B", "é", "zz")
# Far in the future (EXPIREAT from the manual clock must lie ahead of Redis's real clock).
START = datetime(2035, 8, 29, 20, tzinfo=UTC)  # a month rolls over


def board_settings(ties: str) -> st.SearchStrategy[dict[str, Any]]:
    # Earliest ties refuse a trimmed board and a zero weight (the settings say why).
    return st.fixed_dictionaries(
        {
            "aggregate": st.sampled_from(["sum", "max", "min", "set"]),
            "order": st.sampled_from(["desc", "asc"]),
            "ties": st.just(ties),
            "windows": st.just(WINDOWS),
            "week_weights": st.lists(st.sampled_from([1, 2, 0.5]), min_size=7, max_size=7),
            "season_weights": st.lists(st.sampled_from([1, 2]), max_size=3),
            "max_entries": st.just(0) if ties == "earliest" else st.sampled_from([0, 0, 2]),
        }
    )


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict[str, Any], datetime, str]:
    start = START + timedelta(hours=draw(st.integers(0, 30)))
    anchor = start.date() + timedelta(days=draw(st.integers(-8, 2)))
    overrides = {
        "namespace": NS,
        "timezone": draw(st.sampled_from(["UTC", "America/New_York"])),
        "late_grace": "PT12H",
        "seasons": {"length_days": draw(st.sampled_from([5, 9])), "anchor": anchor.isoformat()},
        "boards": {t: draw(board_settings(t)) for t in TIES},
    }
    return overrides, start, draw(st.sampled_from(WINDOWS))


event = st.fixed_dictionaries(
    {
        "board": st.sampled_from(TIES),
        "member": st.sampled_from(MEMBERS),
        # Few values: equal scores, and so ties, are common.
        "value": st.one_of(st.integers(-2, 2), st.sampled_from([0, 5, 10])),
        "back": st.one_of(st.integers(0, 600), st.integers(0, 14 * 3600)),
    },
    optional={"event_id": st.sampled_from(["e0", "e1"])},  # duplicates answer standings too
)


@pytest.mark.both_backends
@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=configs(), steps=st.lists(step_of(event, 8), min_size=4, max_size=25))
def test_standings_are_the_models_ranks_after_each_batch(
    config: tuple[dict[str, Any], datetime, str],
    steps: list[tuple[str, Any]],
    settings_factory: Make,
    r: redis.Redis,
) -> None:
    overrides, start, window = config
    r.flushall()
    settings = settings_factory(**overrides)
    clock = ManualClock(start)
    with Seasons(settings, clock=clock) as s:
        play(s, r, Model(settings), clock, steps, standing=window)


# --- by hand --------------------------------------------------------------------------------

NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # a Wednesday


def one_board(make: Make, **board: Any) -> Settings:
    return make(
        namespace=NS,
        timezone="UTC",
        # A gap between the seasons: 2035-06-13 is in no season.
        seasons={
            "list": [
                {"id": "spring", "start": "2035-05-01", "end": "2035-06-12"},
                {"id": "summer", "start": "2035-06-20", "end": "2035-08-31"},
            ]
        },
        boards={"b": {**board}},
    )


def test_a_day_in_no_season_has_no_season_standing(settings_factory: Make) -> None:
    with Seasons(one_board(settings_factory), clock=ManualClock(NOW)) as s:
        result = s.submit("b", "ann", 3, standing=True)
        assert result.model_dump()["standings"] == [
            {"index": 0, "board": "b", "member": "ann", "window": "season", "period": None,
             "rank": None, "score": None}
        ]  # fmt: skip
        day = s.submit("b", "ann", 4, standing=True, standing_window="day").standings
        assert day is not None
        assert [(x.period, x.rank, x.score) for x in day] == [(date(2035, 6, 13).isoformat(), 1, 7)]


def test_a_member_trimmed_away_stands_nowhere(settings_factory: Make) -> None:
    settings = one_board(settings_factory, max_entries=2)
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        events = [
            {"board": "b", "member": m, "value": v} for m, v in [("a", 5), ("b", 9), ("c", 1)]
        ]
        result = s.submit_many(events, standing=True, standing_window="week")
        assert [(x.member, x.rank, x.score) for x in result.standings or ()] == [
            ("a", 2, 5), ("b", 1, 9), ("c", None, None),
        ]  # fmt: skip


def test_a_resent_batch_reads_its_standings_again(settings_factory: Make) -> None:
    settings = one_board(settings_factory, ties="shared")
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        first = s.submit("b", "ann", 5, batch_id="k1", standing=True, standing_window="day")
        assert [(x.rank, x.score) for x in first.standings or ()] == [(1, 5)]
        s.submit("b", "bob", 8)
        again = s.submit("b", "ann", 5, batch_id="k1", standing=True, standing_window="day")
        assert (again.applied, again.duplicates) == (first.applied, first.duplicates)
        assert [(x.rank, x.score) for x in again.standings or ()] == [(2, 5)]  # read now
        assert s.rank("b", "ann", "day") is not None
        assert s.rank("b", "ann", "day").score == 5  # type: ignore[union-attr]


def test_the_window_rules(settings_factory: Make) -> None:
    settings = settings_factory(
        namespace=NS, boards={"b": {}, "c": {"windows": ["day", "month", "season"]}}
    )
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        # Default: season, every board keeps it.
        got = s.submit("b", "ann", 1, standing=True).standings
        assert [x.window for x in got or ()] == ["season"]
        both = [
            {"board": "b", "member": "ann", "value": 1},
            {"board": "c", "member": "ann", "value": 1},
        ]
        with pytest.raises(BadWindow, match="board 'b' keeps no month window"):
            s.submit_many(both, standing=True, standing_window="month")
        with pytest.raises(BadWindow, match="unknown window 'year'"):
            s.submit_many(both, standing=True, standing_window="year")
        with pytest.raises(InvalidInput, match="standing_window .* needs standing"):
            s.submit_many(both, standing_window="day")
        assert s.top("b", "day").total == 1  # none of the refused batches wrote anything
        assert s.submit_many(both).standings is None  # not asked: none
        days = s.submit_many(both, standing=True, standing_window="day").standings
        assert [(x.board, x.rank, x.score) for x in days or ()] == [("b", 1, 3), ("c", 1, 2)]


def test_cli_submit_standing(redis_settings: dict[str, Any], tmp_path: Path) -> None:
    toml = tmp_path / "cli.toml"
    toml.write_text(
        f'namespace = "{NS}"\n'
        '[[seasons.list]]\nid = "spring"\nstart = "2035-05-01"\nend = "2035-06-12"\n'
        "[boards.b]\n"
    )
    env = {k: None for k in os.environ if k.startswith("SEASONS_")} | {
        "SEASONS_REDIS__URL": redis_settings["url"],
        "SEASONS_CONFIG": str(toml),
    }

    def run(*args: str) -> Any:
        return CliRunner().invoke(
            cli, ["submit", "b", *args], env=env, obj=CliState(clock=ManualClock(NOW)),
            catch_exceptions=False,
        )  # fmt: skip

    assert run("bob", "9").exit_code == 0
    done = run("ann", "4.5", "--standing", "--standing-window", "day")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == [
        "applied: ann 4.5 on b", "standing: ann rank 2 on day 2035-06-13, score 4.5",
    ]  # fmt: skip
    done = run("ann", "1", "--standing", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {
        "applied": 1, "duplicates": 0,
        "standings": [{"index": 0, "board": "b", "member": "ann", "window": "season",
                       "period": None, "rank": None, "score": None}],
    }  # fmt: skip
    assert "no period that day" in run("ann", "1", "--standing").stdout
    bad = run("ann", "1", "--standing", "--standing-window", "month")
    assert bad.exit_code == 2 and "keeps no month window" in bad.stderr
