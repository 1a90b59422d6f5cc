"""Lanes: dedicated connections for the board reads (top, around, rank...) on a single server.

A read is one EVALSHA of a read-only script. Through redis-py's client that round trip costs
~10 us of extra CPU in sync code (connection pool, retry wrapper, observability hooks) and
~40 us on its asyncio client (measured by ``python -m bench``, sections Reads and HTTP): more
than the script itself. A lane sends the same EVALSHA on a connection of its own:

- :class:`SyncLane`, for the Python API: one redis-py ``Connection`` per thread, built with the
  client's own connection settings (host or socket, password, db, TLS, timeouts);
- :class:`AsyncLane`, for the HTTP server: one connection on the event loop whose requests
  are pipelined (concurrent reads share it; replies come back in order) and parsed by hiredis.

Both are for read-only scripts, so a request that meets a broken connection is simply sent
again: a lane that cannot reach Redis falls back to / raises what the client would
(``ConnectionError``, ``TimeoutError``), which :func:`seasons.connection.backend_errors` turns
into ``BackendUnavailable``. On Redis Cluster no lane is used: the cluster client routes each
read to its slot's master.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import hiredis
import redis
from redis.commands.core import Script
from redis.connection import parse_url
from redis.exceptions import BusyLoadingError, NoScriptError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from config.settings import RedisSettings

# Errors after which a connection's replies can no longer be matched to its requests.
_BROKEN = (RedisConnectionError, RedisTimeoutError, OSError)


class SyncLane:
    """EVALSHA of read-only scripts on one connection per thread, made from ``client``'s own
    connection settings; a thread's connection closes when the thread ends, or on
    :meth:`close`. Anything but a reply (a broken connection, a script the server does not
    have) is handed to the script's normal path on the client, with its retries."""

    def __init__(self, client: redis.Redis):
        self._pool = client.connection_pool
        self._local = threading.local()
        # Weakly: a thread's connection goes (and closes) with the thread.
        self._all: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def _connection(self) -> Any:
        held = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(
                self._pool.connection_class(**self._pool.connection_kwargs)
            )
            with self._lock:
                self._all.add(held.conn)
        return held.conn

    def run(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        conn = self._connection()
        try:
            conn.send_packed_command(
                conn.pack_command("EVALSHA", script.sha, len(keys), *keys, *args),
                check_health=False,
            )
            return conn.read_response()
        except NoScriptError:
            pass  # e.g. Redis restarted: the script's own path loads it again
        except _BROKEN:
            conn.disconnect()  # a late reply must not be read as the next request's
        return script(keys=keys, args=args)

    def close(self) -> None:
        with self._lock:
            conns, self._all = list(self._all), weakref.WeakSet()
        for conn in conns:
            conn.disconnect()


class _Held:
    """A thread's lane connection, disconnected when the thread ends (its thread-local data
    goes then; the connection itself may live on in a reference cycle until a collection)."""

    __slots__ = ("conn",)

    def __init__(self, conn: Any):
        self.conn = conn

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # e.g. at interpreter exit
            self.conn.disconnect()


def sync_lane(client: Any) -> SyncLane | None:
    """A lane for ``client``, or None where reads go through the client itself (a cluster,
    or a client of another kind)."""
    return SyncLane(client) if isinstance(client, redis.Redis) else None


class _Protocol(asyncio.Protocol):
    """One Redis connection: requests written as they come, replies matched in order."""

    def __init__(self) -> None:
        self.reader = hiredis.Reader(replyError=ResponseError)
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.transport: asyncio.Transport | None = None
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (reply := self.reader.gets()) is not False:
                waiter = self.pending.popleft()
                if not waiter.done():  # its caller may have given up (timeout, cancel)
                    waiter.set_result(reply)
        except (hiredis.ProtocolError, IndexError) as exc:
            self.close(RedisConnectionError(f"unreadable reply from Redis: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"Redis closed the connection{f': {exc}' if exc else ''}"))

    def send(self, args: tuple[Any, ...]) -> asyncio.Future[Any]:
        assert self.transport is not None
        waiter = asyncio.get_running_loop().create_future()
        self.transport.write(hiredis.pack_command(args))
        self.pending.append(waiter)
        return waiter

    def close(self, error: Exception) -> None:
        if self.transport is not None:
            self.transport.abort()
        self._fail(error)

    def _fail(self, error: Exception) -> None:
        self.lost = True
        while self.pending:
            waiter = self.pending.popleft()
            if not waiter.done():
                waiter.set_exception(error)


class AsyncLane:
    """EVALSHA of read-only scripts on one pipelined connection of the event loop."""

    def __init__(
        self, url: str, password: str | None, *, timeout: float = 10, connect_timeout: float = 5
    ):
        opts = parse_url(url)
        self._path: str | None = opts.get("path")
        self._host: str = opts.get("host", "localhost")
        self._port: int = int(opts.get("port", 6379))
        self._db = int(opts.get("db") or 0)
        self._username: str | None = opts.get("username")
        self._password = opts.get("password") or password
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._proto: _Protocol | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connecting: asyncio.Lock | None = None

    async def _connected(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        proto = self._proto
        if loop is self._loop and proto is not None and not proto.lost:
            return proto
        if loop is not self._loop:
            # First use, or another event loop (an app served again, a test client without
            # its lifespan): a connection and a lock belong to the loop that made them.
            self._drop(RedisConnectionError("the event loop changed"))
            self._loop, self._connecting = loop, asyncio.Lock()
        assert self._connecting is not None
        async with self._connecting:  # one connect for all the reads that wait for it
            if self._proto is None or self._proto.lost:
                self._proto = await self._connect()
            return self._proto

    async def _connect(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                if self._path:
                    _, proto = await loop.create_unix_connection(_Protocol, self._path)
                else:
                    _, proto = await loop.create_connection(_Protocol, self._host, self._port)
                setup: list[tuple[Any, ...]] = []
                if self._password:
                    auth = (self._username, self._password) if self._username else (self._password,)
                    setup.append(("AUTH", *auth))
                if self._db:
                    setup.append(("SELECT", self._db))
                for reply in await asyncio.gather(*(proto.send(cmd) for cmd in setup)):
                    if isinstance(reply, ResponseError):
                        proto.close(RedisConnectionError(str(reply)))
                        raise RedisConnectionError(f"Redis refused the connection: {reply}")
        except TimeoutError as exc:  # asyncio.timeout's (the builtin)
            raise RedisTimeoutError(
                f"no connection to Redis within {self.connect_timeout}s"
            ) from exc
        except OSError as exc:
            raise RedisConnectionError(f"cannot connect to Redis: {exc}") from exc
        return proto

    async def _request(self, args: tuple[Any, ...]) -> Any:
        """One request; a connection that broke under it is replaced and the request sent
        once more (only read-only scripts come here)."""
        for attempt in (1, 2):
            proto = await self._connected()
            try:
                async with asyncio.timeout(self.timeout):
                    reply = await proto.send(args)
            except TimeoutError as exc:  # asyncio.timeout's (the builtin)
                proto.close(RedisTimeoutError("an earlier request on the connection timed out"))
                raise RedisTimeoutError(f"Redis did not answer within {self.timeout}s") from exc
            except RedisConnectionError:
                if attempt == 2:
                    raise
                continue
            if isinstance(reply, ResponseError):
                message = str(reply)
                if message.startswith("LOADING"):
                    raise BusyLoadingError(message)
                raise reply
            return reply
        raise AssertionError("unreachable")

    async def run(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        call = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            return await self._request(call)
        except ResponseError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
        await self._request(("SCRIPT", "LOAD", script.script))
        return await self._request(call)

    def _drop(self, error: Exception) -> None:
        proto, self._proto = self._proto, None
        if proto is not None:
            with contextlib.suppress(Exception):  # its loop may be closed already
                proto.close(error)

    async def close(self) -> None:
        self._drop(RedisConnectionError("lane closed"))


def async_lane(cfg: RedisSettings, *, timeout: float = 10) -> AsyncLane | None:
    """A lane for a single server reached by ``redis://`` or ``unix://``; None for a cluster
    or TLS (``rediss://``), where the HTTP server uses redis-py's asyncio client."""
    if cfg.cluster or urlsplit(cfg.url).scheme not in ("redis", "unix"):
        return None
    return AsyncLane(cfg.url, cfg.password, timeout=timeout)
