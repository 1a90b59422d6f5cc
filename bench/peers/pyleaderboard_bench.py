"""The ``leaderboard`` side of ``python -m bench.peers``: ``python pyleaderboard_bench.py PLAN``.

Runs in its own virtual environment (``bench/peers/scratch/pyleaderboard-venv``, made by
``bench/peers/external.py``) with the ``leaderboard`` package and nothing of Seasons: only the
standard library and the library under test are imported here.

PLAN.json: redis_url, events (``member TAB value TAB member-data-json`` lines), batch, day (the
board's date), prefix, top, around, rounds, targets, check, batched_info (also time
``rank_members``).
Prints one JSON object: what was done, the seconds it took, and the checked answers.

The app this stands for keeps one board per day, named by the date, with the library's own
member data. Each event is ``change_score_for(member, value, member_data)`` (ZINCRBY + HSET in
one MULTI/EXEC): the library's only way to add to a score, and its only way to write member
data with a score; ``rank_members``, its one batch call, sets scores (ZADD) without member data.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from importlib import metadata
from typing import Any
from urllib.parse import urlparse

from leaderboard.leaderboard import Leaderboard  # type: ignore[import-not-found, unused-ignore]

WARMUP = 500


def load_events(path: str) -> list[tuple[str, int, str]]:
    with open(path, encoding="utf-8") as lines:
        return [(m, int(v), d) for m, v, d in (line.rstrip("\n").split("\t") for line in lines)]


def time_reads(ops: dict[str, Any], targets: list[str], rounds: int, client: Any) -> dict[str, Any]:
    """Like ``bench.peers.inprocess.time_reads``: interleaved rounds, seconds of each, CPU."""
    size = len(targets) // rounds
    for fn in ops.values():
        for member in targets[:WARMUP]:
            fn(member)
    out: dict[str, Any] = {name: [] for name in ops}
    cpu = {name: [0.0, 0.0] for name in ops}
    for r in range(rounds):
        chunk = targets[r * size : (r + 1) * size]
        for name, fn in ops.items():
            gc.collect()
            server = redis_cpu(client)
            began, mine = time.perf_counter(), time.process_time()
            for member in chunk:
                fn(member)
            out[name].append(time.perf_counter() - began)
            cpu[name][0] += time.process_time() - mine
            cpu[name][1] += redis_cpu(client) - server
    out["round_requests"] = size
    out["cpu"] = cpu
    return out


def redis_cpu(client: Any) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def with_data(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        raw = row.get("member_data")
        row["member_data"] = json.loads(raw) if raw else {}
    return rows


def main(plan_path: str) -> None:
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    url = urlparse(plan["redis_url"])
    events = load_events(plan["events"])
    gc.collect()
    gc.freeze()  # the bench's millions of event tuples are not the library's garbage to scan
    name = f"{plan['prefix']}:kills:{plan['day']}"
    lb = Leaderboard(
        name, host=url.hostname, port=url.port, db=0, page_size=plan["top"], decode_responses=True
    )

    redis_before = redis_cpu(lb.redis_connection)
    began, cpu = time.perf_counter(), time.process_time()
    for member, value, data in events:
        lb.change_score_for(member, value, data)
    ingest_seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    redis_used = redis_cpu(lb.redis_connection) - redis_before
    memory = lb.redis_connection.info("memory")["used_memory"]

    size = plan["around"]
    ops = {
        "top": lambda m: with_data(lb.leaders(1, page_size=plan["top"], with_member_data=True)),
        "around": lambda m: with_data(lb.around_me(m, page_size=size, with_member_data=True)),
        "rank": lambda m: lb.rank_for(m),
    }
    reads = time_reads(ops, plan["targets"], plan["rounds"], lb.redis_connection)

    answers: dict[str, Any] = {
        "top": [[r["member"], r["score"], r["member_data"]] for r in ops["top"]("")],
        "ranks": {},
        "around": {},
    }
    for member in plan["check"]:
        rank = lb.rank_for(member)
        if rank is not None:
            answers["ranks"][member] = rank
        answers["around"][member] = [[r["member"], r["rank"]] for r in ops["around"](member)]

    info = {}
    if plan.get("batched_info"):
        other = Leaderboard(f"{name}:batched", host=url.hostname, port=url.port, db=0)
        batch = plan["batch"]
        flats = [
            [x for member, value, _ in events[start : start + batch] for x in (member, value)]
            for start in range(0, len(events), batch)
        ]
        began = time.perf_counter()
        for flat in flats:
            other.rank_members(flat)
        info["ingest_rank_members_seconds"] = time.perf_counter() - began

    dist = lb_version()
    versions = f"{dist}, redis-py {metadata.version('redis')}"
    print(
        json.dumps(
            {
                "peer": "leaderboard",
                "version": versions,
                "ingest": {
                    "events": len(events),
                    "seconds": ingest_seconds,
                    "client_cpu": cpu,
                    "redis_cpu": redis_used,
                    "memory": memory,
                },
                "reads": reads,
                "answers": answers,
                "info": info,
                "problems": [],
            }
        )
    )


def lb_version() -> str:
    for dist in ("ninchanese-leaderboard", "leaderboard"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "leaderboard (version unknown)"


if __name__ == "__main__":
    main(sys.argv[1])
