"""``python -m bench.hooks [--quick] [--gib N]``: what a misbehaving webhook receiver costs a
real ``seasons worker``.

Each round starts a ``seasons worker`` process (the console's entry point, settings from
``SEASONS_CONFIG``) on the bench's own redis-server, with receivers of tests/receivers.py (a
thread per connection on a bare socket) in this process, and appends ``restore_done`` events
to the lifecycle stream as the worker's closes do:

1. *endless*: the receiver answers 200 and a body of up to ``--gib`` GiB (10 by default; a
   bound for a worker that would read it all). Reported: the worker's RSS and peak RSS
   (VmRSS, VmHWM of /proc/<pid>/status) before the delivery and after it, the bytes the
   receiver wrote, the seconds from the request to the connection's end, the requests made.
2. *drip*: a hook (``timeout = 3 s``) whose receiver drips its status line a byte a second,
   beside a healthy hook. Reported: the seconds the dripping request stayed open, and the
   healthy hook's events delivered while it was open.
3. *sigterm*: a hook with a 30 s timeout whose receiver drips: the seconds from SIGTERM to the
   worker's exit, and its exit status.

Exit status 1 if a check fails (delivered once, at most 16 MiB written, peak RSS up by less
than 50 MiB, the drip cut within its timeout + 2 s, the healthy hook served meanwhile, the
worker out within 5 s of SIGTERM), else 0. ``--quick``: a 1 GiB bound.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from bench.common import own_redis

KIND = "restore_done"
SECRET = "bench-hooks-secret"
MIB = 2**20


def status_of(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) * 1024
    return out


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise SystemExit(f"bench.hooks: timed out waiting for {what}")


class Bench:
    """The worker processes of one round, on the bench's redis-server and namespace."""

    def __init__(self, url: str, workdir: Path):
        self.url, self.workdir = url, workdir
        self.client = redis.Redis.from_url(url)
        self.stream = "bench-hooks:lifecycle"

    @contextmanager
    def worker(self, hooks: list[tuple[str, str, float]]) -> Iterator[subprocess.Popen[bytes]]:
        """A ``seasons worker`` with these hooks (name, url, timeout), killed on the way out."""
        self.client.flushall()
        config = self.workdir / "seasons.toml"
        text = (
            f'namespace = "bench-hooks"\n[redis]\nurl = "{self.url}"\n'
            f'[archive]\ndir = "{self.workdir / "archive"}"\n'
            "[worker]\nhooks_interval = 0.1\nheartbeat_interval = 1\n"
        )
        for name, url, timeout in hooks:
            text += (
                f'[[hooks]]\nname = "{name}"\nurl = "{url}"\nsecret = "{SECRET}"\n'
                f'timeout = {timeout}\nevents = ["{KIND}"]\n'
            )
        config.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
        env["SEASONS_CONFIG"] = str(config)
        process = subprocess.Popen(
            [sys.executable, "-c", "from seasons.cli import main; main()", "worker"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for("the hooks' groups", lambda: self.groups() == len(hooks))
            yield process
        finally:
            process.kill()
            process.wait(20)

    def groups(self) -> int:
        try:
            return len(self.client.xinfo_groups(self.stream))
        except redis.ResponseError:
            return 0

    def emit(self, n: int) -> None:
        for i in range(n):
            data = json.dumps({"board": "kills", "n": i})
            self.client.xadd(self.stream, {"id": f"{KIND}:{i}", "type": KIND,
                                           "at": "2026-12-01T08:00:00Z", "data": data})  # fmt: skip

    def delivered(self, hook: str) -> int:
        return int(self.client.hget(f"bench-hooks:hook:{hook}", "delivered") or 0)


def endless_round(bench: Bench, gib: float, checks: list[str]) -> None:
    from receivers import Raw, endless

    receiver = Raw(lambda n: endless(int(gib * 1024 * MIB)))
    try:
        with bench.worker([("endless", receiver.url, 3.0)]) as worker:
            before = status_of(worker.pid)
            bench.emit(1)
            wait_for("the delivery", lambda: bench.delivered("endless") == 1)
            exchange = receiver.exchanges[0]
            wait_for("the answer's end", lambda: exchange.done.is_set())
            time.sleep(1.0)  # a retry, if the worker made one, would come by now
            after = status_of(worker.pid)
    finally:
        receiver.close()
    assert exchange.ended is not None
    took = exchange.ended - exchange.came
    grown = after["VmHWM"] - before["VmHWM"]
    print(f"endless: a 200 with a body of up to {gib:g} GiB, timeout 3 s")
    print(f"  worker RSS {before['VmRSS'] / MIB:.1f} -> {after['VmRSS'] / MIB:.1f} MiB, "
          f"peak {before['VmHWM'] / MIB:.1f} -> {after['VmHWM'] / MIB:.1f} MiB")  # fmt: skip
    requests, delivered = len(receiver.exchanges), bench.delivered("endless")
    print(f"  receiver wrote {exchange.sent / MIB:.2f} MiB; connection ended {took:.2f} s after "
          f"the request; requests {requests}, delivered {delivered}")  # fmt: skip
    if (requests, delivered) != (1, 1):
        checks.append("endless: not delivered exactly once")
    if exchange.sent > 16 * MIB:
        checks.append(f"endless: the receiver wrote {exchange.sent} bytes")
    if grown > 50 * MIB:
        checks.append(f"endless: peak RSS grew {grown} bytes")


def drip_round(bench: Bench, checks: list[str]) -> None:
    from receivers import Raw, drip, ok

    status = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    slow = Raw(lambda n: drip(status, every=1.0, limit=60))
    fast = Raw(lambda n: ok)
    try:
        with bench.worker([("slow", slow.url, 3.0), ("fast", fast.url, 10.0)]):
            bench.emit(10)
            wait_for("the dripping request", lambda: slow.exchanges)
            dripping = slow.exchanges[0]
            wait_for("its end", lambda: dripping.done.is_set())
            wait_for("the healthy hook's events", lambda: bench.delivered("fast") == 10)
    finally:
        slow.close()
        fast.close()
    assert dripping.ended is not None
    held = dripping.ended - dripping.came
    meanwhile = sum(1 for e in fast.exchanges if e.came < dripping.ended)
    print("drip: a hook (timeout 3 s) dripping its status line 1 byte/s, beside a healthy hook")
    print(f"  the dripping request was open {held:.2f} s; the healthy hook got "
          f"{meanwhile} of its 10 events meanwhile")  # fmt: skip
    if held > 3 + 2:
        checks.append(f"drip: held {held:.2f} s")
    if meanwhile != 10:
        checks.append(f"drip: {meanwhile} of 10 healthy deliveries while it dripped")


def sigterm_round(bench: Bench, checks: list[str]) -> None:
    from receivers import Raw, drip

    status = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    slow = Raw(lambda n: drip(status, every=1.0, limit=60))
    try:
        with bench.worker([("slow", slow.url, 30.0)]) as worker:
            bench.emit(1)
            wait_for("the dripping request", lambda: slow.exchanges)
            time.sleep(1.0)
            began = time.monotonic()
            worker.terminate()
            code = worker.wait(60)
            took = time.monotonic() - began
    finally:
        slow.close()
    print("sigterm: a worker delivering to a receiver dripping under a 30 s timeout")
    print(f"  exited {code} {took:.2f} s after SIGTERM")
    if code != 0 or took > 5:
        checks.append(f"sigterm: exit {code} after {took:.2f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hooks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 1 GiB bound on the endless body")
    parser.add_argument("--gib", type=float, default=None, help="the endless body's bound")
    opts = parser.parse_args(argv)
    gib = opts.gib if opts.gib is not None else (1.0 if opts.quick else 10.0)
    checks: list[str] = []
    with own_redis() as server, tempfile.TemporaryDirectory() as tmp:
        bench = Bench(server.url, Path(tmp))
        endless_round(bench, gib, checks)
        drip_round(bench, checks)
        sigterm_round(bench, checks)
        bench.client.close()
    for failed in checks:
        print(f"CHECK FAILED {failed}")
    return 1 if checks else 0


if __name__ == "__main__":
    sys.exit(main())
