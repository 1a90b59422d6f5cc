"""The read executor (seasons.executor) against real redis-servers, once per implementation:
every test takes ``kind`` ("sync" or "async") and drives the executor through one small
blocking adapter, so the sync executor and the asyncio one answer the same questions.

Replies are compared with a plain-Python reference computed from the scores written (through
redis-py) into the keys the prepared reads name, never with another run of the scripts. The
executors must survive what a connection meets in production: flushed scripts, killed
connections, Redis stopped and started, a stalled server, AUTH (password or ACL user), a
database number, a unix socket, and on Redis Cluster a failover and a slot migration.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import random
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
from redis.crc import key_slot
from redis.credentials import UsernamePasswordCredentialProvider
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis_cluster import LocalCluster, find_redis_cli
from redis_server import RedisServer
from reference import Calendar, around_start, gap_up, percentile, ranked

from seasons import Seasons
from seasons.config import Settings, load_settings
from seasons.config.settings import RedisSettings
from seasons.connection import make_client
from seasons.errors import BackendUnreachable
from seasons.executor import (
    AsyncExecutor,
    Call,
    Endpoint,
    Reply,
    SyncExecutor,
    async_executor,
    sync_executor,
)
from seasons.keys import Keys
from seasons.reads import Read, Reads

T = TypeVar("T")

KINDS = ("sync", "async")
THREADS = 8  # the sync adapter's concurrency: the calling thread and 7 others
NOW = datetime(2035, 3, 14, 12, 30, tzinfo=UTC)
DAYS = 3  # today and the two days before hold scores; reads also ask for older, empty days
BOARDS: dict[str, dict[str, str]] = {
    "kills": {},  # desc, ties by member
    "asc": {"order": "asc", "ties": "shared"},
    "shared": {"ties": "shared"},
    "low": {"order": "asc"},
}
# Names the scripts must encode: quotes and backslashes go through cjson, the rest is copied.
AWKWARD = ['quo"te', "back\\slash", "ü/ñ", "sl/ash", "sp ace", "日本語", "emoji😀", "{b}"]
ABSENT = ["nobody", 'no"body', "ünobody"]
WHATS = ("page", "rank", "member", "entry", "lookup", "history")
PASSWORD = "s3cret"
DEADLINE = 3.0  # seconds to wait for the server to notice a closed connection


# --- one adapter for both executors ---------------------------------------------------------


class Executor:
    """A sync or an async executor behind blocking calls. The async one runs on one
    persistent event loop (so it keeps its pipelined connection between calls), or with
    ``fresh_loops`` on a new loop for every call, as a caller without a lifespan would."""

    def __init__(self, kind: str, client: Any, cfg: RedisSettings, *, fresh_loops: bool = False):
        self.kind = kind
        self._sync: SyncExecutor | None = None
        self._async: AsyncExecutor | None = None
        self._runner: asyncio.Runner | None = None
        if kind == "sync":
            self._sync = sync_executor(client)
        else:
            self._async = async_executor(client, cfg)
            self._runner = None if fresh_loops else asyncio.Runner()
        self._closed = False

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            return asyncio.run(coro)
        return self._runner.run(coro)

    def run(self, read: Read[Any]) -> bytes | None:
        """The JSON the read answers (None: the member is not on the board): its plan, or
        its script, run by the executor."""
        if self._sync is not None:
            return read.render(self._sync.run(read.call, read.plan))
        assert self._async is not None
        return read.render(self._wait(self._async.run(read.call, read.plan)))

    def script(self, call: Call) -> Reply:
        """What a script call answers."""
        if self._sync is not None:
            return self._sync.run(call)
        assert self._async is not None
        return self._wait(self._async.run(call))

    def many(self, calls: Sequence[Read[Any]]) -> list[bytes | None | BaseException]:
        """All ``calls`` at once: gathered on the event loop (pipelined on one connection),
        or spread over :data:`THREADS` threads, the calling one among them (so its kept
        connection takes part). An error is returned in the call's place."""
        if self._async is not None:
            run = self._async.run

            async def one(read: Read[Any]) -> bytes | None:
                return read.render(await run(read.call, read.plan))

            async def gathered() -> list[bytes | None | BaseException]:
                return await asyncio.gather(*(one(c) for c in calls), return_exceptions=True)

            return self._wait(gathered())
        sync = self._sync
        assert sync is not None
        out: list[bytes | None | BaseException] = [None] * len(calls)

        def work(first: int) -> None:
            for i in range(first, len(calls), THREADS):
                try:
                    out[i] = calls[i].render(sync.run(calls[i].call, calls[i].plan))
                except Exception as exc:
                    out[i] = exc

        threads = [threading.Thread(target=work, args=(t,)) for t in range(1, THREADS)]
        for t in threads:
            t.start()
        work(0)
        for t in threads:
            t.join()
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._sync is not None:
            self._sync.close()
            return
        assert self._async is not None
        closing = self._async.close  # an Awaitable: asyncio.run takes a coroutine

        async def close() -> None:
            await closing()

        self._wait(close())
        if self._runner is not None:
            self._runner.close()


