"""Shards: one board's live keys spread over several hash tags (``boards.<b>.shards``).

A board with ``shards = 1`` (the default) keeps every key under the hash tag ``{<board>}``.
With ``shards = S > 1`` each member belongs to one shard, ``crc32(UTF-8 of its id) mod S``,
and everything a write touches for it (its day, week, month and season entries, metadata,
event ids, batch ids, the closed days and season states its writes check) lives under the
shard's hash tag ``{<board>#i}``: a *store*. A store is addressed like a board by
:class:`seasons.keys.Keys` (``keys.day("kills#3", day)``), so the write script, the rollups
and the sweep run on a store exactly as on an unsharded board, each in one slot, and a
cluster spreads the stores over its masters.

What is the board's as a whole stays under ``{<board>}``: a season's archive (merged from
the stores at the close, seasons.shard_close), its results, claims and the archive's
metadata. Reads ask every store and merge (seasons.shard_reads). docs/sharding.md.
"""

from __future__ import annotations

import zlib

from seasons.config.settings import BoardSettings

SEPARATOR = "#"  # board names are [A-Za-z0-9_-]: a store's name is never a board's


def shard_of(member: str, shards: int) -> int:
    """The shard of ``member`` on a board of ``shards`` shards: stable across processes,
    versions and languages (CRC-32 of the id's UTF-8 bytes, as zlib and most standard
    libraries compute it), so that an app reading Redis directly finds a member's keys."""
    return zlib.crc32(member.encode("utf-8", "surrogatepass")) % shards


def store(board: str, shard: int) -> str:
    """The store (the name :class:`~seasons.keys.Keys` builds keys of) of ``board``'s shard
    ``shard``."""
    return f"{board}{SEPARATOR}{shard}"


def stores(board: str, cfg: BoardSettings) -> list[str]:
    """Every store of ``board``: ``[board]`` for an unsharded one."""
    if cfg.shards == 1:
        return [board]
    return [store(board, i) for i in range(cfg.shards)]


def member_store(board: str, cfg: BoardSettings, member: str) -> str:
    """The store holding ``member``'s keys of ``board``."""
    if cfg.shards == 1:
        return board
    return store(board, shard_of(member, cfg.shards))


def board_of(name: str) -> str:
    """The board a store belongs to (``kills#3`` -> ``kills``; a board is its own)."""
    return name.partition(SEPARATOR)[0]


def is_sharded(cfg: BoardSettings) -> bool:
    return cfg.shards > 1
