"""Held events (docs/writes.md#held-events): per-member limits checked inside the write
script, against a plain-Python model of what they hold.

- random batches (members, values, event ids repeating, the clock moving within and across
  intervals of ``member_rate.per``) on a sum board with ``member_rate`` and ``max_period_gain``:
  after each batch the day, week and season boards and the held list equal the model's; a
  resent batch answers the same result and changes nothing; approving applies each held
  event exactly once to every window (twice = once), rejecting drops it;
- backfill batches are not limited (nor counted);
- an approval whose season is archived is refused (season_closed), the event stays held;
- the settings are checked at start, naming the key.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import Calendar, zset

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.config.loading import ConfigError
from seasons.errors import (
    HeldDecided,
    HeldNotFound,
    InvalidInput,
    SeasonClosed,
    UnknownBoard,
)
from seasons.keys import Keys

pytestmark = pytest.mark.both_backends

NS = "hv"
BOARD = "kills"
# Far in the future: EXPIREAT computed from the manual clock must not lie in the past. A
# Wednesday at 20:00 UTC, so a few hours' steps cross a day (and sometimes a week).
START = datetime(2035, 6, 13, 20, 0, 5, tzinfo=UTC)
MEMBERS = ("a", "b", "c")
WINDOWS = ("day", "week", "season")
Make = Callable[..., Settings]


@pytest.fixture
def make(settings_factory: Make) -> Make:
    def build(rate: tuple[int, int] | None = (2, 60), gain: tuple[float, str] | None = (50, "day"),
              **overrides: Any) -> Settings:  # fmt: skip
        board: dict[str, Any] = {"windows": list(WINDOWS)}
        if rate is not None:
            board["member_rate"] = {"events": rate[0], "per": f"PT{rate[1]}S"}
        if gain is not None:
            board["max_period_gain"] = {"value": gain[0], "window": gain[1]}
        overrides.setdefault("boards", {BOARD: board, "other": {}})
        return settings_factory(namespace=NS, **overrides)

    return build


# --- the model -------------------------------------------------------------------------------


@dataclass
class HeldModel:
    """What the limits do, from the rules in docs/writes.md#held-events."""

    calendar: Calendar
    rate: tuple[int, int] | None
    gain: tuple[float, str] | None
    boards: dict[tuple[str, str], dict[str, float]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    counts: dict[tuple[int, str], int] = field(default_factory=lambda: defaultdict(int))
    seen: set[str] = field(default_factory=set)
    held: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> event, reason

    def apply(self, member: str, value: float, at: datetime) -> None:
        day = self.calendar.local_date(at)
        for window in WINDOWS:
            pid = self.calendar.period_id(window, day)
            if pid is not None:
                board = self.boards[window, pid]
                board[member] = board.get(member, 0) + value

    def score(self, window: str, at: datetime, member: str) -> float | None:
        pid = self.calendar.period_id(window, self.calendar.local_date(at))
        return None if pid is None else self.boards[window, pid].get(member, 0)

    def batch(
        self, batch_id: str, events: list[dict[str, Any]], now: datetime, backfill: bool = False
    ) -> tuple[int, int, list[tuple[int, str, str]]]:
        applied = duplicates = 0
        held: list[tuple[int, str, str]] = []
        for index, ev in enumerate(events):
            event_id = ev.get("event_id")
            if event_id is not None:
                if event_id in self.seen:
                    duplicates += 1
                    continue
                self.seen.add(event_id)
            member, value, at = ev["member"], ev["value"], now
            reason = None
            interval = (int(now.timestamp()) // self.rate[1], member) if self.rate else None
            if not backfill:
                if self.rate and interval and self.counts[interval] >= self.rate[0]:
                    reason = "member_rate"
                elif self.gain:
                    before = self.score(self.gain[1], at, member)
                    if before is not None and value > 0 and before + value > self.gain[0]:
                        reason = "max_period_gain"
            if reason is not None:
                name = event_id if event_id is not None else f"{batch_id}#{index}"
                held.append((index, name, reason))
                self.held[name] = {"member": member, "value": value, "at": at, "reason": reason}
                continue
            if interval and not backfill:
                self.counts[interval] += 1
            self.apply(member, value, at)
            applied += 1
        return applied, duplicates, held


def boards_in_redis(r: redis.Redis, keys: Keys) -> dict[tuple[str, str], dict[str, float]]:
    """Every board of the windows, as Redis holds them."""
    out = {}
    for window in WINDOWS:
        prefix = keys.window(BOARD, window, "")
        for k in r.scan_iter(match=prefix + "*"):
            name = k.decode() if isinstance(k, bytes) else k
            out[window, name[len(prefix) :]] = zset(r, name)
    return out


def model_boards(model: HeldModel) -> dict[tuple[str, str], dict[str, float]]:
    return {k: dict(v) for k, v in model.boards.items() if v}


def held_in_redis(s: Seasons) -> dict[str, tuple[str, str, float]]:
    out: dict[str, tuple[str, str, float]] = {}
    after = None
    while True:
        page = s.held(BOARD, limit=3, after=after)  # small pages: the cursor is exercised
        for e in page.events:
            assert e.state == "held"
            out[e.event_id] = (e.reason, e.member, e.value)
        if page.next is None:
            return out
        after = page.next


# --- random batches against the model --------------------------------------------------------

event = st.fixed_dictionaries(
    {"member": st.sampled_from(MEMBERS), "value": st.integers(-5, 40)},
    optional={"event_id": st.sampled_from([f"e{i}" for i in range(12)])},
)
step = st.tuples(
    st.sampled_from([0, 0, 5, 30, 61, 3600, 3 * 3600]),  # seconds the clock moves first
    st.lists(event, min_size=1, max_size=6),
    st.booleans(),  # resend a previous batch after this one
)
limits = st.tuples(
    st.one_of(st.none(), st.tuples(st.integers(1, 3), st.sampled_from([30, 60]))),
    st.one_of(st.none(), st.tuples(st.sampled_from([20, 45.5]), st.sampled_from(WINDOWS))),
).filter(lambda lim: lim != (None, None))


@hsettings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(lim=limits, steps=st.lists(step, min_size=1, max_size=12), data=st.data())
def test_holding_equals_the_model(
    make: Make, r: redis.Redis, lim: Any, steps: Any, data: st.DataObject
) -> None:
    r.flushall()
    rate, gain = lim
    settings = make(rate=rate, gain=gain)
    clock = ManualClock(START)
    keys = Keys(NS)
    model = HeldModel(Calendar(settings), rate, gain)
    sent: list[tuple[str, list[dict[str, Any]], Any]] = []
    with Seasons(settings, clock=clock) as s:
        for n, (move, evs, resend) in enumerate(steps):
            clock.advance(timedelta(seconds=move))
            batch_id = f"b{n}"
            events = [{"board": BOARD, **e} for e in evs]
            result = s.submit_many(events, batch_id=batch_id)
            applied, duplicates, held = model.batch(batch_id, evs, clock())
            got = [(h.index, h.event_id, h.reason) for h in result.held_events or ()]
            assert (result.applied, result.duplicates, result.held, got) == (
                applied, duplicates, len(held), held,
            )  # fmt: skip
            sent.append((batch_id, events, result))
            assert boards_in_redis(r, keys) == model_boards(model)
            want = {i: (h["reason"], h["member"], h["value"]) for i, h in model.held.items()}
            assert held_in_redis(s) == want
            if resend:
                old_id, old_events, old_result = data.draw(st.sampled_from(sent))
                again = s.submit_many(old_events, batch_id=old_id)
                assert again == old_result  # held counts included; nothing new held
                assert boards_in_redis(r, keys) == model_boards(model)
                assert held_in_redis(s) == want
        # Approve some, reject the rest: approve applies once (twice = once), reject drops.
        for event_id in sorted(model.held):
            h = model.held[event_id]
            if data.draw(st.booleans(), label=f"approve {event_id}"):
                decision = s.approve(BOARD, event_id)
                assert (decision.applied, decision.repeated, decision.after.state) == (
                    1, False, "approved",
                )  # fmt: skip
                model.apply(h["member"], h["value"], h["at"])
                again = s.approve(BOARD, event_id)
                assert (again.applied, again.repeated) == (0, True)
                with pytest.raises(HeldDecided):
                    s.reject(BOARD, event_id)
            else:
                decision = s.reject(BOARD, event_id)
                assert (decision.repeated, decision.after.state) == (False, "rejected")
                assert s.reject(BOARD, event_id).repeated
                with pytest.raises(HeldDecided):
                    s.approve(BOARD, event_id)
            assert boards_in_redis(r, keys) == model_boards(model)
        assert held_in_redis(s) == {}
        # A resend of a decided event is still a duplicate, never held or applied again.
        for event_id in sorted(i for i in model.held if "#" not in i):
            h = model.held[event_id]
            again = s.submit(BOARD, h["member"], h["value"], event_id=event_id)
            assert (again.applied, again.duplicates, again.held) == (0, 1, 0)
        assert boards_in_redis(r, keys) == model_boards(model)


# --- single cases ----------------------------------------------------------------------------


def test_held_event_changes_nothing_but_its_record(make: Make, r: redis.Redis) -> None:
    """A held event is applied nowhere (no day, week, season, metadata); its record keeps
    what it was sent with, the member's score and the arrival."""
    clock = ManualClock(START)
    with Seasons(make(rate=(1, 60), gain=None), clock=clock) as s:
        s.submit(BOARD, "a", 5, metadata={"name": "Ann"})
        found = [k.decode() for k in r.scan_iter(match=f"{NS}:{{{BOARD}}}:*")]
        before = {k: r.dump(k) for k in found if ":held" not in k}
        before.pop(Keys(NS).events(BOARD), None)
        before.pop(Keys(NS).batches(BOARD))
        before.pop(Keys(NS).batch_results(BOARD))
        result = s.submit(BOARD, "a", 7, event_id="x1", metadata={"name": "Bob"}, batch_id="q")
        assert (result.applied, result.held) == (0, 1)
        for k, v in before.items():
            if not k.endswith(":rate:" + str(int(START.timestamp()) // 60 * 60)):
                assert r.dump(k) == v, k
        assert s.top(BOARD, "day").entries[0].metadata == {"name": "Ann"}
        page = s.held(BOARD)
        (rec,) = page.events
        assert (rec.event_id, rec.member, rec.value, rec.reason, rec.score, rec.limit) == (
            "x1", "a", 7, "member_rate", 5, 1,
        )  # fmt: skip
        assert (rec.metadata, rec.batch_id, rec.arrived_at) == (
            {"name": "Bob"}, "q", START.timestamp(),
        )  # fmt: skip
        # Approving merges its metadata then, and applies it with its own ts.
        clock.advance(timedelta(minutes=5))
        s.approve(BOARD, "x1")
        entry = s.top(BOARD, "day").entries[0]
        assert (entry.score, entry.metadata) == (12, {"name": "Bob"})


def test_backfill_is_not_limited(make: Make, r: redis.Redis) -> None:
    clock = ManualClock(START)
    with Seasons(make(rate=(1, 60), gain=(10, "day")), clock=clock) as s:
        events = [{"board": BOARD, "member": "a", "value": 8} for _ in range(3)]
        result = s.submit_many(events, backfill=True)
        assert (result.applied, result.held) == (3, 0)
        # Not counted either: the next live event is the member's first in the interval,
        # but the gain (24 already) holds it.
        live = s.submit(BOARD, "a", 1)
        assert [h.reason for h in live.held_events or ()] == ["max_period_gain"]
        assert s.rank(BOARD, "a", "day").score == 24  # type: ignore[union-attr]


def test_gain_counts_events_earlier_in_the_batch(make: Make) -> None:
    with Seasons(make(rate=None, gain=(10, "week")), clock=ManualClock(START)) as s:
        s.submit(BOARD, "a", 4)
        result = s.submit_many(
            [{"board": BOARD, "member": "a", "value": v} for v in (5, 2, 1, -3, 1)]
        )
        # 4+5 = 9; +2 = 11 > 10 held; +1 = 10 ok; -3 = 7 (never held); +1 = 8.
        assert [h.index for h in result.held_events or ()] == [1]
        assert s.rank(BOARD, "a", "week").score == 8  # type: ignore[union-attr]


def test_approve_in_an_archived_season_is_refused(make: Make, r: redis.Redis) -> None:
    clock = ManualClock(START)
    settings = make(rate=(1, 60), gain=None)
    with Seasons(settings, clock=clock) as s:
        s.submit(BOARD, "a", 1)
        held = s.submit(BOARD, "a", 2, event_id="late1")
        assert held.held == 1
        season = Calendar(settings).period_id("season", START.date())
        r.hset(Keys(NS).state(BOARD), f"season:{season}", "archived")
        with pytest.raises(SeasonClosed) as caught:
            s.approve(BOARD, "late1")
        assert caught.value.code == "season_closed"
        assert [e.event_id for e in s.held(BOARD).events] == ["late1"]
        assert s.rank(BOARD, "a", "day").score == 1  # type: ignore[union-attr]


def test_unknown_and_malformed(make: Make) -> None:
    with Seasons(make(), clock=ManualClock(START)) as s:
        with pytest.raises(UnknownBoard):
            s.held("nope")
        with pytest.raises(HeldNotFound):
            s.approve(BOARD, "never")
        with pytest.raises(HeldNotFound):
            s.reject(BOARD, "never")
        with pytest.raises(InvalidInput):
            s.approve(BOARD, "")
        with pytest.raises(InvalidInput):
            s.held(BOARD, limit=0)
        with pytest.raises(InvalidInput):
            s.held(BOARD, after="never")


def test_boards_without_limits_answer_as_before(make: Make, r: redis.Redis) -> None:
    with Seasons(make(), clock=ManualClock(START)) as s:
        result = s.submit("other", "a", 1000, batch_id="z")
        body = json.loads(result.model_dump_json())
        assert body == {"applied": 1, "duplicates": 0, "batch_id": "z"}
        assert not r.keys(f"{NS}:{{other}}:held*") and not r.keys(f"{NS}:{{other}}:rate*")


@pytest.mark.parametrize(
    ("board", "named"),
    [
        ({"aggregate": "max", "max_period_gain": {"value": 1, "window": "day"}}, "max_period_gain"),
        ({"max_period_gain": {"value": 1, "window": "month"}}, "max_period_gain.window"),
        ({"max_period_gain": {"value": 1, "window": "year"}}, "window"),
        ({"member_rate": {"events": 0, "per": "PT1M"}}, "member_rate.events"),
        ({"member_rate": {"events": 1, "per": "PT0.5S"}}, "member_rate.per"),
        ({"member_rate": {"events": 1, "per": "-PT1M"}}, "member_rate.per"),
    ],
)
def test_settings_are_checked_at_start(settings_factory: Make, board: Any, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_factory(namespace=NS, boards={BOARD: board})
    assert named.split(".")[0] in str(caught.value)
    assert named.split(".")[-1] in str(caught.value)
