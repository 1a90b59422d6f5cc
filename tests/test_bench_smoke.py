"""The benchmark's sections, in a tiny mode on the test server: correctness only, never timing.

What the bench compares must be the same work: the hand-written pipeline and ``submit_many``
must leave identical boards, and Seasons' reads must return what the raw commands return.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    ingest,
    limits,
    memory,
    moderation,
    reads,
    redis_time,
    rewards,
    writes,
)
from bench.common import BOARD, TINY, Calendar  # noqa: E402
from seasons import Seasons  # noqa: E402


def test_ingest_methods_write_identical_boards(redis_url: str) -> None:
    calendar = Calendar.for_today()
    section = ingest.run(redis_url, TINY, calendar)
    assert section.correct, section.render()
    client: Any = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        settings = calendar.settings(redis_url, ingest.NS_SEASONS)
        pipeline = calendar.settings(redis_url, ingest.NS_PIPELINE)
        ours = ingest.board_keys(settings, calendar)
        theirs = ingest.board_keys(pipeline, calendar)
        assert ingest.board_differences(client, ours, theirs) == []
        day, week, season = (dict(client.zrange(k, 0, -1, withscores=True)) for k in ours)
        # Today weighs 2 in its week and 2 in its season, so the windows really differ.
        assert day and week == {m: 2 * x for m, x in day.items()} == season
        assert sum(day.values()) == sum(e["value"] for e in ingest.make_events(TINY))
    finally:
        client.close()


def test_writes_section_writes_what_the_plain_commands_write(redis_url: str) -> None:
    """bench/writes.py: Seasons' boards and metadata equal the plain MULTI's, and its
    profile finds every section of write.lua it splits the call at."""
    section = writes.run(redis_url, 3, Calendar.for_today())
    assert section.correct, section.render()
    profiled = [label for label, _, note in section.rows if note == "profile"]
    assert len(profiled) == len(writes.CASES) * len(writes.SECTIONS)


def test_limits_section_applies_the_same_events_on_both_sides(redis_url: str) -> None:
    """bench/limits.py: with loose limits nothing is held and both boards are equal, and each
    side's Redis time was counted."""
    section = limits.run(redis_url, 2, Calendar.for_today())
    assert section.correct, section.render()
    assert [label for label, _, _ in section.rows] == [
        "without limits", "with limits", "without limits: ingest", "with limits: ingest",
    ]  # fmt: skip
    assert all(value > 0 for _, value, _ in section.rows), section.render()


def test_moderation_section_hides_the_same_members_it_checks(redis_url: str) -> None:
    """bench/moderation.py: the moderated side's public boards are the other side's without
    its hidden members, its twins hold those, and each side's Redis time was counted."""
    section = moderation.run(redis_url, 2, Calendar.for_today())
    assert section.correct, section.render()
    assert [label for label, _, _ in section.rows] == ["no moderation hash", "1% hidden"]
    assert all(value > 0 for _, value, _ in section.rows), section.render()


def test_redis_time_section_asks_both_sides_the_same(redis_url: str) -> None:
    """bench/redis_time.py: for each read kind Seasons and the plain commands answer the
    same, and each side's Redis time was counted."""
    section = redis_time.run(redis_url, TINY, Calendar.for_today())
    assert section.correct, section.render()
    assert len(section.rows) == 2 * len(redis_time.KINDS)
    assert all(value > 0 for _, value, _ in section.rows), section.render()


def test_board_differences_sees_a_changed_score(redis_url: str) -> None:
    calendar = Calendar.for_today()
    ingest.run(redis_url, TINY, calendar)
    client: Any = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        ours = ingest.board_keys(calendar.settings(redis_url, ingest.NS_SEASONS), calendar)
        theirs = ingest.board_keys(calendar.settings(redis_url, ingest.NS_PIPELINE), calendar)
        member = client.zrange(theirs[1], 0, 0)[0]
        client.zincrby(theirs[1], 1, member)
        assert len(ingest.board_differences(client, ours, theirs)) == 1
    finally:
        client.close()


def test_reads_return_what_the_raw_commands_return(redis_url: str) -> None:
    calendar = Calendar.for_today()
    section = reads.run(redis_url, TINY, calendar)
    assert section.correct, section.render()
    with Seasons(calendar.settings(redis_url, reads.NS_READS), clock=calendar.clock()) as s:
        key = reads.day_key(s, calendar)
        raw = reads.raw_top(s.client, key)
        page = s.top(BOARD, "day", limit=reads.TOP)
        assert [(e.member, e.score) for e in page.entries] == raw
        assert [e.rank for e in page.entries] == list(range(1, reads.TOP + 1))
        assert all(e.metadata["clan"].startswith("clan-") for e in page.entries)
        member = s.client.zrange(key, 100, 100, desc=True)[0]
        assert reads.raw_around_rank(s.client, key, member) == 100
        around = s.around(BOARD, member, "day", size=reads.AROUND)
        assert around is not None
        assert [e.member for e in around.entries] == s.client.zrange(key, 95, 104, desc=True)
        assert reads.read_differences(s, key, [member]) == []


def test_memory_compares_the_same_members_and_scores(redis_url: str) -> None:
    section = memory.run(redis_url, TINY, Calendar.for_today())
    assert section.correct, section.render()


def test_rewards_results_are_right(redis_url: str) -> None:
    section = rewards.run(redis_url, rewards.TINY)
    assert section.correct, section.render()
