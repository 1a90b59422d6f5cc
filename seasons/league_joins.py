"""Joining league cohorts (docs/leagues.md#joining): what the write script is told of a
board's league, and the joins that wait for a period's close.

A member joins a cohort on its first accepted event of a period of the league's window,
inside ``write.lua`` (the rule is ``seasons/lua/lib/league_join.lua``): :func:`batch_league`
and :func:`group_league` build the batch's ``league`` fields. An event of period P+1 that
arrives before P's outcome exists waits (``joined`` score -n); once the close has written
P's outcome and the tiers, :func:`join_waiting` joins those members in arrival order and
marks P closed, in chunks, with ``league_waiting.lua``.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from seasons import calendar
from seasons import windows as win
from seasons.config.league import LeagueSettings
from seasons.config.settings import Settings
from seasons.connection import RedisClient
from seasons.errors import BadPeriod
from seasons.keys import Keys
from seasons.leagues import COHORT_SPAN
from seasons.scripts import Scripts

# How many waiting members one call of league_waiting.lua joins at most: each costs a few
# commands, so a call stays well under a millisecond or so per hundred.
WAITING_CHUNK = 500


def previous_period(league: LeagueSettings, period: win.Period, settings: Settings) -> str | None:
    """The period of the league's window before ``period``: for a week or a month the one
    ending the day before its first day; for a season the last season that ended before it
    started. None when there is none."""
    try:
        return win.previous_period(league.window, period.first, settings).id
    except BadPeriod:
        return None


def batch_league(board: str, settings: Settings, keys: Keys) -> dict[str, Any] | None:
    """The batch's ``league`` (write.lua's header): the board's league rules and its two
    period-less keys; None for a board without a league."""
    league = settings.boards[board].league
    if league is None:
        return None
    return {
        "span": COHORT_SPAN,
        "size": league.cohort_size,
        "tiers": list(league.tiers),
        "group_by": league.group_by,
        "state": keys.league_state(board),
        "tier": keys.league_tier(board),
    }


def period_league(
    board: str, league: LeagueSettings, period: win.Period, settings: Settings, keys: Keys
) -> dict[str, Any]:
    """A period's part of the league's arguments: its id, the previous period's id, its
    start (epoch seconds), the instant from which a first event joins no cohort, its keys and
    their EXPIREAT."""
    end = win.period_end(period, settings.zone)
    assert end is not None  # league windows all end
    return {
        "period": period.id,
        "previous": previous_period(league, period, settings),
        "start": int(calendar.day_start(period.first, settings.zone).timestamp()),
        "join_until": (end - league.join_closes).timestamp(),
        "expire_at": win.expire_at(period, settings),
        "joined": keys.league(board, period.id, "joined"),
        "cohorts": keys.league(board, period.id, "cohorts"),
        "open": keys.league(board, period.id, "open"),
        "counts": keys.league(board, period.id, "counts"),
    }


def group_league(board: str, day: date, settings: Settings, keys: Keys) -> dict[str, Any] | None:
    """A batch group's ``league``: the period of the league's window holding ``day``
    (:func:`period_league`); None for a board without a league or a day in no season."""
    league = settings.boards[board].league
    if league is None:
        return None
    period = win.period_of_day(league.window, day, settings)
    if period is None:
        return None
    return period_league(board, league, period, settings, keys)


def league_keys(part: dict[str, Any] | None) -> list[str]:
    """The keys a batch's (or a group's) ``league`` names, for KEYS."""
    if part is None:
        return []
    names = ("state", "tier") if "tier" in part else ("joined", "cohorts", "open", "counts")
    return [part[n] for n in names]


def join_waiting(
    client: RedisClient,
    scripts: Scripts,
    settings: Settings,
    keys: Keys,
    board: str,
    period: win.Period,
    next_period: win.Period,
    closed_json: str,
    chunk: int = WAITING_CHUNK,
) -> None:
    """Join the members waiting in ``next_period`` (P+1) in arrival order, ``chunk`` per
    call, to cohorts of the tiers the tier hash holds now; the call that joins the last one
    sets ``closed:<P>`` to ``closed_json`` (JSON counts of P's outcome), after which events
    of P+1 join at once. Run it once P's outcome and the tiers are written. Idempotent: run
    again after a crash it goes on where it stopped, and once P is closed it does nothing."""
    league = settings.boards[board].league
    if league is None:
        raise ValueError(f"board {board!r} has no league")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    part = batch_league(board, settings, keys)
    assert part is not None
    args = {
        **part,
        "meta": keys.meta(board),
        "period": period.id,
        "next": period_league(board, league, next_period, settings, keys),
        "closed": closed_json,
        "limit": chunk,
    }
    names = [part["state"], part["tier"], args["meta"], *league_keys(args["next"])]
    text = json.dumps(args, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    while int(scripts.league_waiting(keys=names, args=[text], client=client)) > 0:
        pass
