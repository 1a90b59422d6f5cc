"""Section 1: events/s of ``Seasons.submit_many`` against a hand-written redis-py pipeline.

Both write the same events into the same key layout (day, week, season of one ``sum`` board,
with the week and season weights) under different namespaces, from empty, and the boards
they leave behind are compared member by member, score by score, EXPIRETIME by EXPIRETIME.
The pipeline is what an app would write by hand: per event ZINCRBY day / week x weight /
season x weight and EXPIREAT on each of the three keys (6 commands), ``transaction=False``,
one ``execute`` per batch; periods, weights and expiry are worked out once per batch.

The same events also go, side by side in each round, to a ``set`` board (the latest value
wins): its rate against the ``sum`` board's is what the set rule costs on the write path (a
set board also reads whether a later day of each rolled-up period has the member), and to a
``sum`` board that also keeps the ``alltime`` window (one more write per event, and a read of
the day its base is folded through), and to a ``sum`` board with ``ties = "dense"`` (each
write also keeps the distinct set beside each board: a ZSCORE before and after, a ZADD, and a
ZCOUNT when the old score may have left the board).
"""

from __future__ import annotations

import random
from typing import Any

from bench.common import BOARD, Calendar, Section, Sizes, timed
from seasons import Seasons
from seasons import windows as win
from seasons.calendar import local_day, season_of_day, week_of_season, weekday_index
from seasons.config import Settings
from seasons.connection import make_client
from seasons.keys import Keys

NS_SEASONS = "bench-ingest-seasons"
NS_PIPELINE = "bench-ingest-pipeline"
NS_FULL = "bench-ingest-ids-meta"
NS_SET = "bench-ingest-set"
NS_ALLTIME = "bench-ingest-alltime"
NS_DENSE = "bench-ingest-dense"


def make_events(
    sizes: Sizes, *, seed: int = 1, ids: str | None = None, metadata: bool = False
) -> list[dict[str, Any]]:
    """``sizes.events`` events (no ``ts``: now) on ``sizes.members`` members, integer values.

    ``ids`` prefixes unique event ids; ``metadata`` adds a small object to every event.
    """
    rnd = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(sizes.events):
        m = rnd.randrange(sizes.members)
        ev: dict[str, Any] = {
            "board": BOARD,
            "member": f"player:{m:06d}",
            "value": rnd.randint(1, 50),
        }
        if ids is not None:
            ev["event_id"] = f"{ids}:{i}"
        if metadata:
            ev["metadata"] = {"clan": f"clan-{m % 97}", "level": m % 60 + 1, "vip": m % 7 == 0}
        out.append(ev)
    return out


