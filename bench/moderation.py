"""``python -m bench.moderation``: what hidden members cost the write path in Redis's time
(docs/fair-play.md).

The same batches (100 events on a pool of 10,000 members with scores already, as in
:mod:`bench.limits`) are written through ``Seasons.submit_many`` to the ``sum`` board of
:mod:`bench.common` under two namespaces: one with no moderation hash, one with 1% of the
members hidden (so most batches hold a hidden member, whose events go to the twin keys).
Before a figure is believed, the moderated side's public boards must equal the other side's
without the hidden members, and its twins must hold exactly those. The two sides run in
slices that alternate between them (:func:`bench.common.paired`). The figure is Redis's time
per event (``INFO commandstats``, a script's commands counted once), for information: what
hidden members cost the write script (the moderation hash read once per batch, the twin keys
named in every batch once the board has a hidden member).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

from bench.common import BOARD, Calendar, Paired, Section, paired
from bench.limits import EVENTS_PER_BATCH, MEMBERS, make_batch
from seasons import Seasons
from seasons import windows as win
from seasons.keys import Keys

NS_FREE = "bench-mod-free"
NS_HIDDEN = "bench-mod-hidden"
HIDDEN_SHARE = 100  # one member in this many is hidden: 1%
FULL_BATCHES = 1_000
QUICK_BATCHES = 120
FULL_READS = 6_000  # per kind and side
QUICK_READS = 400
CHUNKS = 20  # slices alternating between the sides: bench.common.paired


def run(url: str, batches: int, calendar: Calendar | None = None) -> Section:
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Hidden members: Redis time per event",
        f"batches of {EVENTS_PER_BATCH} on a sum board (day, week, season) of {MEMBERS:,} "
        f"members, without a moderation hash and with 1% of the members hidden; {batches} "
        f"batches per side, in {CHUNKS} slices alternating between the sides",
        "µs/event",
    )
    sides = {
        "no moderation hash": Seasons(calendar.settings(url, NS_FREE), clock=calendar.clock()),
        "1% hidden": Seasons(calendar.settings(url, NS_HIDDEN), clock=calendar.clock()),
    }
    hidden = {f"player:{m:06d}" for m in range(0, MEMBERS, HIDDEN_SHARE)}
    try:
        seed = [{"board": BOARD, "member": f"player:{m:06d}", "value": 1} for m in range(MEMBERS)]
        for s in sides.values():
            for i in range(0, MEMBERS, 1000):
                s.submit_many(seed[i : i + 1000])
        for member in sorted(hidden):
            sides["1% hidden"].moderate(member, "hidden", boards=[BOARD], reason="bench")
        rnd = random.Random(1)
        work = [make_batch(rnd) for _ in range(batches)]
        steps = {name: _submitting(s, work) for name, s in sides.items()}
        cost = paired(sides["1% hidden"].client, steps, batches, CHUNKS)
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
    for name in sides:
        section.row(name, cost.total(name) / (batches * EVENTS_PER_BATCH))
    ratio = cost.ratio("1% hidden", "no moderation hash")
    section.ratio("1% hidden / none, Redis time per event", ratio)
    return section


def run_reads(url: str, requests: int, calendar: Calendar | None = None) -> Section:
    """Reads of visible members (and public pages) on a board with 1% of its members hidden
    against the same board with none, per kind: reads/s through one client and Redis time
    per read, each within 0.95x (the hidden side's time at most 1/0.95 of the other's)."""
    calendar = calendar or Calendar.for_today()
    section = Section(
        "Hidden members: Redis time per read",
        f"a sum board of {MEMBERS:,} members, without a moderation hash and with 1% hidden; "
        f"{requests} reads of visible members per kind and side, in {CHUNKS} slices "
        "alternating between the sides (day window)",
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
    cost: dict[str, Paired] = {}
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
        client = sides["1% hidden"].client
        for kind, read in kinds.items():
            steps = {name: partial(read, s) for name, s in sides.items()}
            cost[kind] = paired(client, steps, requests, CHUNKS)
    finally:
        for s in sides.values():
            s.close()
    section.check("a visible member's entry: same score, rank lower by the hidden above it",
                  same)  # fmt: skip
    for kind in kinds:
        for name in sides:
            section.row(f"{kind}: {name}", cost[kind].total(name) / requests)
        for name in sides:
            per_s = requests / cost[kind].total(name, wall=True)
            section.row(f"{kind}: {name}, reads/s", per_s, "one client")
        ratio = 1 / cost[kind].ratio("1% hidden", "none hidden", wall=True)
        section.ratio(f"{kind}: 1% hidden / none, reads/s", ratio, ">=", 0.95)
        ratio = cost[kind].ratio("1% hidden", "none hidden")
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


def _submitting(s: Seasons, work: list[list[dict[str, object]]]) -> Callable[[int], object]:
    return lambda i: s.submit_many(work[i])
