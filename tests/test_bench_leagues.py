"""bench/leagues.py, bench/league_close.py and bench/league_http.py in a tiny mode on the test
server: their checks pass and would fail on a wrong outcome; never timing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import league_close, league_http, leagues  # noqa: E402
from bench.common import Calendar  # noqa: E402
from seasons import Seasons  # noqa: E402
from seasons.keys import Keys  # noqa: E402


def test_ingest_figure_applies_the_same_events_and_joins_everyone(redis_url: str) -> None:
    section = leagues.run_ingest(redis_url, leagues.TINY, Calendar.for_today())
    assert section.correct, section.render()
    assert all(value > 0 for _, value, _ in section.rows), section.render()
    assert len(section.checks) == 2


def test_close_figure_checks_every_outcome_count_and_a_sample(redis_url: str) -> None:
    calendar = Calendar.for_today()
    section = league_close.run_close(redis_url, leagues.TINY.close_members, calendar)
    assert section.correct, section.render()
    steps = {label.split(":")[0] for label, _, _ in section.rows}
    assert steps == {
        "overview read",
        "open",
        "cohorts",
        "idle",
        "archive",
        "tiers",
        "finish",
        "event",
        "close",
        "machine",
    }
    assert dict((label, ok) for label, ok in section.checks)  # the checks ran
    assert any("3,000 members + 150 idle" in label for label, _ in section.checks)
    assert dict(section.checks)["the overview's members and cohorts per tier are the world's"]

    # The same world again, one sampled outcome changed: the model check sees it.
    settings = league_close.settings(redis_url, league_close.NS_CLOSE, calendar, True)
    with Seasons(settings, clock=calendar.clock()) as s:
        period = league_close.week_of(s, calendar)
        world = league_close.make_world(leagues.TINY.close_members)
        assert all(ok for _, ok in league_close.check_close(s, period, world))
        key = Keys(settings.namespace).league(league_close.BOARD, period.id, "outcome")
        member = world.cohorts[max(world.cohorts)][1][0][0]  # the last cohort is sampled
        changed = json.loads(s.client.hget(key, member)) | {"rank": 999}
        s.client.hset(key, member, json.dumps(changed))
        found = dict(league_close.check_close(s, period, world))
    wrong = [label for label, ok in found.items() if not ok]
    assert len(wrong) == 2 and all("cohorts' outcomes" in label for label in wrong), found


def test_the_model_ranks_ties_by_member_and_moves_by_tier() -> None:
    rows: list[tuple[str, float | None]] = [(f"m{i:02d}", float(i // 2)) for i in range(12)]
    rows.append(("gone", None))
    got = league_close.model_cohort(3, "silver", rows)
    order = sorted((o["rank"], m) for m, o in got.items() if o["rank"] is not None)
    # Equal scores: the greater member bytes first on a desc board (as ZRANGE REV).
    assert [m for _, m in order][:4] == ["m11", "m10", "m09", "m08"]
    assert [got[f"m{i:02d}"]["zone"] for i in (11, 7, 6, 5, 4, 0)] == [
        "promote", "promote", "stay", "stay", "demote", "demote",
    ]  # fmt: skip
    assert got["m11"]["tier_after"] == "gold" and got["m00"]["tier_after"] == "bronze"
    assert got["gone"] == {
        "tier_before": "silver",
        "tier_after": "silver",
        "cohort": 3,
        "rank": None,
        "score": None,
        "zone": None,
        "reward": None,
    }
    # Fewer than min_cohort ranked: nobody down; the top tier: nobody up.
    small = league_close.model_cohort(1, "diamond", rows[:9])
    assert {o["zone"] for o in small.values()} == {"stay"}
    assert league_close.model_idle("bronze")["tier_after"] == "bronze"
    assert league_close.model_idle("gold")["tier_after"] == "silver"


def test_reads_figure_reads_whole_cohorts_and_pages(redis_url: str) -> None:
    section = leagues.run_reads(redis_url, leagues.TINY, Calendar.for_today())
    assert section.correct, section.render()
    assert all(value > 0 for _, value, _ in section.rows), section.render()


@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)")
def test_http_figure_checks_answers_against_the_python_api(redis_url: str) -> None:
    section = league_http.run_http(redis_url, leagues.TINY, Calendar.for_today(), quick=True)
    assert section.correct, section.render()
    assert dict(section.checks)["10 answers of each kind equal the Python API's"]
    rates = {label: value for label, value, _ in section.rows}
    assert rates["cohort read"] > 0 and rates["page read"] > 0