def batches(events: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [events[i : i + size] for i in range(0, len(events), size)]


def board_keys(settings: Settings, calendar: Calendar) -> list[str]:
    """The keys of today's periods of the bench board (day, week, season: the windows it keeps)."""
    keys = Keys(settings.namespace)
    out = []
    for window in win.board_windows(settings.boards[BOARD]):
        p = window.period_of_day(calendar.today, settings)
        assert p is not None
        out.append(keys.window(BOARD, window.name, p.id))
    return out


def pipeline_ingest(
    client: Any, settings: Settings, calendar: Calendar, chunks: list[list[dict[str, Any]]]
) -> None:
    """The hand-written baseline: 6 pipelined commands per event, one execute per batch."""
    keys = Keys(settings.namespace)
    cfg = settings.boards[BOARD]
    clock = calendar.clock()
    for chunk in chunks:
        day = local_day(clock(), settings.zone)
        day_p = win.period_of_day("day", day, settings)
        week_p = win.period_of_day("week", day, settings)
        season_p = win.period_of_day("season", day, settings)
        span = season_of_day(day, settings)
        assert day_p is not None and week_p is not None and season_p is not None
        assert span is not None
        dk = keys.day(BOARD, day)
        wk = keys.week(BOARD, week_p.id)
        sk = keys.season(BOARD, season_p.id)
        ww = cfg.week_weights[weekday_index(day, settings.week_start_index)]
        sw = cfg.season_weight(week_of_season(day, span))
        dx = win.expire_at(day_p, settings)
        wx = win.expire_at(week_p, settings)
        sx = win.expire_at(season_p, settings)
        pipe = client.pipeline(transaction=False)
        for ev in chunk:
            m, v = ev["member"], ev["value"]
            pipe.zincrby(dk, v, m)
            pipe.zincrby(wk, ww * v, m)
            pipe.zincrby(sk, sw * v, m)
            pipe.expireat(dk, dx)
            pipe.expireat(wk, wx)
            pipe.expireat(sk, sx)
        pipe.execute()


def set_board(settings: Settings) -> Settings:
    """``settings`` with the bench board's aggregate ``set`` instead of ``sum``."""
    board = settings.boards[BOARD].model_copy(update={"aggregate": "set"})
    return settings.model_copy(update={"boards": {BOARD: board}})


def dense_board(settings: Settings) -> Settings:
    """``settings`` with the bench board ranking ``ties = "dense"``."""
    board = settings.boards[BOARD].model_copy(update={"ties": "dense"})
    return settings.model_copy(update={"boards": {BOARD: board}})


def dense_differences(client: Any, keys: list[str], sum_keys: list[str]) -> list[str]:
    """What differs between the dense board's boards and the sum board's (the same events,
    the same aggregate), and between each distinct set and its board's scores; [] if
    nothing."""
    problems = board_differences(client, keys, sum_keys)
    texts = "local o = {} for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do "
    texts += "o[#o + 1] = redis.call('ZSCORE', KEYS[1], m) end return o"
    for name in keys:
        ns, rest = name.split(":", 1)
        tag, window, pid = rest.split(":", 2)
        distinct = f"{ns}:{tag}:distinct:{window}:{pid}"
        want = set(client.eval(texts, 1, name))
        got = set(client.zrange(distinct, 0, -1))
        if got != want:
            problems.append(f"{distinct}: {len(got)} scores, its board has {len(want)}")
        if client.expiretime(distinct) != client.expiretime(name):
            problems.append(f"{distinct}: EXPIRETIME differs from its board's")
    return problems


def alltime_board(settings: Settings) -> Settings:
    """``settings`` with the bench board keeping the alltime window too."""
    cfg = settings.boards[BOARD]
    board = cfg.model_copy(update={"windows": (*cfg.windows, "alltime")})
    return settings.model_copy(update={"boards": {BOARD: board}})


def alltime_differences(client: Any, settings: Settings, calendar: Calendar) -> list[str]:
    """What differs between the all-time board and today's day board (every event is of
    today and a day weighs 1 in alltime), and whether it has no TTL; [] if nothing."""
    keys = Keys(settings.namespace)
    alltime, day = keys.window(BOARD, "alltime", "all"), keys.day(BOARD, calendar.today)
    problems = []
    a, d = (
        client.zrange(alltime, 0, -1, withscores=True),
        client.zrange(day, 0, -1, withscores=True),
    )
    if not a or a != d:
        problems.append(f"{alltime} differs from {day} ({len(a)} vs {len(d)} members)")
    if client.ttl(alltime) != -1:
        problems.append(f"{alltime} has a TTL")
    return problems


def set_differences(
    client: Any, keys: list[str], like: list[str], events: list[dict[str, Any]],
    weights: list[float],
) -> list[str]:  # fmt: skip
    """What differs between the set board's day/week/season boards and each member's last
    value times the window's weight (EXPIRETIME: as the boards ``like``); [] if nothing."""
    last = {ev["member"]: float(ev["value"]) for ev in events}
    problems = []
    for name, weight, other in zip(keys, weights, like, strict=True):
        got = {
            m.decode() if isinstance(m, bytes) else m: score
            for m, score in client.zrange(name, 0, -1, withscores=True)
        }
        want = {m: weight * v for m, v in last.items()}
        if got != want:
            diff = sum(1 for m in want if got.get(m) != want[m]) + len(set(got) - set(want))
            problems.append(f"{name} differs from the last values ({diff} diffs)")
        if client.expiretime(name) != client.expiretime(other):
            problems.append(f"EXPIRETIME of {name} is not that of {other}")
    return problems


def seasons_ingest(s: Seasons, chunks: list[list[dict[str, Any]]]) -> None:
    for chunk in chunks:
        result = s.submit_many(chunk)
        assert result.applied == len(chunk), result


def board_differences(client: Any, keys_a: list[str], keys_b: list[str]) -> list[str]:
    """What differs between two sets of boards (members, scores, EXPIRETIME); [] if nothing."""
    problems = []
    for a, b in zip(keys_a, keys_b, strict=True):
        za = client.zrange(a, 0, -1, withscores=True)
        zb = client.zrange(b, 0, -1, withscores=True)
        if not za:
            problems.append(f"{a} is empty")
        if za != zb:
            diff = sum(1 for x, y in zip(za, zb, strict=False) if x != y) + abs(len(za) - len(zb))
            problems.append(f"{a} and {b} differ ({len(za)} vs {len(zb)} members, {diff} diffs)")
        ea, eb = client.expiretime(a), client.expiretime(b)
        if ea <= 0 or ea != eb:
            problems.append(f"EXPIRETIME of {a} is {ea}, of {b} is {eb}")
    return problems


def _clear(client: Any, namespaces: list[str]) -> None:
    for ns in namespaces:
        doomed = list(client.scan_iter(match=f"{ns}:*", count=1000))
        if doomed:
            client.delete(*doomed)


def run(url: str, sizes: Sizes, calendar: Calendar | None = None) -> Section:
    """Measure both write paths (plus Seasons with event ids and metadata) and compare boards."""
    calendar = calendar or Calendar.for_today()
    settings = {ns: calendar.settings(url, ns) for ns in (NS_SEASONS, NS_PIPELINE, NS_FULL)}
    settings[NS_SET] = set_board(calendar.settings(url, NS_SET))
    settings[NS_ALLTIME] = alltime_board(calendar.settings(url, NS_ALLTIME))
    settings[NS_DENSE] = dense_board(calendar.settings(url, NS_DENSE))
    events = make_events(sizes)
    plain = batches(events, sizes.batch)
    seasons_s = Seasons(settings[NS_SEASONS], clock=calendar.clock())
    seasons_f = Seasons(settings[NS_FULL], clock=calendar.clock())
    seasons_set = Seasons(settings[NS_SET], clock=calendar.clock())
    seasons_all = Seasons(settings[NS_ALLTIME], clock=calendar.clock())
    seasons_dense = Seasons(settings[NS_DENSE], clock=calendar.clock())
    client = make_client(settings[NS_PIPELINE].redis)  # configured exactly like Seasons' own
    best: dict[str, float] = {}
    try:
        for r in range(sizes.ingest_rounds):
            full = batches(make_events(sizes, ids=f"r{r}", metadata=True), sizes.batch)
            _clear(client, list(settings))
            runs = {
                "seasons": lambda: seasons_ingest(seasons_s, plain),
                "set": lambda: seasons_ingest(seasons_set, plain),
                "alltime": lambda: seasons_ingest(seasons_all, plain),
                "dense": lambda: seasons_ingest(seasons_dense, plain),
                "pipeline": lambda: pipeline_ingest(client, settings[NS_PIPELINE], calendar, plain),
                "full": lambda f=full: seasons_ingest(seasons_f, f),  # type: ignore[misc]
            }
            for name, fn in runs.items():
                seconds = timed(fn)
                best[name] = min(best.get(name, seconds), seconds)
        keys = {ns: board_keys(st, calendar) for ns, st in settings.items()}
        same = board_differences(client, keys[NS_SEASONS], keys[NS_PIPELINE])
        same_full = board_differences(client, keys[NS_SEASONS], keys[NS_FULL])
        day_weights = _weights(settings[NS_SET], calendar)
        same_set = set_differences(client, keys[NS_SET], keys[NS_SEASONS], events, day_weights)
        same_alltime = alltime_differences(client, settings[NS_ALLTIME], calendar)
        same_dense = dense_differences(client, keys[NS_DENSE], keys[NS_SEASONS])
        members = client.zcard(keys[NS_SEASONS][0])
    finally:
        seasons_s.close()
        seasons_f.close()
        seasons_set.close()
        seasons_all.close()
        seasons_dense.close()
        client.close()

    n = sizes.events
    rate = {name: n / seconds for name, seconds in best.items()}
    cfg = settings[NS_SEASONS].boards[BOARD]
    day_i = weekday_index(calendar.today, settings[NS_SEASONS].week_start_index)
    section = Section(
        "1. Ingest",
        f"{n:,} events on {members:,} members of board {BOARD!r} (sum; today weighs "
        f"{cfg.week_weights[day_i]:g} in its week and {cfg.season_weights[3]:g} in its "
        f"season), batches of {sizes.batch:,}, best of {sizes.ingest_rounds} interleaved "
        f"round(s), each from empty keys",
        "events/s",
    )
    section.row("Seasons submit_many (no event ids)", rate["seasons"], "1 EVALSHA per batch")
    section.row(
        "redis-py pipeline, 6 commands per event",
        rate["pipeline"],
        "ZINCRBY x3 + EXPIREAT x3, transaction=False",
    )
    section.row("Seasons submit_many, event ids + metadata", rate["full"], "information only")
    section.row("ingest on a set board", rate["set"], "the same events, aggregate = set")
    section.row(
        "ingest on a board keeping alltime", rate["alltime"], "the same events, + window alltime"
    )
    section.row(
        "ingest on a dense board", rate["dense"], "the same events, ties = dense (distinct sets)"
    )
    section.check(
        "Seasons and pipeline boards identical (day/week/season ZRANGE WITHSCORES, EXPIRETIME)"
        + ("" if not same else f" -- {'; '.join(same)}"),
        not same,
    )
    section.check(
        "boards written with event ids + metadata identical too"
        + ("" if not same_full else f" -- {'; '.join(same_full)}"),
        not same_full,
    )
    section.check(
        "set board holds each member's last value x weight (day/week/season, EXPIRETIME)"
        + ("" if not same_set else f" -- {'; '.join(same_set)}"),
        not same_set,
    )
    section.check(
        "alltime board equals today's day board, no TTL"
        + ("" if not same_alltime else f" -- {'; '.join(same_alltime)}"),
        not same_alltime,
    )
    section.check(
        "dense board equals the sum board, each distinct set its board's scores (EXPIRETIME)"
        + ("" if not same_dense else f" -- {'; '.join(same_dense)}"),
        not same_dense,
    )
    section.ratio("ratio Seasons / pipeline", rate["seasons"] / rate["pipeline"], ">=", 2.0)
    section.ratio("ratio set board / sum board", rate["set"] / rate["seasons"], ">=", 0.8)
    section.ratio("ratio alltime board / sum board", rate["alltime"] / rate["seasons"], ">=", 0.8)
    section.ratio("ratio dense board / sum board", rate["dense"] / rate["seasons"], ">=", 0.8)
    section.notes.append(
        "Seasons' time includes validating every event in Python; the pipeline validates nothing"
    )
    return section


def _weights(settings: Settings, calendar: Calendar) -> list[float]:
    """The weight of today in each of the bench board's windows (day, week, season)."""
    cfg = settings.boards[BOARD]
    return [window.weight(cfg, calendar.today, settings) for window in win.board_windows(cfg)]
