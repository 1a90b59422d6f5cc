"""Wiping a demo namespace before the demo data set is seeded again (``/v1/admin/demo/reset``).

Refused unless the namespace starts with ``demo``: an admin token on a production server must
not be one click away from deleting every board.
"""

from __future__ import annotations

from seasons import shards
from seasons.api import Seasons
from seasons.archives import DATA_SUFFIX, MANIFEST_SUFFIX
from seasons.catalog import archive_dir
from seasons.claimlog import CLAIMS_SUFFIX
from seasons.connection import scan_keys
from seasons.errors import Conflict

SCAN_COUNT = 1000
DEMO_PREFIX = "demo"


def reset_namespace(s: Seasons) -> tuple[int, int]:
    """Delete every key of every configured board, the worker's job state (so it closes and
    archives again from scratch) and the boards' archive files and claims logs (their claims
    are gone from Redis: a restore must not bring them back). Locks and the heartbeat are
    kept: a running worker carries on. Returns (keys deleted, files deleted)."""
    ns = s.settings.namespace
    if not ns.startswith(DEMO_PREFIX):
        raise Conflict(
            f"demo reset deletes every board's data: refused for namespace {ns!r} (only for "
            f"namespaces starting with {DEMO_PREFIX!r}, like config/demo.toml's)",
            {"namespace": ns},
        )
    # A sharded board's live keys are its stores' (seasons.shards), each its own pattern.
    patterns = [
        s.keys.board_pattern(name)
        for board, cfg in sorted(s.settings.boards.items())
        for name in dict.fromkeys([board, *shards.stores(board, cfg)])
    ]
    patterns.append(s.keys.job_state("*"))
    deleted = 0
    for pattern in patterns:
        for batch in _scan(s, pattern):
            deleted += int(s.client.unlink(*batch))
    files = 0
    for board in s.settings.boards:
        folder = archive_dir(s.settings, board)
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.endswith((DATA_SUFFIX, MANIFEST_SUFFIX, CLAIMS_SUFFIX)) and path.is_file():
                path.unlink(missing_ok=True)
                files += 1
    return deleted, files


def _scan(s: Seasons, pattern: str) -> list[list[str]]:
    return list(scan_keys(s.client, pattern, count=SCAN_COUNT))
