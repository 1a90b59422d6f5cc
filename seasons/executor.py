"""The read executor: every read script call of every interface goes through here.

A read is prepared once as a :class:`Call` (a script, its KEYS and ARGV; see
:mod:`seasons.reads`) and run by an executor: :class:`SyncExecutor` for the Python API and the
CLI, :class:`AsyncExecutor` for the HTTP server. Both speak the same small protocol, written
once in their ``run``:

- send ``EVALSHA``; if Redis has lost the script (a restart, ``SCRIPT FLUSH``, a failover to a
  node that never saw it) it answers NOSCRIPT, and the call is sent once as ``EVAL`` with the
  source, which also caches the script on that server again;
- an error reply is raised as redis-py's own exception for it (its parser's table): LOADING is
  a :class:`~redis.exceptions.BusyLoadingError`, OOM an
  :class:`~redis.exceptions.OutOfMemoryError`, READONLY a
  :class:`~redis.exceptions.ReadOnlyError`;
- a broken connection, a timeout or LOADING are retried with redis-py's :class:`Retry` and the
  backoff of every Seasons client (:func:`seasons.connection.retry_policy`); the read scripts
  write nothing, so a resend is harmless;
- at its exit, ``run`` raises what is left as the Seasons clients do
  (:func:`seasons.connection.translated`): Redis unreachable as
  :class:`~seasons.errors.BackendUnreachable`, a refusal as ``BackendFull`` /
  ``BackendReadOnly``, anything else (a bug of ours) as redis-py raised it.

A read may also come with a :class:`Plan`: plain commands that answer it in one
``MULTI``/``EXEC`` from a guess of what the script would have read first (the members of a
page, whose metadata comes in the same transaction), checked against what the transaction
read. A transaction of plain commands costs Redis a fraction of a script's time (no script
to set up, no reply converted to Lua and back). When the guess was wrong the plan learns
from the reply and sends the transaction again (:data:`PLAN_TRIES` in all); then the script
answers; a plan that finds the read is a hidden member's own view (:data:`SCRIPTED`) leaves
it to the script at once. The script also answers when Redis is full: at its maxmemory it
refuses every command queued in a MULTI, but runs read-only scripts. Plans run on Seasons'
own connections; through a redis-py client (a cluster, TLS) the script answers.

A read of a sharded board (seasons.shard_reads) is :class:`Steps` instead: rounds of script
calls and plain commands, each round sent at once (one MULTI/EXEC on Seasons' own
connections, a pipeline through a redis-py client: one round trip per master of a cluster),
with the same NOSCRIPT rule, retries and error translation.

They differ only in how a command reaches Redis (the transport):

- on a single server reached by ``redis://`` or ``unix://``, on connections of their own
  (:class:`Endpoint`: host or socket, AUTH, db and timeouts taken from the Seasons client, so
  both executors talk to the same server as it does). redis-py's client layer (pool, retry
  wrapper, hooks) costs more CPU per call than the read script itself; the sync executor
  keeps one blocking socket per thread, the async one a single pipelined connection per event
  loop whose replies come back in order, both parsed by hiredis;
- on Redis Cluster, and over TLS (``rediss://``), through redis-py's clients, which route each
  call to its slot's master, follow MOVED/ASK and re-read the slot map after a failover (the
  cluster client), or own the TLS setup, and retry with the same policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import hiredis
import redis
from redis._parsers.base import BaseParser  # redis-py's table of error replies -> exceptions
from redis.connection import Connection, UnixDomainSocketConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, OutOfMemoryError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from seasons.config.settings import RedisSettings
from seasons.connection import RedisClient, make_async_client, retry_policy, translated
from seasons.scripts import Script, resent
from seasons.scripts import script as script  # re-exported: seasons.reads takes it from here

# What a read script or a plan answers: Redis's reply, its fields and values (bytes on
# Seasons' own connections, str through a redis-py client, which decodes them; see
# seasons.replies), or None (nil) where a read found nothing to answer.
Reply = list[Any] | None


Command = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Call:
    """One call of a read script."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Any]

    def evalsha(self) -> Command:
        return ("EVALSHA", self.script.sha, len(self.keys), *self.keys, *self.args)

    def eval(self) -> Command:
        return ("EVAL", self.script.source, len(self.keys), *self.keys, *self.args)


# One round of a gathered read (:class:`Steps`): script calls and plain commands sent together.
Round = Sequence[Call | Command]
# A gathered read: yields each round, is sent back its replies, returns what the read
# renders (seasons.reads.Read.render).
Gathered = Generator[Round, list[Any], Any]


