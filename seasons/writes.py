"""The write path: one Lua call per board per batch (SPEC sections 4 and 6)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from config.settings import BoardSettings, Settings
from seasons import timewindows as tw
from seasons.connection import is_cluster, on_one_connection
from seasons.errors import NotReplicated
from seasons.events import META_MAX_BYTES, META_MAX_FIELDS, ValidEvent
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


def script_args(
    board: str,
    events: list[ValidEvent],
    settings: Settings,
    keys: Keys,
    now: datetime,
    *,
    backfill: bool = False,
    check_only: bool = False,
) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of ``write.lua`` for the events of one board (see the script's header)."""
    cfg: BoardSettings = settings.boards[board]
    zone = settings.zone
    ws = settings.week_start_index
    state = keys.state(board)
    script_keys = [state, keys.events(board), keys.meta(board)]
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
    ]
    extra_keys: list[str] = []
    extra_index: dict[str, int] = {}
    group_keys: list[str] = []
    group_argv: list[str] = []

    def key_index(key: str) -> str:
        # 1-based position in KEYS of a day key that trimmed boards recompute from.
        if key not in extra_index:
            extra_keys.append(key)
            extra_index[key] = 3 + 3 * len(days) + len(extra_keys)
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


def parse_reply(reply: list[Any]) -> WriteResult:
    """Turn the script's reply into a result, or raise :class:`BatchRejectedByState`."""
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
    return WriteResult(applied=int(reply[0]), duplicates=int(reply[1]))


def apply_batch(
    client: Any,
    scripts: Scripts,
    events: list[ValidEvent],
    settings: Settings,
    keys: Keys,
    now: datetime,
    *,
    backfill: bool = False,
) -> WriteResult:
    """Apply validated events. One board: one atomic script call. Several boards: every
    board is checked first, then applied (one pipeline each; on a cluster one call per
    board), so a batch that a closed day or season would refuse on one board writes nothing
    on any board.

    With ``redis.wait_replicas`` > 0 the writes are followed by ``WAIT`` on their own
    connection, and a shortfall raises :class:`NotReplicated`."""
    by_board: dict[str, list[ValidEvent]] = defaultdict(list)
    for ev in events:
        by_board[ev.board].append(ev)
    if not by_board:
        return WriteResult(applied=0, duplicates=0)
    if len(by_board) > 1:
        _run(client, scripts, by_board, settings, keys, now, backfill, check_only=True)
    results = _run(client, scripts, by_board, settings, keys, now, backfill, check_only=False)
    return WriteResult(
        applied=sum(r.applied for r in results), duplicates=sum(r.duplicates for r in results)
    )


def _run(
    client: Any,
    scripts: Scripts,
    by_board: dict[str, list[ValidEvent]],
    settings: Settings,
    keys: Keys,
    now: datetime,
    backfill: bool,
    *,
    check_only: bool,
) -> list[WriteResult]:
    calls = [
        script_args(b, evs, settings, keys, now, backfill=backfill, check_only=check_only)
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
            results.append(parse_reply(reply))
        except BatchRejectedByState as exc:
            problems += exc.problems
    if problems:
        raise BatchRejectedByState(sorted(problems, key=lambda p: p["index"]))
    if replicas and min(acked) < replicas:
        raise NotReplicated(
            f"the write was applied on the master, but only {min(acked)} of "
            f"{replicas} replicas acknowledged it within {settings.redis.wait_timeout_ms} ms "
            "(redis.wait_replicas): retry with the same event ids",
            {"replicas": replicas, "acknowledged": min(acked)},
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
        pipe = client.pipeline(transaction=False)
        for k, a in calls:
            scripts.write(keys=k, args=a, client=pipe)
        return list(pipe.execute()), []
    groups = [[c] for c in calls] if is_cluster(client) else [calls]
    replies: list[Any] = []
    acked: list[int] = []
    for group in groups:

        def fill(pipe: Any, group: list[tuple[list[str], list[str]]] = group) -> None:
            for k, a in group:
                scripts.write(keys=k, args=a, client=pipe)
            pipe.wait(replicas, timeout_ms)

        *got, count = on_one_connection(client, group[0][0][0], fill)
        replies += got
        acked.append(int(count))
    return replies, acked
