"""The web page in a real browser: headless Chromium (Debian's package, driven by playwright)
clicks through every feature against a live server and checks what it shows against the JSON
API. Screenshots go to screenshots/web/ (git-ignored) for a person to look at."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest
from browser.walkthrough import chromium_path, walk
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, serving

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.demo import seed_demo
from seasons.http.app import create_app

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


def test_every_page_feature_in_chromium(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    # kills also keeps a month board, laps does not: the window pickers follow each board.
    boards = {**SETTINGS["boards"]}
    boards["kills"] = {**boards["kills"], "windows": ["day", "week", "month", "season"]}
    settings = settings_factory(
        **{**SETTINGS, "boards": boards},
        namespace="demo-web",  # a demo namespace: "Reset demo data" is allowed
        api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN},
        archive={"dir": str(tmp_path / "archive")},
    )
    with Seasons(settings, clock=ManualClock(START)) as app:
        seed_demo(app, days=21, players=60)
        app.client.set(app.keys.heartbeat(), "web-test", ex=600)  # /readyz: a worker runs
        with serving(create_app(settings, app=app)) as url:
            seen = walk(url + "/", SCREENSHOTS, write_token=WRITE_TOKEN, admin_token=ADMIN_TOKEN)
    assert seen.page_errors == []
    assert seen.failed_requests == []
    assert len(seen.screenshots) >= 10
    assert all(p.stat().st_size > 5000 for p in seen.screenshots)
