"""The HTTP bench section in its tiny mode: the server it starts answers like the Python API
(correctness only; its timings are never asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import http  # noqa: E402
from bench.common import TINY, Calendar  # noqa: E402


def test_http_bench_answers_equal_the_python_api(redis_url: str) -> None:
    section = http.run(redis_url, TINY, Calendar.for_today())
    assert section.correct, section.render()
    assert [label for label, _, _ in section.rows] == [
        "GET /healthz (no I/O)",
        "GET top 10, with metadata",
        "GET around member, size 10",
    ]
    assert all(rate > 0 for _, rate, _ in section.rows)
