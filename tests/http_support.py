"""What the HTTP tests share: a board configuration, a start time, and a seeded data set."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from seasons import Seasons

# A Wednesday far ahead, so that EXPIREAT computed from the manual clock lies in the future
# for the real redis-server. Season S1 starts on the anchor; 2035-06-13 is in S3 (14-day cycle).
START = datetime(2035, 6, 13, 12, tzinfo=UTC)
SETTINGS: dict[str, Any] = {
    "seasons": {"length_days": 14, "anchor": "2035-05-14"},
    "boards": {
        "kills": {"aggregate": "sum", "week_weights": [1, 1, 1, 1, 1, 2, 2]},
        "laps": {"aggregate": "min", "order": "asc", "ties": "shared"},
    },
}
ROOT = Path(__file__).resolve().parent.parent
WRITE_TOKEN = "w-s3cr3t-token-for-tests"
ADMIN_TOKEN = "a-s3cr3t-token-for-tests"


def seed(app: Seasons, *, days: int = 10, players: int = 40, rng_seed: int = 3) -> list[dict]:
    """Events for the last ``days`` days (backfilled), several per player per day; returns them."""
    rng = random.Random(rng_seed)
    now = app.clock()
    events: list[dict[str, Any]] = []
    for d in range(days):
        day_noon = now - timedelta(days=days - 1 - d)
        for p in range(players):
            if rng.random() < 0.3:
                continue
            member = f"p{p:03d}"
            ts = (day_noon - timedelta(minutes=rng.randint(0, 600))).isoformat()
            events.append(
                {
                    "board": "kills",
                    "member": member,
                    "value": rng.randint(0, 20),
                    "ts": ts,
                    "metadata": {"name": f"Player {p}", "level": p % 7},
                }
            )
            events.append(
                {
                    "board": "laps",
                    "member": member,
                    "value": round(rng.uniform(60, 70), 1),
                    "ts": ts,
                }
            )
    app.submit_many(events, backfill=True)
    return events


@contextmanager
def serving(app: Any, startup_timeout: float = 10.0, **options: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn in a thread on a free port (``options`` go to
    ``uvicorn.Config``: proxy_headers...); yields its base URL."""
    import uvicorn
    from redis_server import free_port

    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, lifespan="on", **options
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def seasons_serve(env: dict[str, str], log: Path, timeout: float = 30.0) -> Iterator[str]:
    """``seasons serve`` as a process on a free port, with only the SEASONS_* variables of
    ``env``, its output (the access log among it) in the file ``log``; yields its base URL.
    Ends it with SIGTERM (uvicorn writes out its log), or SIGKILL if it hangs."""
    from redis_server import free_port

    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")} | env
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from seasons.cli import main; main()", "serve",
             "--port", str(port)],
            cwd=ROOT, env=environ, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        yield base
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
