"""The write path: one Lua call per board per batch (SPEC sections 4 and 6).

Every batch carries a batch id. The script records each board's result under it for 48
hours, so that sending the same batch again (after a timeout: it may or may not have run)
answers the original result instead of applying the batch twice; see docs/writes.md.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any

from redis.exceptions import NoScriptError

from seasons import timewindows as tw
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import is_cluster, on_one_connection
from seasons.errors import BatchIdReused, InvalidBatchId, NotReplicated
from seasons.events import META_MAX_BYTES, META_MAX_FIELDS, ValidEvent, check_id
from seasons.keys import Keys
from seasons.models import WriteResult
from seasons.scripts import Scripts

DEDUPE_WINDOW = timedelta(hours=48)


class BatchRejectedByState(Exception):
    """The write script refused a batch (closed day or season); carries its problems."""

    def __init__(self, problems: list[dict[str, Any]]):
        self.problems = problems


def _fmt(x: float) -> str:
    return repr(float(x))


def new_batch_id() -> str:
    """A batch id for a caller that gave none (32 hex digits, random)."""
    return uuid.uuid4().hex


def check_batch_id(value: Any, what: str = "batch_id") -> str:
    """``value`` if it is a valid batch id (1-128 bytes of UTF-8 without control
    characters, like event ids), else :class:`InvalidBatchId` naming ``what``."""
    why = check_id(value, what)
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


def script_args(
    board: str,
    events: list[ValidEvent],
    settings: Settings,
    keys: Keys,
    now: datetime,
    *,
    batch_id: str,
    digest: str,
    backfill: bool = False,
    check_only: bool = False,
) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of ``write.lua`` for the events of one board (see the script's header)."""
    cfg: BoardSettings = settings.boards[board]
    zone = settings.zone
    ws = settings.week_start_index
    state = keys.state(board)
    script_keys = [
        state,
        keys.events(board),
        keys.meta(board),
        keys.batches(board),
        keys.batch_results(board),
    ]
    days = sorted({ev.day for ev in events})
    stamp = now.timestamp()
    argv: list[str] = [
        _fmt(stamp),
        cfg.aggregate,
        cfg.order,
        str(cfg.max_entries),
        _fmt(stamp - DEDUPE_WINDOW.total_seconds()),
        str(int(stamp + DEDUPE_WINDOW.total_seconds()) + 1),
        "1" if backfill else "0",
        "1" if check_only else "0",
        str(META_MAX_FIELDS),
        str(META_MAX_BYTES),
        str(len(days)),
        batch_id,
        digest,
    ]
    extra_keys: list[str] = []
    extra_index: dict[str, int] = {}
    group_keys: list[str] = []
    group_argv: list[str] = []

    def key_index(key: str) -> str:
        # 1-based position in KEYS of a day key that trimmed boards recompute from.
        if key not in extra_index:
            extra_keys.append(key)
            extra_index[key] = len(script_keys) + 3 * len(days) + len(extra_keys)
        return str(extra_index[key])

    today = tw.local_day(now, zone)
    for day in days:
        day_p = tw.period_of_day("day", day, settings)
        week_p = tw.period_of_day("week", day, settings)
        season_p = tw.period_of_day("season", day, settings)
        assert day_p is not None and week_p is not None
        span = tw.season_of_day(day, settings)
        group_keys += [
            keys.day(board, day),
            keys.week(board, week_p.id),
            keys.season(board, season_p.id) if season_p else state,
        ]
        group_argv += [
            day.isoformat(),
            season_p.id if season_p else "",
            _fmt(cfg.week_weights[tw.weekday_index(day, ws)]),
            _fmt(cfg.season_weight(tw.week_of_season(day, span))) if span else "1.0",
            str(tw.expire_at(day_p, settings)),
            str(tw.expire_at(week_p, settings)),
            str(tw.expire_at(season_p, settings)) if season_p else "0",
        ]
        if cfg.max_entries > 0:
            horizon = max(today, day) + timedelta(days=1)
            week_days = [d for d in week_p.days() if d <= horizon]
            group_argv.append(str(len(week_days)))
            for d in week_days:
                w = cfg.week_weights[tw.weekday_index(d, ws)]
                group_argv += [key_index(keys.day(board, d)), _fmt(w)]
            season_days = [d for d in season_p.days() if d <= horizon] if season_p else []
            group_argv.append(str(len(season_days)))
            for d in season_days:
                assert span is not None
                w = cfg.season_weight(tw.week_of_season(d, span))
                group_argv += [key_index(keys.day(board, d)), _fmt(w)]
    group_of = {day: str(n) for n, day in enumerate(days, start=1)}
    for ev in events:  # in batch order
        group_argv += [
            group_of[ev.day],
            str(ev.index),
            ev.member,
            _fmt(ev.value),
            ev.event_id or "",
            ev.metadata or "",
        ]
    return script_keys + group_keys + extra_keys, argv + group_argv


def parse_reply(reply: list[Any], batch_id: str | None = None) -> WriteResult:
    """Turn the script's reply into a result, or raise :class:`BatchRejectedByState` (a
    closed day or season) or :class:`BatchIdReused`."""
    if int(reply[0]) == -2:
        raise BatchIdReused(str(reply[1]), {"batch_id": batch_id})
    if int(reply[0]) == -1:
        items = reply[1:]
        problems = [
            {
                "index": int(items[i]),
                "field": "ts",
                "code": str(items[i + 1]),
                "message": str(items[i + 2]),
            }
            for i in range(0, len(items), 3)
        ]
        raise BatchRejectedByState(problems)
    return WriteResult(applied=int(reply[0]), duplicates=int(reply[1]), batch_id=batch_id)


