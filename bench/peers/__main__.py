"""``python -m bench.peers [--quick]``: Seasons next to other leaderboard libraries.

Starts its own redis-server (free port, ``--save ''``), installs the peers on first use into
``bench/peers/scratch/``, and for each size runs every contender on the same events and the same
reads, one after the other, with a FLUSHALL before each. Prints progress, one table of rates and
ratios, and the extra timings that explain them. Exit status 1 if a contender's answers differ
from the expected ones (the comparison would not be honest), else 0: a row where Seasons is not
ahead is reported, not an error.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import redis

from bench.common import BOARD, Calendar, own_redis
from bench.peers import external, report
from bench.peers.inprocess import ROUNDS, DayPlan, PeerResult, run_pipeline, run_seasons
from bench.peers.workload import AROUND, TOP, Workload, differences, make_workload

FULL_SIZES = (10_000, 500_000, 2_000_000)
QUICK_SIZES = (10_000, 100_000)
REQUESTS = 5_000
BATCH = 1_000

LEGEND = f"""\
contenders, each from empty keys, the same events ({{events}} members, one event each, with
member data):
  Seasons      submit_many, batches of {{batch}}: one Lua call writes the day, week and season
               boards (weighted write-through), EXPIREAT and the member data; reads: day board
  redis-rank   {{redis_rank}}
               a daily PeriodicLeaderboard (aggregate = ZINCRBY); member data in a hash beside
               it (the library keeps none): updatePipe + HSET, one pipeline per batch; top and
               around are the library call + one HMGET
  leaderboard  {{leaderboard}}
               one board named by the day; change_score_for(member, value, member_data) per
               event (its batch call rank_members sets scores, without member data)
  pipeline     hand-written redis-py, the same keys and work as Seasons: ZINCRBY x3 per event,
               one HSET + 3 EXPIREAT per batch, transaction=False; reads: plain commands + HMGET
reads: {{requests}} sequential requests per kind from one client to random members, in {ROUNDS}
interleaved rounds (the best round counts); top {TOP}; around: {AROUND} entries (5 either side,
shifted at the ends); rank: Seasons returns rank, score and member data, the others the rank
alone"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}")
    parser.add_argument("--sizes", help="comma-separated member counts instead of the defaults")
    parser.add_argument("--requests", type=int, default=REQUESTS, help="requests per read kind")
    parser.add_argument("--batch", type=int, default=BATCH, help="events per write batch")
    opts = parser.parse_args(argv)
    if opts.sizes:
        sizes = tuple(int(x) for x in opts.sizes.split(","))
    else:
        sizes = QUICK_SIZES if opts.quick else FULL_SIZES
    started = time.monotonic()
    calendar = Calendar.for_today()

    rr, lb = external.ensure_redis_rank(), external.ensure_leaderboard()
    with own_redis() as server:
        admin = server.client()
        version = admin.info("server")["redis_version"]
        print(
            f"Seasons next to other leaderboard libraries -- own redis-server {version} on "
            f"{server.url} (save '', appendonly no); Python {platform.python_version()}, "
            f"redis-py {redis.__version__}; node {_node_version()}; {os.cpu_count()} CPUs, "
            f"load average {_load()}"
        )
        print(
            LEGEND.format(
                events=", ".join(report.human(n) for n in sizes), batch=opts.batch,
                redis_rank=rr.installed, leaderboard=lb.installed, requests=opts.requests,
            ),
            flush=True,
        )  # fmt: skip
        results: dict[int, dict[str, PeerResult]] = {}
        info: dict[int, dict[str, float]] = {}
        problems: list[str] = []
        for size in sizes:
            results[size], info[size] = run_size(
                size, server.url, admin, calendar, opts, rr, lb, problems
            )
        admin.close()

    versions = {name: r.version for by_peer in results.values() for name, r in by_peer.items()}
    print("\nversions: " + "; ".join(f"{name}: {v}" for name, v in versions.items()))
    print("\n" + report.table(results))
    _explain(results, info)
    missed = report.misses(results)
    if missed:
        print(f"target (Seasons ahead of redis-rank and leaderboard on every row): MISSED on "
              f"{len(missed)} of {len(report.OPS) * len(sizes)} rows:")  # fmt: skip
        print("\n".join(f"  {m}" for m in missed))
    else:
        print("target (Seasons ahead of redis-rank and leaderboard on every row): met")
    for p in problems:
        print(f"check FAILED: {p}")
    print(f"answers checked against plain Python: {'all OK' if not problems else 'FAILED'}; "
          f"{time.monotonic() - started:.0f} s; load average {_load()}")  # fmt: skip
    return 1 if problems else 0


