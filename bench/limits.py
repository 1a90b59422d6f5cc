"""``python -m bench --only limits``: what per-member limits cost the write path in Redis's
time (docs/writes.md#held-events).

The same batches (100 events on a pool of members with scores already, as in
:mod:`bench.writes`) are written through ``Seasons.submit_many`` to the ``sum`` board of
:mod:`bench.common` under two namespaces: one without limits or bounds, one with the board's
bounds (``min_value``, ``max_value``: checked in Python, before Redis) and ``member_rate`` and
``max_period_gain`` set, all loose enough that every event passes and nothing is held, so both
sides apply the same events and their boards can be compared score by score (and nothing may
be held) before a figure is believed. The two sides run in slices that alternate between
them (:func:`bench.common.paired`). Two figures: ingest events/s through one client (target:
the limited board at least 0.9x the free one's), and Redis's time per event (``INFO
commandstats``, a script's commands counted once: :func:`bench.common.command_usec`), the main
thread's work, which does not scale out: what the limits cost it, for information (two
multi-field hash commands per batch, ``HMGET`` and ``HSET`` of the rate counters, are its floor).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bench.common import BOARD, Calendar, Section, paired
from seasons import Seasons
from seasons import windows as win
from seasons.config import Settings
from seasons.config.settings import MaxPeriodGain, MemberRate
from seasons.keys import Keys

NS_FREE = "bench-limits-free"
NS_LIMITED = "bench-limits-held"
EVENTS_PER_BATCH = 100
MEMBERS = 10_000
FULL_BATCHES = 4_000  # per side: 20 slices of 200 batches, about 0.8 s each
QUICK_BATCHES = 120
CHUNKS = 20  # slices alternating between the sides: bench.common.paired
INGEST_TARGET = 0.9  # limited / free ingest events/s, at least (the figure)
# Loose enough that nothing is held: every event is applied on both sides alike. A day's
# interval: the bench's clock stands at noon of today, and the counter of a shorter interval
# would expire at once by Redis's real clock (each batch would start a new, small hash).
RATE = MemberRate(events=1_000_000, per=timedelta(days=1))
GAIN = MaxPeriodGain(value=1e15, window="week")
# make_batch's values lie inside them.
MIN_VALUE, MAX_VALUE = 0.0, 1_000.0


def limited(settings: Settings) -> Settings:
    """``settings`` with the board's bounds and limits set (frozen models: copies)."""
    cfg = settings.boards[BOARD].model_copy(
        update={
            "min_value": MIN_VALUE,
            "max_value": MAX_VALUE,
            "member_rate": RATE,
            "max_period_gain": GAIN,
        }
    )
    return settings.model_copy(update={"boards": {BOARD: cfg}})


def make_batch(rnd: random.Random) -> list[dict[str, Any]]:
    return [
        {"board": BOARD, "member": f"player:{rnd.randrange(MEMBERS):06d}",
         "value": rnd.randint(1, 50)}
        for _ in range(EVENTS_PER_BATCH)
    ]  # fmt: skip


def run(url: str, batches: int, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Per-member limits: Redis time per event",
        f"batches of {EVENTS_PER_BATCH} on a sum board (day, week, season) of {MEMBERS:,} "
        f"members, without limits and with min_value/max_value + member_rate + "
        f"max_period_gain (nothing held); "
        f"{batches} batches per side, in {CHUNKS} slices alternating between the sides",
        "µs/event",
    )
    sides = {
        "without limits": Seasons(calendar.settings(url, NS_FREE), clock=calendar.clock()),
        "with limits": Seasons(limited(calendar.settings(url, NS_LIMITED)),
                               clock=calendar.clock()),
    }  # fmt: skip
    held = 0
    try:
        seed = [{"board": BOARD, "member": f"player:{m:06d}", "value": 1} for m in range(MEMBERS)]
        for s in sides.values():
            for i in range(0, MEMBERS, 1000):
                s.submit_many(seed[i : i + 1000])
        rnd = random.Random(1)
        work = [make_batch(rnd) for _ in range(batches)]

        def submit(s: Seasons) -> Callable[[int], object]:
            def step(i: int) -> None:
                nonlocal held
                held += s.submit_many(work[i]).held

            return step

        client = sides["without limits"].client
        cost = paired(client, {name: submit(s) for name, s in sides.items()}, batches, CHUNKS)
        boards = {
            name: {
                w: s.client.zrange(Keys(s.settings.namespace).window(BOARD, w, p), 0, -1,
                                   withscores=True)
                for w, p in _periods(s, calendar)
            }
            for name, s in sides.items()
        }  # fmt: skip
    finally:
        for s in sides.values():
            s.close()
    section.check("both sides' day, week and season boards equal, score by score",
                  boards["without limits"] == boards["with limits"])  # fmt: skip
    section.check("nothing held (the limits are loose: the same events applied)", held == 0)
    for name in sides:
        section.row(name, cost.total(name) / (batches * EVENTS_PER_BATCH))
    for name in sides:
        ingest = batches * EVENTS_PER_BATCH / cost.total(name, wall=True)
        section.row(f"{name}: ingest", ingest, "events/s, one client")
    ingest = 1 / cost.ratio("with limits", "without limits", wall=True)
    section.ratio("with / without limits, ingest events/s", ingest, ">=", INGEST_TARGET)
    ratio = cost.ratio("with limits", "without limits")
    section.ratio("with / without limits, Redis time per event", ratio)
    return section


def _periods(s: Seasons, calendar: Calendar) -> list[tuple[str, str]]:
    cfg = s.settings.boards[BOARD]
    out = []
    for window in win.board_windows(cfg):
        period = window.period_of_day(calendar.today, s.settings)
        assert period is not None
        out.append((window.name, period.id))
    return out


def main() -> int:  # pragma: no cover - python -m bench --only limits runs it
    import sys

    from bench.common import own_redis

    quick = "--quick" in sys.argv
    with own_redis() as server:
        section = run(server.url, QUICK_BATCHES if quick else FULL_BATCHES)
    print(section.render())
    return 0 if section.correct else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