def apply_batch(
    client: Any,
    scripts: Scripts,
    events: list[ValidEvent],
    settings: Settings,
    keys: Keys,
    now: datetime,
    *,
    batch_id: str,
    digest: str,
    backfill: bool = False,
) -> WriteResult:
    """Apply validated events as the batch ``batch_id``. One board: one atomic script call.
    Several boards: every board is checked first, then applied (one pipeline each; on a
    cluster one call per board), so a batch that a closed day or season would refuse on one
    board writes nothing on any board.

    A board that applied ``batch_id`` in the last 48 hours answers its recorded result in
    both passes and writes nothing, so the result of a resend is the sum of the originals.
    The same id with another ``digest`` raises :class:`BatchIdReused`, nothing written.

    With ``redis.wait_replicas`` > 0 the writes are followed by ``WAIT`` on their own
    connection, and a shortfall raises :class:`NotReplicated`."""
    by_board: dict[str, list[ValidEvent]] = defaultdict(list)
    for ev in events:
        by_board[ev.board].append(ev)
    if not by_board:
        return WriteResult(applied=0, duplicates=0, batch_id=batch_id)
    batch = (batch_id, digest)
    if len(by_board) > 1:
        _run(client, scripts, by_board, settings, keys, now, backfill, batch, check_only=True)
    results = _run(
        client, scripts, by_board, settings, keys, now, backfill, batch, check_only=False
    )
    return WriteResult(
        applied=sum(r.applied for r in results),
        duplicates=sum(r.duplicates for r in results),
        batch_id=batch_id,
    )


def _run(
    client: Any,
    scripts: Scripts,
    by_board: dict[str, list[ValidEvent]],
    settings: Settings,
    keys: Keys,
    now: datetime,
    backfill: bool,
    batch: tuple[str, str],
    *,
    check_only: bool,
) -> list[WriteResult]:
    batch_id, digest = batch
    calls = [
        script_args(
            b,
            evs,
            settings,
            keys,
            now,
            batch_id=batch_id,
            digest=digest,
            backfill=backfill,
            check_only=check_only,
        )
        for b, evs in by_board.items()
    ]
    replicas = 0 if check_only else settings.redis.wait_replicas
    replies, acked = run_write_calls(
        client, scripts, calls, replicas=replicas, timeout_ms=settings.redis.wait_timeout_ms
    )
    problems: list[dict[str, Any]] = []
    results = []
    for reply in replies:
        try:
            results.append(parse_reply(reply, batch_id))
        except BatchRejectedByState as exc:
            problems += exc.problems
    if problems:
        raise BatchRejectedByState(sorted(problems, key=lambda p: p["index"]))
    if replicas and min(acked) < replicas:
        raise NotReplicated(
            f"the write was applied on the master, but only {min(acked)} of "
            f"{replicas} replicas acknowledged it within {settings.redis.wait_timeout_ms} ms "
            f"(redis.wait_replicas): retry with the same batch id {batch_id!r}",
            {"replicas": replicas, "acknowledged": min(acked), "batch_id": batch_id},
        )
    return results


def run_write_calls(
    client: Any,
    scripts: Scripts,
    calls: list[tuple[list[str], list[str]]],
    *,
    replicas: int = 0,
    timeout_ms: int = 0,
) -> tuple[list[Any], list[int]]:
    """Run ``write.lua`` once per (KEYS, ARGV): the replies in order, and with ``replicas``
    > 0 the replica count each ``WAIT`` reported.

    On one server, several calls share one pipeline. On a cluster each board is its own
    slot, so each call goes to its slot's master on its own (redis-py's cluster pipeline
    does not run scripts). ``WAIT`` counts only the writes of its own connection, so it is
    sent on the connection that ran the scripts (:func:`on_one_connection`).
    """
    if replicas <= 0:
        if len(calls) == 1 or is_cluster(client):
            return [scripts.write(keys=k, args=a) for k, a in calls], []

        def run() -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for k, a in calls:
                scripts.write(keys=k, args=a, client=pipe)
            return list(pipe.execute())

        return _loading_script(client, scripts, run), []
    groups = [[c] for c in calls] if is_cluster(client) else [calls]
    replies: list[Any] = []
    acked: list[int] = []
    for group in groups:

        def fill(pipe: Any, group: list[tuple[list[str], list[str]]] = group) -> None:
            for k, a in group:
                scripts.write(keys=k, args=a, client=pipe)
            pipe.wait(replicas, timeout_ms)

        def send(fill: Callable[[Any], None] = fill, key: str = group[0][0][0]) -> list[Any]:
            return on_one_connection(client, key, fill)

        *got, count = _loading_script(client, scripts, send)
        replies += got
        acked.append(int(count))
    return replies, acked


def _loading_script(client: Any, scripts: Scripts, run: Callable[[], list[Any]]) -> list[Any]:
    """``run()`` a pipeline of write scripts; if Redis lost its scripts under it (a restart
    while redis-py reconnected and resent the pipeline, which loads scripts only before its
    first try), load ``write.lua`` and run it once more. NOSCRIPT means no script of the
    pipeline ran, and each carries its batch id, so the second run cannot apply twice."""
    try:
        return run()
    except NoScriptError:
        client.script_load(scripts.write.script)
        return run()
