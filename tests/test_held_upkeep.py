"""Held events (docs/writes.md#held-events): the cases write.lua takes a shortcut on.

- max_period_gain reads no member's score when the whole batch's gain on the board, added to
  the board's best score, cannot pass the limit: the members of a batch whose gains together
  pass it, but each alone does not, are not held; one whose own gain passes is; an event that
  adds nothing is never held, even for a member above the limit;
- the held-record upkeep runs only where the board has held records: records past retention
  and decided ones past the dedupe window are dropped by a later write; a board that never
  held an event has none of the held keys.

Each expectation is computed from the rules (a plain sum per member), not read from Redis.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.keys import Keys

pytestmark = pytest.mark.both_backends

NS = "hu"
BOARD = "kills"
# Far in the future (EXPIREAT from the manual clock stays in Redis's real future), early on a
# Wednesday so a few hours' steps stay within the day.
START = datetime(2035, 6, 13, 1, 0, 5, tzinfo=UTC)
Make = Callable[..., Settings]


@pytest.fixture
def make(settings_factory: Make) -> Make:
    def build(board: dict[str, Any]) -> Settings:
        cfg = {"windows": ["day", "week", "season"], **board}
        return settings_factory(namespace=NS, boards={BOARD: cfg})

    return build


def gain_model(
    stored: dict[str, float], events: list[tuple[str, float]], limit: float
) -> tuple[list[int], dict[str, float]]:
    """The indexes held by max_period_gain (an event > 0 taking its member's score above
    ``limit`` is held and adds nothing) and the scores after the batch."""
    scores, held = dict(stored), []
    for i, (member, value) in enumerate(events):
        before = scores.get(member, 0.0)
        if value > 0 and before + value > limit:
            held.append(i)
        else:
            scores[member] = before + value
    return held, scores


@pytest.mark.parametrize(
    "stored, events",
    [
        # Together 4+5+5 = 14 > 10, each alone 4+5 = 9: none held.
        ({"a": 4, "b": 4}, [("a", 5), ("b", 5)]),
        # The batch cannot take the best score (4) above 10: nothing is read, nothing held.
        ({"a": 4, "b": 1}, [("a", 3), ("b", 2), ("c", 1)]),
        # c's own events pass the limit (the third), a's and b's do not.
        ({"a": 4, "b": 4}, [("c", 6), ("a", 5), ("c", 5), ("b", 5), ("c", -2), ("c", 1)]),
        # a is above the limit already: its events > 0 are held, the others applied.
        ({"a": 20, "b": 1}, [("a", -3), ("b", 2), ("a", 1), ("a", 0)]),
        # Nothing > 0 in the batch: nothing held, whatever the scores.
        ({"a": 20}, [("a", -1), ("b", -5), ("a", 0)]),
    ],
)
def test_gain_holds_exactly_the_members_past_the_limit(
    make: Make, stored: dict[str, float], events: list[tuple[str, float]]
) -> None:
    limit = 10.0
    with Seasons(make({"max_period_gain": {"value": limit, "window": "day"}}),
                 clock=ManualClock(START)) as s:  # fmt: skip
        seed = [{"board": BOARD, "member": m, "value": v} for m, v in stored.items()]
        s.submit_many(seed, backfill=True)  # backfills are not limited
        result = s.submit_many([{"board": BOARD, "member": m, "value": v} for m, v in events])
        want_held, want_scores = gain_model({m: float(v) for m, v in stored.items()}, events, limit)
        assert [h.index for h in result.held_events or ()] == want_held
        assert [h.reason for h in result.held_events or ()] == ["max_period_gain"] * len(want_held)
        got = {e.member: e.score for e in s.top(BOARD, "day", limit=100).entries}
        assert got == want_scores


def test_held_records_are_dropped_after_retention_and_the_dedupe_window(
    make: Make, r: redis.Redis
) -> None:
    keys = Keys(NS)
    record, order, done = keys.held(BOARD), keys.held_order(BOARD), keys.held_done(BOARD)
    clock = ManualClock(START)
    settings = make({"member_rate": {"events": 1, "per": "PT60S"}})
    with Seasons(settings, clock=clock) as s:
        s.submit(BOARD, "a", 1)
        assert r.exists(record, order, done) == 0  # nothing held yet: no held key
        s.submit(BOARD, "a", 2, event_id="kept")
        s.submit(BOARD, "a", 3, event_id="decided")
        assert {e.event_id for e in s.held(BOARD).events} == {"kept", "decided"}
        clock.advance(timedelta(minutes=1))
        s.reject(BOARD, "decided")
        # Past the dedupe window, within retention: a write drops the decided record only.
        clock.advance(DEDUPE_PLUS)
        s.submit(BOARD, "b", 1)
        assert {k.decode() for k in r.hkeys(record)} == {"kept"}
        assert r.zrange(done, 0, -1) == []
        assert r.zrange(order, 0, -1) == [b"kept"]
        # Past retention: the held one goes too.
        clock.advance(settings.retention)
        s.submit(BOARD, "b", 1)
        assert r.hlen(record) == 0
        assert r.zcard(order) == 0


DEDUPE_PLUS = timedelta(hours=49)  # the dedupe window is 48 hours (docs/writes.md)
