"""The time model (docs/contract.md#time) checked against independent references.

Every expectation here comes either from a hand-written table (facts about the calendar and the
IANA zones: when DST switches, which weekday a date is) or from a brute-force reference written in
plain Python below: bisecting UTC seconds for a day's first instant, counting UTC minutes whose
local date is a day, walking back day by day to a week's first day, walking season by season from
the anchor. Nothing is copied from the module's own output.
"""

from __future__ import annotations

import functools
from calendar import timegm
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from seasons import calendar
from seasons import windows as win
from seasons.config import Settings, load_settings
from seasons.errors import BadPeriod, BadWindow

ZONES = (
    "UTC",
    "America/New_York",
    "Europe/Istanbul",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "America/Santiago",  # DST switches at local midnight
    "America/Havana",  # DST switches at local midnight
)
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
ONE_DAY = timedelta(days=1)
TINY = timedelta(microseconds=1)


# --- settings -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def make_settings(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Settings]:
    """``make(**overrides)``: Settings from an empty TOML file and no environment."""
    toml = tmp_path_factory.mktemp("calendar") / "seasons.toml"
    toml.write_text("")
    cache: dict[str, Settings] = {}

    def make(**overrides: Any) -> Settings:
        key = repr(sorted(overrides.items()))
        if key not in cache:
            cache[key] = load_settings(environ={}, path=toml, **overrides)
        return cache[key]

    return make


CYCLE: dict[str, Any] = {"length_days": 28, "anchor": "2026-01-05"}  # S1 = 2026-01-05 .. 2026-02-01
LISTED: dict[str, Any] = {
    # Given out of order on purpose: the settings sort them.
    "list": [
        {"id": "spring", "start": "2026-04-01", "end": "2026-04-30"},
        {"id": "winter", "start": "2026-01-01", "end": "2026-01-31"},
        {"id": "late-winter", "start": "2026-02-10", "end": "2026-03-10"},
    ]
}


# --- independent references ---------------------------------------------------------------


