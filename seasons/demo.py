"""A deterministic demo data set: weeks of scores on every configured board.

:func:`seed_demo` writes through the ordinary write path (``submit_many(..., backfill=True)``),
so the day, week and season boards it leaves are exactly what real traffic would have made.
The same clock, settings and ``rng_seed`` always give the same events, and each event has an
``event_id``, so seeding twice within the 48-hour idempotency window changes nothing.

What a board gets follows from its configuration:

- ``order = "asc"``: lap times in seconds, one decimal (so equal times happen);
- ``aggregate = "max"`` (high first): ``level * 10^10 + power``, a :class:`CompositeScore`;
- ``aggregate = "set"``: a rating around a level of its own, up and down from match to match;
- otherwise: counts per match (kills, goals, ...).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from seasons import calendar
from seasons import windows as win
from seasons.api import Seasons
from seasons.composite import CompositeScore
from seasons.config.settings import BoardSettings
from seasons.jobs.integrity import new_marker, read_disk_marker
from seasons.keys import STATE_SEASON
from seasons.models import WriteResult

LEVEL_POWER = CompositeScore([("level", None), ("power", 10)])
BATCH = 5000  # events per submit_many call (at most MAX_BATCH)

_FIRST = (
    "Ayla",
    "Deniz",
    "Emre",
    "Elif",
    "Mert",
    "Zeynep",
    "Can",
    "Ece",
    "Kaan",
    "Selin",
    "Burak",
    "Defne",
    "Liam",
    "Olivia",
    "Noah",
    "Emma",
    "Lucas",
    "Mia",
    "Mateo",
    "Sofia",
    "Yuki",
    "Hana",
    "Arjun",
    "Priya",
    "Omar",
    "Layla",
    "Jonas",
    "Freya",
    "Diego",
    "Lucia",
    "Ivan",
    "Anya",
)
_LAST = (
    "Yilmaz",
    "Kaya",
    "Demir",
    "Sahin",
    "Celik",
    "Aydin",
    "Ozturk",
    "Arslan",
    "Dogan",
    "Kilic",
    "Smith",
    "Garcia",
    "Muller",
    "Rossi",
    "Tanaka",
    "Kim",
    "Silva",
    "Novak",
    "Jensen",
    "Patel",
    "Haddad",
    "Costa",
    "Ivanova",
    "Nguyen",
    "Okafor",
    "Larsen",
    "Moreau",
    "Kowalski",
)
_COUNTRIES = ("TR", "TR", "TR", "DE", "GB", "US", "FR", "BR", "JP", "KR", "IN", "NL", "PL", "SE")


@dataclass(frozen=True, slots=True)
class _Player:
    member: str
    name: str
    country: str
    skill: float  # 0..1
    activity: float  # chance of playing on a given day
    level: int  # level on the first demo day
    growth: float  # levels gained per day

    def level_on(self, day_index: int) -> int:
        return self.level + int(self.growth * day_index)


def _roster(rng: random.Random, players: int) -> list[_Player]:
    width = max(3, len(str(players)))
    roster = []
    for i in range(1, players + 1):
        skill = rng.betavariate(2, 3)
        roster.append(
            _Player(
                member=f"player-{i:0{width}d}",
                name=f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
                country=rng.choice(_COUNTRIES),
                skill=skill,
                activity=0.35 + 0.5 * rng.random(),
                level=1 + int(40 * skill) + rng.randint(0, 5),
                growth=0.1 + 0.4 * rng.random(),
            )
        )
    return roster


def _value(cfg: BoardSettings, rng: random.Random, p: _Player, level: int) -> float | int:
    if cfg.order == "asc":  # a lap time: faster with skill
        return round(max(30.0, rng.gauss(95.0 - 20.0 * p.skill, 2.5)), 1)
    if cfg.aggregate == "set":  # a rating: the latest value stands, so it can fall
        return 1000 + 10 * level + round(rng.gauss(0, 4)) * 5
    if cfg.aggregate == "max":
        power = int(p.skill * 40_000) + level * 1_500 + rng.randint(0, 5_000)
        return LEVEL_POWER.build(level=level, power=power)
    return max(0, round(rng.gauss(3 + 12 * p.skill, 3)))  # kills in a match


def _writable(app: Seasons, board: str, day: date, now: datetime) -> bool:
    """Whether the demo writes ``day``: the worker can recompute every period that holds it
    from day keys, and its season is not archived.

    A period (week, month, season) reaching back past retention cannot be recomputed from
    its day keys: the worker would skip its final rollup with a warning, so a day of such a
    period is left out (the newest such periods, still open, are always recomputable).
    """
    settings = app.settings
    # An hour of margin: the worker starts after the seeding, maybe past local midnight.
    oldest = win.oldest_kept_day(now + timedelta(hours=1), settings)
    if day < oldest:
        return False
    for window in win.rolled_up(settings.boards[board]):
        period = window.period_of_day(day, settings)
        if period is not None and not period.endless and period.first < oldest:
            return False
    span = calendar.season_of_day(day, settings)
    if span is None:
        return True
    return not app.client.hexists(app.keys.state(board), STATE_SEASON + span.id)


def demo_events(
    app: Seasons, now: datetime, *, days: int, players: int, rng_seed: int
) -> Iterator[dict[str, Any]]:
    """The demo's events, board by board, oldest day first."""
    settings = app.settings
    zone = settings.zone
    today = calendar.local_day(now, zone)
    rng = random.Random(rng_seed)
    roster = _roster(rng, players)
    for board, cfg in settings.boards.items():
        for index in range(days):
            day = today - timedelta(days=days - 1 - index)
            if not _writable(app, board, day, now):
                continue
            # A random stream of each board's day: a day left out (archived since, say) does
            # not change the events of the others.
            rng = random.Random(f"{rng_seed}:{board}:{day.isoformat()}")
            start = calendar.day_start(day, zone)
            seconds = (min(calendar.day_end(day, zone), now) - start).total_seconds()
            for p in roster:
                if rng.random() > p.activity:
                    continue
                level = p.level_on(index)
                for match in range(rng.randint(1, 3)):
                    event: dict[str, Any] = {
                        "board": board,
                        "member": p.member,
                        "value": _value(cfg, rng, p, level),
                        "ts": start + timedelta(seconds=rng.random() * seconds),
                        "event_id": f"demo:{board}:{day.isoformat()}:{p.member}:{match}",
                    }
                    if match == 0:
                        event["metadata"] = {"name": p.name, "country": p.country, "level": level}
                    yield event


