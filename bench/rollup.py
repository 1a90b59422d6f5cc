"""Rollup at scale: how long Redis is unresponsive while week and season boards are recomputed.

Day keys of ``members`` members each (7 for the week, 28 for the season) are written straight
into Redis; the week and season boards start out as the formula says and are then made to
drift. Two ways to recompute them are measured while a second client PINGs every 2 ms:

- one naive ZUNIONSTORE of all day keys (what a rollup would do without care);
- Seasons' :func:`seasons.jobs.reconcile.reconcile` (sliced repair for boards this size).

Reported: wall time, the longest PING round trip seen (Redis unresponsive), and whether the
board afterwards equals the ZUNIONSTORE result exactly.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import time
from dataclasses import dataclass
from typing import Any

import redis

from bench.common import Section
from seasons.config.settings import BoardSettings
from seasons.jobs.reconcile import Plan, reconcile
from seasons.scripts import Scripts

TAG = "bench:{rollup}"
WEEK_WEIGHTS = [1, 1, 1, 1, 1, 2, 2]


@dataclass(frozen=True)
class RollupSizes:
    members: int
    week_days: int = 7
    season_days: int = 28


FULL = RollupSizes(500_000)
QUICK = RollupSizes(50_000)
TINY = RollupSizes(2_000, 7, 10)


def _ping_loop(url: str, interval: float, stop: Any, worst: Any, count: Any) -> None:
    client = redis.Redis.from_url(url, socket_timeout=None)
    while not stop.is_set():
        start = time.perf_counter()
        client.ping()
        elapsed = time.perf_counter() - start
        with worst.get_lock():
            worst.value = max(worst.value, elapsed)
        count.value += 1
        time.sleep(interval)
    client.close()


class Pinger:
    """Another process that PINGs every ``interval`` and keeps the slowest round trip.

    A process, not a thread: a thread would also measure this process's own pauses (the GIL
    held while a large reply is parsed), which are not Redis being unresponsive.
    """

    def __init__(self, url: str, interval: float = 0.002):
        ctx = multiprocessing.get_context("spawn")
        self._stop = ctx.Event()
        self._worst = ctx.Value("d", 0.0)
        self._count = ctx.Value("i", 0)
        self._proc = ctx.Process(
            target=_ping_loop, args=(url, interval, self._stop, self._worst, self._count)
        )

    @property
    def worst(self) -> float:
        return float(self._worst.value)

    def __enter__(self) -> Pinger:
        self._proc.start()
        while self._count.value < 5:  # started and answering
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join()


def _fill(client: redis.Redis, keys: list[str], members: int, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"player-{i:07d}" for i in range(members)]
    for key in keys:
        for start in range(0, members, 20_000):
            chunk = names[start : start + 20_000]
            client.zadd(key, {m: rng.randint(0, 10_000) for m in chunk})


def _drift(client: redis.Redis, target: str, members: int) -> None:
    """Wrong scores for some members and a member on no day, like a board after a bug."""
    pipe = client.pipeline(transaction=False)
    for i in range(0, members, max(1, members // 100)):
        pipe.zincrby(target, 7, f"player-{i:07d}")
    pipe.zadd(target, {"ghost": 1})
    pipe.execute()


def _measure(url: str, fn: Any) -> tuple[float, float, float, Any]:
    """(wall s, slowest PING s, longest single command s per SLOWLOG, fn's result)."""
    admin = redis.Redis.from_url(url, socket_timeout=None)
    admin.config_set("slowlog-log-slower-than", 1000)  # microseconds
    admin.config_set("slowlog-max-len", 1024)
    admin.slowlog_reset()
    with Pinger(url) as pinger:
        time.sleep(0.05)
        start = time.perf_counter()
        result = fn()
        wall = time.perf_counter() - start
        time.sleep(0.05)
    log = admin.slowlog_get(1024)
    if os.environ.get("BENCH_DEBUG"):
        print(sorted(((e["duration"], e["command"][:80]) for e in log), reverse=True)[:3])
    longest = max((e["duration"] for e in log), default=0) / 1e6
    admin.close()
    return wall, pinger.worst, longest, result


def _one(
    url: str, client: redis.Redis, window: str, days: int, sizes: RollupSizes, section: Section
) -> None:
    board = BoardSettings(aggregate="sum", week_weights=WEEK_WEIGHTS)
    keys = [f"{TAG}:day:{window}:{i}" for i in range(days)]
    weights = [float(WEEK_WEIGHTS[i % 7]) for i in range(days)]
    _fill(client, keys, sizes.members, seed=days)
    target = f"{TAG}:{window}"
    naive = f"{TAG}:{window}:naive"
    client.zunionstore(target, dict(zip(keys, weights, strict=True)))
    _drift(client, target, sizes.members)

    wall_naive, stall_naive, cmd_naive, _ = _measure(
        url, lambda: client.zunionstore(naive, dict(zip(keys, weights, strict=True)))
    )
    plan = Plan(target, keys, weights, int(time.time()) + 86_400, f"{TAG}:{window}:scratch")
    wall, stall, cmd, outcome = _measure(
        url, lambda: reconcile(client, Scripts(client), board, plan)
    )
    exact = client.zrange(target, 0, -1, withscores=True) == client.zrange(
        naive, 0, -1, withscores=True
    )
    entries = days * sizes.members
    label = f"{window} ({days} days x {sizes.members:,})"
    section.row(f"{label}: naive ZUNIONSTORE wall", wall_naive * 1000)
    section.row(f"{label}: naive slowest PING", stall_naive * 1000)
    section.row(f"{label}: naive longest command", cmd_naive * 1000, "SLOWLOG")
    section.row(
        f"{label}: Seasons wall", wall * 1000, f"{outcome.mode}, {outcome.changed} repaired"
    )
    section.row(f"{label}: Seasons slowest PING", stall * 1000, f"{entries:,} entries in")
    section.row(f"{label}: Seasons longest command", cmd * 1000, "SLOWLOG")
    section.check(f"{window} board equals ZUNIONSTORE after the rollup", exact)
    section.ratio(f"{window}: Seasons longest command / 50 ms", cmd / 0.050, "<=", 1.0)
    client.delete(*keys, target, naive)


def run(url: str, sizes: RollupSizes = FULL) -> Section:
    section = Section(
        title="Rollup at scale",
        what="recompute week and season boards from day keys while a second client PINGs",
        unit="ms",
    )
    # A naive union of millions of entries runs for seconds: no socket timeout for it.
    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=None)
    try:
        _one(url, client, "week", sizes.week_days, sizes, section)
        _one(url, client, "season", sizes.season_days, sizes, section)
    finally:
        client.close()
    section.notes.append(
        "slowest PING: round trip of a PING sent every 2 ms from another process (includes that"
        " process's own scheduling on a busy machine); longest command: Redis's own SLOWLOG"
        " duration of the longest single command, i.e. the longest time Redis was busy"
    )
    return section
