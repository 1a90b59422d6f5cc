"""The two contenders that run inside the bench process: Seasons and a hand-written pipeline.

Both write the same key layout (day, week and season boards of one ``sum`` board with their
weights, EXPIREAT on each, a member data hash), so the pipeline is what the same work costs
when written by hand with plain commands. Only the library calls are timed: turning the
workload into each one's input happens outside the clock, in every contender alike.
"""

from __future__ import annotations

import gc
import json
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import redis

from bench.common import BOARD, Calendar
from bench.peers.workload import AROUND, TOP, Answers, Workload
from seasons import Seasons
from seasons import windows as win
from seasons.calendar import local_day, season_of_day, week_of_season, weekday_index
from seasons.config import Settings
from seasons.connection import make_client
from seasons.keys import Keys

NS_SEASONS = "peers-seasons"
NS_PIPELINE = "peers-pipeline"
OPS = ("top", "around", "rank")
WARMUP = 500  # requests per read kind before the clock starts: JIT, scripts and caches warm
ROUNDS = 5  # read requests are timed in this many interleaved rounds; the best round counts


@dataclass
class PeerResult:
    """One contender at one size: what it did, how long it took, what it answered."""

    peer: str
    version: str
    events: int
    ingest_seconds: float
    round_requests: int  # sequential requests per read kind in one round
    read_rounds: dict[str, list[float]]  # read kind -> seconds of each round
    answers: Answers
    problems: list[str] = field(default_factory=list)  # its own checks that failed
    ingest_client_cpu: float = 0.0  # CPU seconds of the contender's process during ingest
    ingest_redis_cpu: float = 0.0  # CPU seconds of redis-server during ingest
    # read kind -> CPU seconds (the contender's process, redis-server) over all its rounds
    read_cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    memory: int = 0  # redis-server used_memory right after ingest, bytes

    def rate(self, op: str) -> float:
        """events/s for ``ingest``; requests/s of the best round for a read kind."""
        if op == "ingest":
            return self.events / self.ingest_seconds
        return self.round_requests / min(self.read_rounds[op])

    def read_cpu_per_request(self, op: str) -> tuple[float, float]:
        """Microseconds of CPU per request of ``op``: the contender's process, redis-server."""
        n = self.round_requests * len(self.read_rounds[op])
        mine, theirs = self.read_cpu[op]
        return mine / n * 1e6, theirs / n * 1e6

    @property
    def read_seconds(self) -> float:
        return sum(sum(rounds) for rounds in self.read_rounds.values())

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> PeerResult:
        return cls(
            peer=raw["peer"],
            version=raw["version"],
            events=raw["ingest"]["events"],
            ingest_seconds=raw["ingest"]["seconds"],
            round_requests=raw["reads"]["round_requests"],
            read_rounds={op: list(raw["reads"][op]) for op in OPS},
            answers=Answers.from_json(raw["answers"]),
            problems=list(raw.get("problems", [])),
            ingest_client_cpu=raw["ingest"]["client_cpu"],
            ingest_redis_cpu=raw["ingest"]["redis_cpu"],
            read_cpu={op: (raw["reads"]["cpu"][op][0], raw["reads"]["cpu"][op][1]) for op in OPS},
            memory=int(raw["ingest"]["memory"]),
        )


class Stopwatch:
    """Wall-clock and process CPU seconds of the ``with`` blocks it has timed, added up."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def __enter__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._wall
        self.cpu += time.process_time() - self._cpu


def redis_cpu(client: Any) -> float:
    """CPU seconds redis-server has used so far (user + system)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def time_reads(
    ops: dict[str, Callable[[str], object]],
    targets: Sequence[str],
    server_cpu: Callable[[], float],
    rounds: int = ROUNDS,
) -> tuple[int, dict[str, list[float]], dict[str, tuple[float, float]]]:
    """Requests per round; seconds of each round of each read kind; CPU seconds of each kind
    over all its rounds, in this process and in redis-server (``server_cpu()``).

    The targets are cut into ``rounds`` slices; round r asks each kind in turn for slice r, so
    a burst of load from elsewhere on the machine hits one round of every kind, not one kind.
    """
    size = len(targets) // rounds
    for fn in ops.values():
        for member in targets[:WARMUP]:
            fn(member)
    seconds: dict[str, list[float]] = {name: [] for name in ops}
    cpu = dict.fromkeys(ops, (0.0, 0.0))
    for r in range(rounds):
        chunk = targets[r * size : (r + 1) * size]
        for name, fn in ops.items():
            gc.collect()
            watch, server = Stopwatch(), server_cpu()
            with watch:
                for member in chunk:
                    fn(member)
            seconds[name].append(watch.wall)
            mine, theirs = cpu[name]
            cpu[name] = (mine + watch.cpu, theirs + server_cpu() - server)
    return size, seconds, cpu


