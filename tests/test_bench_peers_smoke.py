"""``python -m bench.peers`` in a tiny mode: the in-process contenders only, correctness only.

Seasons and the hand-written pipeline get the same 1 000 events and must give the top 10 and
the ranks that a plain Python sort of those events gives. The Node (redis-rank) and virtual-env
(leaderboard) peers are left out here: they need npm and PyPI, which the tests do not.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.common import Calendar  # noqa: E402
from bench.peers import report  # noqa: E402
from bench.peers.inprocess import run_pipeline, run_seasons  # noqa: E402
from bench.peers.workload import TOP, differences, make_workload  # noqa: E402

MEMBERS = 1_000


def test_seasons_and_pipeline_answer_like_plain_python(redis_url: str) -> None:
    work = make_workload(MEMBERS, 300)
    calendar = Calendar.for_today()
    seasons = run_seasons(redis_url, work, calendar, batch=250)
    pipeline = run_pipeline(redis_url, work, calendar, batch=250)

    # Plain Python, from the events alone: highest value first, equal values by member, as
    # Redis orders a high-to-low board.
    scores = dict(zip(work.members, work.values, strict=True))
    order = sorted(scores, key=lambda m: (scores[m], m), reverse=True)
    data = dict(zip(work.members, (json.loads(j) for j in work.meta), strict=True))
    top = [(m, float(scores[m]), data[m]) for m in order[:TOP]]
    ranks = {m: order.index(m) + 1 for m in work.check}
    assert len(work.check) > 5

    for result in (seasons, pipeline):
        assert result.events == MEMBERS and result.problems == []
        assert result.answers.top == top, result.peer
        assert result.answers.ranks == ranks, result.peer
        assert differences(result.answers, work.expected) == [], result.peer
        assert all(result.rate(op) > 0 for op in ("ingest", "top", "around", "rank"))
    assert seasons.answers == pipeline.answers


def test_report_marks_where_seasons_is_not_ahead(redis_url: str) -> None:
    seasons = run_seasons(redis_url, make_workload(200, 50), Calendar.for_today(), batch=100)
    slower = replace(seasons, peer="redis-rank", ingest_seconds=seasons.ingest_seconds * 2)
    faster = replace(seasons, peer="leaderboard", ingest_seconds=seasons.ingest_seconds / 2)
    text = report.table({200: {"Seasons": seasons, "redis-rank": slower, "leaderboard": faster}})
    ingest = next(line for line in text.splitlines() if line.startswith("| ingest"))
    assert "2.00 |" in ingest and f"0.50 {report.BEHIND}" in ingest and "n/a" in ingest
    assert report.misses({200: {"Seasons": seasons, "leaderboard": faster}}) == [
        "ingest at 200: behind leaderboard 0.50x"
    ]