def seed_demo(
    app: Seasons, *, days: int = 21, players: int = 200, rng_seed: int = 7
) -> WriteResult:
    """Write the demo data set to every configured board over the last ``days`` local days
    (today included, up to ``app.clock()``), for ``players`` members ``player-001`` ...

    Days past retention, days of a week, month or season that reaches back past retention
    (the worker could not recompute it), and days of archived seasons are left out. Creates
    the namespace marker on a fresh namespace. Returns how many events were applied and how
    many were already there.
    """
    if days < 1 or players < 1:
        raise ValueError(f"days and players must be at least 1, got {days} and {players}")
    now = app.clock()
    applied = duplicates = 0
    batch: list[dict[str, Any]] = []
    for event in demo_events(app, now, days=days, players=players, rng_seed=rng_seed):
        batch.append(event)
        if len(batch) == BATCH:
            result = app.submit_many(batch, backfill=True)
            applied, duplicates = applied + result.applied, duplicates + result.duplicates
            batch = []
    if batch:
        result = app.submit_many(batch, backfill=True)
        applied, duplicates = applied + result.applied, duplicates + result.duplicates
    _mark_namespace(app, now)
    return WriteResult(applied=applied, duplicates=duplicates)


def _mark_namespace(app: Seasons, now: datetime) -> None:
    """Create the namespace marker as the worker does on a fresh namespace, so that a CLI
    finds that the namespace holds Seasons data before a worker ever ran (the worker writes
    its copy beside the archives). A Redis without the marker while that copy exists is left
    to the worker, which tells data loss from a fresh start."""
    if read_disk_marker(app.settings) is None:
        app.client.set(app.keys.marker(), new_marker(now), nx=True)