Make = Callable[..., Executor]


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def executors(kind: str) -> Iterator[Make]:
    """``make(client, cfg, fresh_loops=False)``: an :class:`Executor` of the test's kind for
    the Seasons client ``client`` (``cfg`` is read on a cluster or TLS only); closed after."""
    made: list[Executor] = []

    def make(client: Any, cfg: RedisSettings, *, fresh_loops: bool = False) -> Executor:
        ex = Executor(kind, client, cfg, fresh_loops=fresh_loops)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close()


# --- the boards and what every read must answer ---------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One read, as the reference sees it."""

    what: str  # one of WHATS
    board: str
    period: str  # a day id, "current" or "previous" (history: unused)
    a: Any  # page: offset; rank: rank; lookup: members; else: the member
    b: int  # page: limit; rank, member: size; history: last; else unused


class World:
    """Day boards with ties, awkward member names and metadata on some members, written
    with plain redis-py; the prepared reads of them; and the reference answer of each read."""

    def __init__(self, settings: Settings, *, members: int, seed: int, prefix: str = "m"):
        self.settings = settings
        self.reads = Reads(settings, Keys(settings.namespace), lambda: NOW)
        self.cal = Calendar(settings)
        self.days = self.cal.recent("day", NOW, DAYS)  # oldest first, today last
        self.empty_day = self.cal.recent("day", NOW, DAYS + 3)[0]
        rnd = random.Random(seed)
        self.names = [f"{prefix}{i}" for i in range(members)] + [prefix + n for n in AWKWARD]
        self.scores: dict[tuple[str, str], dict[str, float]] = {}
        for board in BOARDS:
            for day in self.days:
                chosen = self.names
                if day != self.days[-1]:  # earlier days: some members only (history's nulls)
                    chosen = rnd.sample(self.names, k=len(self.names) * 2 // 3)
                self.scores[(board, day)] = {m: _score(rnd) for m in chosen}
        with_meta = self.names[::3] + self.names[-len(AWKWARD) :: 2]
        self.meta = {
            board: {
                m: {"name": m, "level": rnd.randint(1, 9), "note": 'a "b" \\ ü'} for m in with_meta
            }
            for board in BOARDS
        }
        self._rows: dict[tuple[str, str], list[tuple[int, str, float]]] = {}
        self._position: dict[tuple[str, str], dict[str, int]] = {}
        for (board, day), scores in self.scores.items():
            cfg = settings.boards[board]
            rows = ranked(scores, cfg.order, cfg.ties)
            self._rows[(board, day)] = rows
            self._position[(board, day)] = {m: i for i, (_, m, _) in enumerate(rows)}

    def write(self, client: Any) -> None:
        """ZADD and HSET into the keys that the prepared reads name."""
        for (board, day), scores in self.scores.items():
            _, live, archive = self.reads.target(board, "day", day)
            assert live == archive  # a day board has no archive
            client.zadd(live, scores)
        for board, meta in self.meta.items():
            client.hset(
                self.reads.keys.meta(board), mapping={m: json.dumps(v) for m, v in meta.items()}
            )

    def key(self, board: str) -> str:
        return self.reads.target(board, "day", "current")[1]

    # the reads

    def read(self, s: Spec) -> Read[Any]:
        r = self.reads
        if s.what == "page":
            return r.page(s.board, "day", s.period, limit=s.b, offset=s.a)
        if s.what == "rank":
            return r.around_rank(s.board, "day", s.a, s.period, size=s.b)
        if s.what == "member":
            return r.around_member(s.board, "day", s.a, s.period, size=s.b)
        if s.what == "entry":
            return r.entry(s.board, "day", s.a, s.period)
        if s.what == "lookup":
            return r.lookup(s.board, "day", s.a, s.period)
        return r.history(s.board, s.a, "day", last=s.b)

    def call(self, s: Spec) -> Read[Any]:
        return self.read(s)

    def random_spec(self, rnd: random.Random) -> Spec:
        what, board = rnd.choice(WHATS), rnd.choice(list(BOARDS))
        period = rnd.choice([*self.days, "current", "previous", self.empty_day])
        member = rnd.choice(self.names + ABSENT)
        n = len(self.names)
        if what == "page":
            return Spec(what, board, period, rnd.randint(0, n + 3), rnd.randint(1, 30))
        if what == "rank":
            return Spec(what, board, period, rnd.randint(1, n + 3), rnd.randint(1, 15))
        if what == "member":
            return Spec(what, board, period, member, rnd.randint(1, 15))
        if what == "lookup":
            asked = [rnd.choice(self.names + ABSENT) for _ in range(rnd.randint(0, 12))]
            return Spec(what, board, period, asked, 0)
        if what == "history":
            return Spec(what, board, period, member, rnd.randint(1, DAYS + 3))
        return Spec(what, board, period, member, 0)

    def specs(self, n: int, seed: int) -> list[Spec]:
        rnd = random.Random(seed)
        return [self.random_spec(rnd) for _ in range(n)]

    def distinct(self, n: int, seed: int) -> list[Spec]:
        """``n`` reads whose answers all differ, so a reply handed to the wrong call shows."""
        rnd, out, seen = random.Random(seed), list[Spec](), set[str]()
        while len(out) < n:
            spec = self.random_spec(rnd)
            answer = json.dumps(self.expected(spec), sort_keys=True)
            if answer not in seen:
                seen.add(answer)
                out.append(spec)
        return out

    # the reference

    def expected(self, s: Spec) -> Any:
        """The parsed JSON the read must answer (None for nil), from the scores alone."""
        if s.what == "history":
            points = []
            for pid in self.cal.recent("day", NOW, s.b):
                found = self._place(s.board, pid, s.a)
                rank, score = (found[0], found[2]) if found else (None, None)
                points.append({"period": pid, "rank": rank, "score": score})
            return {"board": s.board, "window": "day", "member": s.a, "history": points}
        pid = {"current": self.days[-1], "previous": self.days[-2]}.get(s.period, s.period)
        rows = self._rows.get((s.board, pid), [])
        position = self._position.get((s.board, pid), {})
        if s.what == "entry":
            found = self._place(s.board, pid, s.a)
            if found is None:
                return None
            scores, order = self.scores[(s.board, pid)], self.settings.boards[s.board].order
            return {
                **self._entry(s.board, found),
                "percentile": percentile(scores, order, s.a),
                "gap_up": gap_up(scores, order, s.a),
                "total": len(rows),
            }
        if s.what == "lookup":
            asked = list(dict.fromkeys(s.a))
            hits = [(rows[position[m]][0], i, m) for i, m in enumerate(asked) if m in position]
            return [self._entry(s.board, rows[position[m]]) for _, _, m in sorted(hits)]
        if s.what == "page":
            start, count = s.a, s.b
        elif s.what == "rank":
            start, count = around_start(s.a - 1, s.b, len(rows)), s.b
        else:
            if s.a not in position:
                return None
            start, count = around_start(position[s.a], s.b, len(rows)), s.b
        return {
            "board": s.board,
            "window": "day",
            "period": pid,
            "total": len(rows),
            "entries": [self._entry(s.board, row) for row in rows[start : start + count]],
        }

    def _place(self, board: str, pid: str, member: str) -> tuple[int, str, float] | None:
        at = self._position.get((board, pid), {}).get(member)
        return None if at is None else self._rows[(board, pid)][at]

    def _entry(self, board: str, row: tuple[int, str, float]) -> dict[str, Any]:
        rank, member, score = row
        meta = self.meta[board].get(member, {})
        return {"rank": rank, "member": member, "score": score, "metadata": meta}


def _score(rnd: random.Random) -> float:
    """Mostly small integers (many ties), some quarters and negatives, some near 2^52."""
    pick = rnd.random()
    if pick < 0.6:
        return rnd.randint(0, 20)
    if pick < 0.9:
        return rnd.randint(-40, 40) / 4
    return 2**52 + rnd.randint(0, 3)


def parsed(reply: bytes | None | BaseException) -> Any:
    if isinstance(reply, BaseException):
        raise reply
    return None if reply is None else json.loads(reply)


def mismatches(world: World, specs: Sequence[Spec], replies: Sequence[Any]) -> list[str]:
    out = []
    for spec, reply in zip(specs, replies, strict=True):
        got, want = parsed(reply), world.expected(spec)
        if got != want:
            out.append(f"{spec}: got {got!r}, want {want!r}")
    return out


def answers_right(ex: Executor, world: World, specs: Sequence[Spec]) -> None:
    """Each read, one after the other and then all at once, answers the reference."""
    calls = [world.call(s) for s in specs]
    assert mismatches(world, specs, [ex.run(c) for c in calls]) == []
    assert mismatches(world, specs, ex.many(calls)) == []


# --- servers, settings, connections ---------------------------------------------------------


@pytest.fixture(scope="module")
def toml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty config file, so that neither $SEASONS_CONFIG nor ./seasons.toml leaks in."""
    path = tmp_path_factory.mktemp("executor") / "seasons.toml"
    path.write_text("")
    return path


def settings_for(toml: Path, url: str, **redis_overrides: Any) -> Settings:
    return load_settings(
        environ={}, path=toml, redis={"url": url, **redis_overrides}, boards=BOARDS
    )


@pytest.fixture
def server() -> Iterator[RedisServer]:
    """A server of the test's own: tests stop it, kill its clients, pause it."""
    with RedisServer() as s:
        yield s


@pytest.fixture
def admin(server: RedisServer) -> Iterator[redis.Redis]:
    """The test's own client: it writes the boards and watches the server."""
    client = server.client(decode_responses=True)
    yield client
    client.close()


def executor_connections(admin: redis.Redis) -> set[int]:
    """Ids of the server's normal connections other than ``admin``'s own."""
    me = admin.client_id()
    return {int(c["id"]) for c in admin.client_list(_type="normal")} - {me}


def connections_made(admin: redis.Redis) -> int:
    return int(admin.info("stats")["total_connections_received"])


def wait_until(predicate: Callable[[], bool], timeout: float = DEADLINE) -> bool:
    """Whether ``predicate()`` became true within ``timeout`` seconds (the server notices a
    closed connection a little after the client closed it)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def calls_of(admin: redis.Redis, command: str, field: str = "calls") -> int:
    stats: dict[str, Any] = admin.info("commandstats")
    return int(stats.get(f"cmdstat_{command}", {}).get(field, 0))


@dataclass
class Single:
    world: World
    settings: Settings
    client: Any  # the Seasons client the executor takes its endpoint from


@pytest.fixture
def single(server: RedisServer, admin: redis.Redis, toml: Path) -> Iterator[Single]:
    """Boards written on the test's server, and a Seasons client of it (which the executor's
    own connections stand in for: it never connects itself)."""
    settings = settings_for(toml, server.url)
    world = World(settings, members=150, seed=1)
    world.write(admin)
    client = make_client(settings.redis)
    yield Single(world, settings, client)
    client.close()


# --- a single server ------------------------------------------------------------------------


def test_replies_equal_the_reference(
    kind: str, single: Single, admin: redis.Redis, executors: Make
) -> None:
    world = single.world
    ex = executors(single.client, single.settings.redis)
    specs = world.specs(300, seed=2)
    assert {s.what for s in specs} == set(WHATS)
    assert any(world.expected(s) is None for s in specs)  # some members are not ranked
    replies = [ex.run(world.call(s)) for s in specs]
    assert mismatches(world, specs, replies) == []
    if kind == "sync":  # bytes on its own connection: hiredis, not redis-py's decoding
        assert all(isinstance(r, bytes) for r in replies if r is not None)

    # Hundreds at once: gathered on one pipelined connection (async), or from 8 threads
    # (sync), each caller gets its own reply.
    (mine,) = executor_connections(admin)  # the connection kept by the reads above
    made = connections_made(admin)
    many = world.specs(400, seed=3)
    assert mismatches(world, many, ex.many([world.call(s) for s in many])) == []
    if kind == "async":
        assert connections_made(admin) == made
        assert executor_connections(admin) == {mine}
    else:  # one connection per thread: the caller's kept one and one for each other thread
        assert connections_made(admin) == made + THREADS - 1
        assert wait_until(lambda: executor_connections(admin) == {mine})  # gone with them


def test_lost_scripts_are_sent_again_once(
    kind: str, single: Single, admin: redis.Redis, executors: Make
) -> None:
    world = single.world
    ex = executors(single.client, single.settings.redis)
    specs = world.distinct(8, seed=4)
    answers_right(ex, world, specs)
    admin.script_flush()  # as a restart or a failover to a node that never saw them
    read = world.call(specs[0])
    call = read.call  # its script, whether or not a plan could answer it
    evals, evalshas = calls_of(admin, "eval"), calls_of(admin, "evalsha")
    refused = calls_of(admin, "evalsha", "failed_calls")
    assert parsed(read.render(ex.script(call))) == world.expected(specs[0])
    # NOSCRIPT, then EVAL once, which caches the script again ...
    assert calls_of(admin, "evalsha", "failed_calls") == refused + 1
    assert calls_of(admin, "eval") == evals + 1
    assert admin.script_exists(call.script.sha) == [True]
    # ... so the next call is one EVALSHA.
    assert parsed(read.render(ex.script(call))) == world.expected(specs[0])
    assert calls_of(admin, "eval") == evals + 1
    assert calls_of(admin, "evalsha") == evalshas + 2
    assert calls_of(admin, "evalsha", "failed_calls") == refused + 1
    answers_right(ex, world, specs)


def test_a_killed_connection_is_replaced(
    kind: str, single: Single, admin: redis.Redis, executors: Make
) -> None:
    world = single.world
    ex = executors(single.client, single.settings.redis)
    specs = world.distinct(8, seed=5)
    calls = [world.call(s) for s in specs]
    assert mismatches(world, specs, [ex.run(c) for c in calls]) == []
    before = executor_connections(admin)
    assert len(before) == 1
    assert admin.client_kill_filter(_type="normal", skipme=True) == 1  # the executor's
    assert mismatches(world, specs, [ex.run(c) for c in calls]) == []
    after = executor_connections(admin)
    assert len(after) == 1 and after.isdisjoint(before)


def test_redis_stopped_then_started(
    kind: str, server: RedisServer, single: Single, executors: Make
) -> None:
    world = single.world
    ex = executors(single.client, single.settings.redis)
    specs = world.distinct(8, seed=6)
    answers_right(ex, world, specs)
    server.stop()
    call = world.call(specs[0])
    for _ in range(2):  # and again: no stuck state
        with pytest.raises(BackendUnreachable) as refused:
            ex.run(call)
        assert isinstance(refused.value.__cause__, RedisConnectionError)
    server.start()  # empty: the boards and the scripts are gone
    fresh = server.client(decode_responses=True)
    try:
        assert parsed(ex.run(world.call(Spec("page", "kills", "current", 0, 10)))) == {
            "board": "kills",
            "window": "day",
            "period": world.days[-1],
            "total": 0,
            "entries": [],
        }
        world.write(fresh)
    finally:
        fresh.close()
    answers_right(ex, world, specs)


def test_a_stalled_server_times_out_and_no_late_reply_is_misread(
    kind: str, server: RedisServer, admin: redis.Redis, toml: Path, executors: Make
) -> None:
    settings = settings_for(toml, server.url, socket_timeout=0.3)
    world = World(settings, members=40, seed=7)
    world.write(admin)
    client = make_client(settings.redis)
    ex = executors(client, settings.redis)
    specs = world.distinct(12, seed=8)
    calls = [world.call(s) for s in specs]
    assert mismatches(world, specs, [ex.run(c) for c in calls]) == []  # connected
    made = connections_made(admin)
    # CLIENT PAUSE rather than DEBUG SLEEP: the stall has begun once it answers, so the calls
    # below are certainly sent to a server that does not answer for 2 s. With 0.3 s timeouts
    # and the retry policy's 3 resends the calls give up at about 1.9 s, or, if the machine is
    # slow, meet the server awake on their last try: either is right.
    admin.client_pause(2000, all=True)
    during = ex.many(calls)
    for spec, got in zip(specs, during, strict=True):
        if isinstance(got, BaseException):
            assert isinstance(got, BackendUnreachable), repr(got)
            assert isinstance(got.__cause__, RedisTimeoutError), repr(got.__cause__)
        else:
            assert parsed(got) == world.expected(spec)
    assert admin.ping()  # the pause is over (the admin's commands waited for it too)
    # Every stalled request was answered late; none of those replies may be read as the
    # answer of a later request on the connection the executor keeps.
    assert mismatches(world, specs, [ex.run(c) for c in calls]) == []
    assert mismatches(world, specs, [ex.run(c) for c in reversed(calls)][::-1]) == []
    assert mismatches(world, specs, ex.many(calls)) == []
    assert connections_made(admin) > made  # the stalled connection was given up
    client.close()


def test_auth_a_database_and_a_unix_socket(kind: str, toml: Path, executors: Make) -> None:
    # A short path of its own: a unix socket's path is limited to about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="sx-") as folder:
        sock = f"{folder}/redis.sock"
        with RedisServer(args=["--unixsocket", sock, "--unixsocketperm", "700"]) as server:
            first = server.client()
            first.config_set("requirepass", PASSWORD)  # after start: it PINGs at start
            first.execute_command("ACL", "SETUSER", "reader", "on", ">pw2", "~*", "+@all")
            first.close()
            host, port = server.host, server.port
            settings = settings_for(toml, f"redis://:{PASSWORD}@{host}:{port}/3")
            db3 = World(settings, members=30, seed=9)
            db0 = World(settings, members=7, seed=10, prefix="zero")  # other names, sizes
            for world, db in ((db3, 3), (db0, 0)):
                writer = server.client(db=db, password=PASSWORD, decode_responses=True)
                world.write(writer)
                writer.close()
            # Only reads whose answer on db 0 differs: each proves the database was selected.
            specs = [s for s in db3.specs(60, seed=11) if db3.expected(s) != db0.expected(s)]
            assert len(specs) > 30
            clients = {
                "password": redis.Redis(host=host, port=port, db=3, password=PASSWORD),
                "socket": redis.Redis.from_url(f"unix://:{PASSWORD}@{sock}?db=3"),
                "acl user": redis.Redis(
                    host=host, port=port, db=3, username="reader", password="pw2"
                ),
                "acl user, socket": redis.Redis(
                    unix_socket_path=sock, db=3, username="reader", password="pw2"
                ),
            }
            for name, client in clients.items():
                ex = executors(client, settings.redis)
                calls = [db3.call(s) for s in specs]
                assert mismatches(db3, specs, [ex.run(c) for c in calls]) == [], name
                assert mismatches(db3, specs, ex.many(calls)) == [], name
                ex.close()
            # A wrong password is refused at once (after the retries), not waited on.
            wrong = redis.Redis(host=host, port=port, db=3, password="nope", socket_timeout=2)
            ex = executors(wrong, settings.redis)
            with pytest.raises(BackendUnreachable) as refused:
                ex.run(db3.call(specs[0]))
            assert isinstance(refused.value.__cause__, AuthenticationError)


def test_a_refused_database_is_refused_every_time(
    kind: str, server: RedisServer, admin: redis.Redis, toml: Path, executors: Make
) -> None:
    settings = settings_for(toml, server.url)
    world = World(settings, members=5, seed=12)
    world.write(admin)  # on database 0, which the executor must never read instead
    ex = executors(redis.Redis(host=server.host, port=server.port, db=20), settings.redis)
    call = world.call(Spec("page", "kills", "current", 0, 10))
    for _ in range(2):
        with pytest.raises(ResponseError, match="DB index is out of range"):
            ex.run(call)


def test_the_async_executor_follows_its_caller_to_new_event_loops(
    single: Single, admin: redis.Redis
) -> None:
    """Each asyncio.run is a new loop (as each request of a test client without its
    lifespan): the executor connects on the new one instead of waiting on the old one's."""
    world = single.world
    ex = Executor("async", single.client, single.settings.redis, fresh_loops=True)
    try:
        specs = world.distinct(6, seed=13)
        calls = [world.call(s) for s in specs]
        for _ in range(2):
            assert mismatches(world, specs, [ex.run(c) for c in calls]) == []
            assert mismatches(world, specs, ex.many(calls)) == []
    finally:
        ex.close()
        collect_abandoned()


