"""The windows, declared once: :data:`SPECS` holds a :class:`WindowSpec` per window (day,
week, month, season, alltime), and every layer reads it: keys, the write path, reads, rollup,
closes, sweep, CLI choices, HTTP validation and OpenAPI, and the web page (through
``GET /v1/boards``).

A window maps each local day to its period (:class:`Period`: an id and its first and last
day), reads period ids, weighs a day's scores in its period, and says whether its boards are
rolled up from day keys and archived when they end. Adding a window means a spec here, its
calendar arithmetic in :mod:`seasons.calendar`, and its tests. Pure functions of settings
and ``now``, like the calendar.

A window whose ``expires`` is false (``alltime``) has one period that never ends: its key
has no TTL, its period is no list of days (:meth:`Period.days` refuses it), and what its
board is recomputed from is the window's *base* (every closed day folded in once, by the day
close) and the days after the last one folded (``seasons.jobs.rollup``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from seasons.calendar import (
    day_end,
    day_start,
    local_day,
    month_first_day,
    month_last_day,
    season_by_id,
    season_of_day,
    week_first_day,
    week_of_season,
    weekday_index,
)
from seasons.config.settings import BoardSettings, SeasonSpan, Settings
from seasons.errors import BadPeriod, BadWindow
from seasons.vocabulary import WINDOWS, Window

ALLTIME_ID = "all"  # the one period of the alltime window
# fromisoformat alone also takes 20260308 and 2026-W10-1; period ids are YYYY-MM-DD.
_ISO_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_ISO_MONTH = re.compile(r"[0-9]{4}-[0-9]{2}")


@dataclass(frozen=True, slots=True)
class Period:
    """One period of a window: its id and its local days ``first`` .. ``last`` inclusive
    (``date.min`` .. ``date.max`` for the one period of a window that never ends)."""

    window: Window
    id: str
    first: date
    last: date

    @property
    def endless(self) -> bool:
        """The period of a window that never ends (``alltime``): no end, no TTL, no list of
        days."""
        return not SPECS[self.window].expires

    def days(self) -> list[date]:
        if self.endless:
            # Every calendar day is not what anyone wants to loop over: the rollup computes
            # an endless period's open days from its base (seasons.jobs.rollup).
            raise ValueError(f"the {self.window} period is not a list of days")
        return [self.first + timedelta(days=i) for i in range((self.last - self.first).days + 1)]


# --- windows ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """One window: how a local day maps to its period, how period ids read, and how a day
    weighs in it. ``rolled_up``: a weighted aggregate of the board's day keys, written through
    by every write and recomputed from the days by the rollup. ``archived``: its periods are
    closed and archived when they end (seasons). ``tiles``: every local day has a period.
    ``expires`` false: one period that never ends (``alltime``): its key has no TTL and
    each closed day is folded into the window's base (``seasons.keys.Keys.base``)."""

    name: Window
    ids: str  # how its period ids are written, for help texts and error messages
    rolled_up: bool
    archived: bool
    tiles: bool
    history_last: int  # how many periods a history shows by default
    of_day: Callable[[date, Settings], tuple[str, date, date] | None]
    day_of_id: Callable[[str], date] | None  # a calendar window: the day an explicit id names
    weight_of_day: Callable[[BoardSettings, date, Settings], float]
    expires: bool = True

    def period_of_day(self, day: date, settings: Settings) -> Period | None:
        """The period holding ``day`` (None for a day outside every season)."""
        found = self.of_day(day, settings)
        return None if found is None else Period(self.name, *found)

    def weight(self, cfg: BoardSettings, day: date, settings: Settings) -> float:
        """The weight of ``day``'s scores in its period of this window on a board ``cfg``."""
        return self.weight_of_day(cfg, day, settings)


def _day_of(day: date, settings: Settings) -> tuple[str, date, date]:
    return day.isoformat(), day, day


def _week_of(day: date, settings: Settings) -> tuple[str, date, date]:
    first = week_first_day(day, settings.week_start_index)
    return first.isoformat(), first, first + timedelta(days=6)


def _month_of(day: date, settings: Settings) -> tuple[str, date, date]:
    first = month_first_day(day)
    return first.isoformat()[:7], first, month_last_day(day)  # strftime drops year zeros


def _season_of(day: date, settings: Settings) -> tuple[str, date, date] | None:
    span = season_of_day(day, settings)
    return None if span is None else (span.id, span.start, span.end)


