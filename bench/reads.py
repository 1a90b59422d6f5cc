"""Section 2: requests/s of Seasons' reads against raw redis-py round trips.

One client (Seasons' own), sequential requests, on a day board of ``board_members`` members
that all carry metadata, written through ``submit_many``. Top 10: ``s.top(board, "day",
limit=10)`` (one EVALSHA: ZCARD, ZRANGE REV WITHSCORES, HMGET, then pydantic models) against
``ZRANGE key 0 9 REV WITHSCORES``. Around: ``s.around(board, member, "day", size=10)`` (one
EVALSHA: ZREVRANK, ZRANGE, HMGET) against a bare ``ZREVRANK``. The raw commands return no
metadata, and a raw around needs two more round trips (ZRANGE, HMGET) to equal Seasons' answer.

The raw commands go through redis-py's client, as an app would send them; Seasons sends its
EVALSHA on its executor (``seasons.executor``: a connection of its own, without the client's
pool, retry wrapper and observability hooks). The info rows show both sides on a bare
connection too, so the part of the ratio that is the client layer can be read off.

Ties: the board's scores bucketed so that about ten members share each score, on two boards
alike but for ``ties`` -- ``member`` and ``earliest`` (with a reach set of random times beside
it) -- and the same top 10 and around reads on both: what the earliest order costs a read.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from bench.common import BOARD, Calendar, Section, Sizes
from seasons import Seasons
from seasons.keys import Keys

NS_READS = "bench-reads"
# The same board with groups of equal scores, once with member ties, once with earliest ties.
NS_TIES = {"member": "bench-reads-member", "earliest": "bench-reads-earliest"}
GROUP = 10  # members per equal score on those boards, about
TOP = 10
AROUND = 10
BLOCK = 50  # requests per turn of one kind


def populate(s: Seasons, members: int, *, seed: int = 2, batch: int = 5_000) -> list[str]:
    """One event with metadata per member on today's day board; returns the member names."""
    rnd = random.Random(seed)
    names = [f"user:{i:07d}" for i in range(members)]
    for start in range(0, members, batch):
        events = [
            {
                "board": BOARD,
                "member": name,
                "value": rnd.randint(1, 10_000_000),
                "metadata": {
                    "name": f"Player {name[5:]}",
                    "clan": f"clan-{i % 211}",
                    "level": i % 80 + 1,
                },
            }
            for i, name in enumerate(names[start : start + batch], start=start)
        ]
        s.submit_many(events)
    return names


def day_key(s: Seasons, calendar: Calendar) -> str:
    return Keys(s.settings.namespace).day(BOARD, calendar.today)


def raw_top(client: Any, key: str) -> Any:
    return client.execute_command("ZRANGE", key, 0, TOP - 1, "REV", "WITHSCORES", withscores=True)


def raw_around_rank(client: Any, key: str, member: str) -> Any:
    return client.zrevrank(key, member)


def raw_top_with_meta(client: Any, key: str, meta: str) -> Any:
    """The same answer as ``top`` by hand: ZRANGE, then HMGET (two round trips)."""
    rows = raw_top(client, key)
    return rows, client.hmget(meta, [m for m, _ in rows])


