"""What the jobs and the rewards of one namespace run on, built once by the facade.

The facade (:class:`seasons.api.Seasons`) owns the Redis client and the scripts and builds the
paths of its interfaces on them; the jobs (:mod:`seasons.jobs.registry`) and the rewards
(:mod:`seasons.rewards`) need only these five, so they take a :class:`Backend` instead of the
facade, and nothing below the facade imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from seasons.clock import Clock
from seasons.config.settings import Settings
from seasons.connection import RedisClient
from seasons.keys import Keys
from seasons.scripts import Scripts


@dataclass(frozen=True, slots=True)
class Backend:
    """One namespace's client, its registered scripts, its settings, its key names and the
    clock every job and claim reads the time from."""

    client: RedisClient
    scripts: Scripts
    settings: Settings
    keys: Keys
    clock: Clock
