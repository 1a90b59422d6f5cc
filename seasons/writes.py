"""The write path: one Lua call per board per batch (docs/contract.md#writes).

Every batch carries a batch id. The script records each board's result under it for 48
hours, so that sending the same batch again (after a timeout: it may or may not have run)
answers the original result instead of applying the batch twice; see docs/writes.md. What
the script is sent and answers: :mod:`seasons.write_script`.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, cast

from redis.client import Pipeline

from seasons import calendar, shards, ties
from seasons import windows as win
from seasons.clock import Clock, system_clock
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import RedisClient, is_cluster, on_one_connection
from seasons.errors import (
    BatchRejected,
    InvalidBatchId,
    InvalidInput,
    NotReplicated,
    SeasonsError,
)
from seasons.events import ValidEvent, check_id, late_for_good, validate_batch
from seasons.executor import Steps, SyncExecutor, sync_executor
from seasons.keys import Keys
from seasons.models import Standing, WriteResult
from seasons.replies import Writer
from seasons.scripts import Scripts
from seasons.shard_reads import Board, Place, ShardReads
from seasons.write_script import TWINS, parse_reply, refused, script_args

# The window a write answers standings on when none is asked: every board keeps it
# (BoardSettings.windows), and it is what a season's rewards are granted from.
STANDING_WINDOW = "season"
# Calls of one board's batch at most: the first, and again with the twin keys when the script
# met a hidden member (a race with moderation can only ask once; one more is slack).
TWIN_TRIES = 3


def _fmt(x: float) -> str:
    return repr(float(x))


def new_batch_id() -> str:
    """A batch id for a caller that gave none (32 hex digits, random)."""
    return uuid.uuid4().hex


def check_batch_id(value: Any, what: str = "batch_id") -> str:
    """``value`` if it is a valid batch id (1-128 bytes of UTF-8 without control
    characters, like event ids, and no whitespace at either end), else
    :class:`InvalidBatchId` naming ``what``. Batch, claim and clear ids are compared exactly:
    an id that differs only by a trailing space would be another write, while HTTP drops
    that space from an ``Idempotency-Key`` (:func:`seasons.http.scores.batch_id_of`), so no
    interface takes one."""
    why = check_id(value, what)
    if why is None and value != value.strip():
        why = f"{what} begins or ends with whitespace ({value!r})"
    if why is not None:
        raise InvalidBatchId(f"{why}; nothing written", {"field": what})
    return str(value)


def batch_digest(events: list[ValidEvent], timed: Collection[int] = ()) -> str:
    """A digest of the batch's content, recorded with its result: the same batch id sent
    with other events is refused (:class:`BatchIdReused`), not answered the old result.

    It covers each event's position, board, member, value, event id and metadata, and its
    time only when the caller gave one (index in ``timed``): an event without ``ts`` takes
    the time it is received, which a resend changes."""
    # No field can hold a NUL (ids refuse control characters, metadata is JSON text), so
    # NUL-separated fields and events cannot run into each other.
    text = "\0\0".join(
        f"{ev.index}\0{ev.board}\0{ev.member}\0{ev.value!r}\0{ev.event_id or ''}\0"
        f"{_fmt(ev.ts.timestamp()) if ev.index in timed else ''}\0{ev.metadata or ''}"
        for ev in events
    )
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def resolve_standing_window(board: str, cfg: BoardSettings, window: str | None) -> str:
    """The window on which a write answers the standing of ``board``'s events: ``window``
    (:class:`BadWindow` if the board keeps no such window), or :data:`STANDING_WINDOW`."""
    if window is None:
        return STANDING_WINDOW
    return win.board_window(board, cfg, window).name


@dataclass(frozen=True, slots=True)
class Batch:
    """A checked batch as :meth:`Writes.apply` writes it. A resend after a timeout sends it
    unchanged: the same id, events and instant, so a copy that ran answers its result."""

    events: list[ValidEvent]
    now: datetime
    batch_id: str
    digest: str  # batch_digest: the same id with other events is refused
    backfill: bool = False
    # board -> the window its standings are answered on (resolve_standing_window); None: the
    # result holds no standings.
    standing: dict[str, str] | None = None
    # The batch id was made here (new_batch_id): no board can have seen it with other events.
    fresh_id: bool = False

    def by_store(self, settings: Settings) -> dict[tuple[str, str], list[ValidEvent]]:
        """The events of each (board, store) in batch order: a sharded board's events go to
        the store of their member (seasons.shards), an unsharded board's to the board."""
        out: dict[tuple[str, str], list[ValidEvent]] = defaultdict(list)
        boards = settings.boards
        for ev in self.events:
            out[ev.board, shards.member_store(ev.board, boards[ev.board], ev.member)].append(ev)
        return out


