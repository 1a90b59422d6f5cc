"""The write path (docs/contract.md: boards and scores, keys, writes) against Redis itself and
hand-computed expectations.

- week and season boards equal ZUNIONSTORE of their day keys with WEIGHTS and AGGREGATE, run
  by the test into a scratch key of the same hash tag (and trimmed like Redis would);
- idempotency by event id, within a batch and over 48 hours;
- every kind of bad input rejects the whole batch, names the problem and its index, and leaves
  the database byte for byte as it was;
- EXPIREAT of every key from the period's local end + retention, across DST;
- metadata merging and its exact round trip;
- late grace, closed days, archived seasons and backfill.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from reference import Calendar, Model, key, snapshot, zset

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BatchRejected, LimitExceeded
from seasons.keys import Keys

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

NS = "wp"
# Far in the future: EXPIREAT is computed from the manual clock and must not lie in the past.
START = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # a Wednesday
Make = Callable[..., Settings]


@pytest.fixture
def make(settings_factory: Make) -> Make:
    def build(**overrides: Any) -> Settings:
        overrides.setdefault("namespace", NS)
        overrides.setdefault("boards", {"kills": {}, "deaths": {"order": "asc"}})
        return settings_factory(**overrides)

    return build


def ev(board: str, member: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"board": board, "member": member, "value": value, **extra}


# --- (a) write-through equals ZUNIONSTORE of the day keys ----------------------------------


def _union(
    r: redis.Redis,
    board: str,
    sources: Sequence[tuple[str, float]],
    aggregate: str,
    order: str,
    max_entries: int,
) -> dict[str, float]:
    """ZUNIONSTORE into a scratch key with the board's hash tag, trimmed to the best N."""
    scratch = f"{NS}:{{{board}}}:scratch"
    r.zunionstore(scratch, dict(sources), aggregate=aggregate.upper())
    if max_entries:
        if order == "desc":
            r.zremrangebyrank(scratch, 0, -(max_entries + 1))
        else:
            r.zremrangebyrank(scratch, max_entries, -1)
    out = zset(r, scratch)
    r.delete(scratch)
    return out


@pytest.mark.parametrize(
    ("aggregate", "order", "max_entries"),
    [
        ("sum", "desc", 0),
        ("max", "desc", 0),
        ("min", "asc", 0),
        ("sum", "asc", 0),
        ("max", "asc", 0),
        ("min", "desc", 0),
        # trimmed boards, including ones where scores get worse (negative points, sum/asc)
        ("sum", "desc", 4),
        ("sum", "asc", 4),
        ("max", "desc", 3),
        ("max", "asc", 3),
        ("min", "asc", 3),
        ("min", "desc", 3),
    ],
)
def test_boards_equal_zunionstore_of_their_days(
    make: Make, r: redis.Redis, aggregate: str, order: str, max_entries: int
) -> None:
    week_weights = [1, 0, 2, 1, 1, 2, 0]
    season_weights = [2, 0]  # the third week of a season weighs 1
    settings = make(
        timezone="Europe/Istanbul",
        week_start="wednesday",
        seasons={"length_days": 10, "anchor": "2035-06-16"},  # three days after the start
        boards={
            "b": {
                "aggregate": aggregate,
                "order": order,
                "week_weights": week_weights,
                "season_weights": season_weights,
                "max_entries": max_entries,
            }
        },
    )
    cal = Calendar(settings)

    def check(week_first: date | None, season_id: str | None) -> None:
        if week_first is not None:
            sources = [
                (key(NS, "b", "day", (week_first + timedelta(days=i)).isoformat()), week_weights[i])
                for i in range(7)
            ]
            want = _union(r, "b", sources, aggregate, order, max_entries)
            assert want and zset(r, key(NS, "b", "week", week_first.isoformat())) == want
        if season_id is not None:
            season = cal.season_by_id(season_id)
            sources = []
            for i in range((season.last - season.first).days + 1):
                week = i // 7
                weight = season_weights[week] if week < len(season_weights) else 1
                day_key = key(NS, "b", "day", (season.first + timedelta(days=i)).isoformat())
                sources.append((day_key, weight))
            want = _union(r, "b", sources, aggregate, order, max_entries)
            assert want and zset(r, key(NS, "b", "season", season_id)) == want

    rng = random.Random(f"{aggregate}{order}{max_entries}")
    members = [f"m{i:02d}" for i in range(12)]
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        for _ in range(24 * 3):  # 24 days, three batches a day, checked after each one
            batch = [
                ev("b", rng.choice(members), rng.randint(-1000, 1000))
                for _ in range(rng.randint(1, 6))
            ]
            s.submit_many(batch)
            today = cal.local_date(clock())
            season = cal.season_of(today)
            check(cal.week_first(today), season.id if season else None)
            clock.advance(timedelta(hours=8))
    # At the end, every week and season again.
    days = [START.date() + timedelta(days=i) for i in range(24)]
    weeks = sorted({cal.week_first(d) for d in days})
    seasons = sorted({cal.season_of(d).id for d in days if cal.season_of(d)})  # type: ignore[union-attr]
    assert len(weeks) >= 4 and len(seasons) >= 2
    for first in weeks:
        check(first, None)
    for sid in seasons:
        check(None, sid)
    # Days before the first season feed their week but no season board.
    seasonal = {key(NS, "b", "season", sid) for sid in seasons}
    stored = {n.decode() for n in r.scan_iter(match=f"{NS}:{{b}}:season:*")}
    assert stored == seasonal
    assert cal.season_of(START.date()) is None


