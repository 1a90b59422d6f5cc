"""The cluster bench section (``python -m bench --only cluster``) at a tiny size: its checks
hold (every acknowledged event on its board once, each board's keys on its slot's master)."""

from __future__ import annotations

from bench import cluster


def test_cluster_bench_checks_hold() -> None:
    section = cluster.run(cluster.TINY)
    assert section.checks and section.correct, section.render()
    assert [label for label, *_ in section.rows][0].startswith("one board")