def refusable(batch: Batch, settings: Settings) -> bool:
    """Whether write.lua could refuse ``batch`` once it is checked: an event's day closed, its
    season closing or archived, a backfill folded, metadata too large once merged, or its
    batch id seen with other events. A batch of several boards or shards is checked on all
    of them before it is applied, so that such a refusal writes nothing anywhere. A batch
    whose id was made here, whose events are all of the local today or later (a day closes
    only after its end and late grace, a season only after its last day), carry no metadata
    and backfill nothing cannot be refused, and goes straight to its one pass."""
    if batch.backfill or not batch.fresh_id:
        return True
    today = calendar.local_day(batch.now, settings.zone)
    return any(ev.metadata is not None or ev.day < today for ev in batch.events)


class Writes:
    """The write path of one facade (:class:`seasons.api.Seasons` builds it once): its
    client, scripts, settings, keys and clock. :meth:`check` turns a caller's events into a
    :class:`Batch` or raises every problem of it; :meth:`apply` writes that batch."""

    def __init__(
        self, client: RedisClient, scripts: Scripts, settings: Settings, keys: Keys,
        clock: Clock = system_clock,
    ):  # fmt: skip
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys
        self.clock = clock
        # Runs the merged reads of a sharded board's standings (made at the first one).
        self.executor: SyncExecutor | None = None
        # Boards whose script asked for the twin keys (a hidden member wrote): their calls name
        # them from then on, saving the call that would ask again. Naming them when no member
        # is hidden any more costs only a longer argument.
        self.twin_boards: set[str] = set()

    def check(
        self,
        events: Iterable[Any],
        *,
        batch_id: str | None = None,
        backfill: bool = False,
        standing: bool = False,
        standing_window: str | None = None,
    ) -> Batch:
        """The batch of ``events`` at the clock's now, checked whole (:meth:`validate`):
        :class:`BatchRejected` with every problem, :class:`InvalidBatchId`, or
        :class:`InvalidInput` for ``standing_window`` without ``standing``. ``batch_id``:
        generated when None. ``standing``: each board's window (:func:`resolve_standing_window`,
        :class:`BadWindow` if a board of the batch keeps no ``standing_window``)."""
        fresh = batch_id is None
        batch_id = new_batch_id() if batch_id is None else check_batch_id(batch_id)
        items = list(events)
        now = self.clock()
        valid = self.validate(items, now, backfill=backfill)
        windows = None
        if standing:
            boards = self.settings.boards
            windows = {
                b: resolve_standing_window(b, boards[b], standing_window)
                for b in dict.fromkeys(ev.board for ev in valid)
            }
        elif standing_window is not None:
            raise InvalidInput(
                "standing_window names the window of the standings: it needs standing",
                {"field": "standing_window"},
            )
        timed = {i for i, ev in enumerate(items) if _ts(ev) is not None}
        digest = batch_digest(valid, timed)
        return Batch(valid, now, batch_id, digest, backfill, windows, fresh_id=fresh)

    def validate(
        self, events: list[Any], now: datetime, *, backfill: bool = False
    ) -> list[ValidEvent]:
        """:func:`seasons.events.validate_batch`, with its hint for a late event (``seasons
        import --backfill`` can still write the day) kept only where the backfill would write:
        the backfill itself is asked (:meth:`refusals` with ``backfill``), and an event it
        would refuse (its season closing or archived) is refused with that reason."""
        try:
            return validate_batch(events, self.settings, now, backfill=backfill)
        except BatchRejected as exc:
            if backfill:
                raise
            problems = exc.details
        by_index: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for p in problems:
            by_index[p["index"]].append(p)
        # The events whose one problem is being late; those a backfill may write by time.
        late = [i for i, found in by_index.items() if [p["code"] for p in found] == ["late_event"]]
        while late:
            try:
                valid = validate_batch([events[i] for i in late], self.settings, now, backfill=True)
                break
            except BatchRejected as again:  # past retention: no hint was given
                dropped = {late[p["index"]] for p in again.details}
                late = [i for i in late if i not in dropped]
        else:
            raise BatchRejected(problems)
        try:
            for_good = self.refusals(valid, now, backfill=True)
        except SeasonsError:
            for_good = []  # Redis cannot tell now: the refusal stands as time alone decides it
        days = {ev.index: ev.day for ev in valid}
        for p in for_good:
            problem = by_index[late[p["index"]]][0]
            problem["message"] = late_for_good(days[p["index"]], self.settings, p["message"])
        raise BatchRejected(problems)

    def refusals(
        self, valid: list[ValidEvent], now: datetime, *, backfill: bool = False
    ) -> list[dict[str, Any]]:
        """What the write script would refuse of validated events (a closed day, a closing or
        archived season), asked of it in its check-only mode: nothing is written."""
        if not valid:
            return []
        batch_id = new_batch_id()  # nothing is recorded under a new id: every event is checked
        try:
            self._run(Batch(valid, now, batch_id, batch_id, backfill), check_only=True)
        except BatchRejected as exc:
            return exc.details
        return []

    def apply(self, batch: Batch) -> WriteResult:
        """Apply a checked batch. One board (one store): one atomic script call. Several
        boards or the shards of a sharded board: every one is checked first, then applied
        (one pipeline each; on a cluster one call per store), so a batch that a closed day or
        season would refuse on one board writes nothing on any board; a batch that nothing
        could refuse (:func:`refusable`) skips the check.

        A board that applied the batch id in the last 48 hours answers its recorded result in
        both passes and writes nothing, so the result of a resend is the sum of the originals.
        The same id with another digest raises :class:`BatchIdReused`, nothing written.

        With ``redis.wait_replicas`` > 0 the writes are followed by ``WAIT`` on their own
        connection, and a shortfall raises :class:`NotReplicated`.

        With ``batch.standing`` the result holds each event's standing on its board's window,
        read by the same script call after the batch (on a resend: read then)."""
        if not batch.events:
            return WriteResult(applied=0, duplicates=0, batch_id=batch.batch_id)
        if len(batch.by_store(self.settings)) > 1 and refusable(batch, self.settings):
            self._run(batch, check_only=True)
        results = self._run(batch, check_only=False)
        held = sorted((h for r in results for h in r.held_events or ()), key=lambda h: h.index)
        return WriteResult(
            applied=sum(r.applied for r in results),
            duplicates=sum(r.duplicates for r in results),
            batch_id=batch.batch_id,
            held=len(held),
            held_events=held or None,
            banned=sum(r.banned for r in results),
            standings=None
            if batch.standing is None
            else self._global(
                sorted((s for r in results for s in r.standings or ()), key=lambda s: s.index)
            ),
        )

    def _global(self, standings: list[Standing]) -> list[Standing]:
        """``standings`` with the ranks of a sharded board's events over all its shards: each
        store's script answers the rank on its own shard, and the score, which is exact.
        Read after every store applied the batch, as one merged read (seasons.shard_reads):
        a write of another batch in between can show in it, as in any read after a write."""
        asked: dict[tuple[str, str, str], list[Standing]] = defaultdict(list)
        for s in standings:
            cfg = self.settings.boards[s.board]
            if shards.is_sharded(cfg) and s.score is not None and s.period is not None:
                asked[s.board, s.window, s.period].append(s)
        if not asked:
            return standings
        if self.executor is None:
            self.executor = sync_executor(self.client)
        for (board, window, period), found in asked.items():
            cfg = self.settings.boards[board]
            cap = cfg.max_entries if win.spec(window).rolled_up else 0
            b = Board(self.keys, board, cfg, window, period, None, cap)
            merged = ShardReads(Writer(cfg.composite_score()), ties.of(cfg))
            probes = [(repr(float(s.score or 0)).encode(), s.member) for s in found]
            places = self.executor.run(
                Steps("standings of a sharded board", partial(merged.places, b, b.live, probes))
            )
            for s, place in zip(found, cast(list[Place], places), strict=True):
                if b.fits(place):  # a hidden member's event: its self-view, as unsharded
                    s.rank = merged.rank_of(b, place)
                else:  # past the board's top max_entries: trimmed away, as unsharded
                    s.rank, s.score, s.hidden = None, None, False
        return standings

    def _run(self, batch: Batch, *, check_only: bool) -> list[WriteResult]:
        settings = self.settings
        by_store = batch.by_store(settings)
        standing = None if check_only else batch.standing
        windows = {b: None if standing is None else standing[b] for b, _ in by_store}

        def call(at: tuple[str, str], twins: bool) -> tuple[list[str], list[str]]:
            b, store = at
            return script_args(
                b, by_store[at], settings, self.keys, batch.now, batch_id=batch.batch_id,
                digest=batch.digest, backfill=batch.backfill, check_only=check_only,
                standing=windows[b], twins=twins, store=store,
            )  # fmt: skip

        targets = list(by_store)
        replicas = 0 if check_only else settings.redis.wait_replicas
        twins = self.twin_boards
        replies, acked = self.send([call(t, t[1] in twins) for t in targets], replicas=replicas)
        # A store whose script met a hidden member without its twin keys wrote nothing: sent
        # again naming them (docs/fair-play.md). With them it cannot answer so again; the
        # tries are bounded all the same.
        for _ in range(TWIN_TRIES - 1):
            again = [n for n, reply in enumerate(replies) if _text(reply[0]) == TWINS]
            if not again:
                break
            twins.update(targets[n][1] for n in again)
            got, more = self.send([call(targets[n], True) for n in again], replicas=replicas)
            for n, reply in zip(again, got, strict=True):
                replies[n] = reply
            acked += more
        problems: list[dict[str, Any]] = []
        results = []
        for ((b, _), evs), reply in zip(by_store.items(), replies, strict=True):
            window = windows[b]
            asked = None if window is None else (window, evs, settings)
            try:
                results.append(parse_reply(reply, batch.batch_id, asked))
            except BatchRejected as exc:
                problems += exc.details
        if problems:
            raise BatchRejected(sorted(problems, key=lambda p: p["index"]))
        if replicas and min(acked) < replicas:
            raise NotReplicated(
                f"the write was applied on the master, but only {min(acked)} of "
                f"{replicas} replicas acknowledged it within {settings.redis.wait_timeout_ms} "
                f"ms (redis.wait_replicas): retry with the same batch id {batch.batch_id!r}",
                {"replicas": replicas, "acknowledged": min(acked), "batch_id": batch.batch_id},
            )
        return results

    def send(
        self, calls: list[tuple[list[str], list[str]]], *, replicas: int = 0
    ) -> tuple[list[Any], list[int]]:
        """Run ``write.lua`` once per (KEYS, ARGV): the replies in order, and with
        ``replicas`` > 0 the replica count each ``WAIT`` reported (``redis.wait_timeout_ms``).

        On one server, several calls share one pipeline. On a cluster each board is its own
        slot, so each call goes to its slot's master on its own (redis-py's cluster pipeline
        does not run scripts). ``WAIT`` counts only the writes of its own connection, so it
        is sent on the connection that ran the scripts (:func:`on_one_connection`).

        A batch that the script refuses as malformed raises RuntimeError
        (:func:`seasons.write_script.refused`)."""
        with refused():
            return self._send(calls, replicas)

    def _send(
        self, calls: list[tuple[list[str], list[str]]], replicas: int
    ) -> tuple[list[Any], list[int]]:
        client, scripts = self.client, self.scripts
        # A pipeline of scripts that meets NOSCRIPT (Redis restarted while redis-py
        # reconnected and resent it, which loads scripts only before its first try) ran none
        # of them, and each carries its batch id: loaded, it runs once more (Scripts.loaded).
        if replicas <= 0:
            if len(calls) == 1 or is_cluster(client):
                return [scripts.write(keys=k, args=a) for k, a in calls], []

            def run() -> list[Any]:
                pipe = client.pipeline(transaction=False)
                for k, a in calls:
                    scripts.write(keys=k, args=a, client=pipe)
                return list(pipe.execute())

            return scripts.loaded("write", run), []
        timeout_ms = self.settings.redis.wait_timeout_ms
        groups = [[c] for c in calls] if is_cluster(client) else [calls]
        replies: list[Any] = []
        acked: list[int] = []
        for group in groups:

            def fill(pipe: Pipeline, group: list[tuple[list[str], list[str]]] = group) -> None:
                for k, a in group:
                    scripts.write(keys=k, args=a, client=pipe)
                pipe.wait(replicas, timeout_ms)

            def send(
                fill: Callable[[Pipeline], None] = fill, key: str = group[0][0][0]
            ) -> list[Any]:
                return on_one_connection(client, key, fill)

            *got, count = scripts.loaded("write", send)
            replies += got
            acked.append(int(count))
        return replies, acked


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ts(event: object) -> Any:
    """The ``ts`` the caller gave (None if none): it is part of the batch's content."""
    if isinstance(event, Mapping):
        return event.get("ts")
    return getattr(event, "ts", None)