def test_trimmed_board_refills_when_a_leader_falls(make: Make, r: redis.Redis) -> None:
    """max_entries = 1: the leader losing points must hand the top to the next member."""
    settings = make(
        boards={
            "pts": {"aggregate": "sum", "order": "desc", "max_entries": 1},
            "time": {"aggregate": "sum", "order": "asc", "max_entries": 1},
        }
    )
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        s.submit_many([ev("pts", "ann", 10), ev("pts", "bob", 5)])
        s.submit("pts", "ann", -10)
        assert [(e.member, e.score) for e in s.top("pts", "week").entries] == [("bob", 5.0)]
        s.submit_many([ev("time", "ann", 1), ev("time", "bob", 2)])
        s.submit("time", "ann", 5)
        assert [(e.member, e.score) for e in s.top("time", "week").entries] == [("bob", 2.0)]
        # ann comes back with the formula's score, not with a partial one
        s.submit("time", "bob", 10)
        assert [(e.member, e.score) for e in s.top("time", "week").entries] == [("ann", 6.0)]


# --- (b) idempotency ----------------------------------------------------------------------


def _two_day_batch(now: datetime, tz: ZoneInfo) -> list[dict[str, Any]]:
    yesterday = (now - timedelta(minutes=40)).astimezone(tz).isoformat()
    return [
        ev("kills", "ann", 5, event_id="k1", metadata={"tier": "gold"}),
        ev("kills", "bob", 7, event_id="k2", ts=yesterday),
        ev("deaths", "ann", 2, event_id="k1", metadata={"x": 1}),
        ev("deaths", "cid", 3, event_id="d9", ts=yesterday),
        ev("kills", "cid", -4, event_id="k3"),
    ]


def _without_batches(snap: dict[bytes, Any]) -> dict[bytes, Any]:
    """A snapshot without the batch-id records, which every batch (a new id) adds to."""
    return {k: v for k, v in snap.items() if not k.endswith((b":batches", b":batch_results"))}


@pytest.mark.parametrize("replays", [1, 2, 3, 4, 5])
def test_replaying_a_batch_changes_nothing(make: Make, r: redis.Redis, replays: int) -> None:
    settings = make(boards={"kills": {"max_entries": 2}, "deaths": {"order": "asc"}})
    cal = Calendar(settings)
    clock = ManualClock(cal.day_start(date(2035, 6, 14)) + timedelta(minutes=20))
    with Seasons(settings, clock=clock) as s:
        batch = _two_day_batch(clock(), cal.zone)
        assert s.submit_many(batch).model_dump(exclude={"batch_id"}) == {
            "applied": 5,
            "duplicates": 0,
        }
        before = _without_batches(snapshot(r))
        for n in range(replays):
            # A new batch id each time (none given): its events are duplicates by event id.
            assert s.submit_many(batch).model_dump(exclude={"batch_id"}) == {
                "applied": 0,
                "duplicates": 5,
            }
            assert _without_batches(snapshot(r)) == before, f"replay {n + 1}"
        # Later (still within 48 hours and the late grace) only the events key's TTL may move.
        clock.advance(timedelta(minutes=30))
        assert s.submit_many(batch).model_dump(exclude={"batch_id"}) == {
            "applied": 0,
            "duplicates": 5,
        }
        after = _without_batches(snapshot(r))
        events_keys = {k.encode() for k in (Keys(NS).events("kills"), Keys(NS).events("deaths"))}
        assert set(after) == set(before)
        for name, (dump, expires) in after.items():
            assert dump == before[name][0], name
            if name not in events_keys:
                assert expires == before[name][1], name


