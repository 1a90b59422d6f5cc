"""The restore bench in a tiny run: its checks hold (every hostile file refused with exit 2,
no traceback, nothing loaded; the good file restored); its timings are never asserted."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import restore  # noqa: E402


def test_restore_bench_checks_hold(redis_url: str) -> None:
    text, ok = restore.run(redis_url, restore.TINY)
    assert ok, text
    assert "one line of 8 MiB" in text and "is longer than 65536 bytes" in text
    assert "manifest a FIFO" in text and "restored kills S1: 2000 members" in text
