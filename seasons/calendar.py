"""The calendar of the time model (docs/contract.md#time), as pure functions of settings and an
instant: local days, weeks, months and seasons, and whether an event's time is acceptable.

Nothing here reads the wall clock: callers pass ``now``. Days are local calendar dates in
the configured zone (23 or 25 hours long on DST days); weeks start on ``week_start``; months
are calendar months; seasons are a cycle from an anchor or an explicit list. The windows
built on this calendar are declared in :mod:`seasons.windows`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from seasons.config.settings import SeasonSpan, Settings
from seasons.errors import BadPeriod

FUTURE_TOLERANCE = timedelta(minutes=5)

_CYCLE_ID = re.compile(r"S([1-9][0-9]{0,6})")  # used with fullmatch: "$" would allow "S1\n"
# Event times must have a local day, and an end of it, in every zone: keep clear of datetime's
# limits (year 1 and 9999), where astimezone and day arithmetic raise OverflowError.
_TS_MIN = datetime(2, 1, 1, tzinfo=UTC)
_TS_MAX = datetime(9998, 12, 31, tzinfo=UTC)


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


# --- months -----------------------------------------------------------------------------


def month_first_day(day: date) -> date:
    return day.replace(day=1)


def month_last_day(day: date) -> date:
    """The last day of the calendar month holding ``day``."""
    first_of_next = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return first_of_next - timedelta(days=1)


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