def test_duplicate_ids_within_a_batch(make: Make, r: redis.Redis) -> None:
    """The first event of an id in batch order is applied, whatever its day; (board, id) is
    the identity, so the same id on another board is a different event."""
    settings = make()
    cal = Calendar(settings)
    today = date(2035, 6, 14)
    clock = ManualClock(cal.day_start(today) + timedelta(minutes=20))
    yesterday_ts = (clock() - timedelta(minutes=40)).isoformat()
    with Seasons(settings, clock=clock) as s:
        result = s.submit_many(
            [
                ev("kills", "ann", 5, event_id="x", metadata={"tier": "gold"}),
                ev("kills", "ann", 7, event_id="x", ts=yesterday_ts, metadata={"tier": "lead"}),
                ev("deaths", "ann", 1, event_id="x"),
                ev("kills", "bob", 1, event_id="y", ts=yesterday_ts),
                ev("kills", "bob", 2, event_id="y"),
                ev("kills", "bob", 4, event_id="y"),
            ]
        )
        assert result.model_dump(exclude={"batch_id"}) == {"applied": 3, "duplicates": 3}
        assert zset(r, key(NS, "kills", "day", today.isoformat())) == {"ann": 5.0}
        assert zset(r, key(NS, "kills", "day", "2035-06-13")) == {"bob": 1.0}
        assert zset(r, key(NS, "deaths", "day", today.isoformat())) == {"ann": 1.0}
        entry = s.rank("kills", "ann", "week")
        assert entry is not None and entry.metadata == {"tier": "gold"}


def test_event_ids_are_forgotten_after_48_hours(make: Make, r: redis.Redis) -> None:
    settings = make()
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        assert s.submit("kills", "ann", 3, event_id="once").applied == 1
        clock.advance(timedelta(hours=47, minutes=59, seconds=59))
        assert s.submit("kills", "ann", 3, event_id="once").model_dump(exclude={"batch_id"}) == {
            "applied": 0,
            "duplicates": 1,
        }
        clock.advance(timedelta(seconds=2))  # 48 hours and one second after it was applied
        assert s.submit("kills", "ann", 3, event_id="once").model_dump(exclude={"batch_id"}) == {
            "applied": 1,
            "duplicates": 0,
        }
        # and from then on it is a duplicate again
        assert s.submit("kills", "ann", 3, event_id="once").duplicates == 1
    week = Calendar(settings).week_first(START.date()).isoformat()
    assert zset(r, key(NS, "kills", "week", week)) == {"ann": 6.0}


# --- (c) bad input ----------------------------------------------------------------------


def _bad_cases(cal: Calendar, now: datetime) -> list[tuple[str, dict[str, Any], str, str]]:
    """(name, bad event, field, text the message must contain)."""
    late = cal.day_start(cal.local_date(now)) - timedelta(hours=3)  # yesterday, grace over
    future = now + timedelta(minutes=5, seconds=1)
    many = {f"f{i}": i for i in range(17)}
    return [
        ("nan", ev("kills", "ann", math.nan), "value", "finite"),
        ("+inf", ev("kills", "ann", math.inf), "value", "finite"),
        ("-inf", ev("kills", "ann", -math.inf), "value", "finite"),
        ("2^53+1", ev("kills", "ann", 2**53 + 1), "value", "2^53"),
        ("-2^53-2.0", ev("kills", "ann", -(2.0**53) - 2), "value", "2^53"),
        ("string value", ev("kills", "ann", "12"), "value", "number"),
        ("empty member", ev("kills", "", 1), "member", "empty"),
        ("129-byte member", ev("kills", "m" * 129, 1), "member", "129 bytes"),
        ("65 two-byte chars", ev("kills", "é" * 65, 1), "member", "130 bytes"),
        ("newline in member", ev("kills", "a\nb", 1), "member", "control character"),
        ("NUL in member", ev("kills", "a\x00b", 1), "member", "control character"),
        ("DEL in member", ev("kills", "a\x7f", 1), "member", "control character"),
        ("unknown board", ev("nope", "ann", 1), "board", "'nope'"),
        ("17 metadata fields", ev("kills", "ann", 1, metadata=many), "metadata", "17 fields"),
        (
            "metadata > 1 KiB",
            ev("kills", "ann", 1, metadata={"bio": "x" * 1100}),
            "metadata",
            "bytes",
        ),
        (
            "nested metadata",
            ev("kills", "ann", 1, metadata={"gear": {"gun": 1}}),
            "metadata",
            "'gear'",
        ),
        ("list in metadata", ev("kills", "ann", 1, metadata={"tags": ["a"]}), "metadata", "'tags'"),
        ("late event", ev("kills", "ann", 1, ts=late.isoformat()), "ts", "grace"),
        ("future event", ev("kills", "ann", 1, ts=future.isoformat()), "ts", "5 minutes ahead"),
        ("bad ts", ev("kills", "ann", 1, ts="yesterday"), "ts", "yesterday"),
        ("ts without offset", ev("kills", "ann", 1, ts="2035-06-13T10:00:00"), "ts", "offset"),
        ("unknown field", ev("kills", "ann", 1, colour="red"), "colour", "'colour'"),
        ("empty event id", ev("kills", "ann", 1, event_id=""), "event_id", "empty"),
    ]