def _alltime_of(day: date, settings: Settings) -> tuple[str, date, date]:
    return ALLTIME_ID, date.min, date.max


def _alltime_id(text: str) -> date:
    if text != ALLTIME_ID:
        raise ValueError(text)
    return date.min


def _iso_day(text: str) -> date:
    """``YYYY-MM-DD`` only: fromisoformat alone also takes 20260308 and 2026-W10-1."""
    if not _ISO_DAY.fullmatch(text):
        raise ValueError(text)
    return date.fromisoformat(text)


def _iso_month_or_day(text: str) -> date:
    """``YYYY-MM`` (its first day) or any ``YYYY-MM-DD`` of the month."""
    if _ISO_MONTH.fullmatch(text):
        return date.fromisoformat(text + "-01")
    return _iso_day(text)


def _week_weight(cfg: BoardSettings, day: date, settings: Settings) -> float:
    return cfg.week_weights[weekday_index(day, settings.week_start_index)]


def _season_weight(cfg: BoardSettings, day: date, settings: Settings) -> float:
    span = season_of_day(day, settings)
    return cfg.season_weight(week_of_season(day, span)) if span is not None else 1.0


SPECS: dict[Window, WindowSpec] = {
    spec.name: spec
    for spec in (
        WindowSpec(
            "day",
            "YYYY-MM-DD",
            rolled_up=False,
            archived=False,
            tiles=True,
            history_last=14,
            of_day=_day_of,
            day_of_id=_iso_day,
            weight_of_day=lambda cfg, day, settings: 1.0,
        ),
        WindowSpec(
            "week",
            "YYYY-MM-DD of any day of the week",
            rolled_up=True,
            archived=False,
            tiles=True,
            history_last=12,
            of_day=_week_of,
            day_of_id=_iso_day,
            weight_of_day=_week_weight,
        ),
        WindowSpec(
            "month",
            "YYYY-MM, or YYYY-MM-DD of any day of the month",
            rolled_up=True,
            archived=False,
            tiles=True,
            history_last=12,
            of_day=_month_of,
            day_of_id=_iso_month_or_day,
            weight_of_day=lambda cfg, day, settings: cfg.month_weight(day.day),
        ),
        WindowSpec(
            "season",
            "a season id",
            rolled_up=True,
            archived=True,
            tiles=False,
            history_last=12,
            of_day=_season_of,
            day_of_id=None,
            weight_of_day=_season_weight,
        ),
        WindowSpec(
            "alltime",
            ALLTIME_ID,
            rolled_up=True,
            archived=False,
            tiles=True,
            history_last=1,
            of_day=_alltime_of,
            day_of_id=_alltime_id,
            weight_of_day=lambda cfg, day, settings: 1.0,
            expires=False,
        ),
    )
}
assert tuple(SPECS) == WINDOWS, "SPECS must hold the windows of seasons.vocabulary, in order"


def spec(window: str) -> WindowSpec:
    """The window named ``window``; :class:`BadWindow` if there is none."""
    found = SPECS.get(window)  # type: ignore[call-overload]
    if found is None:
        raise BadWindow(f"unknown window {window!r}: use {', '.join(WINDOWS)}", {"window": window})
    return found


def board_windows(cfg: BoardSettings) -> tuple[WindowSpec, ...]:
    """The windows a board keeps, in the table's order."""
    return tuple(SPECS[w] for w in WINDOWS if w in cfg.windows)


def board_window(board: str, cfg: BoardSettings, window: str) -> WindowSpec:
    """The window ``window`` of ``board``; :class:`BadWindow` if it has no such window."""
    found = spec(window)
    if found.name not in cfg.windows:
        kept = ", ".join(w.name for w in board_windows(cfg))
        raise BadWindow(
            f"board {board!r} keeps no {window} window (its windows: {kept}); add "
            f"{window!r} to boards.{board}.windows to keep one",
            {"board": board, "window": window},
        )
    return found


def rolled_up(cfg: BoardSettings) -> tuple[WindowSpec, ...]:
    """The windows a write to ``cfg``'s day keys also writes through to."""
    return tuple(w for w in board_windows(cfg) if w.rolled_up)


# --- periods ----------------------------------------------------------------------------


def period_of_day(window: Window, day: date, settings: Settings) -> Period | None:
    """The period of ``window`` that holds ``day`` (None for a day outside every season)."""
    return SPECS[window].period_of_day(day, settings)


