"""GET /v1/boards tells a viewer which boards have a league (docs/leagues-web.md): the web page
shows its League view for those only (tests/test_web_page.py drives the view itself)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from fastapi.testclient import TestClient

from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app

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
