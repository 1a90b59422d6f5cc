"""Season results at scale: the archive copy and the results step of a season close.

``members`` members on the season board of each of three boards (member, shared and earliest
ties, each with reward tiers by rank and by percent) are written straight into Redis (the
earliest board with its reach set). Then, per board, the close's two steps are timed: the copy
to the archive key (:meth:`seasons.archives.Archives.copy`) and the results
(:meth:`seasons.results.Results.write`: every member's rank, score and reward into the
results hash, 1 000 fields per HSET). Reported: wall time of each, the slowest PING of a
second client sending one every 2 ms, and the longest single Redis command per SLOWLOG (the
target, as for the sliced rollup: <= 10 ms for the results step).

    .venv/bin/python -m bench.rewards [--members N] [--quick] [--settle SECONDS]

Also ``python -m bench --only rewards``. It starts its own redis-server.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import redis

from bench.common import Section, own_redis
from bench.rollup import Pinger
from seasons import Seasons
from seasons.archives import Archives
from seasons.config import Settings, load_settings
from seasons.results import Results

NS = "bench-rewards"
SEASON = "S1"
FULL = 500_000
QUICK = 50_000
TINY = 2_000
SAMPLE = 300  # members per board whose results are checked against ranks Redis gives
TIERS: list[dict[str, Any]] = [
    {"ranks": "1", "reward": "gold"},
    {"ranks": "2-10", "reward": "silver"},
    {"top_percent": 1, "reward": "bronze"},
    {"top_percent": 10, "reward": "token"},
]
BOARDS = {
    "by_member": {"aggregate": "sum", "ties": "member", "rewards": TIERS},
    "by_shared": {"aggregate": "sum", "ties": "shared", "rewards": TIERS},
    "by_earliest": {"aggregate": "max", "ties": "earliest", "rewards": TIERS},
}
SLOWER_THAN_US = 200  # SLOWLOG threshold: every command longer than this is kept


def settings(url: str, archive: Path) -> Settings:
    with tempfile.TemporaryDirectory(prefix="seasons-bench-") as tmp:
        empty = Path(tmp) / "seasons.toml"
        empty.write_text("")
        return load_settings(
            environ={}, path=empty, namespace=NS, timezone="UTC", redis={"url": url},
            boards=BOARDS, archive={"dir": str(archive)},
        )  # fmt: skip


def populate(client: redis.Redis, s: Seasons, members: int) -> None:
    """Season boards of ``members`` each; scores with ties (about 10 members a score)."""
    for k, board in enumerate(BOARDS):
        rnd = random.Random(k)
        key = s.keys.season(board, SEASON)
        reached = s.keys.reached(board, "season", SEASON)
        earliest = s.settings.boards[board].ties == "earliest"
        for start in range(0, members, 10_000):
            names = [f"player-{i:07d}" for i in range(start, min(members, start + 10_000))]
            client.zadd(key, {m: rnd.randrange(max(1, members // 10)) for m in names})
            if earliest:
                client.zadd(reached, {m: 2.0e9 + rnd.randrange(86_400 * 28) for m in names})


def reward_of(rank: int, total: int) -> str | None:
    """TIERS, by hand."""
    for tier in TIERS:
        if "ranks" in tier:
            ends = [int(x) for x in str(tier["ranks"]).split("-")]
            if ends[0] <= rank <= ends[-1]:
                return str(tier["reward"])
        elif rank <= math.ceil(Fraction(str(tier["top_percent"])) * total / 100):
            return str(tier["reward"])
    return None


def check(client: redis.Redis, s: Seasons, board: str, members: int) -> bool:
    """Every member has results; a sample's rank is the one Redis gives (member: ZREVRANK;
    shared: 1 + members with a higher score), its reward the tier rule's."""
    results = s.keys.results(board, SEASON)
    if client.hlen(results) != members + 1:
        return False
    archive = s.keys.archive(board, SEASON)
    ties = s.settings.boards[board].ties
    rnd = random.Random(99)
    sample = [f"player-{rnd.randrange(members):07d}" for _ in range(SAMPLE)] + ["player-0000000"]
    for member, raw in zip(sample, client.hmget(results, sample), strict=True):
        if raw is None:
            return False
        got = json.loads(raw)
        score = client.zscore(archive, member)
        if got["score"] != score or got["reward"] != reward_of(got["rank"], members):
            return False
        if ties == "member" and got["rank"] != client.zrevrank(archive, member) + 1:  # type: ignore[operator]
            return False
        if ties == "shared" and got["rank"] != client.zcount(archive, f"({score}", "+inf") + 1:
            return False
    return True