def period_end(period: Period, zone: ZoneInfo) -> datetime | None:
    """The instant (UTC) a period ends; None for one that never ends."""
    return None if period.endless else day_end(period.last, zone)


def resolve_period(window: str, period: str, now: datetime, settings: Settings) -> Period:
    """Turn a read's ``period`` (an id, ``current`` or ``previous``) into a :class:`Period`."""
    found_spec = spec(window)
    today = local_day(now, settings.zone)
    if period == "current":
        found = found_spec.period_of_day(today, settings)
        if found is None:
            raise BadPeriod(f"no season is running on {today}, so there is no current season")
        return found
    if period == "previous":
        return previous_period(found_spec.name, today, settings)
    if not found_spec.expires:
        return explicit_period(found_spec, period, settings)
    try:
        found = explicit_period(found_spec, period, settings)
        # At the calendar's ends a period's bounds may not be instants: refuse it here, not
        # with an OverflowError wherever its end is needed.
        day_start(found.first, settings.zone)
        period_end(found, settings.zone)
    except OverflowError:
        raise BadPeriod(
            f"bad period {period!r} for window {window}: outside the calendar"
        ) from None
    return found


def explicit_period(window: WindowSpec, period: str, settings: Settings) -> Period:
    """The period an explicit id names (not ``current`` / ``previous``)."""
    if window.day_of_id is None:  # seasons: by id
        span = season_by_id(period, settings)
        return Period(window.name, span.id, span.start, span.end)
    try:
        day = window.day_of_id(period)
    except ValueError:
        raise BadPeriod(
            f"bad period {period!r} for window {window.name}: use {window.ids}, current or previous"
        ) from None
    found = window.period_of_day(day, settings)
    assert found is not None  # calendar windows tile every day
    return found


def previous_period(window: Window, today: date, settings: Settings) -> Period:
    """The last period of ``window`` that has ended by ``today``."""
    if not SPECS[window].expires:
        raise BadPeriod(
            f"the {window} window has one period: use {ALLTIME_ID} or current, not previous"
        )
    if not SPECS[window].tiles:
        if settings.seasons.list:
            ended = [s for s in settings.seasons.list if s.end < today]
        else:
            ended = _cycle_previous(today, settings)
        if not ended:
            raise BadPeriod(f"no season has ended by {today}")
        span = ended[-1]
        return Period(window, span.id, span.start, span.end)
    current = period_of_day(window, today, settings)
    assert current is not None
    found = period_of_day(window, current.first - timedelta(days=1), settings)
    assert found is not None
    return found


def _cycle_previous(today: date, settings: Settings) -> list[SeasonSpan]:
    offset = (today - settings.seasons.anchor).days
    number = offset // settings.seasons.length_days  # the season before today's
    return [season_by_id(f"S{number}", settings)] if number >= 1 else []


def recent_periods(window: str, last: int, now: datetime, settings: Settings) -> list[Period]:
    """The ``last`` periods of ``window`` up to the current one, oldest first."""
    name = spec(window).name
    today = local_day(now, settings.zone)
    out: list[Period] = []
    if not SPECS[name].expires:
        found = period_of_day(name, today, settings)
        assert found is not None
        return [found]  # its one period, however many were asked for
    if not SPECS[name].tiles:
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
            out.append(Period(name, span.id, span.start, span.end))
            cursor = span.start - timedelta(days=1)
            if not settings.seasons.list and cursor < settings.seasons.anchor:
                break
        return out[::-1]
    current = period_of_day(name, today, settings)
    assert current is not None
    for _ in range(last):
        out.append(current)
        found = period_of_day(name, current.first - timedelta(days=1), settings)
        assert found is not None
        current = found
    return out[::-1]


def expire_at(period: Period, settings: Settings) -> int | None:
    """EXPIREAT (epoch seconds) of a live key of ``period``: its end + retention; None for
    a period that never ends (its key has no TTL)."""
    end = period_end(period, settings.zone)
    return None if end is None else int((end + settings.retention).timestamp())


def day_expire_at(day: date, settings: Settings) -> int:
    """EXPIREAT of ``day``'s day key: the instant from which it may be gone."""
    return int((day_end(day, settings.zone) + settings.retention).timestamp())


def oldest_kept_day(now: datetime, settings: Settings) -> date:
    """The first local day whose day key has not expired at ``now``."""
    day = local_day(now - settings.retention, settings.zone) - timedelta(days=1)
    while now.timestamp() >= day_expire_at(day, settings):
        day += timedelta(days=1)
    return day