@dataclass(frozen=True, slots=True)
class Steps:
    """A read that no one call answers: a sharded board's, whose shards are keys of several
    slots (several masters of a cluster; seasons.shard_reads). Its rounds are sent each in one
    round trip per server: on Seasons' own connections one MULTI/EXEC (one instant of the
    server), through a redis-py client a pipeline (one round trip per master of a cluster)."""

    name: str
    start: Callable[[], Gathered]


def _round(batch: Round, fresh: bool) -> list[Command]:
    """A round's commands: its calls as EVALSHA, or as EVAL once Redis answered NOSCRIPT."""
    return [(c.eval() if fresh else c.evalsha()) if isinstance(c, Call) else c for c in batch]


# Transactions a plan sends before the script answers: the first from its guess, each next
# one from what the one before read (a page around a rank may learn the board's size, then
# its members).
PLAN_TRIES = 3


class Plan(Protocol):
    """Plain commands that answer a read in one transaction (see the module's doc)."""

    def commands(self) -> list[Command]:
        """The transaction's commands, from the current guess."""
        ...

    def settle(self, replies: list[Any]) -> Reply | Missed:
        """The read's reply (as its script answers it) from the transaction's replies, or
        :data:`MISSED` when the guess was wrong (the plan has learned the right one)."""
        ...


class Missed:
    """What :meth:`Plan.settle` answers for a wrong guess."""


MISSED = Missed()


class Scripted(Missed):
    """What :meth:`Plan.settle` answers for a read only its script answers: a hidden or
    banned member's own view (``seasons/lua/lib/hidden.lua``), which no plan ranks. The
    script is sent at once."""


SCRIPTED = Scripted()


def _checked(reply: Any) -> Any:
    """The reply, or the exception redis-py raises for that error reply."""
    if isinstance(reply, ResponseError):
        raise BaseParser.parse_error(str(reply))
    return reply


def _transaction(commands: list[Command]) -> list[Command]:
    """``commands`` in one MULTI/EXEC."""
    return [("MULTI",), *commands, ("EXEC",)]


def _executed(replies: list[Any]) -> list[Any]:
    """The replies of a transaction's commands (EXEC's), or the exception of the first error
    among them: a refused MULTI or command (EXECABORT), or a command's error."""
    for reply in replies:
        if isinstance(reply, ResponseError):
            _checked(reply)
    executed: list[Any] = replies[-1]
    for reply in executed:
        if isinstance(reply, ResponseError):
            _checked(reply)
    return executed


# --- the protocol -------------------------------------------------------------------------


class SyncExecutor:
    """Runs read calls, blocking (see the module's doc)."""

    def __init__(
        self,
        send: Callable[[Command], Any],
        close: Callable[[], None],
        transact: Callable[[list[Command]], list[Any]] | None = None,
        gather: Callable[[list[Command]], list[Any]] | None = None,
    ):
        self._send = send
        self._transact = transact
        self._gather = gather or transact
        self.close = close

    def run(self, call: Call | Steps, plan: Plan | None = None) -> Reply:
        with translated():
            if isinstance(call, Steps):
                return self._steps(call)
            if plan is not None and self._transact is not None:
                for _ in range(PLAN_TRIES):
                    try:
                        reply = plan.settle(self._transact(plan.commands()))
                    except OutOfMemoryError:
                        break  # a full Redis refuses commands queued in MULTI, not read scripts
                    if not isinstance(reply, Missed):
                        return reply
                    if reply is SCRIPTED:
                        break
            send = self._send
            return resent(lambda: send(call.evalsha()), lambda: send(call.eval()))

    def _steps(self, steps: Steps) -> Reply:
        gather = self._gather
        if gather is None:
            raise TypeError(f"{steps.name}: this executor gathers no rounds")
        reads = steps.start()
        try:
            batch = next(reads)
            while True:
                batch = reads.send(resent(partial(gather, _round(batch, False)),
                                          partial(gather, _round(batch, True))))  # fmt: skip
        except StopIteration as done:
            return done.value