def utc(text: str) -> datetime:
    """An instant written as ``YYYY-MM-DDTHH:MM[:SS[.ffffff]]`` in UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def d(text: str) -> date:
    return date.fromisoformat(text)


def local_date_at(epoch: int, zone: ZoneInfo) -> date:
    return datetime.fromtimestamp(epoch, zone).date()


def epoch_of(instant: datetime) -> int:
    return timegm(instant.astimezone(UTC).utctimetuple())


def ref_day_start(day: date, zone: ZoneInfo) -> datetime:
    """Bisect UTC seconds for the first instant whose local date is ``day`` or later."""
    naive = timegm(day.timetuple())
    lo, hi = naive - 16 * 3600, naive + 16 * 3600  # every UTC offset lies within +-16 h
    assert local_date_at(lo, zone) < day <= local_date_at(hi, zone)
    while hi - lo > 1:  # invariant: local date at lo < day <= local date at hi
        mid = (lo + hi) // 2
        if local_date_at(mid, zone) < day:
            lo = mid
        else:
            hi = mid
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=hi)


def ref_day_end(day: date, zone: ZoneInfo) -> datetime:
    return ref_day_start(day + ONE_DAY, zone)


def ref_day_hours(day: date, zone: ZoneInfo) -> float:
    """Length of a local day, counting the UTC minutes whose local date is ``day``."""
    naive = timegm(day.timetuple())
    minutes = sum(1 for m in range(-16 * 60, 40 * 60) if local_date_at(naive + m * 60, zone) == day)
    return minutes / 60


def ref_weekday_name(day: date) -> str:
    return WEEKDAY_NAMES[day.isocalendar().weekday - 1]


def ref_week_first_day(day: date, week_start: str) -> tuple[date, int]:
    """Walk back one day at a time until the weekday is ``week_start``; also the steps taken."""
    steps = 0
    while ref_weekday_name(day) != week_start:
        day -= ONE_DAY
        steps += 1
    return day, steps


def ref_cycle_season(day: date, anchor: date, length: int) -> tuple[str, date, date] | None:
    """Walk season by season from the anchor."""
    if day < anchor:
        return None
    number, start = 1, anchor
    while day >= start + timedelta(days=length):
        start += timedelta(days=length)
        number += 1
    return f"S{number}", start, start + timedelta(days=length - 1)


def days_between(first: date, last: date) -> Iterator[date]:
    while first <= last:
        yield first
        first += ONE_DAY


# --- the references themselves, against facts known by hand --------------------------------


def test_references_agree_with_known_facts() -> None:
    ny = ZoneInfo("America/New_York")
    assert ref_day_start(d("2026-03-08"), ny) == utc("2026-03-08T05:00")
    assert ref_day_hours(d("2026-03-08"), ny) == 23
    assert ref_weekday_name(d("2026-01-05")) == "monday"
    assert ref_weekday_name(d("2028-02-29")) == "tuesday"
    assert ref_week_first_day(d("2027-01-01"), "sunday") == (d("2026-12-27"), 5)
    assert ref_cycle_season(d("2026-09-14"), d("2026-01-05"), 28) == (
        "S10",
        d("2026-09-14"),
        d("2026-10-11"),
    )


# --- days ---------------------------------------------------------------------------------

# zone, local day, its first instant in UTC, its length in hours, local wall time it starts at.
DAY_TABLE = [
    # America/New_York: DST at 02:00 local.
    ("America/New_York", "2026-03-08", "2026-03-08T05:00", 23, "00:00"),
    ("America/New_York", "2026-03-09", "2026-03-09T04:00", 24, "00:00"),
    ("America/New_York", "2026-11-01", "2026-11-01T04:00", 25, "00:00"),
    ("America/New_York", "2026-11-02", "2026-11-02T05:00", 24, "00:00"),
    ("America/New_York", "2026-07-04", "2026-07-04T04:00", 24, "00:00"),
    ("America/New_York", "2026-12-31", "2026-12-31T05:00", 24, "00:00"),
    ("America/New_York", "2027-01-01", "2027-01-01T05:00", 24, "00:00"),
    ("America/New_York", "2028-02-29", "2028-02-29T05:00", 24, "00:00"),
    ("America/New_York", "2028-03-12", "2028-03-12T05:00", 23, "00:00"),
    ("America/New_York", "2028-11-05", "2028-11-05T04:00", 25, "00:00"),
    # Europe/Istanbul: +03 all year since September 2016; DST at 03:00 before.
    ("Europe/Istanbul", "2015-03-29", "2015-03-28T22:00", 23, "00:00"),
    ("Europe/Istanbul", "2015-11-08", "2015-11-07T21:00", 25, "00:00"),
    ("Europe/Istanbul", "2016-03-27", "2016-03-26T22:00", 23, "00:00"),
    ("Europe/Istanbul", "2016-10-30", "2016-10-29T21:00", 24, "00:00"),
    ("Europe/Istanbul", "2026-03-29", "2026-03-28T21:00", 24, "00:00"),
    ("Europe/Istanbul", "2026-12-31", "2026-12-30T21:00", 24, "00:00"),
    ("Europe/Istanbul", "2027-01-01", "2026-12-31T21:00", 24, "00:00"),
    ("Europe/Istanbul", "2028-02-29", "2028-02-28T21:00", 24, "00:00"),
    # Asia/Kolkata: +05:30, no DST.
    ("Asia/Kolkata", "2026-03-08", "2026-03-07T18:30", 24, "00:00"),
    ("Asia/Kolkata", "2026-11-01", "2026-10-31T18:30", 24, "00:00"),
    ("Asia/Kolkata", "2026-12-31", "2026-12-30T18:30", 24, "00:00"),
    ("Asia/Kolkata", "2027-01-01", "2026-12-31T18:30", 24, "00:00"),
    ("Asia/Kolkata", "2028-02-29", "2028-02-28T18:30", 24, "00:00"),
    # Pacific/Chatham: +12:45 / +13:45, DST at 02:45 standard time.
    ("Pacific/Chatham", "2026-04-05", "2026-04-04T10:15", 25, "00:00"),
    ("Pacific/Chatham", "2026-04-06", "2026-04-05T11:15", 24, "00:00"),
    ("Pacific/Chatham", "2026-09-27", "2026-09-26T11:15", 23, "00:00"),
    ("Pacific/Chatham", "2026-09-28", "2026-09-27T10:15", 24, "00:00"),
    ("Pacific/Chatham", "2026-12-31", "2026-12-30T10:15", 24, "00:00"),
    ("Pacific/Chatham", "2027-01-01", "2026-12-31T10:15", 24, "00:00"),
    ("Pacific/Chatham", "2028-02-29", "2028-02-28T10:15", 24, "00:00"),
    # UTC.
    ("UTC", "2026-03-08", "2026-03-08T00:00", 24, "00:00"),
    ("UTC", "2026-12-31", "2026-12-31T00:00", 24, "00:00"),
    ("UTC", "2027-01-01", "2027-01-01T00:00", 24, "00:00"),
    ("UTC", "2028-02-29", "2028-02-29T00:00", 24, "00:00"),
    # America/Santiago: DST ends at 24:00 (clocks back to 23:00 the same Saturday) and starts
    # at 24:00 (clocks on to 01:00 Sunday): the Sunday has no midnight and starts at 01:00.
    ("America/Santiago", "2026-04-04", "2026-04-04T03:00", 25, "00:00"),
    ("America/Santiago", "2026-04-05", "2026-04-05T04:00", 24, "00:00"),
    ("America/Santiago", "2026-09-05", "2026-09-05T04:00", 24, "00:00"),
    ("America/Santiago", "2026-09-06", "2026-09-06T04:00", 23, "01:00"),
    ("America/Santiago", "2026-12-31", "2026-12-31T03:00", 24, "00:00"),
    ("America/Santiago", "2027-01-01", "2027-01-01T03:00", 24, "00:00"),
    ("America/Santiago", "2028-02-29", "2028-02-29T03:00", 24, "00:00"),
    # America/Havana: DST starts at 00:00 (to 01:00) and ends at 01:00 (back to 00:00): the
    # spring Sunday starts at 01:00; the autumn Sunday has midnight twice and starts at the first.
    ("America/Havana", "2026-03-07", "2026-03-07T05:00", 24, "00:00"),
    ("America/Havana", "2026-03-08", "2026-03-08T05:00", 23, "01:00"),
    ("America/Havana", "2026-10-31", "2026-10-31T04:00", 24, "00:00"),
    ("America/Havana", "2026-11-01", "2026-11-01T04:00", 25, "00:00"),
    ("America/Havana", "2026-12-31", "2026-12-31T05:00", 24, "00:00"),
    ("America/Havana", "2028-02-29", "2028-02-29T05:00", 24, "00:00"),
]
DAY_IDS = [f"{z}-{day}-{h}h" for z, day, _, h, _ in DAY_TABLE]


@pytest.mark.parametrize(("zone", "day", "start", "hours", "wall"), DAY_TABLE, ids=DAY_IDS)
def test_day_start_and_end(zone: str, day: str, start: str, hours: int, wall: str) -> None:
    z, local = ZoneInfo(zone), d(day)
    got_start, got_end = calendar.day_start(local, z), calendar.day_end(local, z)

    assert got_start == utc(start) == ref_day_start(local, z)
    assert got_end == ref_day_end(local, z)
    assert got_start.utcoffset() == got_end.utcoffset() == timedelta(0)
    # The day's length, counted minute by minute, is what day_end - day_start says.
    assert ref_day_hours(local, z) == hours == (got_end - got_start) / timedelta(hours=1)
    # It starts where the local date turns to ``day`` (at 01:00 where midnight is skipped).
    assert got_start.astimezone(z).date() == local
    assert got_start.astimezone(z).strftime("%H:%M") == wall
    assert (got_start - TINY).astimezone(z).date() == local - ONE_DAY
    assert (got_end - TINY).astimezone(z).date() == local
    assert got_end.astimezone(z).date() == local + ONE_DAY


@pytest.mark.parametrize(("zone", "day", "start", "hours", "wall"), DAY_TABLE, ids=DAY_IDS)
def test_consecutive_days_tile(zone: str, day: str, start: str, hours: int, wall: str) -> None:
    z, local = ZoneInfo(zone), d(day)
    assert calendar.day_end(local - ONE_DAY, z) == calendar.day_start(local, z)
    assert calendar.day_end(local, z) == calendar.day_start(local + ONE_DAY, z)


# zone, an instant (UTC), its local date: instants either side of a local midnight.
LOCAL_DAY_TABLE = [
    ("UTC", "2026-12-31T23:59:59.999999", "2026-12-31"),
    ("UTC", "2027-01-01T00:00", "2027-01-01"),
    ("America/New_York", "2027-01-01T04:59:59.999999", "2026-12-31"),
    ("America/New_York", "2027-01-01T05:00", "2027-01-01"),
    ("America/New_York", "2028-03-01T04:59:59", "2028-02-29"),
    ("America/New_York", "2028-03-01T05:00", "2028-03-01"),
    ("America/New_York", "2026-03-09T03:59:59", "2026-03-08"),  # 23:59:59 EDT
    ("America/New_York", "2026-03-09T04:00", "2026-03-09"),
    ("America/New_York", "2026-11-01T06:30", "2026-11-01"),  # 01:30 EST, the second 01:30
    ("America/New_York", "2026-11-02T04:59:59", "2026-11-01"),
    ("America/New_York", "2026-11-02T05:00", "2026-11-02"),
    ("Europe/Istanbul", "2026-12-31T20:59:59.999999", "2026-12-31"),
    ("Europe/Istanbul", "2026-12-31T21:00", "2027-01-01"),
    ("Asia/Kolkata", "2026-12-31T18:29:59.999999", "2026-12-31"),
    ("Asia/Kolkata", "2026-12-31T18:30", "2027-01-01"),
    ("Asia/Kolkata", "2028-02-28T18:30", "2028-02-29"),
    ("Pacific/Chatham", "2026-12-31T10:14:59.999999", "2026-12-31"),
    ("Pacific/Chatham", "2026-12-31T10:15", "2027-01-01"),
    ("Pacific/Chatham", "2028-02-29T10:14:59", "2028-02-29"),
    ("Pacific/Chatham", "2028-02-29T10:15", "2028-03-01"),
    ("America/Santiago", "2026-04-05T03:30", "2026-04-04"),  # 23:30 -04, the second 23:30
    ("America/Santiago", "2026-04-05T03:59:59", "2026-04-04"),
    ("America/Santiago", "2026-04-05T04:00", "2026-04-05"),
    ("America/Santiago", "2026-09-06T03:59:59", "2026-09-05"),
    ("America/Santiago", "2026-09-06T04:00", "2026-09-06"),  # 01:00 -03
    ("America/Havana", "2026-03-08T04:59:59", "2026-03-07"),
    ("America/Havana", "2026-03-08T05:00", "2026-03-08"),  # 01:00 CDT
    ("America/Havana", "2026-11-01T03:59:59", "2026-10-31"),
    ("America/Havana", "2026-11-01T05:30", "2026-11-01"),  # 00:30 CST, the second 00:30
]


@pytest.mark.parametrize(
    ("zone", "instant", "expected"),
    LOCAL_DAY_TABLE,
    ids=[f"{z}-{i}" for z, i, _ in LOCAL_DAY_TABLE],
)
def test_local_day(zone: str, instant: str, expected: str) -> None:
    t = utc(instant)
    assert calendar.local_day(t, ZoneInfo(zone)) == d(expected)
    # The same instant given in another offset is the same local day.
    assert calendar.local_day(t.astimezone(timezone(timedelta(hours=-7))), ZoneInfo(zone)) == d(
        expected
    )


MIDNIGHT_DAYS = ["2026-01-01", "2027-01-01", "2028-02-29", "2028-03-01", "2026-03-08", "2026-11-01"]


@pytest.mark.parametrize("day", MIDNIGHT_DAYS)
@pytest.mark.parametrize("zone", ZONES)
def test_local_day_either_side_of_day_start(zone: str, day: str) -> None:
    z, local = ZoneInfo(zone), d(day)
    first = ref_day_start(local, z)
    assert calendar.local_day(first, z) == local
    assert calendar.local_day(first - TINY, z) == local - ONE_DAY
    assert calendar.local_day(first - timedelta(seconds=1), z) == local - ONE_DAY


# --- weeks --------------------------------------------------------------------------------

WEEK_DAYS = [
    *days_between(d("2026-12-26"), d("2027-01-05")),  # 2026 -> 2027
    *days_between(d("2027-12-29"), d("2028-01-03")),  # 2027 -> 2028
    *days_between(d("2028-02-26"), d("2028-03-02")),  # leap day
    d("2026-03-08"),
    d("2026-11-01"),
]


@pytest.mark.parametrize("day", WEEK_DAYS, ids=str)
@pytest.mark.parametrize("week_start", WEEKDAY_NAMES)
def test_week_first_day_and_index(week_start: str, day: date) -> None:
    first, steps = ref_week_first_day(day, week_start)
    index = WEEKDAY_NAMES.index(week_start)
    assert calendar.week_first_day(day, index) == first
    assert calendar.weekday_index(day, index) == steps
    assert calendar.weekday_index(first, index) == 0


# Facts by hand: 2027-01-01 is a Friday, 2028-02-29 a Tuesday.
WEEK_TABLE = [
    ("2027-01-01", "monday", "2026-12-28", 4),
    ("2027-01-01", "friday", "2027-01-01", 0),
    ("2027-01-01", "saturday", "2026-12-26", 6),
    ("2027-01-01", "sunday", "2026-12-27", 5),
    ("2028-02-29", "monday", "2028-02-28", 1),
    ("2028-02-29", "wednesday", "2028-02-23", 6),
    ("2028-03-01", "thursday", "2028-02-24", 6),
    ("2028-01-01", "sunday", "2027-12-26", 6),
]


@pytest.mark.parametrize(
    ("day", "week_start", "first", "index"),
    WEEK_TABLE,
    ids=[f"{day}-{ws}" for day, ws, _, _ in WEEK_TABLE],
)
def test_week_table(day: str, week_start: str, first: str, index: int) -> None:
    ws = WEEKDAY_NAMES.index(week_start)
    assert calendar.week_first_day(d(day), ws) == d(first)
    assert calendar.weekday_index(d(day), ws) == index


# --- seasons ------------------------------------------------------------------------------

# length_days, anchor, day, expected season id (None: before the anchor).
CYCLE_TABLE = [
    (28, "2026-01-05", "2026-01-04", None),
    (28, "2026-01-05", "2020-06-01", None),
    (28, "2026-01-05", "2026-01-05", "S1"),  # first day of S1
    (28, "2026-01-05", "2026-02-01", "S1"),  # last day of S1
    (28, "2026-01-05", "2026-02-02", "S2"),  # first day of S2
    (28, "2026-01-05", "2026-03-01", "S2"),  # last day of S2
    (28, "2026-01-05", "2026-03-02", "S3"),
    (28, "2026-01-05", "2026-09-14", "S10"),  # first day of S10
    (28, "2026-01-05", "2026-09-20", "S10"),
    (28, "2026-01-05", "2026-10-11", "S10"),  # last day of S10
    (7, "2025-12-29", "2026-01-04", "S1"),
    (7, "2025-12-29", "2026-01-05", "S2"),
    (7, "2025-12-29", "2026-03-08", "S10"),
    (1, "2028-02-28", "2028-02-29", "S2"),
    (1, "2028-02-28", "2028-03-08", "S10"),
    (365, "2027-03-01", "2028-02-28", "S1"),  # 365 days from 2027-03-01 end before the leap day
    (365, "2027-03-01", "2028-02-29", "S2"),
    (365, "2027-03-01", "2028-03-01", "S2"),
]


@pytest.mark.parametrize(
    ("length", "anchor", "day", "expected"),
    CYCLE_TABLE,
    ids=[f"{n}d@{a}-{day}" for n, a, day, _ in CYCLE_TABLE],
)
def test_cycle_season_of_day(
    make_settings: Callable[..., Settings], length: int, anchor: str, day: str, expected: str | None
) -> None:
    s = make_settings(seasons={"length_days": length, "anchor": anchor})
    got = calendar.season_of_day(d(day), s)
    ref = ref_cycle_season(d(day), d(anchor), length)
    if expected is None:
        assert got is None and ref is None
        assert win.period_of_day("season", d(day), s) is None
        return
    assert ref is not None and ref[0] == expected
    assert got is not None
    assert (got.id, got.start, got.end) == ref
    assert (got.end - got.start).days + 1 == length
    assert calendar.season_by_id(expected, s) == got


@pytest.mark.parametrize(
    ("season_id", "start", "end"),
    [
        ("S1", "2026-01-05", "2026-02-01"),
        ("S3", "2026-03-02", "2026-03-29"),
        ("S10", "2026-09-14", "2026-10-11"),
        ("S13", "2026-12-07", "2027-01-03"),
    ],
    ids=["S1", "S3", "S10", "S13-across-year-end"],
)
def test_cycle_season_by_id(
    make_settings: Callable[..., Settings], season_id: str, start: str, end: str
) -> None:
    span = calendar.season_by_id(season_id, make_settings(seasons=CYCLE))
    assert (span.id, span.start, span.end) == (season_id, d(start), d(end))
    assert ref_cycle_season(d(start), d("2026-01-05"), 28) == (season_id, d(start), d(end))
    assert ref_cycle_season(d(end), d("2026-01-05"), 28) == (season_id, d(start), d(end))


BAD_CYCLE_IDS = ["S0", "X1", "s1", "S", "S01", "S-1", "S1.0", "", " S1", "S1 ", "S1\n", "1", "S1S"]


@pytest.mark.parametrize("bad", BAD_CYCLE_IDS, ids=repr)
def test_cycle_bad_season_ids(make_settings: Callable[..., Settings], bad: str) -> None:
    s = make_settings(seasons=CYCLE)
    with pytest.raises(BadPeriod) as err:
        calendar.season_by_id(bad, s)
    assert repr(bad) in str(err.value)
    with pytest.raises(BadPeriod):
        win.resolve_period("season", bad, utc("2026-03-01T12:00"), s)


def test_cycle_season_id_past_the_calendar_is_bad_period(
    make_settings: Callable[..., Settings],
) -> None:
    # S9999999 of 28 days would start in the year ~768,000: no such date exists.
    s = make_settings(seasons=CYCLE)
    with pytest.raises(BadPeriod, match="S9999999"):
        calendar.season_by_id("S9999999", s)
    with pytest.raises(BadPeriod, match="S9999999"):
        win.resolve_period("season", "S9999999", utc("2026-03-01T12:00"), s)


# day, expected season id (None: in no season)
LISTED_TABLE = [
    ("2025-12-31", None),  # before every season
    ("2026-01-01", "winter"),
    ("2026-01-31", "winter"),
    ("2026-02-01", None),  # gap
    ("2026-02-09", None),  # gap
    ("2026-02-10", "late-winter"),
    ("2026-03-10", "late-winter"),
    ("2026-03-11", None),
    ("2026-03-31", None),
    ("2026-04-01", "spring"),
    ("2026-04-30", "spring"),
    ("2026-05-01", None),  # after every season
]


@pytest.mark.parametrize(("day", "expected"), LISTED_TABLE, ids=[r[0] for r in LISTED_TABLE])
def test_listed_season_of_day(
    make_settings: Callable[..., Settings], day: str, expected: str | None
) -> None:
    s = make_settings(seasons=LISTED)
    got = calendar.season_of_day(d(day), s)
    assert (got.id if got else None) == expected
    if got is not None:
        assert got.start <= d(day) <= got.end


def test_listed_season_by_id(make_settings: Callable[..., Settings]) -> None:
    s = make_settings(seasons=LISTED)
    span = calendar.season_by_id("late-winter", s)
    assert (span.start, span.end) == (d("2026-02-10"), d("2026-03-10"))
    for bad in ["S1", "Winter", "summer", ""]:
        with pytest.raises(BadPeriod) as err:
            calendar.season_by_id(bad, s)
        assert repr(bad) in str(err.value)


# now (UTC), "current" season id (None: BadPeriod), "previous" season id (None: BadPeriod).
LISTED_RESOLVE = [
    ("2025-12-31T12:00", None, None),
    ("2026-01-15T12:00", "winter", None),
    ("2026-02-05T12:00", None, "winter"),  # gap: no current; previous is the last ended one
    ("2026-02-10T12:00", "late-winter", "winter"),
    ("2026-03-20T12:00", None, "late-winter"),
    ("2026-04-30T12:00", "spring", "late-winter"),
    ("2026-05-01T12:00", None, "spring"),
    ("2027-06-01T12:00", None, "spring"),
]


@pytest.mark.parametrize(
    ("now", "current", "previous"), LISTED_RESOLVE, ids=[r[0] for r in LISTED_RESOLVE]
)
def test_listed_resolve_current_and_previous(
    make_settings: Callable[..., Settings], now: str, current: str | None, previous: str | None
) -> None:
    s = make_settings(seasons=LISTED)
    for word, expected in (("current", current), ("previous", previous)):
        if expected is None:
            with pytest.raises(BadPeriod):
                win.resolve_period("season", word, utc(now), s)
        else:
            got = win.resolve_period("season", word, utc(now), s)
            span = calendar.season_by_id(expected, s)
            assert got == win.Period("season", expected, span.start, span.end)


# now (UTC), "current" cycle season (None: BadPeriod), "previous" (None: BadPeriod)
CYCLE_RESOLVE = [
    ("2026-01-04T12:00", None, None),  # before the anchor
    ("2026-01-05T00:00", "S1", None),
    ("2026-02-01T23:59", "S1", None),
    ("2026-02-02T00:00", "S2", "S1"),
    ("2026-09-20T12:00", "S10", "S9"),
]


@pytest.mark.parametrize(
    ("now", "current", "previous"), CYCLE_RESOLVE, ids=[r[0] for r in CYCLE_RESOLVE]
)
def test_cycle_resolve_current_and_previous(
    make_settings: Callable[..., Settings], now: str, current: str | None, previous: str | None
) -> None:
    s = make_settings(seasons=CYCLE)
    anchor = d(CYCLE["anchor"])
    for word, expected in (("current", current), ("previous", previous)):
        if expected is None:
            with pytest.raises(BadPeriod):
                win.resolve_period("season", word, utc(now), s)
            continue
        got = win.resolve_period("season", word, utc(now), s)
        ref = ref_cycle_season(anchor + timedelta(days=28 * (int(expected[1:]) - 1)), anchor, 28)
        assert ref is not None
        assert (got.window, got.id, got.first, got.last) == ("season", *ref)
        assert got.id == expected


def test_season_uses_the_local_day(make_settings: Callable[..., Settings]) -> None:
    # 2026-02-02T03:00Z is still 2026-02-01 (the last day of S1) in New York.
    s = make_settings(seasons=CYCLE, timezone="America/New_York")
    assert win.resolve_period("season", "current", utc("2026-02-02T03:00"), s).id == "S1"
    assert win.resolve_period("season", "current", utc("2026-02-02T05:00"), s).id == "S2"


# --- resolve_period: day and week ------------------------------------------------------------

# Clocks: a zone, a week_start and "now" (UTC).
CLOCKS = {
    # 2026-03-08T04:30Z is still Saturday 2026-03-07, 23:30 EST, in New York.
    "ny-sat-2330": ("America/New_York", "monday", "2026-03-08T04:30"),
    "ny-sun-0000": ("America/New_York", "sunday", "2026-03-08T05:00"),
    "ny-sat-2359": ("America/New_York", "sunday", "2026-03-08T04:59"),
    # 2026-12-31T18:30Z is already Friday 2027-01-01 in Kolkata.
    "kolkata-mon": ("Asia/Kolkata", "monday", "2026-12-31T18:30"),
    "kolkata-fri": ("Asia/Kolkata", "friday", "2026-12-31T18:30"),
    # 2028-02-28T10:15Z is already the leap day in Chatham (+13:45).
    "chatham-sat": ("Pacific/Chatham", "saturday", "2028-02-28T10:15"),
    "utc-mon": ("UTC", "monday", "2026-06-01T00:00"),
    "utc-wed": ("UTC", "wednesday", "2026-06-01T00:00"),
}
# clock, window, period, the period's first and last day (its id is its first day)
RESOLVE_TABLE = [
    ("ny-sat-2330", "day", "current", "2026-03-07", "2026-03-07"),
    ("ny-sat-2330", "day", "previous", "2026-03-06", "2026-03-06"),
    ("ny-sat-2330", "week", "current", "2026-03-02", "2026-03-08"),
    ("ny-sat-2330", "week", "previous", "2026-02-23", "2026-03-01"),
    ("ny-sun-0000", "week", "current", "2026-03-08", "2026-03-14"),
    ("ny-sun-0000", "week", "previous", "2026-03-01", "2026-03-07"),
    ("ny-sat-2359", "week", "current", "2026-03-01", "2026-03-07"),
    ("kolkata-mon", "day", "current", "2027-01-01", "2027-01-01"),
    ("kolkata-mon", "day", "previous", "2026-12-31", "2026-12-31"),
    ("kolkata-mon", "week", "current", "2026-12-28", "2027-01-03"),
    ("kolkata-fri", "week", "current", "2027-01-01", "2027-01-07"),
    ("kolkata-fri", "week", "previous", "2026-12-25", "2026-12-31"),
    ("chatham-sat", "day", "current", "2028-02-29", "2028-02-29"),
    ("chatham-sat", "week", "current", "2028-02-26", "2028-03-03"),
    # Explicit ids: any day of a week names that week.
    ("utc-mon", "day", "2028-02-29", "2028-02-29", "2028-02-29"),
    ("utc-mon", "week", "2027-01-01", "2026-12-28", "2027-01-03"),
    ("utc-mon", "week", "2026-12-28", "2026-12-28", "2027-01-03"),
    ("utc-mon", "week", "2027-01-03", "2026-12-28", "2027-01-03"),
    ("utc-wed", "week", "2028-02-29", "2028-02-23", "2028-02-29"),
    ("utc-wed", "week", "2028-03-01", "2028-03-01", "2028-03-07"),
]


@pytest.mark.parametrize(
    ("clock", "window", "period", "first", "last"),
    RESOLVE_TABLE,
    ids=["-".join(r[:3]) for r in RESOLVE_TABLE],
)
def test_resolve_period_day_week(
    make_settings: Callable[..., Settings],
    clock: str,
    window: win.Window,
    period: str,
    first: str,
    last: str,
) -> None:
    zone, week_start, now = CLOCKS[clock]
    s = make_settings(timezone=zone, week_start=week_start)
    got = win.resolve_period(window, period, utc(now), s)
    assert got == win.Period(window, first, d(first), d(last))
    assert got.days() == list(days_between(d(first), d(last)))
    if window == "week":
        assert ref_weekday_name(got.first) == week_start
    # The period's id resolves back to the same period.
    assert win.resolve_period(window, got.id, utc(now), s) == got


@pytest.mark.parametrize("week_start", WEEKDAY_NAMES)
@pytest.mark.parametrize("day", list(days_between(d("2026-12-24"), d("2027-01-08"))), ids=str)
def test_resolve_week_any_day_names_its_week(
    make_settings: Callable[..., Settings], week_start: str, day: date
) -> None:
    s = make_settings(week_start=week_start)
    first, _ = ref_week_first_day(day, week_start)
    got = win.resolve_period("week", day.isoformat(), utc("2026-06-01T00:00"), s)
    assert got == win.Period("week", first.isoformat(), first, first + timedelta(days=6))


BAD_PERIODS = [
    ("day", "2026-13-01"),
    ("day", "2026-02-30"),
    ("day", "2027-02-29"),  # not a leap year
    ("day", "yesterday"),
    ("day", "Current"),
    ("day", ""),
    ("day", "2026/03/08"),
    ("day", "S1"),
    ("week", "next"),
    ("week", "2026-W10"),
    ("day", "2026-W10-1"),
    ("day", "20260308"),
    ("week", "2026-3-8"),
    ("week", "2026-03-08T00:00"),
    ("season", "2026-03-08"),
    ("season", "latest"),
]


@pytest.mark.parametrize(("window", "bad"), BAD_PERIODS, ids=[f"{w}-{b!r}" for w, b in BAD_PERIODS])
def test_resolve_bad_period(
    make_settings: Callable[..., Settings], window: win.Window, bad: str
) -> None:
    s = make_settings(seasons=CYCLE)
    with pytest.raises(BadPeriod) as err:
        win.resolve_period(window, bad, utc("2026-03-01T12:00"), s)
    assert repr(bad) in str(err.value)
    assert err.value.code == "bad_period"


@pytest.mark.parametrize("bad", ["year", "Day", "", "seasons", "months"])
def test_resolve_bad_window(make_settings: Callable[..., Settings], bad: str) -> None:
    with pytest.raises(BadWindow) as err:
        win.resolve_period(bad, "current", utc("2026-03-01T12:00"), make_settings())
    assert repr(bad) in str(err.value)
    assert "day, week, month, season" in str(err.value)


@pytest.mark.parametrize(
    ("window", "period", "week_start"),
    [
        ("week", "9999-12-31", "monday"),
        ("day", "9999-12-31", "monday"),
        ("week", "0001-01-01", "sunday"),
        ("day", "0001-01-01", "monday"),
    ],
    ids=["week-9999", "day-9999", "week-0001", "day-0001"],
)
def test_resolve_period_at_the_calendar_edges_is_bad_period(
    make_settings: Callable[..., Settings], window: win.Window, period: str, week_start: str
) -> None:
    # Periods whose bounds cannot be expressed as instants are refused up front, so nothing
    # downstream (period_end, expire_at) meets an OverflowError.
    s = make_settings(timezone="Pacific/Chatham", week_start=week_start)
    with pytest.raises(BadPeriod, match=period):
        win.resolve_period(window, period, utc("2026-03-01T12:00"), s)


# --- recent_periods -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "window", "now", "last"),
    [
        ("America/New_York", "day", "2026-03-10T12:00", 14),
        ("America/New_York", "day", "2026-11-02T04:59", 3),
        ("Asia/Kolkata", "day", "2027-01-02T00:00", 400),
        ("UTC", "day", "2028-03-01T00:00", 1),
        ("America/New_York", "week", "2026-03-10T12:00", 8),
        ("Pacific/Chatham", "week", "2027-01-01T00:00", 60),
    ],
    ids=["ny-day-14", "ny-day-3", "kolkata-day-400", "utc-day-1", "ny-week-8", "chatham-week-60"],
)
def test_recent_periods_day_week(
    make_settings: Callable[..., Settings], zone: str, window: win.Window, now: str, last: int
) -> None:
    s = make_settings(timezone=zone, week_start="thursday")
    got = win.recent_periods(window, last, utc(now), s)
    assert len(got) == last
    assert got[-1] == win.resolve_period(window, "current", utc(now), s)
    assert got[-1].first <= utc(now).astimezone(ZoneInfo(zone)).date() <= got[-1].last
    size = 1 if window == "day" else 7
    for earlier, later in zip(got, got[1:], strict=False):
        assert later.first == earlier.last + ONE_DAY  # oldest first, no gaps, no overlaps
    for p in got:
        assert (p.last - p.first).days + 1 == size
        assert p.id == p.first.isoformat()
        if window == "week":
            assert ref_weekday_name(p.first) == "thursday"
    if last > 1:
        assert got[-2] == win.resolve_period(window, "previous", utc(now), s)


@pytest.mark.parametrize(
    ("seasons", "now", "last", "expected"),
    [
        (CYCLE, "2026-03-15T12:00", 5, ["S1", "S2", "S3"]),
        (CYCLE, "2026-03-15T12:00", 2, ["S2", "S3"]),
        (CYCLE, "2026-09-20T12:00", 3, ["S8", "S9", "S10"]),
        (CYCLE, "2026-01-05T00:00", 4, ["S1"]),
        (CYCLE, "2026-01-04T12:00", 4, []),
        (CYCLE, "2026-03-15T12:00", 0, []),
        (LISTED, "2026-03-20T12:00", 5, ["winter", "late-winter"]),  # in a gap
        (LISTED, "2026-04-15T12:00", 2, ["late-winter", "spring"]),
        (LISTED, "2026-04-15T12:00", 1, ["spring"]),
        (LISTED, "2026-02-05T12:00", 9, ["winter"]),
        (LISTED, "2025-12-01T12:00", 9, []),
        (LISTED, "2030-01-01T12:00", 9, ["winter", "late-winter", "spring"]),
    ],
    ids=[
        "cycle-5-in-S3",
        "cycle-2-in-S3",
        "cycle-3-in-S10",
        "cycle-first-day",
        "cycle-before",
        "cycle-0",
        "listed-gap",
        "listed-2",
        "listed-1",
        "listed-gap-first",
        "listed-before",
        "listed-after",
    ],
)
def test_recent_periods_season(
    make_settings: Callable[..., Settings],
    seasons: dict[str, Any],
    now: str,
    last: int,
    expected: list[str],
) -> None:
    s = make_settings(seasons=seasons)
    got = win.recent_periods("season", last, utc(now), s)
    assert [p.id for p in got] == expected
    for p in got:
        span = calendar.season_by_id(p.id, s)
        assert (p.first, p.last) == (span.start, span.end)
    for earlier, later in zip(got, got[1:], strict=False):
        assert earlier.last < later.first
        if seasons is CYCLE:
            assert later.first == earlier.last + ONE_DAY


# --- parse_ts -----------------------------------------------------------------------------

NOW = utc("2026-03-08T07:00")
E = timegm((2026, 3, 8, 7, 0, 0))  # 2026-03-08T07:00Z in epoch seconds

PARSE_OK = [
    ("2026-03-08T07:00:00Z", "2026-03-08T07:00"),
    ("2026-03-08T07:00:00z", "2026-03-08T07:00"),
    ("2026-03-08t07:00:00z", "2026-03-08T07:00"),
    ("2026-03-08 07:00:00+00:00", "2026-03-08T07:00"),
    ("2026-03-08T12:30:00+05:30", "2026-03-08T07:00"),
    ("2026-03-08T19:45:00+12:45", "2026-03-08T07:00"),
    ("2026-03-08T02:00:00-05:00", "2026-03-08T07:00"),
    ("2026-03-07T19:00:00-12:00", "2026-03-08T07:00"),
    ("2026-03-08T07:00:00.250Z", "2026-03-08T07:00:00.250"),
    ("2028-02-29T23:59:59+14:00", "2028-02-29T09:59:59"),
    ("  2026-03-08T07:00:00Z  ", "2026-03-08T07:00"),
    (E, "2026-03-08T07:00"),
    (float(E) + 0.5, "2026-03-08T07:00:00.500"),
    (str(E), "2026-03-08T07:00"),
    (f" {E} ", "2026-03-08T07:00"),
    (f"{E}.25", "2026-03-08T07:00:00.250"),
    (0, "1970-01-01T00:00"),
    ("0", "1970-01-01T00:00"),
    ("-1", "1969-12-31T23:59:59"),
    (datetime(2026, 3, 8, 2, 0, tzinfo=ZoneInfo("America/New_York")), "2026-03-08T07:00"),
    (None, "2026-03-08T07:00"),
]


@pytest.mark.parametrize(("value", "expected"), PARSE_OK, ids=[repr(v) for v, _ in PARSE_OK])
def test_parse_ts_accepts(value: Any, expected: str) -> None:
    got = calendar.parse_ts(value, NOW)
    assert got == utc(expected)
    assert got.utcoffset() == timedelta(0)


PARSE_BAD = [
    "2026-03-08T07:00:00",  # naive
    "2026-03-08",  # a date, no time and no offset
    "2026-03-08T07:00",
    "garbage",
    "",
    "   ",
    "2026-03-08T25:00:00Z",
    "2026-02-30T07:00:00Z",
    "1e9",
    "0x10",
    "--1",
    "12:00Z",
    "9" * 400,  # epoch seconds far past any date
    "99999999999999",
    "0001-01-01T00:00:00+05:00",  # before 0001-01-01 in UTC
    "9999-12-31T23:00:00-05:00",  # after 9999-12-31 in UTC
    "0001-01-01T12:00:00Z",  # a date that exists, but not in every zone
    "-62135596800",  # 0001-01-01T00:00Z
    datetime(2026, 3, 8, 7, 0),  # naive datetime
    True,
    False,
    float("nan"),
    float("inf"),
    float("-inf"),
    10**20,
    1e18,
    -(10**15),
]


@pytest.mark.parametrize("value", PARSE_BAD, ids=[repr(v)[:40] for v in PARSE_BAD])
def test_parse_ts_rejects(value: Any) -> None:
    with pytest.raises(ValueError):
        calendar.parse_ts(value, NOW)


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(
    "value", ["0002-01-01T00:00:00Z", "-62104060800"], ids=["rfc3339", "epoch"]
)
def test_the_earliest_event_times_have_a_day_everywhere(
    make_settings: Callable[..., Settings], zone: str, value: str
) -> None:
    ts = calendar.parse_ts(value, NOW)
    assert ts == utc("0002-01-01T00:00")
    assert calendar.lateness(ts, NOW, make_settings(timezone=zone)) == "late_event"


# --- lateness -----------------------------------------------------------------------------

# zone, the event's local day, the deadline (UTC) = that day's end + PT1H, known by hand.
DEADLINES = [
    ("America/New_York", "2026-03-07", "2026-03-08T06:00"),  # ends at 00:00 EST on the 8th
    ("America/New_York", "2026-03-08", "2026-03-09T05:00"),  # 23 h day, ends at 00:00 EDT
    ("America/New_York", "2026-03-09", "2026-03-10T05:00"),
    ("America/New_York", "2026-10-31", "2026-11-01T05:00"),  # ends at 00:00 EDT on the 1st
    ("America/New_York", "2026-11-01", "2026-11-02T06:00"),  # 25 h day, ends at 00:00 EST
    ("America/New_York", "2026-12-31", "2027-01-01T06:00"),
    ("UTC", "2028-02-29", "2028-03-01T01:00"),
    ("Pacific/Chatham", "2026-04-05", "2026-04-05T12:15"),  # 25 h day
    ("America/Santiago", "2026-04-04", "2026-04-05T05:00"),  # 25 h day, fold at 24:00
    ("America/Havana", "2026-03-08", "2026-03-09T05:00"),  # starts at 01:00
]


def _events_of_day(day: date, zone: ZoneInfo) -> list[datetime]:
    start, end = ref_day_start(day, zone), ref_day_end(day, zone)
    return [start, start + (end - start) / 2, end - timedelta(seconds=1), end - TINY]


@pytest.mark.parametrize(
    ("zone", "day", "deadline"), DEADLINES, ids=[f"{z}-{day}" for z, day, _ in DEADLINES]
)
def test_lateness_at_the_deadline(
    make_settings: Callable[..., Settings], zone: str, day: str, deadline: str
) -> None:
    s = make_settings(timezone=zone, late_grace="PT1H")
    z = ZoneInfo(zone)
    due = utc(deadline)
    assert due == ref_day_end(d(day), z) + timedelta(hours=1)
    for ts in _events_of_day(d(day), z):
        assert calendar.local_day(ts, z) == d(day)
        assert calendar.lateness(ts, due - TINY, s) is None
        assert calendar.lateness(ts, due - timedelta(minutes=30), s) is None
        assert calendar.lateness(ts, due, s) == "late_event"
        assert calendar.lateness(ts, due + timedelta(days=3), s) == "late_event"
    # The first instant of the next day has a deadline a whole day later.
    nxt = ref_day_start(d(day) + ONE_DAY, z)
    assert calendar.lateness(nxt, due, s) is None


def test_lateness_uses_the_local_day_not_the_utc_day(
    make_settings: Callable[..., Settings],
) -> None:
    s = make_settings(timezone="America/New_York", late_grace="PT1H")
    ts = utc("2026-03-09T03:30")  # 2026-03-08 23:30 EDT: the 23-hour day
    assert calendar.lateness(ts, utc("2026-03-09T04:59:59"), s) is None
    assert calendar.lateness(ts, utc("2026-03-09T05:00"), s) == "late_event"
    ts = utc("2026-11-01T06:30")  # 01:30 EST, the second 01:30 of the 25-hour day
    assert calendar.lateness(ts, utc("2026-11-02T05:59:59"), s) is None
    assert calendar.lateness(ts, utc("2026-11-02T06:00"), s) == "late_event"


@pytest.mark.parametrize(
    ("grace", "now", "expected"),
    [
        ("PT0S", "2026-03-09T03:59:59", None),
        ("PT0S", "2026-03-09T04:00", "late_event"),
        ("P2D", "2026-03-11T03:59:59", None),
        ("P2D", "2026-03-11T04:00", "late_event"),
        ("5400", "2026-03-09T05:29:59", None),
        ("5400", "2026-03-09T05:30", "late_event"),
    ],
    ids=["PT0S-before", "PT0S-at", "P2D-before", "P2D-at", "5400s-before", "5400s-at"],
)
def test_lateness_other_graces(
    make_settings: Callable[..., Settings], grace: str, now: str, expected: str | None
) -> None:
    s = make_settings(timezone="America/New_York", late_grace=grace)
    assert calendar.lateness(utc("2026-03-08T12:00"), utc(now), s) == expected


@pytest.mark.parametrize(
    ("ahead", "expected"),
    [
        (timedelta(0), None),
        (timedelta(minutes=4, seconds=59), None),
        (timedelta(minutes=5), None),
        (timedelta(minutes=5, microseconds=1), "future_event"),
        (timedelta(minutes=5, seconds=1), "future_event"),
        (timedelta(hours=2), "future_event"),
        (timedelta(days=1), "future_event"),
    ],
    ids=["now", "4m59s", "exactly-5m", "5m+1us", "5m1s", "2h", "1d"],
)
@pytest.mark.parametrize("now", ["2026-03-08T06:58", "2026-11-01T05:58", "2026-03-09T04:59:30"])
def test_lateness_future(
    make_settings: Callable[..., Settings], now: str, ahead: timedelta, expected: str | None
) -> None:
    # Around New York's DST switches and a day's deadline: a future event is never "late".
    s = make_settings(timezone="America/New_York", late_grace="PT1H")
    assert calendar.lateness(utc(now) + ahead, utc(now), s) == expected


# --- expire_at ----------------------------------------------------------------------------

# zone, week_start, window, period id, the period's end (UTC) known by hand
EXPIRE_TABLE = [
    ("America/New_York", "monday", "week", "2026-03-02", "2026-03-09T04:00"),  # holds the switch
    ("America/New_York", "sunday", "week", "2026-03-08", "2026-03-15T04:00"),
    ("America/New_York", "monday", "week", "2026-10-26", "2026-11-02T05:00"),
    ("America/New_York", "monday", "week", "2026-02-23", "2026-03-02T05:00"),
    ("America/New_York", "monday", "day", "2026-03-08", "2026-03-09T04:00"),
    ("America/New_York", "monday", "day", "2026-11-01", "2026-11-02T05:00"),
    ("America/New_York", "monday", "season", "S3", "2026-03-30T04:00"),  # 03-02 .. 03-29
    ("Pacific/Chatham", "monday", "week", "2026-09-21", "2026-09-27T10:15"),
    ("America/Santiago", "saturday", "week", "2026-04-04", "2026-04-11T04:00"),
    ("America/Havana", "monday", "day", "2026-03-07", "2026-03-08T05:00"),
    ("UTC", "monday", "week", "2027-12-27", "2028-01-03T00:00"),
]


@pytest.mark.parametrize("retention", ["P35D", "PT2H", "864000"])
@pytest.mark.parametrize(
    ("zone", "week_start", "window", "pid", "end"),
    EXPIRE_TABLE,
    ids=[f"{r[0]}-{r[1]}-{r[2]}-{r[3]}" for r in EXPIRE_TABLE],
)
def test_expire_at(
    make_settings: Callable[..., Settings],
    zone: str,
    week_start: str,
    window: win.Window,
    pid: str,
    end: str,
    retention: str,
) -> None:
    s = make_settings(
        timezone=zone, week_start=week_start, seasons=CYCLE, retention=retention, late_grace="PT1H"
    )
    period = win.resolve_period(window, pid, utc("2026-06-01T00:00"), s)
    assert period.id == pid
    assert utc(end) == ref_day_end(period.last, ZoneInfo(zone))
    seconds = {"P35D": 35 * 86400, "PT2H": 7200, "864000": 864000}[retention]
    got = win.expire_at(period, s)
    assert type(got) is int
    assert got == timegm(utc(end).timetuple()) + seconds
    assert win.period_end(period, ZoneInfo(zone)) == utc(end)


# --- properties ---------------------------------------------------------------------------

INSTANTS = st.datetimes(
    min_value=datetime(2020, 1, 1),
    max_value=datetime(2035, 12, 31, 23, 59, 59),
    timezones=st.just(UTC),
)


@functools.cache
def offset_changes(zone: str) -> list[datetime]:
    """Every instant in 2020-2035 where the zone's UTC offset changes (scan daily, then bisect)."""
    z = ZoneInfo(zone)
    noon = timegm((2020, 1, 1, 12, 0, 0))
    out = []
    for k in range(16 * 366):
        lo, hi = noon + k * 86400, noon + (k + 1) * 86400
        if datetime.fromtimestamp(lo, z).utcoffset() == datetime.fromtimestamp(hi, z).utcoffset():
            continue
        before = datetime.fromtimestamp(lo, z).utcoffset()
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (
                (mid, hi) if datetime.fromtimestamp(mid, z).utcoffset() == before else (lo, mid)
            )
        out.append(datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=hi))
    return out


