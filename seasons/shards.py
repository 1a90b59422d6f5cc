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
the stores at the close, seasons.shard_archive), its results, claims and a copy of its
members' metadata (:func:`metadata`). Reads ask every store and merge (seasons.shard_reads).
docs/sharding.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from seasons.config.settings import BoardSettings

if TYPE_CHECKING:
    from seasons.connection import RedisClient
    from seasons.keys import Keys

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


def metadata(
    client: RedisClient, keys: Keys, board: str, cfg: BoardSettings, members: Sequence[str]
) -> list[Any]:
    """The stored metadata of each of ``members`` (None: none), the latest written, as an
    unsharded board's one hash holds it: on a sharded board its store's hash, else the
    board's own copy, which keeps the metadata of the archives' members once their live keys
    are gone (seasons.shard_archive copies it at a close, the sweep when it prunes a
    store's). Two round trips on a sharded board."""
    if not is_sharded(cfg):
        return list(client.hmget(keys.meta(board), members))
    homes: dict[str, list[int]] = {}
    for i, m in enumerate(members):
        homes.setdefault(member_store(board, cfg, m), []).append(i)
    pipe = client.pipeline(transaction=False)
    for store, at in homes.items():
        pipe.hmget(keys.meta(store), [members[i] for i in at])
    out: list[Any] = [None] * len(members)
    for at, found in zip(homes.values(), pipe.execute(), strict=True):
        for i, value in zip(at, found, strict=True):
            out[i] = value
    missing = [i for i, value in enumerate(out) if value is None]
    if missing:
        kept = client.hmget(keys.meta(board), [members[i] for i in missing])
        for i, value in zip(missing, kept, strict=True):
            out[i] = value
    return out