def raw_around_with_meta(client: Any, key: str, meta: str, member: str, total: int) -> Any:
    """The same answer as ``around`` by hand: ZREVRANK, ZRANGE, HMGET (three round trips)."""
    rank = client.zrevrank(key, member)
    start = max(0, min(rank - AROUND // 2, total - AROUND))
    rows = client.zrange(key, start, start + AROUND - 1, desc=True, withscores=True)
    return rows, client.hmget(meta, [m for m, _ in rows])


def tie_boards(src: Seasons, calendar: Calendar, url: str) -> dict[str, Seasons]:
    """The bench board copied to a member-ties and an earliest-ties board, its scores bucketed
    into groups of about :data:`GROUP` equal scores, its metadata along, and (earliest) a
    reach set of random times. Written straight into Redis (the key layout is public)."""
    client, rnd = src.client, random.Random(5)
    rows = client.zrange(day_key(src, calendar), 0, -1, withscores=True)
    step = max(1.0, (rows[-1][1] - rows[0][1]) * GROUP / max(1, len(rows)))
    scores = {m: float(int(x // step)) for m, x in rows}
    meta = client.hgetall(src.keys.meta(BOARD))
    out = {}
    for ties, ns in NS_TIES.items():
        base = calendar.settings(url, ns)
        cfg = base.boards[BOARD].model_copy(update={"ties": ties})
        app = Seasons(base.model_copy(update={"boards": {BOARD: cfg}}), clock=calendar.clock())
        keys = Keys(ns)
        day, reach = (
            keys.day(BOARD, calendar.today),
            keys.reached(BOARD, "day", calendar.today.isoformat()),
        )
        client.delete(day, reach, keys.meta(BOARD))
        for start in range(0, len(rows), 5_000):
            part = dict(list(scores.items())[start : start + 5_000])
            client.zadd(day, part)
            if ties == "earliest":
                client.zadd(reach, {m: rnd.uniform(0, 86_400) for m in part})
        client.hset(keys.meta(BOARD), mapping=meta)
        out[ties] = app
    return out


def earliest_differences(app: Seasons, calendar: Calendar, sample: list[str]) -> list[str]:
    """Where the earliest board's top 10 and around disagree with a plain-Python order of its
    scores and reach times (score best first, then reach time, then member bytes)."""
    keys, client = Keys(app.settings.namespace), app.client
    scores = {
        m: x for m, x in client.zrange(keys.day(BOARD, calendar.today), 0, -1, withscores=True)
    }
    reach_key = keys.reached(BOARD, "day", calendar.today.isoformat())
    reach = dict(client.zrange(reach_key, 0, -1, withscores=True))
    order = sorted(scores, key=lambda m: (-scores[m], reach[m], m.encode()))
    position = {m: i for i, m in enumerate(order)}
    problems = []
    if [e.member for e in app.top(BOARD, "day", limit=TOP).entries] != order[:TOP]:
        problems.append("earliest top 10 differs from the reference order")
    for member in sample:
        around = app.around(BOARD, member, "day", size=AROUND)
        start = max(0, min(position[member] - AROUND // 2, len(order) - AROUND))
        if around is None or [e.member for e in around.entries] != order[start : start + AROUND]:
            problems.append(f"earliest around({member}) differs from the reference order")
    return problems


def read_differences(s: Seasons, key: str, sample: list[str]) -> list[str]:
    """Where Seasons' answers disagree with the raw commands on ``key``; [] if nowhere."""
    client = s.client
    problems = []
    page = s.top(BOARD, "day", limit=TOP)
    raw = raw_top(client, key)
    if [(e.member, e.score) for e in page.entries] != [(m, float(x)) for m, x in raw]:
        problems.append("top 10 differs from ZRANGE 0 9 REV WITHSCORES")
    if any(not e.metadata for e in page.entries):
        problems.append("top 10 entries without metadata")
    total = client.zcard(key)
    for member in sample:
        rank = raw_around_rank(client, key, member)
        around = s.around(BOARD, member, "day", size=AROUND)
        if around is None:
            problems.append(f"around({member}) is None, ZREVRANK says {rank}")
            continue
        start = max(0, min(rank - AROUND // 2, total - AROUND))
        expected = client.zrange(key, start, start + AROUND - 1, desc=True)
        got = [e.member for e in around.entries]
        mine = [e.rank for e in around.entries if e.member == member]
        if got != expected or mine != [rank + 1]:
            problems.append(f"around({member}) differs from ZREVRANK {rank} + ZRANGE")
    return problems


def bare(conn: Any, *args: Any) -> Any:
    """One command on a redis-py Connection, without the client's pool, retry wrapper and
    observability hooks: what Seasons' executor does for its EVALSHA."""
    conn.send_packed_command(conn.pack_command(*args), check_health=False)
    return conn.read_response()


def _interleaved(
    kinds: dict[str, Callable[[int], object]], n: int, rounds: int
) -> dict[str, float]:
    """Seconds each kind spent on ``rounds`` x ``n`` requests, the kinds taking turns in
    blocks of :data:`BLOCK` requests, the first of each turn rotating. This machine's speed
    changes by up to 2x within seconds (other tenants); the best of long rounds per kind
    compared kinds timed at different speeds, blocks this short do not."""
    spent = dict.fromkeys(kinds, 0.0)
    names = list(kinds)
    turn = 0
    for _ in range(rounds):
        for start in range(0, n, BLOCK):
            block = range(start, min(n, start + BLOCK))
            first = turn % len(names)
            for name in names[first:] + names[:first]:
                fn = kinds[name]
                begin = time.perf_counter()
                for i in block:
                    fn(i)
                spent[name] += time.perf_counter() - begin
            turn += 1
    return spent


def _loop(n: int, fn: Callable[[int], object]) -> Callable[[], None]:
    def go() -> None:
        for i in range(n):
            fn(i)

    return go


def run(url: str, sizes: Sizes, calendar: Calendar | None = None) -> Section:
    """Build the board, check the answers agree, then time every request kind, interleaved."""
    calendar = calendar or Calendar.for_today()
    s = Seasons(calendar.settings(url, NS_READS), clock=calendar.clock())
    try:
        s.client.delete(day_key(s, calendar))
        names = populate(s, sizes.board_members)
        key = day_key(s, calendar)
        rnd = random.Random(3)
        targets = [rnd.choice(names) for _ in range(max(1, sizes.requests // sizes.read_rounds))]
        problems = read_differences(s, key, targets[:200])
        client = s.client
        meta = s.keys.meta(BOARD)
        total = client.zcard(key)
        top_call = s.reads.page(BOARD, "day", "current", limit=TOP, offset=0).call
        executor = s.executor
        pool = client.connection_pool
        conn = pool.connection_class(**pool.connection_kwargs)
        s.top(BOARD, "day")  # loads the script
        n = len(targets)
        kinds: dict[str, Callable[[int], object]] = {
            "seasons_top": lambda i: s.top(BOARD, "day", limit=TOP),
            "raw_top": lambda i: raw_top(client, key),
            "seasons_around": lambda i: s.around(BOARD, targets[i], "day", size=AROUND),
            "raw_around": lambda i: raw_around_rank(client, key, targets[i]),
            # Information: the script alone on Seasons' executor (no models built) ...
            "script_top": lambda i: executor.run(top_call),
            "script_around": lambda i: executor.run(
                s.reads.around_member(BOARD, "day", targets[i], "current", size=AROUND).call
            ),
            # ... the raw commands on a bare connection, as the executor sends its EVALSHA ...
            "bare_top": lambda i: bare(conn, "ZRANGE", key, 0, TOP - 1, "REV", "WITHSCORES"),
            "bare_around": lambda i: bare(conn, "ZREVRANK", key, targets[i]),
            # ... and the same answers (entries with metadata) from raw commands.
            "same_top": lambda i: raw_top_with_meta(client, key, meta),
            "same_around": lambda i: raw_around_with_meta(client, key, meta, targets[i], total),
        }
        tied = tie_boards(s, calendar, url)
        problems += earliest_differences(tied["earliest"], calendar, targets[:50])
        for ties, app in tied.items():
            kinds[f"{ties}_top"] = lambda i, a=app: a.top(BOARD, "day", limit=TOP)
            kinds[f"{ties}_around"] = lambda i, a=app: a.around(
                BOARD, targets[i], "day", size=AROUND
            )
        for fn in kinds.values():  # warm up: scripts loaded, connection open, caches filled
            _loop(min(n, 200), fn)()
        spent = _interleaved(kinds, n, sizes.read_rounds)
        conn.disconnect()
        for app in tied.values():
            app.close()
    finally:
        s.close()

    rate = {name: n * sizes.read_rounds / seconds for name, seconds in spent.items()}
    section = Section(
        "2. Reads",
        f"sequential requests from one client on a day board of {total:,} members with "
        f"metadata; {n * sizes.read_rounds:,} requests per kind, the kinds taking turns in "
        f"blocks of {BLOCK} (a change of machine speed hits all alike); requests / total time",
        "requests/s",
    )
    section.row("Seasons top(limit=10), with metadata", rate["seasons_top"], "1 EVALSHA + models")
    section.row("raw ZRANGE key 0 9 REV WITHSCORES", rate["raw_top"], "no metadata")
    section.row(
        "Seasons around(member, size=10), with metadata",
        rate["seasons_around"],
        "1 EVALSHA + models",
    )
    section.row("raw ZREVRANK", rate["raw_around"], "rank only: no entries, no metadata")
    section.row(
        "  info: EVALSHA read_range alone, top 10",
        rate["script_top"],
        "on the executor; no models built",
    )
    section.row("  info: EVALSHA read_range alone, around", rate["script_around"], "")
    section.row(
        "  info: ZRANGE on a bare connection", rate["bare_top"], "no client layer (as the executor)"
    )
    section.row("  info: ZREVRANK on a bare connection", rate["bare_around"], "")
    section.row(
        "  info: raw ZRANGE + HMGET (same answer as top)", rate["same_top"], "2 round trips"
    )
    section.row(
        "  info: raw ZREVRANK + ZRANGE + HMGET (= around)",
        rate["same_around"],
        "3 round trips",
    )
    section.row(
        f"top 10, ~{GROUP} members per score, ties = member", rate["member_top"], "1 EVALSHA"
    )
    section.row(
        f"top 10, ~{GROUP} members per score, ties = earliest",
        rate["earliest_top"],
        "+ the runs at the page's ends and their reach times",
    )
    section.row(f"around, ~{GROUP} members per score, ties = member", rate["member_around"], "")
    section.row(f"around, ~{GROUP} members per score, ties = earliest", rate["earliest_around"], "")
    section.check(
        "Seasons returns the members, scores and ranks of the raw commands (and the earliest "
        "board the reference order)" + ("" if not problems else f" -- {'; '.join(problems[:5])}"),
        not problems,
    )
    section.ratio("ratio top: Seasons / raw", rate["seasons_top"] / rate["raw_top"], ">=", 0.8)
    section.ratio(
        "ratio around: Seasons / raw", rate["seasons_around"] / rate["raw_around"], ">=", 0.8
    )
    section.ratio(
        "ratio top: earliest / member ties", rate["earliest_top"] / rate["member_top"], ">=", 0.8
    )
    section.ratio(
        "ratio around: earliest / member ties",
        rate["earliest_around"] / rate["member_around"],
        ">=",
        0.8,
    )
    section.ratio("  info: Seasons / bare connection, top", rate["seasons_top"] / rate["bare_top"])
    section.ratio(
        "  info: Seasons / bare connection, around",
        rate["seasons_around"] / rate["bare_around"],
    )
    section.ratio("  info: script alone / raw, top", rate["script_top"] / rate["raw_top"])
    section.ratio("  info: script alone / raw, around", rate["script_around"] / rate["raw_around"])
    section.ratio(
        "  info: Seasons / same answer by hand, top", rate["seasons_top"] / rate["same_top"]
    )
    section.ratio(
        "  info: Seasons / same answer by hand, around",
        rate["seasons_around"] / rate["same_around"],
    )
    return section