class AsyncExecutor:
    """Runs read calls on the event loop (see the module's doc)."""

    def __init__(
        self,
        send: Callable[[Command], Awaitable[Any]],
        close: Callable[[], Awaitable[None]],
        transact: Callable[[list[Command]], Awaitable[list[Any]]] | None = None,
        gather: Callable[[list[Command]], Awaitable[list[Any]]] | None = None,
    ):
        self._send = send
        self._transact = transact
        self._gather = gather or transact
        self.close = close

    async def run(self, call: Call | Steps, plan: Plan | None = None) -> Reply:
        with translated():
            if isinstance(call, Steps):
                return await self._steps(call)
            if plan is not None and self._transact is not None:
                for _ in range(PLAN_TRIES):
                    try:
                        reply = plan.settle(await self._transact(plan.commands()))
                    except OutOfMemoryError:
                        break  # a full Redis refuses commands queued in MULTI, not read scripts
                    if not isinstance(reply, Missed):
                        return reply
                    if reply is SCRIPTED:
                        break
            # resent()'s rule, awaited: NOSCRIPT ran nothing, so the call goes once as EVAL.
            try:
                return await self._send(call.evalsha())
            except NoScriptError:
                return await self._send(call.eval())

    async def _steps(self, steps: Steps) -> Reply:
        gather = self._gather
        if gather is None:
            raise TypeError(f"{steps.name}: this executor gathers no rounds")
        reads = steps.start()
        try:
            batch = next(reads)
            while True:
                try:
                    replies = await gather(_round(batch, False))
                except NoScriptError:
                    replies = await gather(_round(batch, True))
                batch = reads.send(replies)
        except StopIteration as done:
            return done.value


def sync_executor(client: RedisClient) -> SyncExecutor:
    """The executor for ``client``'s server: own connections where :class:`Endpoint` can
    reach it, else the client itself."""
    endpoint = Endpoint.of(client)
    if endpoint is None:

        def pipelined(commands: list[Command]) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return list(pipe.execute())

        return SyncExecutor(
            lambda command: client.execute_command(*command), lambda: None, gather=pipelined
        )
    sockets = _ThreadSockets(endpoint)
    retry = retry_policy()

    def send(command: Command) -> Any:
        conn = sockets.get()
        return retry.call_with_retry(lambda: _checked(conn.request(command)), conn.failed)

    def transact(commands: list[Command]) -> list[Any]:
        conn = sockets.get()
        return retry.call_with_retry(lambda: _executed(conn.requests(commands)), conn.failed)

    return SyncExecutor(send, sockets.close, transact)


def async_executor(client: RedisClient, cfg: RedisSettings) -> AsyncExecutor:
    """The asyncio executor for the server of ``client`` (the Seasons sync client); on a
    cluster or TLS, redis-py's asyncio client for ``cfg``."""
    endpoint = Endpoint.of(client)
    if endpoint is None:
        aclient = make_async_client(cfg)

        async def client_send(command: Command) -> Any:
            return await aclient.execute_command(*command)

        async def client_gather(commands: list[Command]) -> list[Any]:
            pipe = aclient.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return list(await pipe.execute())

        return AsyncExecutor(client_send, aclient.aclose, gather=client_gather)
    pipelined = _Pipelined(endpoint)
    retry = retry_policy(asynchronous=True)

    async def send(command: Command) -> Any:
        return await retry.call_with_retry(lambda: pipelined.request(command), pipelined.failed)

    async def transact(commands: list[Command]) -> list[Any]:
        return await retry.call_with_retry(lambda: pipelined.requests(commands), pipelined.failed)

    return AsyncExecutor(send, pipelined.close, transact)


# --- connections of our own ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how to connect: from the Seasons client's own connection settings."""

    host: str
    port: int
    path: str | None
    db: int
    username: str | None
    password: str | None
    timeout: float | None
    connect_timeout: float | None

    @classmethod
    def of(cls, client: RedisClient) -> Endpoint | None:
        """The endpoint of a single-server client on plain TCP or a unix socket; None for a
        cluster, TLS, a credential provider or RESP3, which its own connections handle."""
        if not isinstance(client, redis.Redis):
            return None
        pool = client.connection_pool
        kw = pool.connection_kwargs
        plain = pool.connection_class in (Connection, UnixDomainSocketConnection)
        if not plain or kw.get("credential_provider") or kw.get("protocol") in (3, "3"):
            return None
        # A connection object of the client's own (not connected) tells the timeouts it
        # would use, redis-py's defaults included.
        like = pool.connection_class(**kw)
        return cls(
            host=kw.get("host", "localhost"),
            port=int(kw.get("port", 6379)),
            path=kw.get("path"),
            db=int(kw.get("db") or 0),
            username=kw.get("username"),
            password=kw.get("password"),
            timeout=like.socket_timeout,
            connect_timeout=like.socket_connect_timeout,
        )

    def setup(self) -> list[Command]:
        """The commands that start each connection."""
        out: list[Command] = []
        if self.password:
            auth = (self.username, self.password) if self.username else (self.password,)
            out.append(("AUTH", *auth))
        if self.db:
            out.append(("SELECT", self.db))
        return out

    def where(self) -> str:
        return self.path or f"{self.host}:{self.port}"


