"""The words the settings and the domain share: window names, tie rule names, lifecycle
event types, the syntax of a reward tier's ranks, the largest exact score.

The settings (:mod:`seasons.config.settings`) check a configuration against these, and the
domain modules that act on them (:mod:`seasons.windows`, :mod:`seasons.ties`,
:mod:`seasons.lifecycle`, :mod:`seasons.results`, :mod:`seasons.composite`) import them from
here. This module imports nothing of Seasons, so the settings import it at the top and the
domain can import the settings without a cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal, get_args

# Every score, value and composite part stays within ±2^53, where a double holds every integer.
MAX_EXACT = 2**53

# The windows a board can keep (their table: seasons.windows.SPECS).
Window = Literal["day", "week", "month", "season", "alltime"]
WINDOWS: tuple[Window, ...] = get_args(Window)

# How equal scores rank (their table: seasons.ties.SPECS).
Ties = Literal["member", "shared", "dense", "earliest"]


class EventType(StrEnum):
    """The lifecycle events (their table: seasons.lifecycle.TYPES)."""

    DAY_CLOSED = "day_closed"
    SEASON_CLOSING = "season_closing"
    SEASON_ARCHIVED = "season_archived"
    REWARDS_READY = "rewards_ready"
    DATA_LOSS = "data_loss"
    RESTORE_DONE = "restore_done"
    MEMBER_HIDDEN = "member_hidden"
    MEMBER_UNHIDDEN = "member_unhidden"
    MEMBER_BANNED = "member_banned"
    RESULTS_AMENDED = "results_amended"
    LEAGUE_CLOSED = "league_closed"


def parse_ranks(text: str) -> tuple[int, int]:
    """A reward tier's ``ranks``: ``"7"`` -> (7, 7); ``"2-10"`` -> (2, 10). Raises
    ValueError with a sentence."""
    first, dash, last = text.strip().partition("-")
    try:
        lo = int(first.strip(), 10)
        hi = int(last.strip(), 10) if dash else lo
    except ValueError:
        raise ValueError(
            f'{text!r} is not a rank or a range of ranks; use e.g. "1" or "2-10"'
        ) from None
    if lo < 1:
        raise ValueError(f"{text!r}: ranks start at 1")
    if hi < lo:
        raise ValueError(f"{text!r} is an empty range: its end {hi} is below its start {lo}")
    return lo, hi


def overlap(tiers: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """The first pair (i, j), i < j, of rank ranges that share a rank, or None."""
    for j, (lo, hi) in enumerate(tiers):
        for i, (a, b) in enumerate(tiers[:j]):
            if lo <= b and a <= hi:
                return i, j
    return None
