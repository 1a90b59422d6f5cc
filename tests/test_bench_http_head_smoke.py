"""``python -m bench.http_head`` in a tiny mode: a 4 MB header sent to a real ``seasons serve``
is refused with 431 and the other connection's ``/healthz`` keeps being answered. Timings are
never asserted (the bench prints them)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from redis_server import RedisServer, free_port  # noqa: E402

from bench import http_head  # noqa: E402


def test_the_head_bench_sees_a_431_and_answered_probes(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    port = free_port()
    proc = http_head.serve(redis_server.url, port, tmp_path)
    try:
        stall = http_head.measure(port, 4)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert stall.outcome == "431", stall.render()
    assert stall.probes >= 1 and stall.sent_mb > 0, stall.render()
    assert "431" in stall.render()
