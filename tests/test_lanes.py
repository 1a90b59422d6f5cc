"""The read lanes (seasons.lanes) against real redis-servers: every reply equals the one the
script gives through redis-py's client, under threads and under concurrent pipelined reads,
and a lane survives what a connection meets in production (flushed scripts, killed
connections, Redis stopped and started, a slow server, AUTH, a database number, a socket)."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis_server import RedisServer

from config import load_settings
from seasons import Seasons
from seasons.connection import backend_errors, make_client
from seasons.errors import BackendUnavailable
from seasons.lanes import AsyncLane, SyncLane, async_lane, sync_lane
from seasons.scripts import Scripts

KEY, META = "t:{b}:day:2035-01-01", "t:{b}:meta"
MEMBERS = 300


@pytest.fixture
def server() -> Iterator[RedisServer]:
    """A server of this module's own: the tests stop it, kill its clients, make it sleep."""
    with RedisServer(args=["--enable-debug-command", "yes"]) as s:
        yield s


def populate(client: Any, seed: int = 1) -> list[str]:
    """A board with ties, awkward member names and metadata on some members."""
    rnd = random.Random(seed)
    names = [f"m{i}" for i in range(MEMBERS)] + ['quo"te', "back\\slash", "ü/ñ", "sp ace"]
    client.zadd(KEY, {n: rnd.randint(0, 40) for n in names})
    for n in names[::3]:
        client.hset(META, n, json.dumps({"name": n, "level": rnd.randint(1, 9)}))
    return names


def calls(names: list[str], n: int, seed: int = 2) -> list[tuple[list[str], list[Any]]]:
    """``n`` random read_range calls: pages, around a rank, around a member (some absent)."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        order, ties = rnd.choice(["desc", "asc"]), rnd.choice(["member", "shared"])
        mode = rnd.choice(["page", "rank", "member"])
        if mode == "page":
            a: Any = rnd.randint(0, len(names) + 5)
        elif mode == "rank":
            a = rnd.randint(1, len(names) + 5)
        else:
            a = rnd.choice([*names, "absent"])
        out.append(([KEY, KEY, META], [order, ties, mode, a, rnd.randint(1, 25), "b", "day", "p"]))
    return out


def expected(client: Any, scripts: Scripts, todo: list[tuple[list[str], list[Any]]]) -> list[Any]:
    """What the script answers through redis-py's client (the path a lane stands in for)."""
    return [json.loads(scripts.read_range(keys=k, args=a)) for k, a in todo]


def prepared(server: RedisServer, n: int) -> tuple[Any, Scripts, list[Any], list[Any]]:
    """A client of ``server``, the scripts on it, the populated board, ``n`` random calls and
    their expected replies."""
    client = server.client(decode_responses=True)
    scripts = Scripts(client)
    todo = calls(populate(client), n)
    return client, scripts, todo, expected(client, scripts, todo)


def client_count(client: Any, expect: int | None = None) -> int:
    """Connections the server lists; with ``expect``, waits (2 s at most) for that many, as
    the server notices a closed connection a little after the client closed it."""
    deadline = time.monotonic() + 2
    while True:
        n = len(client.client_list(_type="normal"))
        if expect is None or n == expect or time.monotonic() > deadline:
            return n
        time.sleep(0.01)


# --- SyncLane --------------------------------------------------------------------------------


