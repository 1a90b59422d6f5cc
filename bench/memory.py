"""Section 3: bytes per member of a Seasons day key against a bare sorted set.

The Seasons key is the day board written through ``submit_many`` (one event with metadata per
member, as in the reads section); the bare key gets the same members and scores with plain
ZADD. ``MEMORY USAGE key SAMPLES 0`` counts every element. Metadata lives in its own hash,
shared by all windows of a board, and is excluded from the ratio (shown for information).
"""

from __future__ import annotations

from typing import Any

from bench.common import BOARD, Calendar, Section, Sizes
from bench.reads import NS_READS, day_key, populate
from seasons import Seasons

BARE_KEY = "bench-bare:zset"
CHUNK = 5_000


def copy_as_bare(client: Any, source: str, target: str) -> int:
    """ZADD ``source``'s members and scores into a fresh ``target``; returns the member count."""
    client.delete(target)
    count = 0
    for start in range(0, client.zcard(source), CHUNK):
        rows = client.zrange(source, start, start + CHUNK - 1, withscores=True)
        client.zadd(target, dict(rows))
        count += len(rows)
    return count


def settle(client: Any, key: str) -> None:
    """Finish any incremental rehash of the sorted set's dict by looking up every member.

    A zset's dict rehashes one bucket per access and never in the background, so right after
    a resize it holds two tables and MEMORY USAGE counts both. Which key happens to be caught
    mid-rehash depends on how many lookups followed its last resize, not on who wrote it.
    """
    for start in range(0, client.zcard(key), CHUNK):
        members = client.zrange(key, start, start + CHUNK - 1)
        client.zmscore(key, members)


def usage(client: Any, key: str) -> int:
    return int(client.memory_usage(key, samples=0))


def run(
    url: str, sizes: Sizes, calendar: Calendar | None = None, *, reuse_board: bool = False
) -> Section:
    """Compare the day key with a bare copy; ``reuse_board``: the reads section built it."""
    calendar = calendar or Calendar.for_today()
    s = Seasons(calendar.settings(url, NS_READS), clock=calendar.clock())
    try:
        key = day_key(s, calendar)
        if not reuse_board or s.client.zcard(key) != sizes.board_members:
            s.client.delete(key)
            populate(s, sizes.board_members)
        client = s.client
        members = copy_as_bare(client, key, BARE_KEY)
        same = client.zrange(key, 0, -1, withscores=True) == client.zrange(
            BARE_KEY, 0, -1, withscores=True
        )
        settle(client, key)
        settle(client, BARE_KEY)
        seasons_bytes = usage(client, key)
        bare_bytes = usage(client, BARE_KEY)
        meta_bytes = usage(client, s.keys.meta(BOARD))
        encoding = client.object("encoding", key)
        client.delete(BARE_KEY)
    finally:
        s.close()

    section = Section(
        "3. Memory",
        f"MEMORY USAGE key SAMPLES 0 / {members:,} members, one day window of board {BOARD!r} "
        f"(encoding {encoding}); metadata excluded",
        "bytes/member",
        decimals=1,
    )
    section.row("Seasons day key (written by submit_many)", seasons_bytes / members)
    section.row("bare sorted set (plain ZADD, same members/scores)", bare_bytes / members)
    section.row(
        "metadata hash of the board (all windows share it)",
        meta_bytes / members,
        "information only, not in the ratio",
    )
    section.check("both keys hold the same members and scores", same)
    section.notes.append("both keys measured after any pending dict rehash finished (ZMSCORE)")
    section.ratio("ratio Seasons / bare", seasons_bytes / bare_bytes, "<=", 1.25)
    return section
