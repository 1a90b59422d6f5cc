"""``python -m bench.moderation``: what hidden members cost the write path in Redis's time
(docs/fair-play.md).

The same batches (100 events on a pool of 10,000 members with scores already, as in
:mod:`bench.limits`) are written through ``Seasons.submit_many`` to the ``sum`` board of
:mod:`bench.common` under two namespaces: one with no moderation hash, one with 1% of the
members hidden (so most batches hold a hidden member, whose events go to the twin keys).
Before a figure is believed, the moderated side's public boards must equal the other side's
without the hidden members, and its twins must hold exactly those. Rounds alternate the two
sides; per side the best round counts. The figure is Redis's time per event
(``INFO commandstats``, a script's commands counted once).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from bench.common import BOARD, Calendar, Section
from bench.http_peers import command_stats, command_usec
from bench.limits import EVENTS_PER_BATCH, MEMBERS, make_batch
from seasons import Seasons
from seasons import windows as win
from seasons.keys import Keys

NS_FREE = "bench-mod-free"
NS_HIDDEN = "bench-mod-hidden"
HIDDEN_SHARE = 100  # one member in this many is hidden: 1%
FULL_BATCHES = 400
QUICK_BATCHES = 60
FULL_READS = 2000  # per kind, side and round
QUICK_READS = 200
ROUNDS = 3


def run(url: str, batches: int, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Hidden members: Redis time per event",
        f"batches of {EVENTS_PER_BATCH} on a sum board (day, week, season) of {MEMBERS:,} "
        f"members, without a moderation hash and with 1% of the members hidden; {batches} "
        f"batches per side and round, best of {ROUNDS} rounds",
        "µs/event",
    )
    sides = {
        "no moderation hash": Seasons(calendar.settings(url, NS_FREE), clock=calendar.clock()),
        "1% hidden": Seasons(calendar.settings(url, NS_HIDDEN), clock=calendar.clock()),
    }
    hidden = {f"player:{m:06d}" for m in range(0, MEMBERS, HIDDEN_SHARE)}
    best: dict[str, float] = {}
    try:
        seed = [{"board": BOARD, "member": f"player:{m:06d}", "value": 1} for m in range(MEMBERS)]
        for s in sides.values():
            for i in range(0, MEMBERS, 1000):
                s.submit_many(seed[i : i + 1000])
        for member in sorted(hidden):
            sides["1% hidden"].moderate(member, "hidden", boards=[BOARD], reason="bench")
        for round_ in range(ROUNDS):
            rnd = random.Random(round_)
            work = [make_batch(rnd) for _ in range(batches)]
            for name, s in sides.items():
                before = command_stats(s.client)
                for batch in work:
                    s.submit_many(batch)
                usec = command_usec(before, command_stats(s.client))
                per_event = usec / (batches * EVENTS_PER_BATCH)
                best[name] = min(best.get(name, per_event), per_event)
        same = True
        for w, p in _periods(sides["1% hidden"], calendar):
            free, mod = (
                {_text(m): sc for m, sc in s.client.zrange(
                    Keys(s.settings.namespace).window(BOARD, w, p), 0, -1, withscores=True)}
                for s in sides.values()
            )  # fmt: skip
            twin_key = Keys(NS_HIDDEN).hidden(Keys(NS_HIDDEN).window(BOARD, w, p))
            twin = {_text(m): sc for m, sc in sides["1% hidden"].client.zrange(
                twin_key, 0, -1, withscores=True)}  # fmt: skip
            same = same and mod == {m: v for m, v in free.items() if m not in hidden}
            same = same and twin == {m: v for m, v in free.items() if m in hidden}
    finally:
        for s in sides.values():
            s.close()
    section.check("public boards = the other side's without the hidden members; twins = "
                  "the hidden members' scores", same)  # fmt: skip
    for name, value in best.items():
        section.row(name, value)
    ratio = best["1% hidden"] / best["no moderation hash"]
    section.ratio("1% hidden / none, Redis time per event", ratio, "<=", 1 / 0.9)
    return section


def run_reads(url: str, requests: int, calendar: Calendar | None = None) -> Section:
    """Reads of visible members (and public pages) on a board with 1% of its members hidden
    against the same board with none: Redis time per read, per kind. Target: within 0.95x
    (the hidden side's time at most 1/0.95 of the other's)."""
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Hidden members: Redis time per read",
        f"a sum board of {MEMBERS:,} members, without a moderation hash and with 1% hidden; "
        f"{requests} reads of visible members per kind, side and round, best of {ROUNDS} "
        "rounds (day window)",
        "µs/read",
    )
    sides = {
        "none hidden": Seasons(calendar.settings(url, NS_FREE + "-r"), clock=calendar.clock()),
        "1% hidden": Seasons(calendar.settings(url, NS_HIDDEN + "-r"), clock=calendar.clock()),
    }
    hidden = [f"player:{m:06d}" for m in range(0, MEMBERS, HIDDEN_SHARE)]
    rnd = random.Random(7)
    visible = [f"player:{m:06d}" for m in range(MEMBERS) if m % HIDDEN_SHARE]
    asked = [rnd.choice(visible) for _ in range(requests)]
    kinds: dict[str, Callable[[Seasons, int], object]] = {
        "top": lambda s, i: s.top(BOARD, "day", limit=10),
        "entry": lambda s, i: s.rank(BOARD, asked[i], "day"),
        "around": lambda s, i: s.around(BOARD, asked[i], "day", size=11),
        "lookup": lambda s, i: s.lookup(BOARD, asked[i : i + 20], "day"),
        "history": lambda s, i: s.history(BOARD, asked[i], "day", last=7),
    }
    best: dict[tuple[str, str], float] = {}
    same = True
    try:
        seed = [
            {"board": BOARD, "member": f"player:{m:06d}", "value": rnd.randint(1, 10_000)}
            for m in range(MEMBERS)
        ]
        for s in sides.values():
            for i in range(0, MEMBERS, 1000):
                s.submit_many(seed[i : i + 1000])
        for member in hidden:
            sides["1% hidden"].moderate(member, "hidden", boards=[BOARD], reason="bench")
        # A visible member's own reads answer alike on both sides but for the hidden members
        # above it: its score is the same, its rank lower by them.
        for member in asked[:50]:
            free = sides["none hidden"].rank(BOARD, member, "day")
            mod = sides["1% hidden"].rank(BOARD, member, "day")
            above = sum(1 for h in hidden if (e := sides["none hidden"].rank(BOARD, h, "day"))
                        and free and e.rank < free.rank)  # fmt: skip
            same = same and free is not None and mod is not None
            same = same and mod.score == free.score and mod.rank == free.rank - above
        for _ in range(ROUNDS):
            for kind, read in kinds.items():
                for name, s in sides.items():
                    before = command_stats(s.client)
                    for i in range(requests):
                        read(s, i)
                    usec = command_usec(before, command_stats(s.client)) / requests
                    best[kind, name] = min(best.get((kind, name), usec), usec)
    finally:
        for s in sides.values():
            s.close()
    section.check("a visible member's entry: same score, rank lower by the hidden above it",
                  same)  # fmt: skip
    for kind in kinds:
        for name in sides:
            section.row(f"{kind}: {name}", best[kind, name])
        ratio = best[kind, "1% hidden"] / best[kind, "none hidden"]
        section.ratio(f"{kind}: 1% hidden / none, Redis time per read", ratio, "<=", 1 / 0.95)
    return section


def _periods(s: Seasons, calendar: Calendar) -> list[tuple[str, str]]:
    out = []
    for window in win.board_windows(s.settings.boards[BOARD]):
        period = window.period_of_day(calendar.today, s.settings)
        assert period is not None
        out.append((window.name, period.id))
    return out


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def main() -> int:  # pragma: no cover - python -m bench.moderation runs it
    import sys

    from bench.common import own_redis

    quick = "--quick" in sys.argv
    with own_redis() as server:
        sections = [
            run(server.url, QUICK_BATCHES if quick else FULL_BATCHES),
            run_reads(server.url, QUICK_READS if quick else FULL_READS),
        ]
    for section in sections:
        print(section.render())
    return 0 if all(section.correct for section in sections) else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
