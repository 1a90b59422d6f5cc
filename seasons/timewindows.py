"""The time model (SPEC section 3) as pure functions of settings and an instant.

Nothing here reads the wall clock: callers pass ``now``. Days are local calendar dates in
the configured zone (23 or 25 hours long on DST days); weeks start on ``week_start``;
seasons are a cycle from an anchor or an explicit list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from seasons.config.settings import SeasonSpan, Settings
from seasons.errors import BadPeriod

Window = Literal["day", "week", "season"]
WINDOWS: tuple[Window, ...] = ("day", "week", "season")
FUTURE_TOLERANCE = timedelta(minutes=5)

_CYCLE_ID = re.compile(r"S([1-9][0-9]{0,6})")  # used with fullmatch: "$" would allow "S1\n"
# fromisoformat alone also takes 20260308 and 2026-W10-1; period ids are YYYY-MM-DD.
_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Event times must have a local day, and an end of it, in every zone: keep clear of datetime's
# limits (year 1 and 9999), where astimezone and day arithmetic raise OverflowError.
_TS_MIN = datetime(2, 1, 1, tzinfo=UTC)
_TS_MAX = datetime(9998, 12, 31, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Period:
    """One period of a window: its id and its local days ``first`` .. ``last`` inclusive."""

    window: Window
    id: str
    first: date
    last: date

    def days(self) -> list[date]:
        return [self.first + timedelta(days=i) for i in range((self.last - self.first).days + 1)]


# --- days -------------------------------------------------------------------------------


def local_day(instant: datetime, zone: ZoneInfo) -> date:
    """The local calendar date of an aware instant."""
    return instant.astimezone(zone).date()


def day_start(day: date, zone: ZoneInfo) -> datetime:
    """The first instant (UTC) of a local day.

    If local midnight falls in a DST gap, ``fold=0`` resolves it with the offset in force
    before the transition, which lands exactly on the transition: the day's first instant.
    """
    return datetime.combine(day, time(0), tzinfo=zone).astimezone(UTC)


def day_end(day: date, zone: ZoneInfo) -> datetime:
    """The instant (UTC) a local day ends: the start of the next one."""
    return day_start(day + timedelta(days=1), zone)


# --- weeks ------------------------------------------------------------------------------


def week_first_day(day: date, week_start: int) -> date:
    """The first day of the week holding ``day``; ``week_start`` 0 = Monday .. 6 = Sunday."""
    return day - timedelta(days=(day.weekday() - week_start) % 7)


def weekday_index(day: date, week_start: int) -> int:
    """Position of ``day`` in its week, 0 for the week's first day."""
    return (day.weekday() - week_start) % 7


# --- seasons ----------------------------------------------------------------------------