# --- Seasons --------------------------------------------------------------------------------


def seasons_version() -> str:
    """The commit the measured code is at, and whether its files differ from it."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--", "seasons", "config")
    return f"commit {commit}" + (" + uncommitted changes in seasons/ or config/" if dirty else "")


def run_seasons(url: str, work: Workload, calendar: Calendar, *, batch: int) -> PeerResult:
    """``submit_many`` in batches; then ``top``, ``around`` and ``rank`` on the day board."""
    settings = calendar.settings(url, NS_SEASONS)
    with Seasons(settings, clock=calendar.clock()) as s:
        watch, server_cpu = Stopwatch(), redis_cpu(s.client)
        for start in range(0, work.size, batch):
            stop = start + batch
            events = [
                {"board": BOARD, "member": m, "value": v, "metadata": json.loads(j)}
                for m, v, j in zip(
                    work.members[start:stop],
                    work.values[start:stop],
                    work.meta[start:stop],
                    strict=True,
                )
            ]
            with watch:
                result = s.submit_many(events)
            assert result.applied == len(events), result
        server_cpu = redis_cpu(s.client) - server_cpu
        memory = int(s.client.info("memory")["used_memory"])

        def around(member: str) -> list[tuple[str, int]]:
            page = s.around(BOARD, member, "day", size=AROUND)
            return [] if page is None else [(e.member, e.rank) for e in page.entries]

        def rank(member: str) -> int | None:
            entry = s.rank(BOARD, member, "day")
            return None if entry is None else entry.rank

        per_round, read_rounds, read_cpu = time_reads(
            {
                "top": lambda m: s.top(BOARD, "day", limit=TOP),
                "around": lambda m: s.around(BOARD, m, "day", size=AROUND),
                "rank": lambda m: s.rank(BOARD, m, "day"),
            },
            work.targets,
            lambda: redis_cpu(s.client),
        )
        answers = Answers(
            top=[(e.member, e.score, e.metadata) for e in s.top(BOARD, "day", limit=TOP).entries],
            ranks={m: r for m in work.check if (r := rank(m)) is not None},
            around={m: around(m) for m in work.check},
        )
        problems = [
            f"the {window} board has {total} members, expected {work.size}"
            for window in ("week", "season")
            if (total := s.top(BOARD, window, limit=1).total) != work.size
        ]
    return PeerResult(
        "Seasons",
        seasons_version(),
        work.size,
        watch.wall,
        per_round,
        read_rounds,
        answers,
        problems,
        watch.cpu,
        server_cpu,
        read_cpu,
        memory,
    )


# --- the hand-written pipeline ----------------------------------------------------------------


@dataclass(frozen=True)
class DayPlan:
    """Keys, weights and expiry of one day's write-through, worked out once per batch."""

    day_key: str
    week_key: str
    season_key: str
    meta_key: str
    week_weight: float
    season_weight: float
    expire: tuple[int, int, int]

    @classmethod
    def of(cls, settings: Settings, now: datetime) -> DayPlan:
        keys = Keys(settings.namespace)
        cfg = settings.boards[BOARD]
        day = local_day(now, settings.zone)
        periods = [win.period_of_day(w, day, settings) for w in ("day", "week", "season")]
        span = season_of_day(day, settings)
        day_p, week_p, season_p = periods
        assert day_p is not None and week_p is not None and season_p is not None
        assert span is not None
        return cls(
            day_key=keys.day(BOARD, day),
            week_key=keys.week(BOARD, week_p.id),
            season_key=keys.season(BOARD, season_p.id),
            meta_key=keys.meta(BOARD),
            week_weight=cfg.week_weights[weekday_index(day, settings.week_start_index)],
            season_weight=cfg.season_weight(week_of_season(day, span)),
            expire=(
                win.expire_at(day_p, settings),
                win.expire_at(week_p, settings),
                win.expire_at(season_p, settings),
            ),
        )