def _populate(s: Seasons) -> None:
    s.submit_many(
        [
            ev("kills", "ann", 10, event_id="p1", metadata={"tier": "gold"}),
            ev("kills", "bob", 4),
            ev("deaths", "ann", 2, metadata={"n": 1}),
        ]
    )


def test_every_bad_event_is_named_and_nothing_is_written(make: Make, r: redis.Redis) -> None:
    settings = make()
    cal = Calendar(settings)
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        _populate(s)
        before = snapshot(r)
        assert before
        for name, bad, field, text in _bad_cases(cal, clock()):
            # alone, and as the 3rd of 4 events whose others are fine and touch existing keys
            good = [
                ev("kills", "ann", 1, event_id="g1", metadata={"tier": "x"}),
                ev("deaths", "bob", 3),
                ev("kills", "cid", 2),
            ]
            for batch, index in (([bad], 0), ([good[0], good[1], bad, good[2]], 2)):
                with pytest.raises(BatchRejected) as err:
                    s.submit_many(batch)
                problems = err.value.details
                assert [p["index"] for p in problems] == [index], name
                assert problems[0]["field"] == field, name
                assert text in problems[0]["message"], (name, problems[0]["message"])
                assert f"event {index}" in err.value.message, name
                assert text in err.value.message, name
                assert snapshot(r) == before, name


def test_every_problem_of_a_batch_is_reported(make: Make, r: redis.Redis) -> None:
    settings = make()
    with Seasons(settings, clock=ManualClock(START)) as s:
        with pytest.raises(BatchRejected) as err:
            s.submit_many([ev("kills", "", 1), ev("kills", "ok", 1), ev("kills", "x", math.nan)])
        assert [(p["index"], p["field"]) for p in err.value.details] == [
            (0, "member"),
            (2, "value"),
        ]
        assert "and 1 more" in err.value.message
    assert r.dbsize() == 0


def test_limits_at_their_edge_are_accepted(make: Make, r: redis.Redis) -> None:
    settings = make()
    with Seasons(settings, clock=ManualClock(START)) as s:
        result = s.submit_many(
            [
                ev("kills", "m" * 128, 2**53),
                ev("kills", "é" * 64, -(2**53)),
                ev("kills", "uid_42", 1.5, metadata={f"f{i}": i for i in range(16)}),
                ev("kills", "tab", 1, event_id="i" * 128, metadata={"bio": "x" * 1000}),
            ]
        )
    assert result.applied == 4
    day = zset(r, key(NS, "kills", "day", START.date().isoformat()))
    assert day == {"m" * 128: 2.0**53, "é" * 64: -(2.0**53), "uid_42": 1.5, "tab": 1.0}


def test_a_batch_over_10000_events_is_refused(make: Make, r: redis.Redis) -> None:
    settings = make()
    with (
        Seasons(settings, clock=ManualClock(START)) as s,
        pytest.raises(LimitExceeded, match="10001"),
    ):
        s.submit_many([ev("kills", f"m{i}", 1) for i in range(10_001)])
    assert r.dbsize() == 0


