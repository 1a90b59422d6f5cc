"""What ``ties = "earliest"`` costs a read, side by side with ``member`` ties on the same board.

Among equal scores an earliest board ranks the member that reached its score first higher,
from a reach set kept beside the board (``Keys.reached``). A sorted set orders equal scores
by member bytes only, so the read scripts read the whole run of equal scores a read touches
(ZRANGE BYSCORE s s, then ZMSCORE of the reach set) and sort it
(``seasons/lua/lib/ranks.lua``): a read costs O(log n) plus the size of those runs. This
bench puts 100 000 members on a day board three ways -- groups of about 10 equal scores,
groups of about 1 000, all scores distinct -- with random reach times, and times, per tie
rule, a page of 10, a member's entry and 10 entries around a member, at positions 1, 1 000
and 50 000 of the board. Each figure is the median of a few reads through the Python API
(``Seasons.run``, one EVALSHA each), so it includes the client's overhead, the same for both
tie rules.

    flock /tmp/bench.lock .venv/bin/python -m bench.earliest [--members N] [--reads N]

It starts its own redis-server (``bench.common.own_redis``) and writes the boards' day keys
and the reach sets directly (their layout is public), which is much faster than
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

NS = "bench-earliest"
TIES = ("member", "earliest")
POSITIONS = (1, 1_000, 50_000)
# name -> value of the i-th of n members
SPREADS: dict[str, Callable[[int, int, random.Random], float]] = {
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
    """The same scores on both boards of a spread; the earliest one with its reach set
    (random times within a day, some equal)."""
    day = calendar.today.isoformat()
    for k, value in enumerate(SPREADS.values()):
        rnd = random.Random(k)
        first = keys.day(f"s{k}_{TIES[0]}", calendar.today)
        reached = keys.reached(f"s{k}_earliest", "day", day)
        for start in range(0, members, 10_000):
            names = [f"u{i:07d}" for i in range(start, min(members, start + 10_000))]
            client.zadd(first, {m: value(i, members, rnd) for i, m in enumerate(names, start)})
            client.zadd(reached, {m: 2.0e9 + rnd.randrange(86_400) for m in names})
        client.copy(first, keys.day(f"s{k}_earliest", calendar.today), replace=True)


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
        prog="python -m bench.earliest", description=__doc__.split("\n")[0]
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
            print(f"{'spread':<20} {'read':<20} {'position':>8} {'run':>6}  "
                  + "  ".join(f"{t:>8}" for t in TIES) + "  ratio")  # fmt: skip
            for k, spread in enumerate(SPREADS):
                for position in POSITIONS:
                    if position > args.members:
                        continue
                    top = s.top(f"s{k}_earliest", "day", offset=position - 1, limit=1)
                    name, score = top.entries[0].member, top.entries[0].score
                    run = client.zcount(keys.day(f"s{k}_earliest", calendar.today), score, score)
                    for label, read in _reads(s, name, position).items():
                        cells = [median_ms(read, f"s{k}_{t}", args.reads) for t in TIES]
                        print(f"{spread:<20} {label:<20} {position:>8,} {run:>6,}  "
                              + "  ".join(f"{c:>8.2f}" for c in cells)
                              + f"  {cells[1] / cells[0]:>5.2f}", flush=True)  # fmt: skip
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