def pipeline_write(
    client: Any, settings: Settings, now: datetime, rows: Sequence[tuple[str, int, str]]
) -> None:
    """One batch by hand: ZINCRBY day/week/season per event, one HSET of the member data and
    three EXPIREATs per batch, ``transaction=False``, one round trip."""
    plan = DayPlan.of(settings, now)
    pipe = client.pipeline(transaction=False)
    for member, value, _ in rows:
        pipe.zincrby(plan.day_key, value, member)
        pipe.zincrby(plan.week_key, plan.week_weight * value, member)
        pipe.zincrby(plan.season_key, plan.season_weight * value, member)
    pipe.hset(plan.meta_key, mapping={member: data for member, _, data in rows})
    for key, at in zip((plan.day_key, plan.week_key, plan.season_key), plan.expire, strict=True):
        pipe.expireat(key, at)
    pipe.execute()


class PipelineReads:
    """The reads by hand: plain commands, member data parsed like Seasons parses it."""

    def __init__(self, client: Any, key: str, meta_key: str):
        self.client, self.key, self.meta_key = client, key, meta_key

    def _entries(self, rows: list[tuple[str, float]]) -> list[tuple[str, float, Any]]:
        data = self.client.hmget(self.meta_key, [m for m, _ in rows])
        return [(m, s, json.loads(d) if d else {}) for (m, s), d in zip(rows, data, strict=True)]

    def top(self) -> list[tuple[str, float, Any]]:
        """ZRANGE REV WITHSCORES, HMGET: two round trips."""
        return self._entries(self.client.zrange(self.key, 0, TOP - 1, desc=True, withscores=True))

    def around(self, member: str) -> list[tuple[str, int]]:
        """ZREVRANK + ZCARD (one pipeline), ZRANGE REV WITHSCORES, HMGET: three round trips."""
        pipe = self.client.pipeline(transaction=False)
        pipe.zrevrank(self.key, member)
        pipe.zcard(self.key)
        rank, total = pipe.execute()
        if rank is None:
            return []
        start = max(0, min(rank - AROUND // 2, total - AROUND))
        rows = self.client.zrange(self.key, start, start + AROUND - 1, desc=True, withscores=True)
        entries = self._entries(rows)
        return [(m, start + i + 1) for i, (m, _, _) in enumerate(entries)]

    def rank(self, member: str) -> int | None:
        """ZREVRANK: one round trip."""
        rank = self.client.zrevrank(self.key, member)
        return None if rank is None else rank + 1


def run_pipeline(url: str, work: Workload, calendar: Calendar, *, batch: int) -> PeerResult:
    """The same events and reads as :func:`run_seasons`, written by hand with redis-py."""
    settings = calendar.settings(url, NS_PIPELINE)
    client = make_client(settings.redis)  # configured exactly like Seasons' own
    clock = calendar.clock()
    try:
        watch, server_cpu = Stopwatch(), redis_cpu(client)
        for start in range(0, work.size, batch):
            stop = start + batch
            rows = list(
                zip(
                    work.members[start:stop],
                    work.values[start:stop],
                    work.meta[start:stop],
                    strict=True,
                )
            )
            with watch:
                pipeline_write(client, settings, clock(), rows)
        server_cpu = redis_cpu(client) - server_cpu
        memory = int(client.info("memory")["used_memory"])
        plan = DayPlan.of(settings, clock())
        reads = PipelineReads(client, plan.day_key, plan.meta_key)
        per_round, read_rounds, read_cpu = time_reads(
            {"top": lambda m: reads.top(), "around": reads.around, "rank": reads.rank},
            work.targets,
            lambda: redis_cpu(client),
        )
        answers = Answers(
            top=reads.top(),
            ranks={m: r for m in work.check if (r := reads.rank(m)) is not None},
            around={m: reads.around(m) for m in work.check},
        )
        problems = [
            f"{key} has {total} members, expected {work.size}"
            for key in (plan.week_key, plan.season_key)
            if (total := client.zcard(key)) != work.size
        ]
    finally:
        client.close()
    return PeerResult(
        "pipeline",
        f"redis-py {redis.__version__}",
        work.size,
        watch.wall,
        per_round,
        read_rounds,
        answers,
        problems,
        watch.cpu,
        server_cpu,
        read_cpu,
        memory,
    )