def collect_abandoned() -> None:
    """Collect the transports of the event loops left behind now, not in a later test: the
    executor closed their sockets, but a transport of a closed loop cannot be marked closed,
    and warns when it is collected."""
    with warnings.catch_warnings():  # their transports' "unclosed" warnings
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def test_the_async_executor_closes_the_connection_of_a_loop_it_left(
    single: Single, admin: redis.Redis
) -> None:
    world = single.world
    call = world.call(Spec("page", "kills", "current", 0, 5))
    ex = Executor("async", single.client, single.settings.redis, fresh_loops=True)
    # The cyclic GC closes an abandoned transport sooner or later; it must not be what
    # closes this one.
    gc.disable()
    try:
        for _ in range(3):
            ex.run(call)
            assert wait_until(lambda: len(executor_connections(admin)) == 1)
        ex.close()  # on yet another loop
        assert wait_until(lambda: not executor_connections(admin))
    finally:
        gc.enable()
        collect_abandoned()


def test_seasons_reads_on_connections_of_its_own(
    server: RedisServer, admin: redis.Redis, toml: Path
) -> None:
    settings = settings_for(toml, server.url)
    world = World(settings, members=40, seed=14)
    world.write(admin)
    member = world.names[-1]
    s = Seasons(settings, clock=lambda: NOW)
    try:
        assert isinstance(s.executor, SyncExecutor)
        assert Endpoint.of(s.client) is not None
        s.around("asc", member, "day")  # its script is cached (shared ties: no plan)
        evalshas, evals = calls_of(admin, "evalsha"), calls_of(admin, "eval")
        execs = calls_of(admin, "exec")
        page = s.top("kills", "day", limit=7, offset=3)
        # A page is a plan: its first transaction learns the page's members, the second
        # reads their metadata with it; the next read of the page needs one.
        assert calls_of(admin, "exec") == execs + 2
        assert s.top("kills", "day", limit=7, offset=3) == page
        assert calls_of(admin, "exec") == execs + 3
        entry = s.rank("kills", member, "day")  # a plan too: its score, then the rest
        assert calls_of(admin, "exec") == execs + 5
        around = s.around("kills", member, "day", size=5)  # its position, rows, metadata
        assert calls_of(admin, "exec") == execs + 8
        shared = s.around("asc", member, "day", size=5)
        assert calls_of(admin, "evalsha") == evalshas + 1  # the one read with no plan
        assert calls_of(admin, "eval") == evals
        assert page.model_dump() == world.expected(Spec("page", "kills", "current", 3, 7))
        assert entry is not None and around is not None and shared is not None
        assert entry.model_dump() == world.expected(Spec("entry", "kills", "current", member, 0))
        assert around.model_dump() == world.expected(Spec("member", "kills", "current", member, 5))
        assert shared.model_dump() == world.expected(Spec("member", "asc", "current", member, 5))
        assert s.rank("kills", "nobody", "day") is None
        (mine,) = executor_connections(admin)  # the reads' own; the client never connected

        # From 8 threads: a connection each, kept while the thread lives, closed when it ends.
        problems: list[str] = []
        counted, done = threading.Barrier(THREADS + 1), threading.Barrier(THREADS + 1)
        specs = world.specs(THREADS * 10, seed=15)

        def reader(first: int) -> None:
            try:
                for spec in specs[first::THREADS]:
                    got = s.run(world.read(spec))
                    dumped = None if got is None else _dump(got)
                    if dumped != world.expected(spec):
                        problems.append(f"{spec}: {dumped!r}")
            finally:
                counted.wait()
                done.wait()

        threads = [threading.Thread(target=reader, args=(t,)) for t in range(THREADS)]
        for t in threads:
            t.start()
        counted.wait()
        try:
            assert len(executor_connections(admin)) == THREADS + 1
        finally:
            done.wait()
            for t in threads:
                t.join()
        assert problems == []
        assert wait_until(lambda: executor_connections(admin) == {mine})
    finally:
        s.close()
    assert wait_until(lambda: not executor_connections(admin))  # close() closed the rest


