"""GET /v1/boards tells a viewer which boards have a league (docs/leagues.md#the-web-page):
the web page shows its League view for those only (tests/test_web_page.py drives the view
itself)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi.testclient import TestClient

from seasons import Seasons
from seasons.archives import Archives
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.http.app import create_app
from seasons.jobs.sweep import Sweeper

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "config" / "demo.toml"
NOW = datetime(2035, 6, 13, 12, tzinfo=UTC)


def test_the_boards_list_names_each_board_s_league(
    settings_factory: Callable[..., Settings],
) -> None:
    league = {"window": "month", "tiers": ["wood", "iron"], "cohort_size": 7, "min_cohort": 3}
    boards = {
        "kills": {"aggregate": "sum", "windows": ["day", "week", "month", "season"],
                  "league": league},
        "laps": {"aggregate": "min", "order": "asc"},
    }  # fmt: skip
    settings = settings_factory(boards=boards)
    with TestClient(create_app(settings, clock=ManualClock(NOW))) as http:
        listed = {b["board"]: b for b in http.get("/v1/boards").json()["boards"]}
    assert listed["kills"]["league"] == {"window": "month", "tiers": ["wood", "iron"],
                                         "cohort_size": 7}  # fmt: skip
    assert listed["laps"]["league"] is None


def test_the_demo_has_one_board_with_a_league_of_several_cohorts() -> None:
    """config/demo.toml: kills has a weekly league whose cohorts are small enough that the
    demo's 200 players make several of them in each tier they fill."""
    settings = load_settings(environ={}, path=DEMO_CONFIG)
    with_league = {n: b.league for n, b in settings.boards.items() if b.league is not None}
    assert list(with_league) == ["kills"]
    league = with_league["kills"]
    assert league.window == "week" and "week" in settings.boards["kills"].windows
    assert 200 // league.cohort_size >= 10


def test_the_sweep_knows_the_league_keys(settings_factory: Callable[..., Settings]) -> None:
    """A demo with a league runs its worker without a warning: the sweep leaves the league's
    state and tier hashes and a period's claims without TTL (by design, docs/leagues.md) and
    gives a period's other keys the week's end + retention, as the write path does."""
    settings = settings_factory(
        namespace="lw", timezone="Europe/Istanbul", retention="P10D",
        boards={"kills": {"aggregate": "sum", "league": {"window": "week"}}},
    )  # fmt: skip
    week = "2035-06-11"  # Monday to Sunday; it ends 2035-06-18 00:00 in Istanbul (UTC+3)
    ends = datetime(2035, 6, 17, 21, tzinfo=UTC) + timedelta(days=10)
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        k, c = s.keys, s.client
        board = "kills"
        c.hset(k.league_state(board), "first", week)
        c.hset(k.league_tier(board), "ann", "silver")
        parts = ("joined", "cohorts", "open", "outcome", "done", "claims")
        c.zadd(k.league(board, week, "joined"), {"ann": 1024})
        c.sadd(k.league(board, week, "done"), "1")
        for part in ("cohorts", "open", "outcome", "claims"):
            c.hset(k.league(board, week, part), "x", "1")
        archives = Archives(c, s.scripts, settings, k)
        result = Sweeper(c, s.scripts, settings, k, archives).run(NOW)
        assert result.unknown == []
        assert c.ttl(k.league_state(board)) == c.ttl(k.league_tier(board)) == -1
        assert c.ttl(k.league(board, week, "claims")) == -1
        for part in parts[:-1]:
            assert c.expiretime(k.league(board, week, part)) == int(ends.timestamp()), part
