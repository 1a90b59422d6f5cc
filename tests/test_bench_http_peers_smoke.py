"""``python -m bench.http_peers`` in a tiny mode: ``seasons serve`` and the Fastify peer answer
the same JSON (and what plain Python expects) for every request kind, and wrk gets positive
rates from both; the Redis cost of a request counts each command once.

Timings are never asserted. The run needs node, npm (the peer's packages are installed from
the npm registry into the git-ignored ``bench/peers/scratch/fastify`` on first use) and wrk
(Debian's package): skipped when one is missing.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from redis_server import RedisServer  # noqa: E402

from bench import http_peers  # noqa: E402
from bench.http_peers import CONTENDERS, FLOOR, KINDS, Options, Round, Row  # noqa: E402


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
        # The floor of the Python HTTP stack is timed beside them on /healthz only.
        assert bool(row.rounds[FLOOR]) == (row.kind == "healthz")
        for name in (*CONTENDERS, FLOOR) if row.kind == "healthz" else CONTENDERS:
            timed = row.median(name)
            assert timed.requests > 0 and timed.rate > 0, (row.kind, name)
            assert timed.errors == 0
            assert 0 < timed.p50_ms <= timed.p99_ms
            # Every kind but /healthz asks Redis; /healthz never does (a stray health check
            # of the server's own is far below a microsecond per request).
            if row.kind == "healthz":
                assert timed.redis_cmd_us < 1.0, name
            else:
                assert timed.redis_cmd_us > 0, (row.kind, name)
    text = http_peers.table(result.rows)
    for kind in KINDS:
        assert f"| 1,500 | {KINDS[kind]} |" in text
    assert "/healthz at 1,500: the Python HTTP stack's floor" in text


def test_command_usec_counts_each_command_once() -> None:
    """Redis counts a command run by EXEC or by a script on its own line and again in the
    EXEC's or the script's time; the bench's cost of a round counts it once."""
    with RedisServer() as server:
        client = server.client()
        try:
            before = http_peers.command_stats(client)
            client.eval("for i = 1, 3000 do redis.call('ZADD', KEYS[1], i, i) end", 1, "z")
            after = http_peers.command_stats(client)
            nested = after["zadd"] - before.get("zadd", 0)
            script = after["eval"] - before.get("eval", 0)
            assert 0 < nested < script  # the script's time holds its commands'
            assert http_peers.command_usec(before, after) == script

            before = after
            pipe = client.pipeline(transaction=True)
            for i in range(3000):
                pipe.zincrby("y", 1, str(i))
            pipe.execute()
            client.hmget("h", ["1", "2"])  # outside the transaction
            after = http_peers.command_stats(client)
            mine = {n: after[n] - before.get(n, 0) for n in ("zincrby", "multi", "exec", "hmget")}
            assert 0 < mine["zincrby"] < mine["exec"]
            assert http_peers.command_usec(before, after) == (
                mine["zincrby"] + mine["multi"] + mine["hmget"]
            )
        finally:
            client.close()


def _round(rate: float, p99: float) -> Round:
    return Round(int(rate), 1.0, p99 / 2, p99, 0, 0.0, 0.0, 0.0)


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
    post.rounds["Seasons"] = [_round(120, 1.0)]
    post.rounds["peer"] = [_round(100, 1.0)]
    assert post.met  # writes: 1.2x as the reads
    post.rounds["Seasons"] = [_round(119, 1.0)]
    assert not post.met
    health = Row(10, "healthz")
    health.rounds["Seasons"] = [_round(100, 1.0)]
    health.rounds["peer"] = [_round(100, 1.0)]
    assert health.met  # /healthz: even is enough
    health.rounds["Seasons"] = [_round(100, 1.1)]
    assert not health.met  # p99 counts on every row
    text = http_peers.table([row, post, health])
    assert "MISSED" in text and text.count("\n") == 4
    assert all(line.count("|") == 15 for line in text.splitlines())  # 14 columns
