"""The sweep job, and erasure of a member (docs/contract.md#keys, docs/operations.md#the-worker).

Sweep: SCAN the namespace; every key that should expire but has no TTL gets the EXPIREAT
its name implies (a key of a window: its period's end + ``retention``, as the write
path sets it); then remove the metadata of members that are on none of the board's sorted
sets, live or archived.

Keys without TTL by design: archives, the alltime board and its base, the ``meta``,
``state`` and ``moderation`` hashes, job state, the namespace marker and safe mode
(``seasons.jobs.integrity``), a league's ``state`` and ``tier`` hashes and its periods'
reward ``claims`` (``Keys.league_state``, ``Keys.league_tier``, ``Keys.league``); a league
period's other keys expire as the league window's board of that period does. The sweep
deletes no key: a member on the alltime board or its base keeps its metadata.

A sharded board (``boards.<b>.shards`` > 1, seasons.shards): each store ``<b>#i`` is swept
as a board is (its keys' TTLs by their kind, its metadata against its own keys), and the
board's own keys (archives, results, claims, the archives' metadata) as a board's; erasure
removes the member from its store and from the board's own keys.

A twin (``hidden:<kind>:<id>``, ``Keys.twin_of``: a hidden or banned member's entries) is
its public key's kind for all of this: the same TTL (none for a base's or an archive's), and
a member on a twin keeps its metadata as on the public key; erasure removes the member from
the twins and its field from the moderation hash.

A reach set (``ties = "earliest"``, ``reached:<window>:<period id>``) expires with its board
and an archive's (``reached:archive:<id>``) never does. It holds the members of its board
and no others, so it never keeps a member's metadata by itself: metadata goes by the boards
only. Erasure removes the member from the reach sets too.

A distinct set (``ties = "dense"``, ``distinct:<window>:<period id>``, ``distinct:archive:<id>``)
has its board's TTL the same way. Its members are score texts, not members of the board, so it
never keeps metadata either. Erasure drops the member's score from the distinct set of each
board it was on when no other member has that score.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from seasons import calendar, claimlog, shards, ties
from seasons import windows as win
from seasons.amend import Amender
from seasons.archives import Archives
from seasons.config.settings import Settings
from seasons.connection import RedisClient, scan_keys
from seasons.errors import SeasonsError
from seasons.events import member_problem
from seasons.held import forget_member as forget_held
from seasons.jobs.league_close import forget_in_files
from seasons.keys import Keys, ParsedKey
from seasons.lifecycle import Lifecycle
from seasons.moderation import forget_pending
from seasons.scripts import Scripts
from seasons.write_script import DEDUPE_WINDOW, HELD_SLACK, RATE_SLACK

log = logging.getLogger(__name__)

SCAN_COUNT = 1000
META_SLICE = 200
# Kinds that never expire (besides the keys of a window that never ends: alltime).
NO_TTL = {
    "archive", "results", "claims", "base", "meta", "state", "job", "marker", "safe_mode",
    "lifecycle", "audit", "moderation", "moderation_pending", "amended", "best", "upgrades",
}  # fmt: skip
TMP_TTL = timedelta(hours=1)
# The sorted sets of a board: a member on one of them keeps its metadata, and erasure
# removes it from each.
ZSET_KINDS = (*win.WINDOWS, "base", "archive", "tmp")
# The kinds whose keys have a twin (kind "hidden": a hidden or banned member's entries,
# Keys.twin_of), which counts as its public key does for TTLs, metadata and erasure.
TWINNED = (*win.WINDOWS, "base", "archive", "reached")


@dataclass
class SweepResult:
    scanned: int = 0
    ttl_fixed: int = 0
    metadata_removed: int = 0
    unknown: list[str] = field(default_factory=list)


class Sweeper:
    def __init__(
        self,
        client: RedisClient,
        scripts: Scripts,
        settings: Settings,
        keys: Keys,
        archives: Archives,
    ):
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys
        self.archives = archives

    # --- TTLs ---------------------------------------------------------------------------------

    def expected_expireat(self, parsed: ParsedKey, now: datetime) -> int | None:
        """EXPIREAT a key of this kind should carry; None if it must not expire.

        Raises ValueError for a key whose name we cannot read.
        """
        kind, ident = parsed.kind, parsed.ident
        stamp = int(now.timestamp())
        if kind == "hidden":  # a twin: its public key's TTL
            public = _twinned(parsed)
            if public is None:
                raise ValueError(f"a twin of no key that has one: {ident!r}")
            return self.expected_expireat(public, now)
        if kind in NO_TTL:
            return None
        if kind in win.SPECS:
            return win.expire_at(_checked_period(kind, ident, self.settings), self.settings)
        if kind in ("reached", "distinct"):  # beside its board, whose TTL it has
            window, _, period = ident.partition(":")
            if window == "archive":
                return None
            if window not in win.SPECS:
                what = "reach set" if kind == "reached" else "distinct set"
                raise ValueError(f"a {what} of no window: {window!r}")
            return win.expire_at(_checked_period(window, period, self.settings), self.settings)
        if kind in ("events", "batches", "batch_results"):
            return stamp + int(DEDUPE_WINDOW.total_seconds()) + 1
        if kind in ("held", "held_order", "held_done"):  # given one by every held event
            return stamp + int(self.settings.retention.total_seconds()) + HELD_SLACK
        if kind == "rate":  # a counter of one interval: a minute past it is plenty
            return stamp + RATE_SLACK
        if kind == "tmp":
            return stamp + int(TMP_TTL.total_seconds())
        if kind == "lock":
            return stamp + int(self.settings.worker.lock_ttl.total_seconds()) + 1
        if kind == "heartbeat":
            return stamp + int(3 * self.settings.worker.heartbeat_interval.total_seconds()) + 1
        if kind == "league":
            return self._league_expireat(parsed)
        raise ValueError(f"unknown kind of key {kind!r}")

    def _league_expireat(self, parsed: ParsedKey) -> int | None:
        """A league key's EXPIREAT (seasons.keys: ``league:state``, ``league:tier`` and a
        period's ``claims`` never expire; ``league:<P>:<part>`` at P's end + retention)."""
        period, _, part = parsed.ident.rpartition(":")
        if not period or part == "claims":
            return None
        board = self.settings.boards.get(shards.board_of(parsed.board or ""))
        if board is None or board.league is None:
            raise ValueError(f"a league key of a board without a league: {parsed.board!r}")
        window = board.league.window
        return win.expire_at(_checked_period(window, period, self.settings), self.settings)

    def run(self, now: datetime) -> SweepResult:
        result = SweepResult()
        for batch in self._scan(self.keys.pattern()):
            result.scanned += len(batch)
            pipe = self.client.pipeline(transaction=False)
            for key in batch:
                pipe.ttl(key)
            missing = [k for k, ttl in zip(batch, pipe.execute(), strict=True) if ttl == -1]
            pipe = self.client.pipeline(transaction=False)
            for key in missing:
                parsed = self.keys.parse(key)
                try:
                    if parsed is None:
                        raise ValueError("not a key of this namespace")
                    at = self.expected_expireat(parsed, now)
                except (ValueError, SeasonsError) as exc:
                    result.unknown.append(key)
                    log.warning("sweep: leaving %s without TTL: %s", key, exc)
                    continue
                if at is not None:
                    pipe.expireat(key, at)
                    result.ttl_fixed += 1
                    log.info("sweep: %s had no TTL; EXPIREAT %d", key, at)
            pipe.execute()
        for board in sorted(self.settings.boards):
            result.metadata_removed += self.prune_metadata(board, now)
        return result

    # --- metadata -----------------------------------------------------------------------

    def prune_metadata(self, board: str, now: datetime) -> int:
        """Remove metadata of members on no live or archived key of ``board`` (twins
        included: a hidden member keeps its metadata). A sharded board (seasons.shards):
        each store's metadata against that store's keys, and the board's own (the archives'
        members') against the board's own keys (archives, results' scratch keys)."""
        cfg = self.settings.boards[board]
        if not shards.is_sharded(cfg):
            return self._prune(board, now, opened=True)
        removed = sum(self._prune(store, now, opened=True) for store in shards.stores(board, cfg))
        # No write creates a live key under the board's own tag: nothing is open there.
        return removed + self._prune(board, now, opened=False)

    def _prune(self, name: str, now: datetime, *, opened: bool) -> int:
        """:meth:`prune_metadata` of one board or store ``name``: its metadata hash against
        its own sorted sets (and, with ``opened``, every live key a write may create now).
        A store's member pruned that is on an archive of its board (it has a field in the
        board's own hash) leaves its latest metadata there (seasons.shards.metadata)."""
        board = name
        zsets = self.board_zsets(board)
        opened_keys = self.open_keys(board, now) if opened else []  # a write may create them
        # The open twins last: meta_prune.lua stops at a member's first key, so only the
        # members it removes pay for them.
        for key in [*opened_keys, *(self.keys.twin_of(k) for k in opened_keys)]:
            if key not in zsets:
                zsets.append(key)
        removed = 0
        meta = self.keys.meta(board)
        own = self.keys.meta(shards.board_of(name)) if shards.board_of(name) != name else None
        cursor = 0
        while True:
            cursor, found = self.client.hscan(meta, cursor, count=META_SLICE)
            members = list(found)
            for i in range(0, len(members), META_SLICE):
                part = members[i : i + META_SLICE]
                gone = self.scripts.meta_prune(keys=[meta, *zsets], args=part)
                removed += len(gone)
                if own is not None and gone:
                    kept = [m for m, v in zip(gone, self.client.hmget(own, gone), strict=True)
                            if v is not None]  # fmt: skip
                    if kept:
                        self.client.hset(own, mapping={m: found[m] for m in kept})
            if cursor == 0:
                break
        if removed:
            log.info("sweep: removed metadata of %d members of board %s", removed, board)
        return removed

    def board_zsets(self, board: str) -> list[str]:
        """The sorted sets (and twins) of ``board``'s hash tag: a board's, or a store's
        (``kills#3``, seasons.shards): a sharded board's live keys are its stores'."""
        out = []
        for batch in self._scan(self.keys.board_pattern(board), kind="zset"):
            for key in batch:
                parsed = self.keys.parse(key)
                if parsed is not None and parsed.kind == "hidden":
                    parsed = _twinned(parsed)
                if parsed is not None and parsed.kind in ZSET_KINDS:
                    out.append(key)
        return sorted(out)

    def reach_sets(self, board: str) -> list[str]:
        """Every reach set of ``board`` (``ties = "earliest"``), live and archived, and
        their twins."""
        out = []
        for batch in self._scan(self.keys.board_pattern(board), kind="zset"):
            for key in batch:
                parsed = self.keys.parse(key)
                if parsed is not None and parsed.kind == "hidden":
                    parsed = _twinned(parsed)
                if parsed is not None and parsed.kind == "reached":
                    out.append(key)
        return sorted(out)

    def open_keys(self, board: str, now: datetime) -> list[str]:
        """The keys of every window of ``board`` (a board or one of its stores) that a write
        may create right now."""
        cfg = self.settings.boards[shards.board_of(board)]
        zone = self.settings.zone
        day = calendar.local_day(now - self.settings.late_grace, zone)
        last = calendar.local_day(now + calendar.FUTURE_TOLERANCE, zone)
        out: list[str] = []
        while day <= last:
            for window in win.board_windows(cfg):
                p = window.period_of_day(day, self.settings)
                if p is not None:
                    out.append(self.keys.window(board, window.name, p.id))
            day += timedelta(days=1)
        return out

    # --- erasure --------------------------------------------------------------------------

    def forget(self, member: str, now: datetime) -> dict[str, Any]:
        """Remove ``member`` everywhere: every live and archived sorted set of every board,
        its metadata, and the archive files of seasons it was on (rewritten from their
        archive keys, with a new manifest: the others keep their ranks at the close, the
        member leaves a gap, :mod:`seasons.closed`) and its lines of their claims logs. A
        member Seasons cannot hold raises :class:`seasons.errors.InvalidMember` before any
        Redis call; one stored before the format-character rule is still erased
        (:func:`seasons.events.check_stored_member`)."""
        if (problem := member_problem(member, stored=True)) is not None:
            raise problem
        report: dict[str, Any] = {"member": member, "boards": {}}
        lifecycle = Lifecycle(self.client, self.keys, self.settings)
        for board in sorted(self.settings.boards):
            cfg = self.settings.boards[board]
            # A sharded board: the member's live keys are in its store, what is the board's
            # as a whole (archives, results, claims, their metadata) under the board's tag.
            on: list[str] = []
            metadata = moderation = in_league = False
            home = shards.member_store(board, cfg, member)
            for name in dict.fromkeys([home, board]):
                found, had_meta, had_moderation, had_league = self._forget_keys(name, member)
                on += found
                metadata = metadata or had_meta
                moderation = moderation or had_moderation
                in_league = in_league or had_league
            rewritten = []
            amender = Amender(self.client, self.archives, self.keys, lifecycle)
            for key in on:
                parsed = self.keys.parse(key)
                if parsed is not None and parsed.kind == "hidden":
                    kind, _, season = parsed.ident.partition(":")
                    if kind == "archive":  # hidden at the close: on amended versions only
                        rewritten += amender.forget(board, season, member)
                    continue
                if parsed is None or parsed.kind != "archive":
                    continue
                rewritten += amender.forget(board, parsed.ident, member)
                # Its result and its claim go too (seasons.results, seasons.rewards); the
                # others' ranks, rewards and claims stand.
                self.client.hdel(self.keys.results(board, parsed.ident), member)
                self.client.hdel(self.keys.claims(board, parsed.ident), member)
                data, _ = self.archives.paths(board, parsed.ident)
                if data.exists():
                    self.archives.write_files(board, parsed.ident, now, replace=True)
                    rewritten.append(str(data))
                log = claimlog.log_path(self.settings, board, parsed.ident)
                if claimlog.without_member(log, member):
                    rewritten.append(str(log))
            # Its lines of the league's archives and claims logs (the keys went above).
            if self.settings.boards[board].league is not None:
                found = forget_in_files(self.settings, board, member)
                rewritten += found
                in_league = in_league or bool(found)
            # Its held events and rate counters (seasons.held) hold its id too, in its store.
            held = forget_held(self.client, self.keys, home, member)
            # A crashed moderation call's pending follow-ups name it too (seasons.moderation).
            if forget_pending(self.client, self.keys, home, member):
                moderation = True
            if on or metadata or held or moderation or in_league:
                report["boards"][board] = {
                    "keys": on, "metadata": metadata, "files_rewritten": rewritten,
                    "held": held, "moderation": moderation, "league": in_league,
                }  # fmt: skip
        # The lifecycle events that name it (a moderation's): their data and ids hold its id.
        report["lifecycle"] = lifecycle.forget(member)
        return report

    def _forget_keys(self, name: str, member: str) -> tuple[list[str], bool, bool, bool]:
        """``member`` out of every sorted set, reach set and hash of the board or store
        ``name`` (one forget.lua call, in its slot); returns the sorted sets it was on, and
        whether it had metadata, a moderation record and league keys there."""
        zsets = self.board_zsets(name)
        # Its reach times go with it; the report names the boards it was on.
        reached = self.reach_sets(name)
        distinct = self._distinct_sets(name, zsets)
        # KEYS: meta, the boards (twins included), their reach sets, the distinct sets
        # paired with boards (forget.lua takes a score out of one when no member has it
        # any more), the moderation hash (a hidden or banned member's state goes too).
        keys = [self.keys.meta(name), *zsets, *reached, *dict.fromkeys(distinct.values())]
        at = {key: i for i, key in enumerate(keys, start=1)}
        pairing = [at[distinct[k]] if k in distinct else 0 for k in (*zsets, *reached)]
        pairing += [-1] * (len(keys) - 1 - len(pairing))
        # The league's: its tier, its place in each period's cohorts and its outcomes
        # (a forgotten member's place in its cohort is simply gone).
        league = self.league_keys(name)
        keys += [key for key, _ in league]
        pairing += [0 if kind == "zset" else -2 for _, kind in league]
        keys.append(self.keys.moderation(name))
        pairing.append(-2)
        reply = self.scripts.forget(keys=keys, args=[member, *pairing])
        positions = {int(i) for i in reply[1:]}
        on = [zsets[i - 2] for i in sorted(positions) if i - 2 < len(zsets)]
        first_league = len(keys) - len(league)  # 1-based position of the first
        in_league = any(first_league <= i < len(keys) for i in positions)
        return on, bool(int(reply[0])), len(keys) in positions, in_league

    def league_keys(self, board: str) -> list[tuple[str, str]]:
        """The league keys of ``board`` that name members, with their kind ("zset" or
        "hash"): the tier hash, and each period's ``joined`` set and ``outcome`` and
        ``claims`` hashes still in Redis (found as the board's other keys are: SCAN)."""
        cfg = self.settings.boards.get(board)  # a store (seasons.shards) keeps no league
        if cfg is None or cfg.league is None:
            return []
        out = [(self.keys.league_tier(board), "hash")]
        for part, kind in (("joined", "zset"), ("outcome", "hash"), ("claims", "hash")):
            for batch in self._scan(self.keys.league(board, "*", part), kind=kind):
                out += [(key, kind) for key in sorted(batch)]
        return out

    def _distinct_sets(self, board: str, zsets: list[str]) -> dict[str, str]:
        """ties = "dense": the distinct set of each board of ``zsets`` that keeps one (the
        windows' and archives' keys); empty for a board with other ties."""
        if not ties.of(self.settings.boards[shards.board_of(board)]).distinct_set:
            return {}
        out = {}
        for key in zsets:
            parsed = self.keys.parse(key)
            if parsed is not None and (parsed.kind in win.SPECS or parsed.kind == "archive"):
                out[key] = self.keys.distinct(board, parsed.kind, parsed.ident)
        return out

    def _scan(self, pattern: str, kind: str | None = None) -> Iterator[list[str]]:
        return scan_keys(self.client, pattern, count=SCAN_COUNT, kind=kind)


def _twinned(twin: ParsedKey) -> ParsedKey | None:
    """What the twin ``twin`` (kind "hidden") stands beside, parsed as its public key;
    None when that is no kind with twins."""
    kind, _, ident = twin.ident.partition(":")
    return ParsedKey(twin.board, kind, ident) if kind in TWINNED else None


def _checked_period(window: str, ident: str, settings: Settings) -> win.Period:
    """The period a key's id names, which must be its own id (``2026-03-04`` names a day,
    not the week holding it)."""
    found = win.explicit_period(win.spec(window), ident, settings)
    if found.id != ident:
        raise ValueError(f"{ident!r} is not the id of a {window}")
    return found
