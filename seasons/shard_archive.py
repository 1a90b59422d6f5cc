"""A sharded board's period gathered into one sorted set of the board's own slot.

A season's archive is the board's as a whole (docs/sharding.md#closes-and-archives): one
key ``archive:<season>`` under ``{<board>}``, equal to the archive an unsharded twin fed the
same events would have, so that the archive files, results, rewards, claims, restores and
erasures work on it unchanged. The close (and a snapshot) builds it here: every store's
period key is read in chunks and added to a scratch key of the board's slot, which
:meth:`seasons.archives.Archives.copy` then copies into the archive as it copies an
unsharded live board. The members' metadata is copied into the board's own metadata hash,
which the archive's reads and files use. The stores' twins of the season (hidden and banned
members' entries, seasons.moderation) are gathered alike into a scratch key of their own,
which becomes the archive's twin. On a board with ``ties = "earliest"`` the stores' reach sets
are gathered beside them (:func:`beside`), as the archive keeps its own.

The stores are not written meanwhile: a closing season refuses writes on every store first
(its state, seasons.jobs.closes), and a snapshot's copy of a running season is, like an
unsharded snapshot, the standings of the moment each chunk was read. A rerun builds the
scratch key again from the start, so a crash anywhere leaves nothing half done behind.
"""

from __future__ import annotations

from typing import Any, cast

from seasons import shards, ties
from seasons import windows as win
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import RedisClient
from seasons.keys import Keys

CHUNK = 10_000  # entries read per ZRANGE (and added per ZADD)
SCRATCH_TTL = 3_600  # seconds: the scratch key outlives any copy that follows it


def scratch(keys: Keys, board: str, name: str, *, hidden: bool = False) -> str:
    """The key of ``board``'s slot that :func:`gather` fills: ``tmp:gather:<name>``, or with
    ``hidden`` the twins' ``tmp:gather:<name>:hidden``."""
    return keys.tmp(board, f"gather:{name}{':hidden' if hidden else ''}")


def beside(into: str, cfg: BoardSettings) -> str | None:
    """The reach set :func:`gather` fills beside the scratch key ``into`` on a board whose
    tie rule keeps reach sets (earliest; None on the others): ``<into>:reached``, a scratch
    key too, which :meth:`seasons.archives.Archives.copy` copies beside the archive."""
    return f"{into}:reached" if ties.of(cfg).reach_set else None


def gather(
    client: RedisClient, settings: Settings, keys: Keys, board: str, window: str,
    period_id: str, name: str, *, hidden: bool = False,
) -> str:  # fmt: skip
    """Every store's ``window`` key of ``period_id`` added into the scratch key
    ``tmp:gather:<name>`` of ``board``'s slot (on a rolled-up window trimmed to
    ``max_entries``, the board's global top, as an unsharded board is), each member's
    metadata into the board's metadata hash; returns the scratch key, absent when no store
    holds the period. ``hidden``: the keys' twins instead, untrimmed as twins are, into
    :func:`scratch` ``(hidden=True)``. With earliest ties, each store's reach set of the key
    alike into :func:`beside` it."""
    cfg = settings.boards[board]
    into, meta = scratch(keys, board, name, hidden=hidden), keys.meta(board)
    into_reach = beside(into, cfg)
    client.delete(into, *([into_reach] if into_reach else []))
    for store in shards.stores(board, cfg):
        source, source_meta = keys.window(store, window, period_id), keys.meta(store)
        reach = keys.reached(store, window, period_id)
        if hidden:
            source, reach = keys.twin_of(source), keys.twin_of(reach)
        start = 0
        while True:
            rows = cast(
                list[tuple[str, float]],
                client.zrange(source, start, start + CHUNK - 1, withscores=True),
            )
            if not rows:
                break
            members = [m for m, _ in rows]
            # Their metadata and (earliest) reach times, in one round trip to the store.
            reads = client.pipeline(transaction=False)
            reads.hmget(source_meta, members)
            if into_reach is not None:
                reads.zmscore(reach, members)
            stored, *times = cast(list[list[Any]], reads.execute())
            pipe = client.pipeline(transaction=False)
            pipe.zadd(into, {m: s for m, s in rows})
            pipe.expire(into, SCRATCH_TTL)
            if into_reach is not None:
                found_times = zip(members, times[0], strict=True)
                reached = {m: t for m, t in found_times if t is not None}
                if reached:
                    pipe.zadd(into_reach, reached)  # type: ignore[arg-type]
                    pipe.expire(into_reach, SCRATCH_TTL)
            found: dict[Any, Any] = {
                m: v for m, v in zip(members, stored, strict=True) if v is not None
            }
            if found:
                pipe.hset(meta, mapping=found)
            pipe.execute()
            if len(rows) < CHUNK:
                break
            start += CHUNK
    if not hidden and cfg.max_entries > 0 and win.spec(window).rolled_up:  # days: untrimmed
        if cfg.order == "desc":
            client.zremrangebyrank(into, 0, -(cfg.max_entries + 1))
        else:
            client.zremrangebyrank(into, cfg.max_entries, -1)
    return into