def _dump(result: Any) -> Any:
    if isinstance(result, list):
        return [e.model_dump() for e in result]
    return result.model_dump()


def test_endpoint_of_a_client() -> None:
    plain = redis.Redis(
        host="127.0.0.1",
        port=1234,
        db=3,
        username="u",
        password="p",
        socket_timeout=0.5,
        socket_connect_timeout=0.25,
    )
    assert Endpoint.of(plain) == Endpoint(
        host="127.0.0.1",
        port=1234,
        path=None,
        db=3,
        username="u",
        password="p",
        timeout=0.5,
        connect_timeout=0.25,
    )
    unix = Endpoint.of(redis.Redis.from_url("unix://:pw@/tmp/seasons-x.sock?db=2"))
    assert unix is not None
    assert (unix.path, unix.db, unix.username, unix.password) == (
        "/tmp/seasons-x.sock",
        2,
        None,
        "pw",
    )
    # No connection is needed to tell that these go through the client itself.
    routed = {
        "tls": redis.Redis.from_url("rediss://127.0.0.1:1/0"),
        "resp3": redis.Redis(host="127.0.0.1", port=1, protocol=3),
        "credential provider": redis.Redis(
            host="127.0.0.1",
            port=1,
            credential_provider=UsernamePasswordCredentialProvider("u", "p"),
        ),
        "not a client": object(),
    }
    for name, client in routed.items():
        assert Endpoint.of(client) is None, name


