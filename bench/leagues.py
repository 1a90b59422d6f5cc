"""``python -m bench --only leagues``: what a league costs (issue 24 §5, docs/leagues.md).

Three figures, each measured side by side in one run and believed only after its checks:

1. **Ingest on a league board** against the same board without one: two namespaces, the same
   batches of 100 events (as :mod:`bench.limits`) on a pool of members that all joined
   already, in slices alternating between the sides (:func:`bench.common.paired`). Target:
   the league side at least 0.9x the other's events/s; Redis's time per event for
   information. The seed (every member's first event: a join on the league side) is paired
   too and reported per event, for information. Checks: both sides' boards equal score by
   score; the league side holds ceil(members / cohort_size) cohorts, each member in one.
2. **The close of a period** of ``members`` members (1 000 000: 33 334 cohorts of 30), its
   state written straight into Redis, then the league close of it, step by step; target: its
   longest single command <= 10 ms (:mod:`bench.league_close`).
3. **A cohort read against a page read of the same size**: ``Seasons.league(board, member)``
   (a 30-member cohort) against ``Seasons.top(board, "week", limit=30)`` at a random offset,
   paired; reads/s (target: at least as fast) and Redis's time per read. A third side reads
   the cohort as if one of its scores had changed since its last read (no rows to reuse),
   for information. The same over HTTP: :mod:`bench.league_http`.

    .venv/bin/python -m bench.leagues [--quick] [--members N]
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.common import BOARD, Calendar, Section, paired
from bench.league_close import SIZE, run_close, settings, week_of
from seasons import Seasons
from seasons import windows as win
from seasons.keys import Keys
from seasons.leagues import COHORT_SPAN

NS_FREE, NS_LEAGUE, NS_READS = "bench-league-free", "bench-league", "bench-league-reads"
EVENTS_PER_BATCH = 100
CHUNKS = 20
INGEST_TARGET = 0.9  # league / no league, ingest events/s, at least (the figure)
READ_TARGET = 1.0  # cohort reads/s over page reads/s, at least ("as fast")


@dataclass(frozen=True)
class LeagueSizes:
    members: int  # ingest: the pool every batch falls on (all joined)
    batches: int  # ingest: batches of 100 per side
    close_members: int  # the close: members in cohorts (idle ones come on top: IDLE_SHARE)
    reads: int  # cohort reads and page reads, each


FULL = LeagueSizes(10_000, 4_000, 1_000_000, 20_000)
QUICK = LeagueSizes(6_000, 120, 30_000, 2_000)
TINY = LeagueSizes(600, 4, 3_000, 40)


def pool(members: int) -> list[str]:
    return [f"player:{m:06d}" for m in range(members)]


# --- 1. ingest ------------------------------------------------------------------------------


def run_ingest(url: str, sizes: LeagueSizes, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Leagues: ingest on a league board",
        f"batches of {EVENTS_PER_BATCH} on a sum board (day, week, season) of "
        f"{sizes.members:,} members, without and with a weekly league (cohorts of {SIZE}), "
        f"every member joined; {sizes.batches} batches per side, in {CHUNKS} slices "
        "alternating between the sides",
        "µs/event",
    )
    sides = {
        "no league": Seasons(settings(url, NS_FREE, calendar, False), clock=calendar.clock()),
        "league": Seasons(settings(url, NS_LEAGUE, calendar, True), clock=calendar.clock()),
    }
    names = pool(sizes.members)
    try:
        rnd = random.Random(7)
        seed = [
            [{"board": BOARD, "member": m, "value": rnd.randint(1, 50)}
             for m in names[i : i + EVENTS_PER_BATCH]]
            for i in range(0, sizes.members, EVENTS_PER_BATCH)
        ]  # fmt: skip
        work = [
            [{"board": BOARD, "member": rnd.choice(names), "value": rnd.randint(1, 50)}
             for _ in range(EVENTS_PER_BATCH)]
            for _ in range(sizes.batches)
        ]  # fmt: skip

        def submit(s: Seasons, batches: list[list[dict[str, Any]]]) -> Callable[[int], object]:
            return lambda i: s.submit_many(batches[i])

        client = sides["no league"].client
        first = paired(client, {n: submit(s, seed) for n, s in sides.items()}, len(seed), CHUNKS)
        cost = paired(client, {n: submit(s, work) for n, s in sides.items()}, len(work), CHUNKS)
        boards = {name: week_boards(s, calendar) for name, s in sides.items()}
        joined = cohorts_of(sides["league"], week_of(sides["league"], calendar))
    finally:
        for s in sides.values():
            s.close()
    section.check("both sides' day, week and season boards equal, score by score",
                  boards["no league"] == boards["league"])  # fmt: skip
    expected = math.ceil(sizes.members / SIZE)
    section.check(
        f"the league side holds ceil({sizes.members:,} / {SIZE}) = {expected:,} cohorts, "
        "none over the size, each member of the pool in one",
        len(joined) == expected
        and all(0 < len(ms) <= SIZE for ms in joined.values())
        and sorted(m for ms in joined.values() for m in ms) == names,
    )
    events = sizes.batches * EVENTS_PER_BATCH
    for name in sides:
        section.row(name, cost.total(name) / events)
    for name in sides:
        section.row(f"{name}: ingest", events / cost.total(name, wall=True), "events/s")
    for name in sides:
        section.row(f"{name}: first events", first.total(name) / sizes.members,
                    "µs/event, every member new (joins)")  # fmt: skip
    ingest = 1 / cost.ratio("league", "no league", wall=True)
    section.ratio("league / no league, ingest events/s", ingest, ">=", INGEST_TARGET)
    section.ratio("league / no league, Redis time per event", cost.ratio("league", "no league"))
    section.ratio(
        "first events: league / no league, Redis time", first.ratio("league", "no league")
    )
    return section


def week_boards(s: Seasons, calendar: Calendar) -> dict[str, Any]:
    keys, out = Keys(s.settings.namespace), {}
    for window in win.board_windows(s.settings.boards[BOARD]):
        period = window.period_of_day(calendar.today, s.settings)
        assert period is not None
        key = keys.window(BOARD, window.name, period.id)
        out[window.name] = s.client.zrange(key, 0, -1, withscores=True)
    return out


def cohorts_of(s: Seasons, period: win.Period) -> dict[int, list[str]]:
    """Cohort id -> its members, from the ``joined`` set (a waiting member: cohort 0)."""
    keys = Keys(s.settings.namespace)
    out: dict[int, list[str]] = {}
    for member, place in s.client.zrange(keys.league(BOARD, period.id, "joined"), 0, -1,
                                         withscores=True):  # fmt: skip
        out.setdefault(max(0, int(place) // COHORT_SPAN), []).append(member)
    ids = s.client.hkeys(keys.league(BOARD, period.id, "cohorts"))
    return out if sorted(int(i) for i in ids) == sorted(out) else {}


# --- 3. reads -----------------------------------------------------------------------------


def run_reads(url: str, sizes: LeagueSizes, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Leagues: a cohort read against a page read",
        f"one client, sequential reads on a league board of {sizes.members:,} members (week "
        f"board, cohorts of {SIZE}): Seasons.league(board, member) of a random member "
        f"against Seasons.top(board, 'week', limit={SIZE}) at a random offset; "
        f"{sizes.reads:,} reads each, in {CHUNKS} slices alternating",
        "reads/s",
    )
    with Seasons(settings(url, NS_READS, calendar, True), clock=calendar.clock()) as s:
        names = seed_reads(s, sizes)
        rnd = random.Random(4)
        asked = [rnd.choice(names) for _ in range(sizes.reads)]
        offsets = [rnd.randrange(0, sizes.members - SIZE + 1) for _ in range(sizes.reads)]
        reads = s.league_reads

        def ranked_anew(i: int) -> object:
            # As if a score of the cohort had changed since its last read: no rows to reuse
            # (the plan still reads it in one transaction).
            reads._last.clear()
            return s.league(BOARD, asked[i])

        sides: dict[str, Callable[[int], object]] = {
            "cohort read": lambda i: s.league(BOARD, asked[i]),
            "cohort read, ranked anew": ranked_anew,
            "page read": lambda i: s.top(BOARD, "week", limit=SIZE, offset=offsets[i]),
        }
        cost = paired(s.client, sides, sizes.reads, CHUNKS)
        period = week_of(s, calendar)
        checks = check_reads(s, period, asked[:20], offsets[:20])
    for label, ok in checks:
        section.check(label, ok)
    for name in sides:
        section.row(name, sizes.reads / cost.total(name, wall=True))
    for name in sides:
        section.row(f"{name}: Redis time", cost.total(name) / sizes.reads, "µs/read")
    section.decimals = 1
    speed = 1 / cost.ratio("cohort read", "page read", wall=True)
    section.ratio("cohort / page, reads/s", speed, ">=", READ_TARGET)
    anew = 1 / cost.ratio("cohort read, ranked anew", "page read", wall=True)
    section.ratio("cohort ranked anew / page, reads/s", anew)
    section.ratio("cohort / page, Redis time per read", cost.ratio("cohort read", "page read"))
    return section


def seed_reads(s: Seasons, sizes: LeagueSizes) -> list[str]:
    """The board the read figures read: every member of the pool scores once (0..500: ties)
    and so joins a cohort of 30 of the current week. Returns the pool."""
    names = pool(sizes.members)
    rnd = random.Random(3)
    for i in range(0, sizes.members, 1000):
        s.submit_many([{"board": BOARD, "member": m, "value": rnd.randint(1, 500)}
                       for m in names[i : i + 1000]])  # fmt: skip
    return names


def check_reads(s: Seasons, period: win.Period, asked: list[str], offsets: list[int]
                ) -> list[tuple[str, bool]]:  # fmt: skip
    """Each cohort read holds its member's cohort (from ``joined``) with the board's scores,
    in the board's order; each page read is ZRANGE REV's slice."""
    keys = Keys(s.settings.namespace)
    board = keys.window(BOARD, "week", period.id)
    joined = keys.league(BOARD, period.id, "joined")
    cohorts_ok = pages_ok = True
    for member in asked:
        read = s.league(BOARD, member)
        place = s.client.zscore(joined, member)
        assert place is not None
        c = int(place) // COHORT_SPAN
        names = s.client.zrangebyscore(joined, c * COHORT_SPAN, c * COHORT_SPAN + COHORT_SPAN - 1)
        scores = s.client.zmscore(board, names)
        want = sorted(zip(scores, names, strict=True), key=lambda x: (x[0], x[1].encode()),
                      reverse=True)  # fmt: skip
        rows = getattr(read, "rows", [])
        cohorts_ok &= len(names) == SIZE and [(r.score, r.member) for r in rows] == want
    for offset in offsets:
        page = s.top(BOARD, "week", limit=SIZE, offset=offset)
        raw = s.client.zrange(board, offset, offset + SIZE - 1, desc=True, withscores=True)
        pages_ok &= [(e.member, e.score) for e in page.entries] == [(m, x) for m, x in raw]
    return [
        (f"{len(asked)} cohort reads: {SIZE} members, the board's scores, in its order",
         cohorts_ok),
        (f"{len(offsets)} page reads: ZRANGE REV's {SIZE} members and scores", pages_ok),
    ]  # fmt: skip


def run(url: str, sizes: LeagueSizes, calendar: Calendar | None = None) -> list[Section]:
    """The three figures, the read's also over HTTP, each on an emptied server (``python -m
    bench --only leagues``)."""
    import redis

    from bench.league_http import run_http

    calendar = calendar or Calendar.for_today()
    out = []
    for figure in (
        lambda: run_ingest(url, sizes, calendar),
        lambda: run_close(url, sizes.close_members, calendar),
        lambda: run_reads(url, sizes, calendar),
        lambda: run_http(url, sizes, calendar, quick=sizes is not FULL),
    ):
        redis.Redis.from_url(url).flushall()
        out.append(figure())
    return out


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a command
    import argparse

    from bench.common import own_redis

    parser = argparse.ArgumentParser(prog="python -m bench.leagues",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--members", type=int, default=None, help="of the close")
    opts = parser.parse_args(argv)
    sizes = QUICK if opts.quick else FULL
    if opts.members:
        sizes = LeagueSizes(sizes.members, sizes.batches, opts.members, sizes.reads)
    with own_redis() as server:
        sections = run(server.url, sizes)
    for section in sections:
        print(section.render() + "\n", flush=True)
    return 0 if all(s.correct for s in sections) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
