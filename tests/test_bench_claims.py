"""The claims bench in a tiny run: its checks hold (one claim stored per first claim, every
answer a 200, HTTP equal to the Python API); its timings are never asserted."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import claims  # noqa: E402


def test_claims_bench_checks_hold(redis_url: str) -> None:
    text, ok = claims.run(redis_url, claims.Sizes(members=20_000, seconds=1, rounds=1))
    assert ok, text
    assert "POST claim, first (writes)" in text and "POST claim, already claimed" in text
