"""The shards bench section (``python -m bench --only shards``, bench/shards.py) at a tiny size:
its checks hold (every acknowledged event on its board once, over all its stores; each placed
store on the master it was put on; every member on the memory boards; sharded reads answer
what the unsharded board does; the merged dense ranks are the unsharded board's), never its
timings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from redis_cluster import find_redis_cli

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import shards  # noqa: E402


def test_shards_bench_checks_hold(redis_url: str) -> None:
    try:
        find_redis_cli()  # the cluster tests' condition: a Redis install with its tools
    except RuntimeError as exc:
        pytest.skip(str(exc))
    capacity, memory, reads, earliest, dense = shards.run(redis_url, shards.TINY)
    for section in (capacity, memory, reads, earliest, dense):
        assert section.checks and section.correct, section.render()
    boards = len(shards.BOARDS)
    # every board at every size, and the one-store batches at M = 1
    assert len(capacity.rows) == boards * len(shards.TINY.masters) + 1, capacity.render()
    assert len(capacity.checks) == (boards + 1) * len(shards.TINY.masters) + 1
    assert [label for label, *_ in memory.rows] == ["unsharded", f"S={shards.FALLS}"]
    # top, rank, around; a hidden member's rank and around (its self-view); at every S
    assert len(reads.rows) == 5 * len(shards.READ_SHARDS), reads.render()
    assert len(earliest.rows) == 5 * len(shards.READ_SHARDS), earliest.render()


def test_shards_http_bench_checks_hold(redis_url: str) -> None:
    from bench import http_peers, shards_http

    if http_peers.ensure_wrk()[0] is None:
        pytest.skip("wrk is not installed")
    section = shards_http.run(redis_url, tiny=True)
    assert section.checks and section.correct, section.render()
    assert len(section.rows) == len(shards_http.KINDS) * len(shards_http.SHARDS)
