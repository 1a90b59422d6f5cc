"""The joins of a league period that wait for the previous period's close
(docs/leagues.md).

This branch holds only what the close needs of it: :func:`join_waiting` marks the previous
period closed. The join helper of the write path replaces it with the one that also joins
the waiting members of ``next_period`` in arrival order, in the same call as the mark.
"""

from __future__ import annotations

from seasons.config.settings import Settings
from seasons.connection import RedisClient
from seasons.keys import Keys
from seasons.scripts import Scripts


def join_waiting(
    client: RedisClient, scripts: Scripts, settings: Settings, keys: Keys, board: str,
    period: str, next_period: str | None, closed_json: str,
) -> None:  # fmt: skip
    """The last step of ``period``'s close of ``board``'s league: ``closed:<period>`` =
    ``closed_json`` in the league state hash (the counts of the close), after which events
    of ``next_period`` (None: no period follows, a gap between listed seasons) join at
    once."""
    client.hset(keys.league_state(board), f"closed:{period}", closed_json)