@pytest.mark.parametrize("state_field", ["closed", "archived"])
def test_multi_board_batch_with_one_board_refused_writes_nothing(
    make: Make, r: redis.Redis, state_field: str
) -> None:
    settings = make(seasons={"length_days": 7, "anchor": "2035-06-11"})
    clock = ManualClock(START)
    keys = Keys(NS)
    with Seasons(settings, clock=clock) as s:
        _populate(s)
        if state_field == "closed":
            r.hset(keys.state("deaths"), f"closed:{START.date().isoformat()}", "1")
            code, text = "late_event", "closed"
        else:
            r.hset(keys.state("deaths"), "season:S1", "archived")
            code, text = "season_closed", "archived"
        before = snapshot(r)
        batch = [
            ev("kills", "ann", 1, event_id="new", metadata={"tier": "y"}),
            ev("kills", "dan", 9),
            ev("deaths", "ann", 1),
            ev("kills", "bob", 3),
        ]
        with pytest.raises(BatchRejected) as err:
            s.submit_many(batch)
        assert [(p["index"], p["code"]) for p in err.value.details] == [(2, code)]
        assert "event 2" in err.value.message and text in err.value.message
        assert snapshot(r) == before
        # The other board alone still takes its events.
        assert s.submit_many([batch[0], batch[1], batch[3]]).applied == 3


# --- (d) TTLs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dst_day", "retention", "ids"),
    [
        # New York falls back: a 25-hour day. A long retention keeps these keys alive in real
        # time; event ids are left out, as their key expires 48 hours after the (past) clock.
        (date(2026, 11, 1), "P4000D", False),
        (date(2035, 11, 4), "P35D", True),  # falls back again
        (date(2035, 3, 11), "P35D", True),  # springs forward: a 23-hour day
    ],
)
def test_every_key_expires_at_its_periods_local_end_plus_retention(
    make: Make, r: redis.Redis, dst_day: date, retention: str, ids: bool
) -> None:
    tz = ZoneInfo("America/New_York")
    settings = make(
        timezone="America/New_York",
        retention=retention,
        seasons={"length_days": 7, "anchor": (dst_day - timedelta(days=6)).isoformat()},
        boards={"kills": {"max_entries": 2}, "deaths": {}},
    )
    keep = settings.retention.total_seconds()

    def local_midnight(d: date) -> int:  # midnight is never in New York's DST gap
        return int(datetime(d.year, d.month, d.day, tzinfo=tz).timestamp())

    one = timedelta(days=1)
    clock = ManualClock(datetime(2000, 1, 1, tzinfo=UTC))
    with Seasons(settings, clock=clock) as s:
        for d in (dst_day - one, dst_day, dst_day + one):
            clock.set(datetime(d.year, d.month, d.day, 12, tzinfo=tz))
            first = ev("kills", "ann", 1, metadata={"d": str(d)})
            if ids:
                first["event_id"] = f"e{d}"
            s.submit_many(
                [
                    first,
                    ev("kills", "bob", 2),
                    ev("kills", "cid", 3),
                    ev("deaths", "ann", 1),
                ]
            )
    expected = {}
    for board in ("kills", "deaths"):
        for d in (dst_day - one, dst_day, dst_day + one):
            expected[key(NS, board, "day", d.isoformat())] = local_midnight(d + one) + keep
        expected[key(NS, board, "week", (dst_day - 6 * one).isoformat())] = (
            local_midnight(dst_day + one) + keep
        )
        expected[key(NS, board, "week", (dst_day + one).isoformat())] = (
            local_midnight(dst_day + 8 * one) + keep
        )
        expected[key(NS, board, "season", "S1")] = local_midnight(dst_day + one) + keep
        expected[key(NS, board, "season", "S2")] = local_midnight(dst_day + 8 * one) + keep
    # The length of the DST day shows in the expectation: 23 or 25 hours from its start.
    hours = (local_midnight(dst_day + one) - local_midnight(dst_day)) / 3600
    assert hours == (25 if dst_day.month == 11 else 23)
    got = {name: r.expiretime(name) for name in expected}
    assert got == {name: int(v) for name, v in expected.items()}
    keys = Keys(NS)
    assert r.ttl(keys.meta("kills")) == -1 and r.hlen(keys.meta("kills")) == 1
    if ids:  # the idempotency key outlives the 48-hour window of its last event
        assert r.expiretime(keys.events("kills")) >= clock().timestamp() + 48 * 3600
    # Nothing else without a TTL: only the metadata hash is kept for good.
    for name in r.scan_iter():
        if name.decode() not in (keys.meta("kills"), keys.meta("deaths")):
            assert r.ttl(name) > 0, name


# --- (e) metadata -------------------------------------------------------------------------