def season_of_day(day: date, settings: Settings) -> SeasonSpan | None:
    """The season holding ``day``, or None if no season does."""
    cfg = settings.seasons
    if cfg.list:
        for span in cfg.list:
            if span.start <= day <= span.end:
                return span
        return None
    offset = (day - cfg.anchor).days
    if offset < 0:
        return None
    return _cycle_season(offset // cfg.length_days + 1, settings)


def _cycle_season(number: int, settings: Settings) -> SeasonSpan:
    cfg = settings.seasons
    start = cfg.anchor + timedelta(days=(number - 1) * cfg.length_days)
    return SeasonSpan(id=f"S{number}", start=start, end=start + timedelta(days=cfg.length_days - 1))


def season_by_id(season_id: str, settings: Settings) -> SeasonSpan:
    """The season named ``season_id``; :class:`BadPeriod` if there is none."""
    cfg = settings.seasons
    if cfg.list:
        for span in cfg.list:
            if span.id == season_id:
                return span
        known = ", ".join(s.id for s in cfg.list)
        raise BadPeriod(f"unknown season {season_id!r} (configured: {known})")
    m = _CYCLE_ID.fullmatch(season_id)
    if not m:
        raise BadPeriod(f"unknown season {season_id!r}: seasons are named S1, S2, ...")
    try:
        return _cycle_season(int(m.group(1)), settings)
    except OverflowError:
        raise BadPeriod(f"unknown season {season_id!r}: it would end after 9999-12-31") from None


def seasons_between(first: date, last: date, settings: Settings) -> list[SeasonSpan]:
    """Every season that has at least one day in ``first`` .. ``last``, in order."""
    cfg = settings.seasons
    if cfg.list:
        return [s for s in cfg.list if s.start <= last and s.end >= first]
    out: list[SeasonSpan] = []
    start = max(first, cfg.anchor)
    if last < start:
        return out
    span = season_of_day(start, settings)
    while span is not None and span.start <= last:
        out.append(span)
        span = season_of_day(span.end + timedelta(days=1), settings)
    return out


def week_of_season(day: date, season: SeasonSpan) -> int:
    """0-based week of ``day`` within its season (week 1 = the season's first 7 days)."""
    return (day - season.start).days // 7


def season_end(season: SeasonSpan, zone: ZoneInfo) -> datetime:
    return day_end(season.end, zone)


# --- periods ----------------------------------------------------------------------------


def period_of_day(window: Window, day: date, settings: Settings) -> Period | None:
    """The period of ``window`` that holds ``day`` (None for a day outside every season)."""
    if window == "day":
        return Period("day", day.isoformat(), day, day)
    if window == "week":
        first = week_first_day(day, settings.week_start_index)
        return Period("week", first.isoformat(), first, first + timedelta(days=6))
    span = season_of_day(day, settings)
    if span is None:
        return None
    return Period("season", span.id, span.start, span.end)


def period_end(period: Period, zone: ZoneInfo) -> datetime:
    """The instant (UTC) a period ends."""
    return day_end(period.last, zone)


def resolve_period(window: Window, period: str, now: datetime, settings: Settings) -> Period:
    """Turn a read's ``period`` (an id, ``current`` or ``previous``) into a :class:`Period`."""
    if window not in WINDOWS:
        raise BadPeriod(f"unknown window {window!r}: use day, week or season")
    today = local_day(now, settings.zone)
    if period == "current":
        found = period_of_day(window, today, settings)
        if found is None:
            raise BadPeriod(f"no season is running on {today}, so there is no current season")
        return found
    if period == "previous":
        return previous_period(window, today, settings)
    try:
        if window == "season":
            span = season_by_id(period, settings)
            found = Period("season", span.id, span.start, span.end)
        else:
            found = period_of_day(window, _explicit_day(window, period), settings)
        assert found is not None  # day and week periods always exist
        # At the calendar's ends a period's bounds may not be instants: refuse it here, not
        # with an OverflowError wherever its end is needed.
        day_start(found.first, settings.zone)
        period_end(found, settings.zone)
    except OverflowError:
        raise BadPeriod(
            f"bad period {period!r} for window {window}: outside the calendar"
        ) from None
    return found


def _explicit_day(window: Window, period: str) -> date:
    """The day a day or week id names: ``YYYY-MM-DD`` only."""
    try:
        if _ISO_DAY.fullmatch(period):
            return date.fromisoformat(period)
    except ValueError:
        pass
    raise BadPeriod(
        f"bad period {period!r} for window {window}: use YYYY-MM-DD, current or previous"
    )


def previous_period(window: Window, today: date, settings: Settings) -> Period:
    """The last period of ``window`` that has ended by ``today``."""
    if window == "season":
        if settings.seasons.list:
            ended = [s for s in settings.seasons.list if s.end < today]
        else:
            ended = _cycle_previous(today, settings)
        if not ended:
            raise BadPeriod(f"no season has ended by {today}")
        span = ended[-1]
        return Period("season", span.id, span.start, span.end)
    current = period_of_day(window, today, settings)
    assert current is not None
    found = period_of_day(window, current.first - timedelta(days=1), settings)
    assert found is not None
    return found


def _cycle_previous(today: date, settings: Settings) -> list[SeasonSpan]:
    offset = (today - settings.seasons.anchor).days
    number = offset // settings.seasons.length_days  # the season before today's
    return [_cycle_season(number, settings)] if number >= 1 else []


def recent_periods(window: Window, last: int, now: datetime, settings: Settings) -> list[Period]:
    """The ``last`` periods of ``window`` up to the current one, oldest first."""
    today = local_day(now, settings.zone)
    out: list[Period] = []
    if window == "season":
        cursor: date | None = today
        while cursor is not None and len(out) < last:
            span = season_of_day(cursor, settings)
            if span is None:
                earlier = [s for s in settings.seasons.list if s.end < cursor]
                if not earlier:
                    break
                span = earlier[-1]
            if span.start > today:
                break
            out.append(Period("season", span.id, span.start, span.end))
            cursor = span.start - timedelta(days=1)
            if not settings.seasons.list and cursor < settings.seasons.anchor:
                break
        return out[::-1]
    current = period_of_day(window, today, settings)
    assert current is not None
    for _ in range(last):
        out.append(current)
        found = period_of_day(window, current.first - timedelta(days=1), settings)
        assert found is not None
        current = found
    return out[::-1]


# --- acceptance ---------------------------------------------------------------------------


def parse_ts(value: str | int | float | datetime | None, now: datetime) -> datetime:
    """An event time: RFC 3339 with offset, epoch seconds, an aware datetime, or None (now).

    Raises ValueError for anything else, including instants outside the years 2 .. 9998.
    """
    if value is None:
        return now
    try:
        parsed = _parse_ts(value)
    except (OverflowError, OSError):  # epoch seconds or offsets past datetime's range
        parsed = None
    if parsed is None or not _TS_MIN <= parsed <= _TS_MAX:
        raise ValueError(f"{value!r} is out of range (years 2 to 9998)")
    return parsed


def _parse_ts(value: str | int | float | datetime) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("datetime must carry a time zone")
        return value.astimezone(UTC)
    if isinstance(value, bool):
        raise ValueError("must be RFC 3339 with an offset or epoch seconds")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    if not isinstance(value, str):  # e.g. a JSON object or list from an HTTP body
        kind = type(value).__name__
        raise ValueError(f"must be RFC 3339 with an offset or epoch seconds, got {kind}")
    text = value.strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return datetime.fromtimestamp(float(text), UTC)
    try:
        parsed = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{value!r} is neither RFC 3339 nor epoch seconds") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset (RFC 3339 needs one, e.g. Z or +02:00)")
    return parsed.astimezone(UTC)


def lateness(ts: datetime, now: datetime, settings: Settings) -> str | None:
    """Why an event at ``ts`` cannot be accepted at ``now`` by time alone, or None.

    Returns ``"late_event"`` once ``now >= end of the event's day + late_grace`` and
    ``"future_event"`` if ``ts`` is more than five minutes ahead of ``now``.
    """
    if ts > now + FUTURE_TOLERANCE:
        return "future_event"
    if now >= day_end(local_day(ts, settings.zone), settings.zone) + settings.late_grace:
        return "late_event"
    return None


def expire_at(period: Period, settings: Settings) -> int:
    """EXPIREAT (epoch seconds) of a live key of ``period``: its end + retention."""
    return int((period_end(period, settings.zone) + settings.retention).timestamp())
