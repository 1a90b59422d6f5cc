"""``python -m bench [--quick] [--only SECTION]``: Seasons against plain Redis, side by side.

Sections: ingest, Redis's time per event of a write against the plain commands
(``bench/writes.py``), what per-member limits add to it (``bench/limits.py``), what a league
costs ingest, its close at scale and its cohort read (``bench/leagues.py``), what 1%
hidden members add to a write and to the reads of the others (``bench/moderation.py``), reads,
Redis's time per read against the plain commands (``bench/redis_time.py``), HTTP, memory,
the rollup of week and season boards at scale, and the results step of a season close at
scale (``bench/rewards.py``).
``--only cluster`` (never part of the default run: it starts a local Redis Cluster of its own)
measures one board's write rate against boards spread over the cluster's masters.
``--only shards`` (never part of the default run either: it starts clusters of 1, 2 and 3
masters) measures a sharded board's write capacity per master, its memory, its reads, what
an exact dense rank over shards would cost (``bench/shards.py``), and its reads over HTTP
(``bench/shards_http.py``).
``--only soak`` (never part of the default run either; ``--seconds N``, default 180) runs
writers, readers and the worker over HTTP while a fault injector kills and pauses processes,
then checks every board and archive against a model of the acknowledged events
(``bench/soak.py``); it starts its own servers and needs none of the shared one.
``--only http-peers`` (alone; never part of the default run) is ``python -m bench.http_peers``:
``seasons serve`` against a Fastify + ioredis peer under wrk (``bench/http_peers.py``).

Starts its own redis-server on a free port (never the shared one on 6379), runs the three
sections on it side by side with the same data, prints one plain-text report and stops the
server. Exit status 1 if a correctness check fails (the comparison would not be honest), else
0: a missed target is reported as MISS in the text, since it depends on the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import hiredis
import redis

from bench import (
    cluster,
    http,
    http_peers,
    ingest,
    leagues,
    limits,
    memory,
    moderation,
    reads,
    redis_time,
    rewards,
    rollup,
    shards,
    shards_http,
    soak,
    writes,
)
from bench.common import FULL, QUICK, Calendar, Section, own_redis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes: well under 30 s")
    parser.add_argument(
        "--only",
        choices=[
            "ingest",
            "writes",
            "limits",
            "leagues",
            "moderation",
            "reads",
            "redis-time",
            "http",
            "memory",
            "rollup",
            "rewards",
            "cluster",
            "shards",
            "soak",
            "http-peers",
        ],  # fmt: skip
        action="append",
        help="run only these sections (repeatable)",
    )
    parser.add_argument(
        "--seconds", type=float, default=None,
        help="soak: how long writers run under faults (default 180; 30 with --quick)",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    if opts.only and "http-peers" in opts.only:
        if set(opts.only) != {"http-peers"}:
            parser.error("--only http-peers runs alone")
        return http_peers.main(["--quick"] if opts.quick else [])
    if opts.only and set(opts.only) == {"soak"}:
        return _soak(opts)
    sizes = QUICK if opts.quick else FULL
    calendar = Calendar.for_today()
    started = time.monotonic()
    with own_redis() as server:
        client = server.client()
        version = client.info("server")["redis_version"]
        client.close()
        print(
            f"Seasons bench -- own redis-server {version} on {server.url} (save '', appendonly "
            f"no); Python {platform.python_version()}, redis-py {redis.__version__}, hiredis "
            f"{hiredis.__version__}; clock fixed at {calendar.now.isoformat()}"
        )
        print(f"sizes {sizes.describe()}")
        print(f"load average at start {_load()} ({os.cpu_count()} CPUs)", flush=True)
        sections: list[Section] = []
        wanted = set(
            opts.only
            or [
                "ingest",
                "writes",
                "limits",
                "leagues",
                "moderation",
                "reads",
                "redis-time",
                "http",
                "memory",
                "rollup",
                "rewards",
            ]  # fmt: skip
        )
        if "ingest" in wanted:
            sections.append(ingest.run(server.url, sizes, calendar))
            print("\n" + sections[-1].render(), flush=True)
        if "writes" in wanted:
            batches = writes.QUICK_BATCHES if opts.quick else writes.FULL_BATCHES
            sections.append(writes.run(server.url, batches, calendar))
            print("\n" + sections[-1].render(), flush=True)
        if "limits" in wanted:
            server.client().flushall()
            batches = limits.QUICK_BATCHES if opts.quick else limits.FULL_BATCHES
            sections.append(limits.run(server.url, batches, calendar))
            print("\n" + sections[-1].render(), flush=True)
        if "leagues" in wanted:
            for section in leagues.run(server.url, leagues.QUICK if opts.quick else leagues.FULL,
                                       calendar):  # fmt: skip
                sections.append(section)
                print("\n" + section.render(), flush=True)
        if "moderation" in wanted:
            server.client().flushall()
            batches = moderation.QUICK_BATCHES if opts.quick else moderation.FULL_BATCHES
            sections.append(moderation.run(server.url, batches, calendar))
            print("\n" + sections[-1].render(), flush=True)
            requests = moderation.QUICK_READS if opts.quick else moderation.FULL_READS
            sections.append(moderation.run_reads(server.url, requests, calendar))
            print("\n" + sections[-1].render(), flush=True)
            server.client().flushall()
        for name, run in (("reads", reads.run), ("http", http.run)):
            if name in wanted:
                sections.append(run(server.url, sizes, calendar))
                print("\n" + sections[-1].render(), flush=True)
        if "memory" in wanted:
            reuse = "reads" in wanted  # the reads section leaves its board behind
            sections.append(memory.run(server.url, sizes, calendar, reuse_board=reuse))
            print("\n" + sections[-1].render(), flush=True)
        if "redis-time" in wanted:
            server.client().flushall()
            sections.append(redis_time.run(server.url, sizes, calendar))
            print("\n" + sections[-1].render(), flush=True)
        if "rollup" in wanted:
            server.client().flushall()
            sections.append(rollup.run(server.url, rollup.QUICK if opts.quick else rollup.FULL))
            print("\n" + sections[-1].render(), flush=True)
        if "rewards" in wanted:
            server.client().flushall()
            members = rewards.QUICK if opts.quick else rewards.FULL
            sections.append(rewards.run(server.url, members))
            print("\n" + sections[-1].render(), flush=True)
        if "cluster" in wanted:
            sections.append(cluster.run(cluster.QUICK if opts.quick else cluster.FULL))
            print("\n" + sections[-1].render(), flush=True)
        if "shards" in wanted:
            shards.run(
                server.url,
                shards.QUICK if opts.quick else shards.FULL,
                progress=lambda s: (sections.append(s), print("\n" + s.render(), flush=True)),
            )
            sections.append(shards_http.run(server.url, quick=opts.quick))
            print("\n" + sections[-1].render(), flush=True)
    if opts.only and "soak" in opts.only:
        sections.append(_soak_section(opts))
        print("\n" + sections[-1].render(), flush=True)
    verdicts = ", ".join(
        f"{s.title.lstrip('0123456789. ')} {'PASS' if s.passed else 'MISS'}" for s in sections
    )
    print(f"\nsummary: {verdicts}; {time.monotonic() - started:.0f} s; load average {_load()}")
    return 0 if all(s.correct for s in sections) else 1


def _soak_section(opts: argparse.Namespace) -> Section:
    seconds = opts.seconds if opts.seconds is not None else 30.0 if opts.quick else 180.0
    return soak.run(soak.Options(seconds=seconds))


def _soak(opts: argparse.Namespace) -> int:
    """``--only soak``: no shared redis-server; exit 1 if anything was lost or doubled."""
    print(f"Seasons soak -- Python {platform.python_version()}, redis-py {redis.__version__}; "
          f"load average at start {_load()} ({os.cpu_count()} CPUs)", flush=True)  # fmt: skip
    section = _soak_section(opts)
    print("\n" + section.render())
    print(f"\nsummary: soak {'PASS' if section.correct else 'FAIL'}; load average {_load()}")
    return 0 if section.correct else 1


def _load() -> str:
    """The 1/5/15 minute load averages: other work on the machine skews every number."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
