"""The web page in a real browser: headless Chromium (Debian's package, driven by playwright)
clicks through every feature against a live server and checks what it shows against the JSON
API, with no network but the server's (/docs included). Screenshots at 1280 and 390 px, light
and dark, go to screenshots/web/ (git-ignored) for a person to look at."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from browser.walkthrough import BROWSER_ZONE, MIN_CONTRAST, chromium_path, walk
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, serving

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.demo import seed_demo
from seasons.http.app import create_app
from seasons.jobs.state import JobState

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots" / "web"

pytestmark = [
    pytest.mark.skipif(
        chromium_path() is None,
        reason="no /usr/bin/chromium: scripts/setup installs Debian's chromium (apt-get, as root)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="the playwright package is missing: pip install -e '.[dev]'",
    ),
]


# The boards' zone: not UTC and not the browser's, so a time in the wrong zone shows.
ZONE = "America/New_York"


def default_by_rule(boards: dict[str, dict[str, Any]]) -> str:
    """The board a page opens on when none is configured: the first (by name) ordered
    high-first, else the first."""
    names = sorted(boards)
    return next((n for n in names if boards[n].get("order", "desc") == "desc"), names[0])


def publish_results(app: Seasons) -> list[tuple[str, str, int, int]]:
    """Results of the ended season S2 on kills, in the close's format (docs/contract.md), ranked
    from its season board, with two claims; (season, board, granted, claimed) of each."""
    season, board = "S2", "kills"
    page = app.top(board, "season", period=season, limit=1000)
    tiers = [("1", 1, 1, "gold"), ("2-5", 2, 5, "silver")]
    results = {}
    for e in page.entries:
        reward = next((w for _, lo, hi, w in tiers if lo <= e.rank <= hi), None)
        results[e.member] = {"rank": e.rank, "score": e.score, "reward": reward}
    counts = [sum(1 for r in results.values() if r["reward"] == w) for *_, w in tiers]
    summary = {
        "season": season, "board": board, "provisional": False,
        "computed_at": START.isoformat(), "total": len(results),
        "tiers": [{"tier": t, "reward": w, "count": c}
                  for (t, _, _, w), c in zip(tiers, counts, strict=True)],
    }  # fmt: skip
    key = app.keys.results(board, season)
    app.client.hset(key, mapping={m: json.dumps(r) for m, r in results.items()})
    app.client.hset(key, "", json.dumps(summary))
    for e in page.entries[:2]:
        app.claim(board, season, e.member)
    return [(season, board, sum(counts), 2)]


def test_every_page_feature_in_chromium(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    # kills also keeps a month board, laps does not: the window pickers follow each board.
    # apex (low is best) is first by name: the page must not open on it.
    boards = {**SETTINGS["boards"]}
    # kills holds a member's events after the fourth per hour, for the operator's review.
    boards["kills"] = {
        **boards["kills"], "windows": ["day", "week", "month", "season"],
        "member_rate": {"events": 4, "per": "PT1H"},
    }  # fmt: skip
    boards["apex"] = {"aggregate": "min", "order": "asc"}
    settings = settings_factory(
        **{**SETTINGS, "boards": boards},
        timezone=ZONE,
        namespace="demo-web",  # a demo namespace: "Reset demo data" is allowed
        api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN},
        archive={"dir": str(tmp_path / "archive")},
    )
    assert ZONE != BROWSER_ZONE
    with Seasons(settings, clock=ManualClock(START)) as app:
        seed_demo(app, days=21, players=60)
        app.client.set(app.keys.heartbeat(), "web-test", ex=600)  # /readyz: a worker runs
        # Job runs as the worker records them: the operator view lists them.
        jobs = JobState(app.client, app.keys)
        for n, (job, status) in enumerate((("rollup", "ok"), ("closes", "ok"), ("sweep", "error"))):
            for run in range(n + 1):
                jobs.started(job, START - timedelta(minutes=10 * run + 5))
                jobs.ended(job, START - timedelta(minutes=10 * run), status,
                           next_run=START + timedelta(minutes=n + 1), duration=0.25)  # fmt: skip
        summaries = publish_results(app)
        with serving(create_app(settings, app=app)) as url:
            seen = walk(url + "/", SCREENSHOTS, write_token=WRITE_TOKEN, admin_token=ADMIN_TOKEN)
    assert seen.rewards == summaries
    # Six events of one member at once on kills: the fifth and sixth were held, one of them
    # approved and one rejected in the page; the leader hidden and made visible.
    assert (seen.approved, seen.rejected) == (["fair-4"], ["fair-5"])
    assert seen.hidden
    assert seen.audit_actions[:4] == ["unhide", "hide", "held_reject", "held_approve"]
    assert seen.page_errors == []
    assert seen.failed_requests == []
    assert seen.offsite_requests == []  # /docs and the page load nothing from elsewhere
    assert seen.opened_on == default_by_rule(boards) == "kills"
    low = {name: ratio for name, ratio in seen.contrast.items() if ratio < MIN_CONTRAST}
    assert low == {}, low
    assert any(name.startswith("dark: ") for name in seen.contrast)
    assert len(seen.screenshots) >= 14
    assert all(p.stat().st_size > 5000 for p in seen.screenshots)
