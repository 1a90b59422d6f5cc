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
from typing import Any, cast

import pytest
from browser.walkthrough import BROWSER_ZONE, MIN_CONTRAST, chromium_path, walk
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, serving

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.demo import seed_demo
from seasons.http.app import create_app
from seasons.jobs.state import JobState
from seasons.leagues import COHORT_SPAN
from seasons.models import LeagueCohort, LeagueOverview
from seasons.windows import resolve_period

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


# kills has a league of weekly cohorts; the test writes them (below) the way the join does.
TIERS = ["bronze", "silver", "gold"]
LEAGUE = {"window": "week", "tiers": TIERS, "cohort_size": 10, "min_cohort": 4,
          "promote": 3, "demote": 3, "rewards": [{"ranks": "1", "reward": "chest"}]}  # fmt: skip
Cohort = tuple[int, str, list[str]]  # id, tier, members in join order


def put_league(app: Seasons, board: str) -> dict[str, list[Cohort]]:
    """Cohorts of the current and the previous week of ``board``'s league, written into Redis
    in the layout of seasons/keys.py (Keys.league: joined, cohorts, open, counts) over what a join
    left there, from the members of each week's board (and one member with no score): the
    previous week's of bronze, silver and the top tier (the last being filled), the current
    week's of bronze and two of silver (the last being filled); the second cohort of each
    holds the member with no score."""
    k, c = app.keys, app.client
    out = {}
    for period, plan in (("current", [("bronze", 10), ("silver", 9), ("silver", 4)]),
                         ("previous", [("bronze", 10), ("silver", 9), ("gold", 8)])):  # fmt: skip
        pid = resolve_period("week", period, app.clock(), app.settings).id
        parts = ("joined", "cohorts", "open", "counts", "outcome")
        c.delete(*(k.league(board, pid, part) for part in parts))
        names = [e.member for e in app.top(board, "week", period=pid, limit=1000).entries]
        names.sort()
        assert len(names) >= sum(size for _, size in plan), names
        cohorts: list[Cohort] = []
        for cid, (tier, size) in enumerate(plan, start=1):
            members, names = names[:size], names[size:]
            if cid == 2:
                members.append(f"idle-{period}")  # joined, then no score on the board
            cohorts.append((cid, tier, members))
            c.hset(k.league(board, pid, "cohorts"), str(cid),
                   json.dumps({"tier": tier, "group": ""}))  # fmt: skip
            c.zadd(k.league(board, pid, "joined"),
                   {m: cid * COHORT_SPAN + place for place, m in enumerate(members)})  # fmt: skip
            c.hincrby(k.league(board, pid, "counts"), f"members:{tier}", len(members))
            c.hincrby(k.league(board, pid, "counts"), f"cohorts:{tier}", 1)
        last_id, last_tier, last = cohorts[-1]
        if len(last) < LEAGUE["cohort_size"]:
            c.hset(k.league(board, pid, "open"), json.dumps([last_tier, ""]), str(last_id))
        out[pid] = cohorts
    return out


def model_rows(
    scores: dict[str, float], members: list[str], tier: str
) -> list[tuple[int | None, str, str | None]]:
    """(rank, member, zone) of a cohort of a sum board, high first, ties "member" (equal
    scores in reverse byte order of the member, docs/contract.md#ties), from the issue's
    rules: the top `promote` up (none from the top tier), the bottom `demote` down (none
    from the lowest, none under `min_cohort` ranked); members with no score unranked, last."""
    ranked = sorted((m for m in members if m in scores), key=lambda m: m.encode(), reverse=True)
    ranked.sort(key=lambda m: -scores[m])
    n = len(ranked)
    up = 0 if tier == TIERS[-1] else min(LEAGUE["promote"], n)
    low = tier == TIERS[0] or n < LEAGUE["min_cohort"]
    down = 0 if low else min(LEAGUE["demote"], n)
    rows: list[tuple[int | None, str, str | None]] = [
        (i + 1, m, "promote" if i < up else "demote" if i >= n - down else "stay")
        for i, m in enumerate(ranked)
    ]
    return rows + [(None, m, None) for m in members if m not in scores]


def test_every_page_feature_in_chromium(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    # kills also keeps a month board, laps does not: the window pickers follow each board.
    # apex (low is best) is first by name: the page must not open on it.
    boards = {**SETTINGS["boards"]}
    # kills holds a member's events after the fourth per hour, for the operator's review.
    boards["kills"] = {
        **boards["kills"], "windows": ["day", "week", "month", "season"],
        "member_rate": {"events": 4, "per": "PT1H"}, "league": LEAGUE,
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
        cohorts = put_league(app, "kills")
        # What Python answers, and the weeks' scores, before the walk (its reset clears them).
        scores: dict[str, dict[str, float]] = {}
        answers: dict[str, list[LeagueCohort]] = {}
        for pid, listed in cohorts.items():
            page = app.top("kills", "week", period=pid, limit=1000)
            scores[pid] = {e.member: e.score for e in page.entries}
            answers[pid] = [
                cast(LeagueCohort, app.league("kills", cohort=cid, period=pid))
                for cid, _, _ in listed
            ]
        overviews = {pid: app.league("kills", period=pid) for pid in cohorts}
        with serving(create_app(settings, app=app)) as url:
            seen = walk(url + "/", SCREENSHOTS, write_token=WRITE_TOKEN, admin_token=ADMIN_TOKEN)
    assert seen.rewards == summaries
    # The league view: each period's tiers, and the cohort of a member, as Seasons.league and
    # the model have them; zones of every kind shown (silver: up, stay and down).
    assert seen.league_board == "kills"
    current, previous = cohorts
    for period, pid in (("current", current), ("previous", previous)):
        overview = overviews[pid]
        assert isinstance(overview, LeagueOverview)
        tiers = [(t.tier, t.members, t.cohorts) for t in reversed(overview.tiers)]
        assert seen.league_tiers[period] == tiers
        # Counted from the cohorts written: the open (last) one by its members, full ones
        # by cohort_size.
        assert {t: (m, n) for t, m, n in tiers} == {
            t: (sum(len(ms) for _, tt, ms in cohorts[pid] if tt == t),
                sum(1 for _, tt, _ in cohorts[pid] if tt == t))
            for t in TIERS
        }  # fmt: skip
        member, rows = seen.league_cohorts[period]
        cid, tier, members = next(c for c in cohorts[pid] if member in c[2])
        assert rows == model_rows(scores[pid], members, tier), (period, rows)
        answer = answers[pid][cid - 1]
        assert rows == [(r.rank, r.member, r.zone) for r in answer.rows]
        assert {zone for _, _, zone in rows} == {"promote", "stay", "demote", None}, rows
    assert "nobody-in-this-league" in seen.league_messages["previous"]
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