class _Socket:
    """One blocking connection: a request, then its reply."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.sock: socket.socket | None = None
        self.reader = hiredis.Reader(replyError=ResponseError)

    def request(self, command: Command) -> Any:
        if self.sock is None:
            self._connect()
        return self._roundtrip([command])[0]

    def requests(self, commands: list[Command]) -> list[Any]:
        """The replies of ``commands`` in one transaction, sent in one write: MULTI's, each
        command's (QUEUED) and EXEC's."""
        if self.sock is None:
            self._connect()
        return self._roundtrip(_transaction(commands))

    def _connect(self) -> None:
        ep = self.endpoint
        try:
            if ep.path:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(ep.connect_timeout)
                sock.connect(ep.path)
            else:
                sock = socket.create_connection((ep.host, ep.port), ep.connect_timeout)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            raise RedisConnectionError(f"cannot connect to Redis at {ep.where()}: {exc}") from exc
        sock.settimeout(ep.timeout)
        self.sock, self.reader = sock, hiredis.Reader(replyError=ResponseError)
        try:
            for command in ep.setup():
                _checked(self._roundtrip([command])[0])
        except Exception:
            self.failed()  # e.g. a wrong password: the next try starts from a new connection
            raise

    def _roundtrip(self, commands: list[Command]) -> list[Any]:
        """The reply of each of ``commands``, sent in one write."""
        assert self.sock is not None
        replies: list[Any] = []
        try:
            self.sock.sendall(b"".join(map(hiredis.pack_command, commands)))
            while len(replies) < len(commands):
                if (reply := self.reader.gets()) is not False:
                    replies.append(reply)
                    continue
                data = self.sock.recv(65536)
                if not data:
                    raise RedisConnectionError("Redis closed the connection")
                self.reader.feed(data)
        except TimeoutError as exc:  # socket.timeout
            self.failed()  # a late reply must not be read as the next request's
            raise RedisTimeoutError(
                f"Redis did not answer within {self.endpoint.timeout}s"
            ) from exc
        except (OSError, RedisConnectionError, hiredis.ProtocolError) as exc:
            self.failed()
            if isinstance(exc, RedisConnectionError):
                raise
            raise RedisConnectionError(f"connection to Redis lost: {exc}") from exc
        return replies

    def failed(self, *_: object) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def __del__(self) -> None:  # the thread that held it has ended
        self.failed()


class _ThreadSockets:
    """A :class:`_Socket` per thread, closed when its thread ends or on :meth:`close`."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._local = threading.local()
        self._all: weakref.WeakSet[_Socket] = weakref.WeakSet()
        self._lock = threading.Lock()

    def get(self) -> _Socket:
        conn: _Socket | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _Socket(self.endpoint)
            with self._lock:
                self._all.add(conn)
        return conn

    def close(self) -> None:
        with self._lock:
            conns, self._all = list(self._all), weakref.WeakSet()
        for conn in conns:
            conn.failed()


