"""What each tie rule costs a read, side by side on the same scores.

``member`` and ``shared`` ranks come from Redis in O(log n). A ``dense`` rank counts distinct
scores, which a sorted set cannot count in O(log n): the board keeps its distinct scores in a
sorted set beside it (its distinct set), so a dense rank is one ZCOUNT of that, O(log n) too.
An ``earliest`` read reads whole each run of
equal scores it touches, with the members' reach times, and sorts it
(``seasons/lua/lib/ranks.lua``). This bench puts 100 000 members on a day board four ways --
few distinct scores (100), groups of about 10 equal scores, groups of about 1 000, all scores
distinct -- once per tie rule (the earliest board with a reach set of random times), and
times a page of 10, a member's entry and 10 entries around a member at positions 1, 1 000 and
50 000. It prints the dense rank and the size of the member's run of equal scores there. Each
figure is the median of a few reads through the Python API (``Seasons.run``, one EVALSHA
each), so it includes the client's overhead, the same for every rule.

    .venv/bin/python -m bench.ties [--members N] [--reads N]

It starts its own redis-server (``bench.common.own_redis``) and writes the day keys, the
reach set and the distinct sets directly (their layout is public), which is much faster than
``submit_many`` and reads the same.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

from bench.common import Calendar, own_redis
from seasons import Seasons
from seasons.config import Settings, load_settings
from seasons.keys import Keys

NS = "bench-ties"
# The text ZSCORE answers for each of ARGV (members of KEYS[1]): what a distinct set holds.
SCORE_TEXTS = (
    "local o = {} for i, m in ipairs(ARGV) do o[i] = redis.call('ZSCORE', KEYS[1], m) end return o"
)
TIES = ("member", "shared", "dense", "earliest")
POSITIONS = (1, 1_000, 50_000)
# name -> value of the i-th of n members
SPREADS: dict[str, Callable[[int, int, random.Random], float]] = {
    "few distinct (100)": lambda i, n, rnd: float(rnd.randint(1, 100)),
    "groups of ~10": lambda i, n, rnd: float(rnd.randint(1, max(1, n // 10))),
    "groups of ~1000": lambda i, n, rnd: float(rnd.randint(1, max(1, n // 1000))),
    "all distinct": lambda i, n, rnd: float(i),
}


def settings(url: str) -> Settings:
    boards = {
        f"s{k}_{ties}": {"aggregate": "max", "order": "desc", "ties": ties}
        for k in range(len(SPREADS))
        for ties in TIES
    }
    with tempfile.TemporaryDirectory(prefix="seasons-bench-") as tmp:
        empty = Path(tmp) / "seasons.toml"
        empty.write_text("")
        return load_settings(
            environ={}, path=empty, namespace=NS, timezone="UTC", redis={"url": url},
            boards=boards,
        )  # fmt: skip


def populate(client: redis.Redis, keys: Keys, calendar: Calendar, members: int) -> None:
    """The same scores on every board of a spread; the earliest one with its reach set
    (random times within a day, some equal), the dense one with its distinct set (each
    distinct score, as the text ZSCORE answers for it)."""
    day = calendar.today.isoformat()
    for k, value in enumerate(SPREADS.values()):
        rnd = random.Random(k)
        first = keys.day(f"s{k}_{TIES[0]}", calendar.today)
        reached = keys.reached(f"s{k}_earliest", "day", day)
        for start in range(0, members, 10_000):
            names = [f"u{i:07d}" for i in range(start, min(members, start + 10_000))]
            client.zadd(first, {m: value(i, members, rnd) for i, m in enumerate(names, start)})
            client.zadd(reached, {m: 2.0e9 + rnd.randrange(86_400) for m in names})
        for ties in TIES[1:]:
            client.copy(first, keys.day(f"s{k}_{ties}", calendar.today), replace=True)
        distinct = keys.distinct(f"s{k}_dense", "day", day)
        client.delete(distinct)
        texts: set[bytes] = set()
        cursor = 0
        while True:
            cursor, rows = client.zscan(first, cursor, count=10_000)
            if rows:
                texts.update(client.eval(SCORE_TEXTS, 1, first, *(m for m, _ in rows)))
            if cursor == 0:
                break
        listed = sorted(texts)
        for start in range(0, len(listed), 10_000):
            client.zadd(distinct, {t: float(t) for t in listed[start : start + 10_000]})


def _reads(s: Seasons, member: str, position: int) -> dict[str, Callable[[str], object]]:
    """The timed reads of one board (named by the caller), at ``member``'s position."""
    return {
        "page of 10": lambda b: s.top(b, "day", offset=position - 1, limit=10),
        "entry": lambda b: s.rank(b, member, "day"),
        "around, size 10": lambda b: s.around(b, member, "day", size=10),
    }


def median_ms(read: Callable[[str], object], board: str, reads: int) -> float:
    read(board)  # the script cached, the connection open
    times = []
    for _ in range(reads):
        start = time.perf_counter()
        read(board)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ties", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--members", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=15, help="reads per figure (median)")
    args = parser.parse_args(argv)
    calendar = Calendar.for_today()
    with own_redis() as server:
        cfg = settings(server.url)
        client = redis.Redis.from_url(server.url)
        keys = Keys(NS)
        populate(client, keys, calendar, args.members)
        with Seasons(cfg, clock=calendar.clock()) as s:
            print(f"{args.members:,} members on a day board; median of {args.reads} reads, ms")
            print(f"{'spread':<20} {'read':<16} {'position':>8} {'dense':>7} {'run':>6}  "
                  + "  ".join(f"{t:>8}" for t in TIES))  # fmt: skip
            for k, spread in enumerate(SPREADS):
                for position in POSITIONS:
                    if position > args.members:
                        continue
                    top = s.top(f"s{k}_member", "day", offset=position - 1, limit=1)
                    name, score = top.entries[0].member, top.entries[0].score
                    dense = s.rank(f"s{k}_dense", name, "day")
                    assert dense is not None
                    run = client.zcount(keys.day(f"s{k}_member", calendar.today), score, score)
                    for label, read in _reads(s, name, position).items():
                        cells = [median_ms(read, f"s{k}_{t}", args.reads) for t in TIES]
                        print(f"{spread:<20} {label:<16} {position:>8,} {dense.rank:>7,} "
                              f"{run:>6,}  " + "  ".join(f"{c:>8.2f}" for c in cells),
                              flush=True)  # fmt: skip
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
