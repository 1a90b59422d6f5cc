"""Redis time per request: what each read costs Redis's one thread, Seasons against the plain
commands that answer the same question (``python -m bench --only redis-time``).

A board lives on one Redis master, whose commands run on one thread: the Redis time a request
costs bounds how many requests one board can serve (10^6 / µs per request), however many
Python processes serve it. Per read kind, on a day board of N members with metadata (and 13
days before it, for the history), Seasons answers through its Python API, and the same
answer is asked with the plain commands a hand-written service sends (what the Fastify +
ioredis peer of ``bench/http_peers.py`` sends: MULTI where it needs one instant, a second
round trip for what depends on the first). Per kind: Redis's time in commands per request
(``INFO commandstats``, each command counted once: :func:`bench.common.command_usec`),
redis-server's process CPU per request (Linux ``/proc``: also the network I/O), both sides
and their ratio (target: Seasons <= 1.5x), and the capacity that gives one board.

Before timing, each kind's answers on both sides are compared (ranks, members, scores and
metadata), so both sides answer the same question.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import redis

from bench.common import BOARD, Calendar, Section, Sizes, command_stats, command_usec
from seasons import Seasons
from seasons.clock import ManualClock

NS = "bench-redistime"
TOP = 10
SIZE = 11  # around a member or a rank
LOOKUP = 20
LAST = 14
CLIMB_TO = (10, 100)
TARGET = 1.5  # Seasons' Redis time per request, at most this many times the plain commands'
KINDS = ("top", "entry", "around", "around_rank", "lookup", "history", "climb")


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Plain:
    """The plain commands of each read, as a service without Seasons sends them (redis-py,
    bytes replies), answering (rank, member, score, metadata) rows."""

    def __init__(self, client: redis.Redis, day_key: str, meta: str, days: list[str]):
        self.r, self.key, self.meta, self.days = client, day_key, meta, days

    def _rows(self, start: int, rows: list[Any]) -> list[tuple[Any, ...]]:
        members = [m for m, _ in rows]
        metas = self.r.hmget(self.meta, members) if members else []
        return [
            (start + i + 1, m.decode(), s, json.loads(meta) if meta else {})
            for i, ((m, s), meta) in enumerate(zip(rows, metas, strict=True))
        ]

    def top(self, _: Any) -> Any:
        p = self.r.pipeline(transaction=True)
        p.zrange(self.key, 0, TOP - 1, desc=True, withscores=True)
        p.zcard(self.key)
        rows, total = p.execute()
        return total, self._rows(0, rows)

    def around_rank(self, rank: int) -> Any:
        p = self.r.pipeline(transaction=True)
        p.zcard(self.key)
        p.zrange(
            self.key, max(0, rank - 1 - SIZE // 2), rank - 1 + SIZE // 2, desc=True, withscores=True
        )
        total, rows = p.execute()
        start = max(0, min(rank - 1 - SIZE // 2, total - SIZE))
        if start != max(0, rank - 1 - SIZE // 2):  # at the end: the rows shift
            rows = self.r.zrange(self.key, start, start + SIZE - 1, desc=True, withscores=True)
        return total, self._rows(start, rows)

    def around(self, member: str) -> Any:
        p = self.r.pipeline(transaction=True)
        p.zrevrank(self.key, member)
        p.zcard(self.key)
        rank, total = p.execute()
        start = max(0, min(rank - SIZE // 2, total - SIZE))
        rows = self.r.zrange(self.key, start, start + SIZE - 1, desc=True, withscores=True)
        return total, self._rows(start, rows)

    def entry(self, member: str) -> Any:
        p = self.r.pipeline(transaction=True)
        p.zrevrank(self.key, member)
        p.zscore(self.key, member)
        p.hget(self.meta, member)
        p.zcard(self.key)
        rank, score, meta, total = p.execute()
        p = self.r.pipeline(transaction=True)
        p.zcount(self.key, "-inf", f"({score!r}")
        p.zrangebyscore(self.key, f"({score!r}", "+inf", start=0, num=1, withscores=True)
        worse, better = p.execute()
        gap = better[0][1] - score if better else None
        meta = json.loads(meta) if meta else {}
        return (rank + 1, member, score, meta, 100 * worse / total, gap, total)

    def lookup(self, members: list[str]) -> Any:
        p = self.r.pipeline(transaction=True)
        for m in members:
            p.zscore(self.key, m)
            p.zrevrank(self.key, m)
        got = p.execute()
        found = sorted(
            (got[2 * i + 1] + 1, m, got[2 * i])
            for i, m in enumerate(members)
            if got[2 * i] is not None
        )
        metas = self.r.hmget(self.meta, [m for _, m, _ in found]) if found else []
        return [
            (r, m, s, json.loads(x) if x else {}) for (r, m, s), x in zip(found, metas, strict=True)
        ]

    def history(self, member: str) -> Any:
        p = self.r.pipeline(transaction=False)
        for day in self.days:
            p.zrevrank(day, member)
            p.zscore(day, member)
        got = p.execute()
        return [
            (None, None) if got[i] is None else (got[i] + 1, got[i + 1])
            for i in range(0, len(got), 2)
        ]

    def climb(self, member: str) -> Any:
        p = self.r.pipeline(transaction=True)
        p.zrevrank(self.key, member)
        p.zscore(self.key, member)
        for k in CLIMB_TO:
            p.zrange(self.key, k - 1, k - 1, desc=True, withscores=True)
        rank, score, *at = p.execute()
        return rank + 1, score, [rows[0][1] if rows else None for rows in at]


def _seasons_answers(s: Seasons) -> dict[str, Callable[[Any], Any]]:
    def rows(entries: list[Any]) -> list[tuple[Any, ...]]:
        return [(e.rank, e.member, e.score, e.metadata) for e in entries]

    def top(_: Any) -> Any:
        page = s.top(BOARD, "day", limit=TOP)
        return page.total, rows(page.entries)

    def around_rank(rank: int) -> Any:
        page = s.around_rank(BOARD, rank, "day", size=SIZE)
        return page.total, rows(page.entries)

    def around(member: str) -> Any:
        page = s.around(BOARD, member, "day", size=SIZE)
        assert page is not None
        return page.total, rows(page.entries)

    def entry(member: str) -> Any:
        e = s.rank(BOARD, member, "day")
        assert e is not None
        return (e.rank, e.member, e.score, e.metadata, e.percentile, e.gap_up, e.total)

    def lookup(members: list[str]) -> Any:
        return [(e.rank, e.member, e.score, e.metadata) for e in s.lookup(BOARD, members, "day")]

    def history(member: str) -> Any:
        return [(p.rank, p.score) for p in s.history(BOARD, member, "day", last=LAST)]

    def climb(member: str) -> Any:
        c = s.climb(BOARD, member, "day", to=CLIMB_TO)
        assert c is not None
        return c.rank, c.score, [t.score for t in c.targets]

    return {
        "top": top, "entry": entry, "around": around, "around_rank": around_rank,
        "lookup": lookup, "history": history, "climb": climb,
    }  # fmt: skip


def run(url: str, sizes: Sizes, calendar: Calendar) -> Section:
    n = sizes.board_members
    settings = calendar.settings(url, NS)
    clock = ManualClock(calendar.now)
    rnd = random.Random(21)
    admin = redis.Redis.from_url(url)
    members = [f"player-{i}" for i in range(n)]
    with Seasons(settings, clock=clock) as s:
        today = calendar.now.date()
        for back in range(LAST - 1, -1, -1):  # 13 past days of some members, then today
            clock.set(calendar.now - timedelta(days=back))
            chosen = members if back == 0 else rnd.sample(members, n // 4)
            for i in range(0, len(chosen), 2000):
                s.submit_many(
                    [
                        {"board": BOARD, "member": m, "value": rnd.randint(1, 10**6),
                         "metadata": {"name": m.title(), "level": rnd.randint(1, 60)}}
                        for m in chosen[i : i + 2000]
                    ]
                )  # fmt: skip
        clock.set(calendar.now)
        keys = s.keys
        days = [keys.day(BOARD, today - timedelta(days=b)) for b in range(LAST - 1, -1, -1)]
        plain = Plain(redis.Redis.from_url(url), days[-1], keys.meta(BOARD), days)
        ours = _seasons_answers(s)
        argument: dict[str, Callable[[], Any]] = {
            "top": lambda: None,
            "entry": lambda: rnd.choice(members),
            "around": lambda: rnd.choice(members),
            "around_rank": lambda: rnd.randint(1, n),
            "lookup": lambda: rnd.sample(members, LOOKUP - 2) + ["nobody-1", "nobody-2"],
            "history": lambda: rnd.choice(members),
            "climb": lambda: rnd.choice(members),
        }
        section = Section(
            "Redis time per request",
            f"a day board of {n:,} members with metadata; per read kind, Seasons' Python API "
            f"against the plain commands answering the same (MULTI where one instant is "
            f"needed); Redis's time in commands (INFO commandstats) and redis-server's CPU, "
            f"per request; capacity = 10^6 / Redis µs: what one board serves with Redis as the "
            f"limit",
            "µs / request",
        )
        pid = int(admin.info("server")["process_id"])
        same = True
        for kind in KINDS:
            for _ in range(20):
                a = argument[kind]()
                if _normal(ours[kind](a)) != _normal(getattr(plain, kind)(a)):
                    same = False
            measured = {}
            for side, fn in (("Seasons", ours[kind]), ("plain", getattr(plain, kind))):
                args = [argument[kind]() for _ in range(sizes.requests)]
                for a in args[:200]:
                    fn(a)  # warm up: scripts cached, plans' guesses made
                before, cpu = command_stats(admin), _proc_cpu(pid)
                started = time.perf_counter()
                for a in args:
                    fn(a)
                seconds = time.perf_counter() - started
                usec = command_usec(before, command_stats(admin)) / len(args)
                measured[side] = (usec, (_proc_cpu(pid) - cpu) * 1e6 / len(args), seconds)
            (ours_us, ours_cpu, _), (plain_us, plain_cpu, _) = (
                measured["Seasons"],
                measured["plain"],
            )
            section.row(f"{kind}: Seasons", ours_us, f"redis-server CPU {ours_cpu:.0f} µs; "
                        f"capacity {1e6 / ours_us:,.0f}/s")  # fmt: skip
            section.row(f"{kind}: plain commands", plain_us, f"redis-server CPU {plain_cpu:.0f} "
                        f"µs; capacity {1e6 / plain_us:,.0f}/s")  # fmt: skip
            section.ratio(f"{kind}: Seasons / plain, Redis µs", ours_us / plain_us, "<=", TARGET)
        section.check("Seasons and the plain commands answer the same", same)
        plain.r.close()
    admin.close()
    return section


def _normal(answer: Any) -> Any:
    """An answer with every number a float and every sequence a list, to compare."""
    if isinstance(answer, bool) or answer is None or isinstance(answer, str):
        return answer
    if isinstance(answer, int | float):
        return float(answer)
    if isinstance(answer, dict):
        return {k: _normal(v) for k, v in answer.items()}
    return [_normal(x) for x in answer]