ODD_VALUES = {
    "tenth": 0.1,
    "sum": 0.1 + 0.2,  # needs all 17 significant digits
    "big": 2**53,
    "tiny": -1.5e-7,
    "neg": -(2**53),
    "huge": 1.7976931348623157e308,
    "text": 'Ünïcødé ✓ 日本語 "quoted" \\ / \t',
    "emoji": "🏆",
    "yes": True,
    "no": False,
    "zero": 0,
    "empty": "",
}


def test_metadata_round_trips_exactly_and_merges(make: Make, r: redis.Redis) -> None:
    settings = make()
    clock = ManualClock(START)
    meta_key = Keys(NS).meta("kills")
    with Seasons(settings, clock=clock) as s:
        s.submit("kills", "ann", 1, metadata=ODD_VALUES)
        entry = s.rank("kills", "ann", "day")
        assert entry is not None
        assert entry.metadata == ODD_VALUES
        for name, value in ODD_VALUES.items():  # same types too: True is not 1, 2**53 an int
            assert type(entry.metadata[name]) is type(value), name
        assert json.loads(r.hget(meta_key, "ann")) == ODD_VALUES  # type: ignore[arg-type]

        # given fields replace stored ones, null deletes, others stay
        s.submit("kills", "ann", 1, metadata={"tenth": None, "yes": None, "text": "new", "n": 3})
        want = {k: v for k, v in ODD_VALUES.items() if k not in ("tenth", "yes")}
        want.update(text="new", n=3)
        assert json.loads(r.hget(meta_key, "ann")) == want  # type: ignore[arg-type]
        # no metadata given: nothing changes
        s.submit("kills", "ann", 1)
        page = s.top("kills", "day")
        assert page.entries[0].metadata == want

        # a merge over 16 fields is refused as a whole (11 stored + 6 new = 17)
        assert len(want) == 11
        before = snapshot(r)
        with pytest.raises(BatchRejected) as err:
            s.submit_many(
                [
                    ev("kills", "bob", 1),
                    ev("kills", "ann", 5, metadata={f"new{i}": i for i in range(6)}),
                ]
            )
        assert [p["index"] for p in err.value.details] == [1]
        assert "17 fields" in err.value.message and "event 1" in err.value.message
        assert snapshot(r) == before
        # ... but deleting one in the same event keeps it at 16
        s.submit("kills", "ann", 1, metadata={"n": None, **{f"new{i}": i for i in range(6)}})
        assert len(json.loads(r.hget(meta_key, "ann"))) == 16  # type: ignore[arg-type]
        # deleting every field removes the member from the hash
        s.submit("kills", "ann", 1, metadata={k: None for k in json.loads(r.hget(meta_key, "ann"))})  # type: ignore[arg-type]
        assert r.hexists(meta_key, "ann") is False
        assert s.rank("kills", "ann", "day").metadata == {}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "value",
    [
        "https://cdn.example.com/" + "a/" * 480,  # slashes: cjson would write each as \/
        "\x7f" * 900,  # DEL: cjson would write each as \u007f
        'quote " backslash \\ slash \\/ tab \t nl \n bell \x07 ls \u2028 é',
    ],
)
def test_metadata_size_is_its_compact_json(make: Make, r: redis.Redis, value: str) -> None:
    """1 KiB as JSON means the compact JSON of the object, as stored: what passes the check
    of the event passes the check after merging, and reads back exactly."""
    meta = {"v": value}
    size = len(json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode())
    assert size <= 1024
    settings = make()
    with Seasons(settings, clock=ManualClock(START)) as s:
        assert s.submit("kills", "ann", 1, metadata=meta).applied == 1
        entry = s.rank("kills", "ann", "day")
        assert entry is not None and entry.metadata == meta
    stored = r.hget(Keys(NS).meta("kills"), "ann")
    assert stored is not None and json.loads(stored) == meta and len(stored) == size


def test_metadata_merged_in_batch_order_over_days(make: Make, r: redis.Redis) -> None:
    settings = make()
    cal = Calendar(settings)
    clock = ManualClock(cal.day_start(date(2035, 6, 14)) + timedelta(minutes=10))
    yesterday_ts = (clock() - timedelta(minutes=30)).isoformat()
    with Seasons(settings, clock=clock) as s:
        s.submit_many(
            [
                ev("kills", "ann", 1, metadata={"tier": "new", "a": 1}),
                ev("kills", "ann", 1, ts=yesterday_ts, metadata={"tier": "old", "b": 2}),
            ]
        )
    assert json.loads(r.hget(Keys(NS).meta("kills"), "ann")) == {  # type: ignore[arg-type]
        "tier": "old",
        "a": 1,
        "b": 2,
    }


