"""``python -m bench.http_head [--mb 64]``: how long one huge request head holds up others.

Starts its own redis-server and a real ``seasons serve`` (one process), then sends one
``GET /healthz`` whose ``X-Big`` header is ``--mb`` MB long, in 64 KB pieces, from one
connection, while another connection asks ``GET /healthz`` back to back. It prints how the
big request ended (its status, or that the server closed the connection), how long it took,
and the longest wait of a ``/healthz`` answer on the other connection meanwhile: the stall
one client's head causes everyone else (8 s for 64 MB, measured before the head was
bounded). Timings depend on the machine; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import ROOT, own_redis

PIECE = 64 * 1024
STARTUP_TIMEOUT = 30.0
# Probes count from the big request's start until it ended, or for this long at least.
WINDOW = 1.0
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@dataclass(frozen=True)
class Stall:
    """What one huge head did: how it ended, and the others' longest wait meanwhile."""

    mb: int
    outcome: str  # "431", "400"... or "closed" (no answer), "200" before the fix
    big_seconds: float  # from the first byte sent to the answer or the close
    sent_mb: float  # how much of the head the server let through before answering
    probes: int  # /healthz answered on the other connection meanwhile (WINDOW at least)
    longest_wait: float  # seconds: the longest of those answers

    def render(self) -> str:
        return (
            f"X-Big of {self.mb} MB in {PIECE // 1024} KB pieces: {self.outcome} after "
            f"{self.big_seconds:.2f} s ({self.sent_mb:.1f} MB sent); meanwhile {self.probes} "
            f"GET /healthz on another connection, the longest answered in "
            f"{self.longest_wait * 1000:.0f} ms"
        )


def _answer(sock: socket.socket) -> bytes:
    """Read until one whole response with a Content-Length came, or the socket closed."""
    data = b""
    while True:
        if b"\r\n\r\n" in data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next(
                (int(line.split(b":")[1]) for line in head.split(b"\r\n")
                 if line.lower().startswith(b"content-length:")), 0,
            )  # fmt: skip
            if len(rest) >= length:
                return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def measure(port: int, mb: int) -> Stall:
    """Send the huge head on one connection and probe ``/healthz`` on another meanwhile."""
    done = threading.Event()
    waits: list[float] = []

    def probe() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
            while not done.is_set():
                start = time.perf_counter()
                sock.sendall(HEALTHZ)
                if not _answer(sock).startswith(b"HTTP/1.1 200"):
                    raise RuntimeError("the probe's /healthz was not answered 200")
                waits.append(time.perf_counter() - start)
                time.sleep(0.01)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    time.sleep(0.3)  # a few answers before the big one starts
    waits.clear()
    sent = 0
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        piece = b"a" * PIECE
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            while sent < mb * 1024 * 1024:
                sock.sendall(piece)
                sent += len(piece)
            sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # the server answered and closed while the head was being sent
        try:
            reply = _answer(sock)
        except OSError:
            reply = b""
    elapsed = time.perf_counter() - start
    time.sleep(max(0.0, WINDOW - elapsed))  # a refusal in no time: still a window of probes
    done.set()
    prober.join(timeout=60)
    outcome = reply.split(b" ", 2)[1].decode() if reply.startswith(b"HTTP/") else "closed"
    return Stall(mb, outcome, elapsed, sent / (1024 * 1024), len(waits), max(waits, default=0.0))


def serve(redis_url: str, port: int, directory: Path) -> subprocess.Popen[bytes]:
    """``seasons serve`` on ``port``, answering ``/healthz``."""
    config = directory / "seasons.toml"
    config.write_text(
        f'[redis]\nurl = "{redis_url}"\n[boards.kills]\n[archive]\ndir = "{directory / "a"}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    proc = subprocess.Popen(
        [sys.executable, "-c", "from seasons.cli import main; main()", "serve",
         "--port", str(port), "--log-level", "error"],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"seasons serve exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(HEALTHZ)
            if _answer(s).startswith(b"HTTP/1.1 200"):
                return proc
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("seasons serve did not answer /healthz in time")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_head", description=__doc__)
    parser.add_argument("--mb", type=int, default=64, help="size of the X-Big header in MB")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    from redis_server import free_port

    with own_redis() as redis, tempfile.TemporaryDirectory(prefix="seasons-bench-") as tmp:
        port = free_port()
        proc = serve(redis.url, port, Path(tmp))
        try:
            print(measure(port, args.mb).render())
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