class _Protocol(asyncio.Protocol):
    """One connection on the event loop: requests pipelined, replies matched to them in
    order.

    The requests sent in one turn of the event loop (the reads of all the HTTP requests that
    arrived together) go out in one write: a write is a system call that costs more than a
    read's Python. One timer watches the oldest request in flight: Redis answers in order,
    so if that one is late, the connection is stalled, and it is closed, failing every
    request on it (their callers retry on a new connection)."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.loop = asyncio.get_running_loop()
        self.reader = hiredis.Reader(replyError=ResponseError)
        # Each request's waiter, the loop time by which its replies are due, the replies come
        # so far and how many it waits for (the commands it sent together).
        self.pending: deque[tuple[asyncio.Future[list[Any]], float, list[Any], int]] = deque()
        self.transport: asyncio.Transport | None = None
        self.sock: socket.socket | None = None  # ours: closed here if its loop is gone
        self.lost = False
        self._out: list[bytes] = []
        self._watch: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (reply := self.reader.gets()) is not False:
                waiter, _, replies, count = self.pending[0]
                replies.append(reply)
                if len(replies) == count:
                    self.pending.popleft()
                    if not waiter.done():  # its caller may have given up (cancelled)
                        waiter.set_result(replies)
        except (hiredis.ProtocolError, IndexError) as exc:
            self.close(RedisConnectionError(f"unreadable reply from Redis: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"Redis closed the connection{f': {exc}' if exc else ''}"))

    def send(self, commands: list[Command]) -> asyncio.Future[list[Any]]:
        """The replies of ``commands``, sent together: nothing comes between them."""
        if self.lost:
            raise RedisConnectionError("the connection to Redis is closed")
        loop = self.loop
        waiter = loop.create_future()
        if not self._out:
            loop.call_soon(self._flush)
        self._out += map(hiredis.pack_command, commands)
        due = loop.time() + self.timeout if self.timeout is not None else math.inf
        self.pending.append((waiter, due, [], len(commands)))
        if self._watch is None and self.timeout is not None:
            self._watch = loop.call_later(self.timeout, self._check)
        return waiter

    def _flush(self) -> None:
        out, self._out = self._out, []
        if not self.lost and self.transport is not None:
            self.transport.writelines(out)

    def _check(self) -> None:
        self._watch = None
        if not self.pending:
            return
        late = self.pending[0][1] - self.loop.time()
        if late <= 0:
            self.close(RedisTimeoutError(f"Redis did not answer within {self.timeout}s"))
        else:
            self._watch = self.loop.call_later(late, self._check)

    def close(self, error: Exception) -> None:
        if self.transport is not None:
            try:
                self.transport.abort()
            except RuntimeError:  # its event loop is closed: it can no longer close it
                if self.sock is not None:
                    self.sock.close()
        self._fail(error)

    def _fail(self, error: Exception) -> None:
        self.lost = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        while self.pending:
            waiter = self.pending.popleft()[0]
            if not waiter.done():
                waiter.set_exception(error)


async def _open_socket(loop: asyncio.AbstractEventLoop, ep: Endpoint) -> socket.socket:
    """A connected non-blocking socket to ``ep`` (each address of the host in turn), opened
    here rather than by the event loop so that it can be closed after its loop is."""
    if ep.path:
        targets: list[tuple[int, Any]] = [(socket.AF_UNIX, ep.path)]
    else:
        found = await loop.getaddrinfo(ep.host, ep.port, type=socket.SOCK_STREAM)
        targets = [(family, address) for family, _, _, _, address in found]
    error: OSError = OSError(f"no address for {ep.where()}")
    for family, address in targets:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:  # cancelled, or the connect timeout
            sock.close()
            raise
        if family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise error


class _Pipelined:
    """The pipelined connection of the current event loop (one at a time: an app served
    again, or a test client without its lifespan, runs on another loop)."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._proto: _Protocol | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connecting: asyncio.Lock | None = None

    async def request(self, command: Command) -> Any:
        proto = await self._connected()
        return _checked((await proto.send([command]))[0])

    async def requests(self, commands: list[Command]) -> list[Any]:
        """EXEC's replies of ``commands`` in one transaction."""
        proto = await self._connected()
        return _executed(await proto.send(_transaction(commands)))

    async def _connected(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        proto = self._proto
        if loop is self._loop and proto is not None and not proto.lost:
            return proto
        if loop is not self._loop:
            # A connection and a lock belong to the loop that made them.
            self._drop(RedisConnectionError("the event loop changed"))
            self._loop, self._connecting = loop, asyncio.Lock()
        assert self._connecting is not None
        async with self._connecting:  # one connect for all the reads that wait for it
            if self._proto is None or self._proto.lost:
                self._proto = await self._connect()
            return self._proto

    async def _connect(self) -> _Protocol:
        loop, ep = asyncio.get_running_loop(), self.endpoint
        try:
            async with asyncio.timeout(ep.connect_timeout):
                sock = await _open_socket(loop, ep)

                def protocol() -> _Protocol:
                    return _Protocol(ep.timeout)

                if ep.path:
                    _, proto = await loop.create_unix_connection(protocol, sock=sock)
                else:
                    _, proto = await loop.create_connection(protocol, sock=sock)
                proto.sock = sock
                replies = await proto.send(ep.setup()) if ep.setup() else []
        except TimeoutError as exc:  # asyncio.timeout's (the builtin)
            raise RedisTimeoutError(
                f"no connection to Redis at {ep.where()} within {ep.connect_timeout}s"
            ) from exc
        except OSError as exc:
            raise RedisConnectionError(f"cannot connect to Redis at {ep.where()}: {exc}") from exc
        try:
            for reply in replies:
                _checked(reply)
        except Exception:
            proto.close(RedisConnectionError("connection setup refused"))
            raise
        return proto

    async def failed(self, error: Exception) -> None:
        """Nothing to do: the connection that failed is marked lost (closed by Redis, or by
        :meth:`request` on a timeout), and the next request connects again. Another request
        may have connected meanwhile; that connection is not touched."""

    def _drop(self, error: Exception) -> None:
        proto, self._proto = self._proto, None
        if proto is not None:
            proto.close(error)

    async def close(self) -> None:
        self._drop(RedisConnectionError("executor closed"))