# --- (f) late grace, closed days, archived seasons, backfill ---------------------------------


def test_late_grace_boundary(make: Make, r: redis.Redis) -> None:
    settings = make(timezone="Europe/Istanbul", late_grace="PT90M")
    cal = Calendar(settings)
    day = date(2035, 6, 13)
    in_day = (cal.day_start(day) + timedelta(hours=23, minutes=59)).isoformat()
    deadline = cal.day_end(day) + timedelta(minutes=90)
    assert deadline == datetime(2035, 6, 13, 22, 30, tzinfo=UTC)  # 00:00+03:00 plus 90 minutes
    clock = ManualClock(deadline - timedelta(seconds=1))
    with Seasons(settings, clock=clock) as s:
        assert s.submit("kills", "ann", 4, ts=in_day).applied == 1
        clock.set(deadline)
        before = snapshot(r)
        with pytest.raises(BatchRejected) as err:
            s.submit("kills", "ann", 4, ts=in_day)
        assert err.value.details[0]["code"] == "late_event"
        assert "2035-06-13" in err.value.message
        assert snapshot(r) == before
        # an event of the new day is fine, and the future tolerance is five minutes exactly
        assert s.submit("kills", "ann", 1).applied == 1
        ahead = (deadline + timedelta(minutes=5)).isoformat()
        assert s.submit("kills", "ann", 1, ts=ahead).applied == 1
    assert zset(r, key(NS, "kills", "day", "2035-06-13")) == {"ann": 4.0}
    assert zset(r, key(NS, "kills", "day", "2035-06-14")) == {"ann": 2.0}


def test_backfill_writes_closed_days_but_not_archived_seasons(make: Make, r: redis.Redis) -> None:
    settings = make(
        seasons={"length_days": 7, "anchor": "2035-06-04"},  # S1 06-04..06-10, S2 06-11..06-17
        boards={"kills": {"season_weights": [3]}},
    )
    cal = Calendar(settings)
    keys = Keys(NS)
    closed_day = date(2035, 6, 12)
    # Within the late grace of the closed day: only its closed mark refuses its events.
    clock = ManualClock(cal.day_end(closed_day) + timedelta(minutes=20))
    model = Model(settings)
    old_day = date(2035, 6, 8)
    r.hset(keys.state("kills"), f"closed:{closed_day}", "1")
    model.closed_days.add(("kills", closed_day))
    with Seasons(settings, clock=clock) as s:
        at = (cal.day_start(closed_day) + timedelta(hours=5)).isoformat()
        event = ev("kills", "ann", 5, ts=at)
        with pytest.raises(BatchRejected, match="closed"):
            s.submit_many([event])
        assert r.dbsize() == 1  # the state hash only
        old = ev("kills", "bob", 7, ts=(cal.day_start(old_day) + timedelta(hours=5)).isoformat())
        with pytest.raises(BatchRejected, match="late_event|grace"):
            s.submit_many([old])
        assert s.submit_many([event, old], backfill=True).applied == 2
        model.submit(
            [{**e, "ts": datetime.fromisoformat(e["ts"])} for e in (event, old)],
            clock(),
            backfill=True,
        )
        for window, pid in model.periods("kills"):
            assert zset(r, key(NS, "kills", window, pid)) == model.board("kills", window, pid)
        assert zset(r, key(NS, "kills", "season", "S1")) == {"bob": 21.0}

        r.hset(keys.state("kills"), "season:S1", "archived")
        before = snapshot(r)
        again = ev("kills", "cid", 1, ts=(cal.day_start(old_day) + timedelta(hours=9)).isoformat())
        with pytest.raises(BatchRejected) as err:
            s.submit_many([event, again], backfill=True)
        assert [(p["index"], p["code"]) for p in err.value.details] == [(1, "season_closed")]
        assert "S1" in err.value.message or "S1" in err.value.details[0]["message"]
        assert snapshot(r) == before