# --- Redis Cluster --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """A cluster of this module's own (3 masters, 1 replica each): the tests fail over and
    move slots."""
    if os.environ.get("SEASONS_TEST_CLUSTER", "1") == "0":
        pytest.skip("SEASONS_TEST_CLUSTER=0")
    try:
        find_redis_cli()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with LocalCluster() as c:
        yield c


def test_cluster_replies_survive_failover_migration_and_lost_scripts(
    kind: str, cluster: LocalCluster, toml: Path, executors: Make
) -> None:
    settings = settings_for(toml, cluster.url, cluster=True)
    # Not cluster.flush(): its client keeps the slot map of before the last test's failover.
    for port in cluster.master_ports():
        master = cluster.node_client(port)
        try:
            master.flushall()
        finally:
            master.close()
    client = make_client(settings.redis)
    try:
        assert Endpoint.of(client) is None  # through the cluster client
        world = World(settings, members=60, seed=16)
        world.write(client)
        ex = executors(client, settings.redis)
        specs = world.specs(60, seed=17)
        answers_right(ex, world, specs)

        key = world.key("kills")
        old = cluster.master_of(key)
        cluster.manual_failover(cluster.replicas_of(old)[0])
        assert cluster.master_of(key) != old  # the executor's slot map is stale: MOVED
        answers_right(ex, world, specs)

        other = next(p for p in cluster.master_ports() if p != cluster.master_of(key))
        cluster.migrate_slot(key_slot(key.encode()), other)
        assert cluster.master_of(key) == other
        answers_right(ex, world, specs)

        for node in cluster.nodes:
            if node.running:
                c = cluster.node_client(node.port)
                try:
                    c.script_flush()
                finally:
                    c.close()
        answers_right(ex, world, specs)
    finally:
        client.close()
