"""``seasons reshard``: a board's live keys moved from one shard count to another
(docs/sharding.md#changing-the-shard-count).

The settings already name the new count (``boards.<b>.shards``); the command is told the old
one. Every live key of the old stores (day, week, month, season and all-time boards, the
all-time bases, the reach sets of earliest ties and their twins, metadata, moderation records,
event ids, closed days and season states) is read in chunks and written to the store each
member belongs to under the new count, with the key's EXPIREAT; then the old keys are
deleted. What is the board's own (archives, their twins and reach sets, results, claims, their
metadata, the board's state and its copy of the moderation records, seasons.moderation)
stays.

Writes must be stopped meanwhile (``seasons serve`` and the worker): a write between the copy
and the deletion would be lost. Run again after a crash, it copies what is left and deletes
it: a copy writes the same values again, so nothing is counted twice. It is refused while the
current season holds entries (a running season) unless forced: at a season boundary the
season's standings are archived and its new board is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from seasons import calendar, shards
from seasons import windows as win
from seasons.config.settings import MAX_SHARDS, Settings
from seasons.connection import RedisClient, scan_keys
from seasons.errors import Conflict, InvalidInput, UnknownBoard
from seasons.jobs.locks import locked
from seasons.keys import HIDDEN, Keys

CHUNK = 10_000  # entries read per ZRANGE / HSCAN
LOCK_TTL = timedelta(minutes=10)
# The kinds of a store's keys that move (a member's entries and what its writes check); the
# others are the board's own (archive, results, claims...) or scratch (tmp).
MOVED = frozenset({*win.SPECS, "base", "reached", "meta", "moderation", "events", "state"})
# The kinds holding member entries (and their twins: hidden and banned members' entries):
# each member to its new store. A reach set (ties = "earliest") moves with its window's
# key; an archive's stays (the board's own).
ENTRIES = frozenset({*win.SPECS, "base", "reached"})
# The hashes of member -> value: each field to the member's new store.
FIELDS = frozenset({"meta", "moderation"})
# What a board keeps under its own tag beside its archives when it is a store too (S = 1):
# its archives' metadata, its season states, its copy of the moderation records.
OWN = frozenset({"meta", "state", "moderation"})
# What is not moved but deleted with the old stores: the batch ids a write keeps for 48 hours
# (a batch sent before the reshard and again after it is deduplicated by its events' ids,
# kept on every new store); decided held events (kept 48 hours to answer a second decision)
# and the member_rate counters of the current interval. Held events still under review
# refuse the reshard instead.
DROPPED = frozenset({"batches", "batch_results", "held", "held_order", "held_done", "rate"})


class ShardsChanging(Conflict):
    """The reshard would move a running season's entries, or another reshard holds the
    board."""

    code = "reshard_refused"


@dataclass
class Resharded:
    board: str
    old: int
    new: int
    keys_moved: int = 0
    entries: int = 0  # sorted set entries and hash fields written
    deleted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board, "from": self.old, "to": self.new, "keys_moved": self.keys_moved,
            "entries": self.entries, "deleted": len(self.deleted),
        }  # fmt: skip


def _stores(board: str, count: int) -> list[str]:
    return [board] if count == 1 else [shards.store(board, i) for i in range(count)]


def reshard(
    client: RedisClient, settings: Settings, keys: Keys, board: str, old: int, now: datetime,
    *, force: bool = False, progress: Callable[[int], None] | None = None,
) -> Resharded:  # fmt: skip
    """Move ``board``'s live keys from ``old`` shards to the settings' count (see the
    module's doc). :class:`InvalidInput` for a count out of range or equal to the new one;
    :class:`ShardsChanging` while the current season holds entries (unless ``force``), while
    held events await review or a moderation call's follow-ups are pending, or while another
    reshard runs."""
    cfg = settings.boards.get(board)
    if cfg is None:
        raise UnknownBoard(board, list(settings.boards))
    new = cfg.shards
    if not 1 <= old <= MAX_SHARDS:
        raise InvalidInput(f"--from must be 1 to {MAX_SHARDS}, got {old}", {"field": "from"})
    if old == new:
        raise InvalidInput(
            f"board {board!r} has shards = {new} in the settings already; set the new count "
            "there and give the old one with --from",
            {"field": "from", "board": board},
        )
    sources, targets = _stores(board, old), _stores(board, new)
    if not force:
        season = calendar.season_of_day(calendar.local_day(now, settings.zone), settings)
        if season is not None:
            held = sum(int(client.zcard(keys.season(s, season.id))) for s in sources)
            if held:
                raise ShardsChanging(
                    f"season {season.id} of board {board!r} is running ({held} entries on "
                    f"{old} shards): reshard at a season boundary, or with --force after "
                    "stopping every writer",
                    {"board": board, "season": season.id, "entries": held},
                )
    pending = sum(int(client.zcard(keys.held_order(s))) for s in sources)
    if pending:
        raise ShardsChanging(
            f"board {board!r} has {pending} held events under review: approve or reject them "
            "(seasons held) before a reshard",
            {"board": board, "held": pending},
        )
    following = sum(int(client.hlen(keys.moderation_pending(s))) for s in sources)
    if following:
        raise ShardsChanging(
            f"board {board!r} has {following} moderation calls whose follow-ups are pending "
            "(a crashed call's): the next moderation call or the worker's close job finishes "
            "them a minute after the call; reshard then",
            {"board": board, "pending": following},
        )
    with locked(client, keys, f"reshard:{board}", LOCK_TTL) as lock:
        if lock is None:
            raise ShardsChanging(f"another reshard of board {board!r} is running", {"board": board})
        done = Resharded(board, old, new)
        found = [
            (key, at, what)
            for at in sources
            for batch in scan_keys(client, keys.board_pattern(at))
            for key in batch
            if (what := _kind(keys, key)) is not None
        ]
        for key, _, (kind, ident, twin) in sorted(found):
            if kind not in DROPPED:
                done.entries += _move(client, keys, kind, ident, twin, key, board, new, targets)
                done.keys_moved += 1
            lock.extend()
            if progress is not None:
                progress(1)
        # Only now, every key copied: a crash before leaves the old keys whole, and a rerun
        # copies them again. A store kept (in both counts) loses the members that left it.
        for key, at, (kind, _, _) in sorted(found):
            if at in targets and kind not in DROPPED:
                if kind in ("events", "state"):
                    continue
                done.deleted += _evict(client, key, kind, at, board, new)
            elif at == board and kind in OWN:
                continue  # the board's own (OWN)
            else:
                client.delete(key)
                done.deleted.append(key)
        return done


def _kind(keys: Keys, key: str) -> tuple[str, str, bool] | None:
    """(kind, ident, whether it is the twin of a key of that kind) of a key that moves or
    is dropped; None for the others (a twin of an archive, the board's own)."""
    parsed = keys.parse(key)
    twin = parsed is not None and parsed.kind == HIDDEN
    if twin:
        parsed = keys.parse(keys.public_of(key))
        if parsed is None or parsed.kind not in ENTRIES:
            return None
    if parsed is None or parsed.kind not in MOVED | DROPPED:
        return None
    if parsed.kind == "reached" and parsed.ident.partition(":")[0] not in win.SPECS:
        return None  # an archive's (or scratch) reach set
    return parsed.kind, parsed.ident, twin


def _move(
    client: RedisClient, keys: Keys, kind: str, ident: str, twin: bool, key: str, board: str,
    new: int, targets: list[str],
) -> int:  # fmt: skip
    """Copy one old key (of ``kind``, or its twin) onto the new stores; returns the entries
    written."""
    expire = int(cast(int, client.pexpiretime(key)))
    written: set[str] = set()
    count = 0

    def name(store: str) -> str:
        if kind == "base":
            found = keys.base(store, ident)
        elif kind == "reached":
            window, _, pid = ident.partition(":")
            found = keys.reached(store, window, pid)
        elif kind in win.SPECS:
            found = keys.window(store, kind, ident)
        else:
            return _named(keys, kind, store)
        return keys.twin_of(found) if twin else found

    if kind in ENTRIES:  # a board or a base: each member to its new store
        start = 0
        while rows := _entries(client, key, start):
            by_store: dict[str, dict[str, float]] = {}
            for member, score in rows:
                target = board if new == 1 else shards.store(board, shards.shard_of(member, new))
                by_store.setdefault(name(target), {})[member] = score
            pipe = client.pipeline(transaction=False)
            for target_key, mapping in by_store.items():
                pipe.zadd(target_key, mapping)  # type: ignore[arg-type]
                written.add(target_key)
            pipe.execute()
            count += len(rows)
            start += CHUNK
    elif kind in FIELDS:  # member -> value: each member to its new store
        for fields in _fields(client, key):
            by_store2: dict[str, dict[Any, Any]] = {}
            for member, value in fields.items():
                target = board if new == 1 else shards.store(board, shards.shard_of(member, new))
                by_store2.setdefault(name(target), {})[member] = value
            pipe = client.pipeline(transaction=False)
            for target_key, moved in by_store2.items():
                pipe.hset(target_key, mapping=moved)
            pipe.execute()
            count += len(fields)
    else:  # event ids, states: every new store checks them
        if kind == "events":
            rows = cast(list[tuple[str, float]], client.zrange(key, 0, -1, withscores=True))
            values: Any = dict(rows)
        else:
            values = client.hgetall(key)
        if values:
            pipe = client.pipeline(transaction=False)
            for target in targets:
                target_key = name(target)
                if target_key == key:
                    continue
                if kind == "events":
                    pipe.zadd(target_key, values)  # type: ignore[arg-type]
                else:
                    pipe.hset(target_key, mapping=values)
                written.add(target_key)
            pipe.execute()
            count += len(values) * len(targets)
    if expire > 0:
        pipe = client.pipeline(transaction=False)
        for target_key in written:
            pipe.pexpireat(target_key, expire)
        pipe.execute()
    return count


def _evict(client: RedisClient, key: str, kind: str, store: str, board: str, new: int) -> list[str]:
    """Remove from ``key`` (of ``store``, a store under both counts) the members whose store
    is another one under ``new``; returns ``[key]`` when some were."""
    gone = 0
    if kind in ENTRIES:
        start = 0
        while members := cast(list[str], client.zrange(key, start, start + CHUNK - 1)):
            away = [m for m in members if shards.store(board, shards.shard_of(m, new)) != store]
            if away:
                client.zrem(key, *away)
                gone += len(away)
            start += CHUNK - len(away)
    else:  # FIELDS
        for fields in _fields(client, key):
            away = [m for m in fields if shards.store(board, shards.shard_of(m, new)) != store]
            if away:
                client.hdel(key, *away)
                gone += len(away)
    return [key] if gone else []


def _entries(client: RedisClient, key: str, start: int) -> list[tuple[str, float]]:
    """A chunk of a sorted set's entries from position ``start``, with scores."""
    return cast(list[tuple[str, float]], client.zrange(key, start, start + CHUNK - 1,
                                                       withscores=True))  # fmt: skip


def _fields(client: RedisClient, key: str) -> Iterator[dict[str, str]]:
    """A hash's fields in chunks (HSCAN)."""
    cursor = 0
    while True:
        cursor, fields = cast(tuple[int, dict[str, str]], client.hscan(key, cursor, count=CHUNK))
        yield fields
        if cursor == 0:
            return


def _named(keys: Keys, kind: str, store: str) -> str:
    builders: dict[str, Callable[[str], str]] = {
        "meta": keys.meta, "moderation": keys.moderation, "events": keys.events,
        "state": keys.state,
    }  # fmt: skip
    return builders[kind](store)