def _measure(admin: redis.Redis, url: str, fn: Any) -> tuple[float, float, float, int, int]:
    """(wall s, slowest PING s, longest command s, commands over the threshold, commands
    over 10 ms)."""
    admin.config_set("slowlog-log-slower-than", SLOWER_THAN_US)
    admin.config_set("slowlog-max-len", 100_000)
    admin.slowlog_reset()
    with Pinger(url) as pinger:
        start = time.perf_counter()
        fn()
        wall = time.perf_counter() - start
    log = admin.slowlog_get(100_000)
    longest = max((e["duration"] for e in log), default=0) / 1e6
    over = sum(1 for e in log if e["duration"] > 10_000)
    return wall, pinger.worst, longest, len(log), over


def run(url: str, members: int = FULL, settle: float = 0.0) -> Section:
    section = Section(
        title="Season results at scale",
        what=f"archive copy and results step of a season close, {members:,} members x 3 boards",
        unit="ms",
    )
    admin = redis.Redis.from_url(url, socket_timeout=None)
    with tempfile.TemporaryDirectory(prefix="seasons-bench-archive-") as archive:
        cfg = settings(url, Path(archive))
        with Seasons(cfg) as s:
            populate(admin, s, members)
            archives = Archives(s.client, s.scripts, s.settings, s.keys)
            results = Results(s.client, archives.standings, s.keys)
            now = s.clock()
            worst_results = 0.0
            for board in BOARDS:
                live = s.keys.season(board, SEASON)
                wall, ping, longest, n, over = _measure(
                    admin, url, lambda b=board, k=live: archives.copy(b, k, SEASON)
                )
                section.row(f"{board}: archive copy wall", wall * 1000)
                section.row(f"{board}: archive copy longest command", longest * 1000, "SLOWLOG")
                time.sleep(settle)
                wall, ping, longest, n, over = _measure(
                    admin, url, lambda b=board: results.write(b, SEASON, now)
                )
                worst_results = max(worst_results, longest)
                section.row(f"{board}: results wall", wall * 1000)
                section.row(f"{board}: results slowest PING", ping * 1000)
                section.row(
                    f"{board}: results longest command", longest * 1000,
                    f"SLOWLOG; {n:,} commands over {SLOWER_THAN_US} us, {over} over 10 ms",
                )  # fmt: skip
                section.check(f"{board}: results of every member, ranks and rewards right",
                              check(admin, s, board, members))  # fmt: skip
            section.ratio("results: longest command / 10 ms", worst_results / 0.010, "<=", 1.0)
    admin.close()
    section.notes.append(
        "longest command: Redis's own SLOWLOG duration of the longest single command during "
        "the step; slowest PING: round trip of a PING every 2 ms from another process"
    )
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.rewards", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--members", type=int, default=None, help=f"per board (default {FULL:,})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK:,} members per board")
    parser.add_argument(
        "--settle", type=float, default=0.0,
        help="seconds to wait between the archive copy and the results (default 0, as in a "
        "close): tells the results step's own commands from the copy's aftermath",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    members = opts.members or (QUICK if opts.quick else FULL)
    with own_redis() as server:
        section = run(server.url, members, opts.settle)
    print(section.render())
    return 0 if section.correct else 1


if __name__ == "__main__":
    sys.exit(main())