def _near_an_offset_change(zone: str) -> st.SearchStrategy[tuple[str, datetime]]:
    changes = offset_changes(zone)
    if not changes:
        return st.tuples(st.just(zone), INSTANTS)
    return st.tuples(
        st.just(zone),
        st.builds(
            lambda t, s: t + timedelta(seconds=s),
            st.sampled_from(changes),
            st.integers(-30 * 3600, 30 * 3600),
        ),
    )


# Half anywhere, half within 30 hours of a DST switch, where days are 23 or 25 hours long.
ZONED_INSTANTS = st.one_of(
    st.tuples(st.sampled_from(ZONES), INSTANTS),
    st.sampled_from(ZONES).flatmap(_near_an_offset_change),
)


def test_offset_changes_found() -> None:
    # New York and Chatham switch twice a year throughout; Istanbul and Kolkata never.
    assert len(offset_changes("America/New_York")) == 32
    assert len(offset_changes("Pacific/Chatham")) == 32
    assert offset_changes("Europe/Istanbul") == offset_changes("Asia/Kolkata") == []
    assert utc("2026-03-08T07:00") in offset_changes("America/New_York")
    assert utc("2026-09-06T04:00") in offset_changes("America/Santiago")


@hsettings(max_examples=400, deadline=None)
@given(zoned=ZONED_INSTANTS)
def test_property_days_hold_their_instants_and_tile(zoned: tuple[str, datetime]) -> None:
    zone, instant = zoned
    z = ZoneInfo(zone)
    day = calendar.local_day(instant, z)
    start, end = calendar.day_start(day, z), calendar.day_end(day, z)
    assert start <= instant < end
    assert end == calendar.day_start(day + ONE_DAY, z)
    assert calendar.day_end(day - ONE_DAY, z) == start
    assert start == ref_day_start(day, z)
    assert end == ref_day_end(day, z)
    assert timedelta(hours=23) <= end - start <= timedelta(hours=25)


@hsettings(max_examples=200, deadline=None)
@given(
    day=st.dates(min_value=date(2020, 1, 1), max_value=date(2035, 12, 31)),
    week_start=st.sampled_from(WEEKDAY_NAMES),
)
def test_property_weeks(day: date, week_start: str) -> None:
    index = WEEKDAY_NAMES.index(week_start)
    first = calendar.week_first_day(day, index)
    assert (first, calendar.weekday_index(day, index)) == ref_week_first_day(day, week_start)


@hsettings(max_examples=200, deadline=None)
@given(
    day=st.dates(min_value=date(2024, 1, 1), max_value=date(2032, 12, 31)),
    length=st.integers(min_value=1, max_value=120),
    anchor=st.dates(min_value=date(2025, 1, 1), max_value=date(2028, 12, 31)),
)
def test_property_cycle_seasons(
    make_settings: Callable[..., Settings], day: date, length: int, anchor: date
) -> None:
    s = make_settings(seasons={"length_days": length, "anchor": anchor})
    got = calendar.season_of_day(day, s)
    ref = ref_cycle_season(day, anchor, length)
    assert (None if got is None else (got.id, got.start, got.end)) == ref