def run_size(
    size: int,
    url: str,
    admin: Any,
    calendar: Calendar,
    opts: argparse.Namespace,
    rr: external.External,
    lb: external.External,
    problems: list[str],
) -> tuple[dict[str, PeerResult], dict[str, float]]:
    """Every contender at one size, FLUSHALL before each; adds failed checks to ``problems``."""
    results: dict[str, PeerResult] = {}
    info: dict[str, float] = {}
    work = make_workload(size, opts.requests)
    gc.collect()
    gc.freeze()  # the workload's millions of objects are the bench's, not the contenders'
    events = external.RUN_DIR / f"events-{size}.tsv"
    events.parent.mkdir(parents=True, exist_ok=True)
    work.write_events(events)
    plan = _plan(url, calendar, work, events, opts.batch)
    runners: dict[str, Callable[[], tuple[PeerResult, dict[str, Any]]]] = {
        "Seasons": lambda: (run_seasons(url, work, calendar, batch=opts.batch), {}),
        "redis-rank": lambda: external.run_external(rr, plan, str(size)),
        "leaderboard": lambda: external.run_external(lb, plan, str(size)),
        "pipeline": lambda: (run_pipeline(url, work, calendar, batch=opts.batch), {}),
    }
    skip = {peer.name for peer in (rr, lb) if not peer.available}
    try:
        for name, run in runners.items():
            if name in skip:
                continue
            admin.flushall()
            began = time.monotonic()
            try:
                result, extra = run()
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                problems.append(f"{name} at {report.human(size)}: {exc}")
                print(f"  {report.human(size):>4}  {name:<11}  FAILED: {exc}", flush=True)
                continue
            wrong = differences(result.answers, work.expected) + result.problems
            problems += [f"{name} at {report.human(size)}: {p}" for p in wrong]
            results[name] = result
            for key, seconds in extra.items():
                info[f"{name}:{key.removesuffix('_seconds')}"] = size / seconds
            verdict = "OK" if not wrong else "WRONG: " + wrong[0]
            print(
                f"  {report.human(size):>4}  {name:<11}  ingest {result.ingest_seconds:6.1f} s"
                f"  reads {result.read_seconds:5.1f} s  used_memory after ingest "
                f"{result.memory / 2**20:6.1f} MiB  answers {verdict}"
                f"  ({time.monotonic() - began:.0f} s)",
                flush=True,
            )
    finally:
        admin.flushall()
        events.unlink(missing_ok=True)
        gc.unfreeze()
    return results, info


def _plan(url: str, calendar: Calendar, work: Workload, events: Any, batch: int) -> dict[str, Any]:
    """What the out-of-process peers get: the same events, reads and clock as the others."""
    day = DayPlan.of(calendar.settings(url, "peers-plan"), calendar.now)
    return {
        "redis_url": url,
        "events": str(events),
        "batch": batch,
        "now": calendar.now.isoformat(),
        "day": calendar.today.isoformat(),
        "prefix": f"peers-{BOARD}",
        "top": TOP,
        "around": AROUND,
        "rounds": ROUNDS,
        "targets": work.targets,
        "check": work.check,
        "week_weight": day.week_weight,
        "season_weight": day.season_weight,
        "node_dir": str(external.NODE_DIR),
        "same_work": True,
        "batched_info": True,
    }


def _explain(results: report.Results, info: dict[int, dict[str, float]]) -> None:
    """The extra ingest timings: the same work in redis-rank, leaderboard's batch call."""
    lines = []
    for size, extra in info.items():
        ours = results[size].get("Seasons")
        for key, label in (
            ("redis-rank:ingest_same_work",
             "redis-rank writing what Seasons writes (day+week+season boards, data, EXPIREAT)"),
            ("leaderboard:ingest_rank_members",
             "leaderboard rank_members in batches (sets scores, no member data)"),
        ):  # fmt: skip
            if key in extra:
                ratio = f"  Seasons / it {ours.rate('ingest') / extra[key]:.2f}" if ours else ""
                lines.append(
                    f"  {report.human(size):>4}  {label}: {extra[key]:,.0f} events/s{ratio}"
                )
    if lines:
        print("\ninformation, ingest:")
        print("\n".join(lines))
    print(
        "\nCPU in microseconds per event (ingest) or request (reads), the contender's process "
        "+ redis-server:"
    )
    for op, _ in report.OPS:
        for size, by_peer in results.items():
            cells = []
            for name, r in by_peer.items():
                if op == "ingest":
                    mine, theirs = r.ingest_client_cpu / r.events, r.ingest_redis_cpu / r.events
                    mine, theirs = mine * 1e6, theirs * 1e6
                else:
                    mine, theirs = r.read_cpu_per_request(op)
                cells.append(f"{name} {mine:.0f} + {theirs:.0f}")
            print(f"  {op:<6} {report.human(size):>4}  " + "   ".join(cells))


def _node_version() -> str:
    try:
        done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "not found"
    return done.stdout.strip() or "not found"


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