def test_metadata_of_new_members_within_one_batch(make: Make, r: redis.Redis) -> None:
    """A member with no stored metadata takes the given object as it is; later events of the
    same batch still merge with it in batch order, and nulls on a new member delete nothing."""
    settings = make()
    meta_key = Keys(NS).meta("kills")
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit_many(
            [
                ev("kills", "ann", 1, metadata={"b": "x", "a": 1, "url": "https://x.y/z"}),
                ev("kills", "ann", 1, metadata={"b": None, "c": 2.5}),
                ev("kills", "cid", 1, metadata={"gone": None, "kept": True}),
                ev("kills", "dan", 1, metadata={}),
            ]
        )
        want = {"a": 1, "url": "https://x.y/z", "c": 2.5}
        assert json.loads(r.hget(meta_key, "ann")) == want  # type: ignore[arg-type]
        assert json.loads(r.hget(meta_key, "cid")) == {"kept": True}  # type: ignore[arg-type]
        assert r.hexists(meta_key, "dan") is False
        assert s.rank("kills", "ann", "day").metadata == want  # type: ignore[union-attr]


def test_metadata_sent_again_changes_nothing_and_still_merges_in_order(
    make: Make, r: redis.Redis
) -> None:
    """The metadata a member has, sent again with each score (what games do), writes nothing
    new; in a batch it is still one step of the merge in batch order, like any other."""
    settings = make()
    meta_key = Keys(NS).meta("kills")
    first = {"name": "Ann", "level": 3, "url": "https://x.y/z"}
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit("kills", "ann", 1, metadata=first)
        stored = r.hget(meta_key, "ann")
        s.submit_many([ev("kills", "ann", 1, metadata=first) for _ in range(3)])
        assert r.hget(meta_key, "ann") == stored  # byte for byte
        # same, changed, same again: the last one sets level back, as one by one would
        s.submit_many(
            [
                ev("kills", "ann", 1, metadata=first),
                ev("kills", "ann", 1, metadata={"level": 4, "clan": "red"}),
                ev("kills", "ann", 1, metadata=first),
            ]
        )
        want = {**first, "clan": "red"}
        assert json.loads(r.hget(meta_key, "ann")) == want  # type: ignore[arg-type]
        # a new member: given, then given again in the same batch
        s.submit_many(
            [ev("kills", "bob", 1, metadata={"b": 1}), ev("kills", "bob", 2, metadata={"b": 1})]
        )
        assert json.loads(r.hget(meta_key, "bob")) == {"b": 1}  # type: ignore[arg-type]
        # metadata with a null is always merged: it deletes the field even when the rest
        # equals what is stored
        s.submit("kills", "ann", 1, metadata={**want, "clan": None})
        assert json.loads(r.hget(meta_key, "ann")) == first  # type: ignore[arg-type]
        assert s.rank("kills", "ann", "day").metadata == first  # type: ignore[union-attr]


def test_a_large_batch_of_repeated_ids_and_metadata_equals_the_model(
    make: Make, r: redis.Redis
) -> None:
    """3 000 events: ids seen in an earlier batch, ids repeated within the batch, members
    given metadata many times over (merged in batch order, nulls deleting), against a
    model."""
    settings = make()
    rnd = random.Random(11)
    meta_key = Keys(NS).meta("kills")
    with Seasons(settings, clock=ManualClock(START)) as s:
        earlier = [ev("kills", f"p{i % 50}", 1, event_id=f"e{i}") for i in range(0, 3000, 7)]
        s.submit_many(earlier)
        scores: dict[str, float] = {}
        for e in earlier:
            scores[e["member"]] = scores.get(e["member"], 0) + 1
        applied = {e["event_id"] for e in earlier}
        metas: dict[str, dict[str, Any]] = {}
        batch = []
        for i in range(3000):
            member = f"p{rnd.randrange(1300)}"
            event_id = f"e{rnd.randrange(3000)}" if i % 3 else f"e{i}"
            meta = {"lvl": rnd.randrange(3), "tag": rnd.choice(["a", "b", None])}
            batch.append(ev("kills", member, 2, event_id=event_id, metadata=meta))
            if event_id in applied:
                continue  # a duplicate: neither its value nor its metadata counts
            applied.add(event_id)
            scores[member] = scores.get(member, 0) + 2
            merged = {**metas.get(member, {}), **meta}
            metas[member] = {k: v for k, v in merged.items() if v is not None}
        result = s.submit_many(batch)
        assert result.applied + result.duplicates == 3000
        assert result.applied == len(applied) - len(earlier)
        assert zset(r, key(NS, "kills", "day", START.date().isoformat())) == scores
        stored = {
            (m.decode() if isinstance(m, bytes) else m): json.loads(v)
            for m, v in r.hgetall(meta_key).items()
        }
        assert stored == {m: v for m, v in metas.items() if v}
