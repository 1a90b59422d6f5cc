"""Section: HTTP throughput and latency of reads against the same server's ``/healthz``.

The server is ``uvicorn`` (httptools, uvloop: as ``seasons serve`` runs it) with one worker
process on 127.0.0.1 (``seasons serve`` runs one by default; the machine has two cores and
the load generator needs the other), access log off, serving
``create_app`` on a day board of ``board_members`` members with metadata. The load comes from
this (second) process: a small asyncio HTTP/1.1 keep-alive client over raw streams (much
lighter than an HTTP library, so the client is less of a ceiling), ``CONNECTIONS`` connections
each sending requests back to back. Per kind -- ``/healthz`` (no I/O), top 10 with metadata,
around a member (size 10) -- requests are split into interleaved rounds; the best round's
requests/s counts, and p50/p99 latency are over every request of the kind.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from bench.common import BOARD, ROOT, Calendar, Section, Sizes
from bench.reads import AROUND, TOP, populate
from seasons import Seasons

NS_HTTP = "bench-http"
CONNECTIONS = 16
STARTUP_TIMEOUT = 20.0
TARGET = 0.6

SERVER = """
import sys
from datetime import date
import uvicorn
from bench.common import Calendar
from seasons.http.app import create_app
url, ns, today, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
calendar = Calendar(date.fromisoformat(today))
app = create_app(calendar.settings(url, ns), clock=calendar.clock(), freeze_gc=True)
uvicorn.run(app, host="127.0.0.1", port=port, workers=1, log_level="warning", access_log=False,
            loop="uvloop", http="httptools", server_header=False, proxy_headers=False)
"""


class Conn:
    """One keep-alive HTTP/1.1 connection: GET, read status and body (Content-Length)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def get(self, path: str) -> tuple[int, bytes]:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        body = await self.reader.readexactly(length)
        return status, body

    def close(self) -> None:
        self.writer.close()


async def _blast(port: int, paths: list[str], latencies: list[float]) -> float:
    """Send ``paths`` over CONNECTIONS connections; returns elapsed seconds."""
    conns = [await Conn.open(port) for _ in range(CONNECTIONS)]
    queue = iter(paths)
    failures: list[str] = []

    async def worker(conn: Conn) -> None:
        for path in queue:
            start = time.perf_counter()
            status, _ = await conn.get(path)
            latencies.append(time.perf_counter() - start)
            if status != 200:
                failures.append(f"{status} {path}")

    begin = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - begin
    for c in conns:
        c.close()
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed, e.g. {failures[0]}")
    return elapsed


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc); 0.0 where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _start_server(url: str, calendar: Calendar, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, url, NS_HTTP, calendar.today.isoformat(), str(port)],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the bench's uvicorn exited with {proc.returncode}")
        try:
            status, _ = asyncio.run(_one(port, "/healthz"))
            if status == 200:
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the bench's uvicorn did not answer /healthz in time")


async def _one(port: int, path: str) -> tuple[int, bytes]:
    conn = await Conn.open(port)
    try:
        return await conn.get(path)
    finally:
        conn.close()


def _check(port: int, s: Seasons, target: str) -> list[str]:
    """The HTTP answers equal the Python API's for the same queries."""
    problems = []
    status, body = asyncio.run(_one(port, f"/v1/boards/{BOARD}/day?limit={TOP}"))
    if status != 200 or json.loads(body) != s.top(BOARD, "day", limit=TOP).model_dump():
        problems.append("top 10 over HTTP differs from Seasons.top")
    path = f"/v1/boards/{BOARD}/day/members/{quote(target, safe='')}/around?size={AROUND}"
    status, body = asyncio.run(_one(port, path))
    expected = s.around(BOARD, target, "day", size=AROUND)
    if status != 200 or expected is None or json.loads(body) != expected.model_dump():
        problems.append("around over HTTP differs from Seasons.around")
    return problems


