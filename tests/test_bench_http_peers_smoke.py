"""``python -m bench.http_peers`` in a tiny mode: ``seasons serve`` and the Fastify peer answer
the same JSON (and what plain Python expects), and wrk gets positive rates from both.

Timings are never asserted. Needs node, npm (the peer's packages are installed from the npm
registry into the git-ignored ``bench/peers/scratch/fastify`` on first use) and wrk (Debian's
package): skipped when one is missing.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import http_peers  # noqa: E402
from bench.http_peers import CONTENDERS, KINDS, Options, Round, Row  # noqa: E402


@pytest.mark.skipif(
    not (shutil.which("node") and shutil.which("npm") and shutil.which("wrk")),
    reason="needs node, npm and wrk (apt-get install wrk)",
)
def test_seasons_serve_and_fastify_peer_answer_alike() -> None:
    result = http_peers.run(Options(sizes=(1_500,), seconds=1, warmup=0, rounds=1))
    if result.not_run:
        pytest.skip(result.not_run)  # npm could not install fastify / ioredis here
    assert result.problems == []
    assert [row.kind for row in result.rows] == list(KINDS)
    for row in result.rows:
        for name in CONTENDERS:
            timed = row.median(name)
            assert timed.requests > 0 and timed.rate > 0, (row.kind, name)
            assert timed.errors == 0
            assert 0 < timed.p50_ms <= timed.p99_ms
    assert "| 1,500 | POST /v1/scores" in http_peers.table(result.rows)


def _round(rate: float, p99: float) -> Round:
    return Round(int(rate), 1.0, p99 / 2, p99, 0, 0.0, 0.0)


def test_median_round_and_targets() -> None:
    row = Row(10, "top")
    row.rounds["Seasons"] = [_round(300, 1.0), _round(100, 9.0), _round(200, 2.0)]
    row.rounds["peer"] = [_round(150, 3.0), _round(50, 1.0), _round(100, 2.0)]
    assert row.median("Seasons").rate == 200 and row.median("Seasons").p99_ms == 2.0
    assert row.median("peer").rate == 100
    assert row.ratio == 2.0 and row.met  # 2x, p99 2.0 <= 2.0
    row.rounds["peer"][2] = _round(100, 1.5)  # the peer's median round: better p99
    assert not row.met
    post = Row(10, "post")
    post.rounds["Seasons"] = [_round(100, 9.0)]
    post.rounds["peer"] = [_round(100, 1.0)]
    assert post.met  # writes: 1.0x is enough, p99 not part of the target
    post.rounds["Seasons"] = [_round(99, 1.0)]
    assert not post.met
    text = http_peers.table([row, post])
    assert "MISSED" in text and text.count("\n") == 3
