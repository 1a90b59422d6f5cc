"""Seasons: time-windowed, seasonal leaderboards on Redis."""

from seasons.api import Seasons
from seasons.composite import CompositeScore
from seasons.models import Entry, Event, History, HistoryPoint, Page, WriteResult

__all__ = [
    "CompositeScore",
    "Entry",
    "Event",
    "History",
    "HistoryPoint",
    "Page",
    "Seasons",
    "WriteResult",
]