def test_sync_lane_replies_equal_the_clients_from_many_threads(server: RedisServer) -> None:
    client = make_client(load_settings(environ={}, redis={"url": server.url}).redis)
    scripts, lane = Scripts(client), sync_lane(client)
    assert isinstance(lane, SyncLane)
    names = populate(client)
    todo = calls(names, 400)
    want = expected(client, scripts, todo)
    before = client_count(client)
    problems: list[str] = []
    counted, done = threading.Barrier(9), threading.Barrier(9)

    def reader(offset: int) -> None:
        for i in range(offset, len(todo), 8):
            got = json.loads(lane.run(scripts.read_range, *todo[i]))
            if got != want[i]:
                problems.append(f"call {i}: {got} != {want[i]}")
        counted.wait()
        done.wait()

    threads = [threading.Thread(target=reader, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    counted.wait()
    assert client_count(client) == before + 8  # one connection per thread, kept
    done.wait()
    for t in threads:
        t.join()
    assert problems == []
    assert client_count(client, before) == before  # each went with its thread
    # close() closes the connections of threads still alive.
    lane.run(scripts.read_range, *todo[0])
    assert client_count(client, before + 1) == before + 1
    lane.close()
    assert client_count(client, before) == before
    client.close()


def test_sync_lane_survives_flushed_scripts_killed_connections_and_restarts(
    server: RedisServer,
) -> None:
    client = make_client(load_settings(environ={}, redis={"url": server.url}).redis)
    scripts, lane = Scripts(client), SyncLane(client)
    names = populate(client)
    todo = calls(names, 6)
    want = expected(client, scripts, todo)

    def check() -> None:
        assert [json.loads(lane.run(scripts.read_range, k, a)) for k, a in todo] == want

    check()
    client.script_flush()  # NOSCRIPT on the lane's connection
    check()
    client.client_kill_filter(_type="normal", skipme=True)  # the lane's connection is gone
    check()
    server.stop()
    with pytest.raises(BackendUnavailable), backend_errors():
        lane.run(scripts.read_range, *todo[0])
    server.start()  # empty: the board and the scripts are gone
    names = populate(client)
    check()
    lane.close()
    client.close()


def test_seasons_reads_go_down_the_lane_on_a_single_server(server: RedisServer) -> None:
    settings = load_settings(environ={}, redis={"url": server.url}, boards={"kills": {}})
    with Seasons(settings) as s:
        assert isinstance(s.lane, SyncLane)
        s.submit("kills", "ann", 3, metadata={"clan": "x"})
        s.top("kills", "day"), s.rank("kills", "ann", "day")  # the scripts are loaded
        before = server.client().info("commandstats")["cmdstat_evalsha"]["calls"]
        page = s.top("kills", "day")
        assert [(e.member, e.score, e.metadata) for e in page.entries] == [
            ("ann", 3, {"clan": "x"})
        ]
        assert s.rank("kills", "ann", "day") is not None
        after = server.client().info("commandstats")["cmdstat_evalsha"]["calls"]
        assert after == before + 2
        assert len(s.lane._all) == 1  # the reads above used the lane's connection


# --- AsyncLane -------------------------------------------------------------------------------


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_async_lane_pipelined_replies_come_back_to_their_callers(server: RedisServer) -> None:
    client, scripts, todo, want = prepared(server, 600)

    async def go() -> list[Any]:
        lane = AsyncLane(server.url, None)
        try:
            replies = await asyncio.gather(*(lane.run(scripts.read_range, k, a) for k, a in todo))
            assert client_count(client) == 2  # this test's client and the one lane connection
            return [json.loads(r) for r in replies]
        finally:
            await lane.close()

    assert run(go()) == want
    client.close()


def test_async_lane_survives_flushed_scripts_killed_connections_and_restarts(
    server: RedisServer,
) -> None:
    client, scripts, todo, want = prepared(server, 20)

    async def go() -> None:
        lane = AsyncLane(server.url, None)

        async def check() -> None:
            replies = await asyncio.gather(*(lane.run(scripts.read_range, k, a) for k, a in todo))
            assert [json.loads(r) for r in replies] == want

        try:
            await check()
            client.script_flush()
            await check()
            client.client_kill_filter(_type="normal", skipme=True)
            await check()
            server.stop()
            with pytest.raises(BackendUnavailable), backend_errors():
                await lane.run(scripts.read_range, *todo[0])
            server.start()
            populate(client)
            await check()
        finally:
            await lane.close()

    run(go())
    client.close()


def test_async_lane_follows_its_caller_to_another_event_loop(server: RedisServer) -> None:
    """Each asyncio.run is a new loop (as each request of a test client without its
    lifespan): the lane reconnects on the new one instead of waiting on the old one's."""
    client, scripts, todo, want = prepared(server, 5)
    lane = AsyncLane(server.url, None, timeout=2)

    async def go() -> list[Any]:
        return [json.loads(await lane.run(scripts.read_range, k, a)) for k, a in todo]

    for _ in range(3):
        assert run(go()) == want
    run(lane.close())
    client.close()


def test_async_lane_times_out_on_a_stalled_server_and_recovers(server: RedisServer) -> None:
    client, scripts, todo, want = prepared(server, 3)

    async def go() -> None:
        lane = AsyncLane(server.url, None, timeout=0.3)
        try:
            await lane.run(scripts.read_range, *todo[0])  # connected
            sleeper = threading.Thread(
                target=server.client().execute_command, args=("DEBUG", "SLEEP", 1.5)
            )
            sleeper.start()
            time.sleep(0.1)
            started = time.monotonic()
            with pytest.raises(RedisTimeoutError):
                await lane.run(scripts.read_range, *todo[1])
            assert time.monotonic() - started < 1.2  # it gave up before Redis woke up
            sleeper.join()
            # The stalled connection was dropped: its late reply is not taken for this one.
            got = [json.loads(await lane.run(scripts.read_range, k, a)) for k, a in todo]
            assert got == want
        finally:
            await lane.close()

    run(go())
    client.close()


def test_async_lane_authenticates_selects_its_database_and_takes_a_socket(tmp_path: Path) -> None:
    sock = tmp_path / "redis.sock"
    with RedisServer(args=["--unixsocket", str(sock), "--unixsocketperm", "700"]) as server:
        server.client().config_set("requirepass", "s3cret")  # after start: it PINGs at start
        client = redis.Redis(host=server.host, port=server.port, db=3, password="s3cret")
        scripts = Scripts(client)
        names = populate(client)
        todo = calls(names, 10)
        want = expected(client, scripts, todo)
        urls = [
            f"redis://:s3cret@{server.host}:{server.port}/3",
            f"unix://:s3cret@{sock}?db=3",
        ]
        for url in urls:
            lane = async_lane(load_settings(environ={}, redis={"url": url}).redis)
            assert isinstance(lane, AsyncLane)

            async def go(lane: AsyncLane = lane) -> list[Any]:
                try:
                    return [json.loads(await lane.run(scripts.read_range, k, a)) for k, a in todo]
                finally:
                    await lane.close()

            assert run(go()) == want, url
        # A wrong password: the error names the refusal, and nothing is retried forever.
        wrong = AsyncLane(f"redis://:nope@{server.host}:{server.port}/3", None)
        with pytest.raises(RedisConnectionError, match="refused"):
            run(wrong.run(scripts.read_range, *todo[0]))
        client.close()


def test_no_lanes_where_the_client_routes_reads_itself() -> None:
    cluster = load_settings(environ={}, redis={"url": "redis://127.0.0.1:1/0", "cluster": True})
    tls = load_settings(environ={}, redis={"url": "rediss://127.0.0.1:1/0"})
    assert async_lane(cluster.redis) is None
    assert async_lane(tls.redis) is None
    assert sync_lane(object()) is None
