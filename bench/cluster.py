"""Section "cluster" (only with ``--only cluster``): what one board's single slot means for its
write rate, on a local Redis Cluster of 3 masters with 1 replica each (tests/redis_cluster.py).

Every key of a board is in one hash slot, so one master runs every write script of that board
(the replica only applies the effects). The same writers, ``WRITERS`` processes each calling
``Seasons.submit_many`` with batches of ``BATCH`` events (event ids and values of 1, members
drawn from 10 000), write for a fixed time:

- into one board: one master works, the other two idle;
- into three boards, one on each master: each writer takes one board per batch, in turn.

Reported: events/s through the API, and each master's CPU seconds (``INFO cpu``, user + sys)
spent meanwhile. Events per CPU-second of the busy master is the ceiling of ONE board on this
machine (a Redis master runs scripts on one thread); boards on different masters add up
until the writers or the machine run out of CPU. Checks: every acknowledged event is on its
board exactly once (day board sum), and each board's keys are on the master of its slot.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import ROOT, Section
from seasons.config import Settings, load_settings

BATCH = 100
MEMBERS = 10_000
WRITERS = 4  # processes; each waits on Redis part of the time, so more than the 2 cores


@dataclass(frozen=True)
class Sizes:
    seconds: float  # each scenario writes this long
    writers: int


FULL = Sizes(seconds=6.0, writers=WRITERS)
QUICK = Sizes(seconds=2.0, writers=WRITERS)
TINY = Sizes(seconds=0.5, writers=2)


def _tests_on_path() -> None:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def settings(url: str, namespace: str, boards: list[str]) -> Settings:
    with tempfile.TemporaryDirectory(prefix="seasons-bench-") as tmp:
        empty = Path(tmp) / "seasons.toml"
        empty.write_text("")
        return load_settings(
            environ={}, path=empty, namespace=namespace, timezone="UTC",
            redis={"url": url, "cluster": True}, boards={b: {} for b in boards},
        )  # fmt: skip


def writer(
    url: str,
    namespace: str,
    boards: list[str],
    seed: int,
    seconds: float,
    start: Any,
    results: Any,
) -> None:
    """One writer process: batches of BATCH events, one board per batch in turn, for
    ``seconds`` after ``start`` is set. Puts None on ``results`` when ready, then
    (acknowledged events per board)."""
    from seasons import Seasons

    rnd = random.Random(seed)
    done = dict.fromkeys(boards, 0)
    with Seasons(settings(url, namespace, boards)) as app:
        app.submit(boards[0], "warm-up", 0)  # connections, slot map, scripts loaded
        results.put(None)
        start.wait()
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            board = boards[n % len(boards)]
            events = [
                {"board": board, "member": f"p{rnd.randrange(MEMBERS):05d}", "value": 1,
                 "event_id": f"w{seed}-{n}-{i}"}
                for i in range(BATCH)
            ]  # fmt: skip
            done[board] += app.submit_many(events).applied
            n += 1
    results.put(done)


def _cpu(cluster: Any, port: int) -> float:
    c = cluster.node_client(port, decode_responses=True)
    try:
        info = c.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    finally:
        c.close()


def scenario(
    cluster: Any, namespace: str, boards: list[str], sizes: Sizes
) -> tuple[float, dict[int, float], dict[str, int]]:
    """(events/s, master port -> CPU seconds, board -> acknowledged events)."""
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(
            target=writer,
            args=(
                cluster.url,
                namespace,
                boards[w % len(boards) :] + boards[: w % len(boards)],
                w,
                sizes.seconds,
                start,
                results,
            ),
        )  # fmt: skip
        for w in range(sizes.writers)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every writer started, connected and warmed up
        assert results.get(timeout=60) is None
    masters = cluster.master_ports()
    cpu_before = {p: _cpu(cluster, p) for p in masters}
    began = time.monotonic()
    start.set()
    totals = dict.fromkeys(boards, 0)
    for _ in procs:
        for board, n in results.get(timeout=sizes.seconds + 60).items():
            totals[board] += n
    wall = time.monotonic() - began
    for p in procs:
        p.join(timeout=30)
    cpu = {p: _cpu(cluster, p) - cpu_before[p] for p in masters}
    return sum(totals.values()) / wall, cpu, totals


def board_on_each_master(cluster: Any) -> dict[int, str]:
    from redis.crc import key_slot

    ranges = [(int(a), int(b), int(m[1])) for a, b, m, *_ in cluster._slots()]
    out: dict[int, str] = {}
    n = 0
    while len(out) < len(ranges):
        slot = key_slot(f"b{n}".encode())
        out.setdefault(next(p for a, b, p in ranges if a <= slot <= b), f"b{n}")
        n += 1
    return out


def run(sizes: Sizes = FULL) -> Section:
    _tests_on_path()
    from redis_cluster import LocalCluster

    from seasons import Seasons

    section = Section(
        "Cluster: one board is one slot",
        f"local Redis Cluster, 3 masters + 1 replica each; {sizes.writers} writer processes, "
        f"submit_many batches of {BATCH} events (event ids, value 1), {sizes.seconds:g} s "
        f"per scenario; {os.cpu_count()} CPUs for cluster and writers together",
        "events/s",
    )
    with LocalCluster() as cluster:
        placed = board_on_each_master(cluster)
        one = [placed[min(placed)]]
        spread = list(placed.values())
        measured = {}
        for label, ns, boards in (("one board", "bench-one", one),
                                  ("three boards", "bench-three", spread)):  # fmt: skip
            rate, cpu, totals = scenario(cluster, ns, boards, sizes)
            measured[label] = (rate, cpu)
            busiest = max(cpu.values())
            section.row(
                f"{label} ({', '.join(boards)})",
                rate,
                "master CPU s: " + ", ".join(f"{cpu[p]:.2f}" for p in sorted(cpu)),
            )
            # Correct: each acknowledged event is on its board once (day sums), keys in place.
            with Seasons(settings(cluster.url, ns, boards)) as app:
                for board in boards:
                    page = app.top(board, "day", limit=1000)
                    day = app.keys.day(board, datetime.now(UTC).date())
                    held = sum(s for _, s in app.client.zrange(day, 0, -1, withscores=True))
                    section.check(
                        f"{label}: {board}'s day board sums to its {totals[board]:,} "
                        f"acknowledged events ({page.total:,} members)",
                        held == totals[board],
                    )
                    port = next(p for p, b in placed.items() if b == board)
                    node = cluster.node_client(port)
                    try:
                        section.check(f"{label}: {board}'s day key on master :{port}",
                                      bool(node.exists(day)))  # fmt: skip
                    finally:
                        node.close()
            if label == "one board":
                ceiling = sum(totals.values()) / max(busiest, 1e-9)
                section.row("  events per CPU-second of its master", ceiling,
                            "the ceiling of one board on this machine")  # fmt: skip
    one_rate, three_rate = measured["one board"][0], measured["three boards"][0]
    section.ratio("three boards / one board", three_rate / one_rate)
    section.notes.append(
        "one board keeps one master busy and leaves the others idle; spread boards share the "
        "work, limited here by the writers' own CPU (validation in Python) on 2 cores"
    )
    return section


if __name__ == "__main__":
    print(run(QUICK if "--quick" in sys.argv else FULL).render())