def run(url: str, sizes: Sizes, calendar: Calendar | None = None) -> Section:
    """Populate the board, start the server, check its answers, then time each kind."""
    from redis_server import free_port  # bench.common.own_redis put tests/ on sys.path

    calendar = calendar or Calendar.for_today()
    s = Seasons(calendar.settings(url, NS_HTTP), clock=calendar.clock())
    port = free_port()
    proc = None
    try:
        s.client.delete(s.keys.day(BOARD, calendar.today))
        names = populate(s, sizes.board_members)
        rnd = random.Random(5)
        n = max(CONNECTIONS, sizes.requests // sizes.read_rounds)
        targets = [quote(rnd.choice(names), safe="") for _ in range(n)]
        kinds: dict[str, Callable[[int], str]] = {
            "healthz": lambda i: "/healthz",
            "top": lambda i: f"/v1/boards/{BOARD}/day?limit={TOP}",
            "around": lambda i: f"/v1/boards/{BOARD}/day/members/{targets[i]}/around?size={AROUND}",
        }
        proc = _start_server(url, calendar, port)
        problems = _check(port, s, names[len(names) // 2])
        for make in kinds.values():  # warm up
            asyncio.run(_blast(port, [make(i) for i in range(min(n, 500))], []))
        best: dict[str, float] = {}
        latencies: dict[str, list[float]] = {k: [] for k in kinds}
        cpu: dict[str, float] = dict.fromkeys(kinds, 0.0)  # the server's CPU seconds per kind
        for _ in range(sizes.read_rounds):
            for name, make in kinds.items():
                before = _cpu_seconds(proc.pid)
                seconds = asyncio.run(_blast(port, [make(i) for i in range(n)], latencies[name]))
                cpu[name] += _cpu_seconds(proc.pid) - before
                best[name] = min(best.get(name, seconds), seconds)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        s.close()

    rate = {name: n / seconds for name, seconds in best.items()}
    section = Section(
        "HTTP",
        f"uvicorn (httptools, uvloop), 1 worker, 127.0.0.1; load from a second process over "
        f"{CONNECTIONS} keep-alive connections; day board of {sizes.board_members:,} members "
        "with metadata; "
        f"{n * sizes.read_rounds:,} requests per kind in {sizes.read_rounds} interleaved "
        "round(s), best round counts; latency over every request",
        "requests/s",
    )
    labels = {
        "healthz": "GET /healthz (no I/O)",
        "top": f"GET top {TOP}, with metadata",
        "around": f"GET around member, size {AROUND}",
    }
    for name, label in labels.items():
        p50, p99 = _pct(latencies[name], 0.50) * 1000, _pct(latencies[name], 0.99) * 1000
        per = cpu[name] / (n * sizes.read_rounds) * 1e6
        section.row(
            label, rate[name], f"p50 {p50:.2f} ms, p99 {p99:.2f} ms; server CPU {per:.0f} us/req"
        )
    section.check(
        "HTTP answers equal the Python API's" + (f" -- {'; '.join(problems)}" if problems else ""),
        not problems,
    )
    section.ratio("ratio top / healthz", rate["top"] / rate["healthz"], ">=", TARGET)
    section.ratio("ratio around / healthz", rate["around"] / rate["healthz"], ">=", TARGET)
    section.notes.append(
        "the client runs in this process; client, server and Redis share the two cores. The "
        "server is CPU-bound: the ratios are about its CPU per request (the column's note)"
    )
    section.notes.append(
        "pages and around run on the event loop down one pipelined connection (seasons.executor) "
        "and answer the script's JSON as is; the server freezes its startup objects out of "
        "the garbage collector (gc.freeze) -- see docs/http-api.md#http-performance"
    )
    return section


if __name__ == "__main__":  # python -m bench.http [--quick]: this section alone
    from bench.common import FULL, QUICK, own_redis

    chosen = QUICK if "--quick" in sys.argv else FULL
    with own_redis() as server:
        print(run(server.url, chosen).render())
