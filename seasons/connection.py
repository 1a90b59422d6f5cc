"""Redis clients for one Seasons process: a single server or a cluster
(docs/operations.md#running-on-redis-cluster).

This module is Seasons' one error boundary with Redis. The clients it makes
(:func:`make_client`, :func:`make_async_client`: :class:`SeasonsRedis`,
:class:`SeasonsCluster`, their pipelines and their asyncio twins) raise Seasons errors, never
redis-py's, when Redis cannot do the work, after redis-py's own retries (:func:`translate`):

- Redis unreachable (connection refused or lost, a timeout, LOADING, a cluster without a
  master for the slot): :class:`~seasons.errors.BackendUnreachable`;
- Redis refusing a write: :class:`~seasons.errors.BackendFull` (maxmemory with noeviction),
  :class:`~seasons.errors.BackendReadOnly` (a replica).

Everything else passes through as redis-py raised it: NOSCRIPT, a protocol signal that the
scripts answer by loading themselves; MOVED/ASK, which only a node's own pipeline sees
(:func:`on_one_connection` follows them); and the errors that are bugs of ours (any other
error reply, CROSSSLOT), which the HTTP layer answers with a 500 and a log line. The read
executor, which speaks to Redis on sockets of its own, applies the same
:func:`translated` at its exit (:mod:`seasons.executor`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Literal, TypeAlias, TypeVar

import redis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.backoff import ExponentialBackoff
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import (
    AskError,
    ClusterError,
    ConnectionError,
    CrossSlotTransactionError,
    InvalidPipelineStack,
    MovedError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)
from redis.retry import Retry
from typing_extensions import TypeIs

from seasons.config.settings import RedisSettings
from seasons.errors import (
    BackendFull,
    BackendReadOnly,
    BackendUnavailable,
    BackendUnreachable,
)

# ClusterError covers CLUSTERDOWN, MASTERDOWN and "TTL exhausted" (redirections that never
# settle); RedisClusterException is what the cluster client raises when no node answers.
UNAVAILABLE = (ConnectionError, TimeoutError, ClusterError, SlotNotCoveredError, TryAgainError)
# Errors of a command that was not run: the cluster is down or a multi-key command met a
# slot being migrated; wait a little and send it again (MOVED and ASK are handled apart).
NOT_RUN = (TryAgainError, ClusterError, SlotNotCoveredError)
SLOT_ATTEMPTS = 5

T = TypeVar("T")
log = logging.getLogger(__name__)


# --- the error boundary -------------------------------------------------------------------


def translate(exc: BaseException) -> BackendUnavailable | None:
    """The Seasons error for a redis-py error that says Redis cannot do the work now, or None
    for an error that passes through as it is (see the module's doc)."""
    if isinstance(exc, UNAVAILABLE):
        return BackendUnreachable(f"Redis is unreachable: {exc}")
    if isinstance(exc, ResponseError):
        return refusal(exc)
    if isinstance(exc, CrossSlotTransactionError | InvalidPipelineStack):
        return None  # a bug of ours, not an outage
    if isinstance(exc, RedisClusterException):
        return BackendUnreachable(f"Redis Cluster is unreachable: {exc}")
    return None


def refusal(exc: ResponseError) -> BackendUnavailable | None:
    """The Seasons error for Redis refusing work it would otherwise do (full, a replica), or
    None for any other reply error. Inside a script the refusal comes with the script's name
    appended, so the text is checked as well as the class."""
    text = str(exc)
    if isinstance(exc, OutOfMemoryError) or "OOM command not allowed" in text:
        return BackendFull(
            "Redis refused the write: it is at its maxmemory (noeviction). Raise maxmemory or "
            f"free memory; resending the same batch (batch id) is safe ({text})"
        )
    if isinstance(exc, ReadOnlyError) or text.startswith("READONLY"):
        return BackendReadOnly(
            "Redis refused the write: the server is a read-only replica. Point redis.url at "
            f"the master; resending the same batch (batch id) is safe ({text})"
        )
    return None


class _Translated:
    """The context manager of :func:`translated`: stateless, so one serves every call (a
    ``@contextmanager`` generator would cost a microsecond on every command and read)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        found = translate(exc) if isinstance(exc, Exception) else None
        if found is None:
            return False  # no error, or one that passes through: raised as it is
        raise found from exc


_TRANSLATED = _Translated()


def translated() -> _Translated:
    """``with translated():`` raises redis-py's errors that :func:`translate` knows as their
    Seasons error (``from`` the original) and lets every other exception through unchanged."""
    return _TRANSLATED


# --- the clients ----------------------------------------------------------------------------


class SeasonsRedis(redis.Redis):
    """redis-py's client for one server, whose commands raise Seasons errors."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        with translated():
            return super().execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> SeasonsPipeline:
        return SeasonsPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )


class SeasonsPipeline(Pipeline):
    """A pipeline of :class:`SeasonsRedis`: the commands queue; running them may raise."""

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        with translated():
            return super().execute(raise_on_error)

    def immediate_execute_command(self, *args: Any, **options: Any) -> Any:
        # WATCH and the commands after it until MULTI, and SCRIPT EXISTS/LOAD before execute.
        with translated():
            return super().immediate_execute_command(*args, **options)


class SeasonsCluster(RedisCluster):
    """redis-py's Redis Cluster client, whose commands raise Seasons errors. It reads the slot
    map when it is built: a cluster that no node of answers is BackendUnreachable then."""

    def __init__(self, *args: Any, **kwargs: Any):
        with translated():
            super().__init__(*args, **kwargs)

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with translated():
            return super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> SeasonsClusterPipeline:
        pipe = super().pipeline(transaction, shard_hint)
        # The very pipeline redis-py built (its constructor takes a dozen of the client's
        # internals, which change between releases), given the class that translates.
        pipe.__class__ = SeasonsClusterPipeline
        assert isinstance(pipe, SeasonsClusterPipeline)
        return pipe


class SeasonsClusterPipeline(ClusterPipeline):
    """A pipeline of :class:`SeasonsCluster`."""

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        # Queues, except WATCH and what follows it in a transaction.
        with translated():
            return super().execute_command(*args, **kwargs)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        with translated():
            return super().execute(raise_on_error)


class SeasonsAsyncRedis(AsyncRedis):
    """The asyncio client for one server, whose commands raise Seasons errors."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with translated():
            return await super().execute_command(*args, **options)


class SeasonsAsyncCluster(AsyncRedisCluster):
    """The asyncio Redis Cluster client, whose commands raise Seasons errors."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with translated():
            return await super().execute_command(*args, **kwargs)


# The client every Seasons component is given, and its pipelines.
RedisClient: TypeAlias = SeasonsRedis | SeasonsCluster
RedisPipeline: TypeAlias = SeasonsPipeline | SeasonsClusterPipeline
AsyncRedisClient: TypeAlias = SeasonsAsyncRedis | SeasonsAsyncCluster


def text(reply: bytes | str) -> str:
    """A reply as text. Seasons' clients decode replies (``decode_responses``), which
    redis-py's types cannot know: they say ``bytes | str``."""
    return reply if isinstance(reply, str) else reply.decode()


def decoded(found: Mapping[bytes | str, bytes | str]) -> dict[str, str]:
    """A hash as text (see :func:`text`)."""
    return {text(k): text(v) for k, v in found.items()}


def retry_policy(*, asynchronous: bool = False) -> Any:
    """How every Seasons client and executor retries a command after a connection error or
    timeout (redis-py's :class:`Retry`): 3 more tries, backing off from 50 ms up to 1 s."""
    if asynchronous:
        from redis.asyncio.retry import Retry as AsyncRetry

        return AsyncRetry(ExponentialBackoff(cap=1.0, base=0.05), 3)
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), 3)


def make_client(cfg: RedisSettings) -> RedisClient:
    """A client with retries on connection errors and string replies."""
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": cfg.socket_timeout,
        "socket_connect_timeout": 5,
        # Resending a command after a connection error or timeout is safe for Seasons: reads
        # are read-only, and a write script carries its batch id, so a copy that the server
        # ran already answers the original result instead of applying the batch again.
        "retry": retry_policy(),
        "retry_on_error": [ConnectionError, TimeoutError],
        "health_check_interval": 30,
    }
    if cfg.password:
        common["password"] = cfg.password
    if cfg.cluster:
        # The URL names any one node; the client reads the slot map from it and talks to
        # each slot's master, following MOVED/ASK and re-reading the map after a failover.
        cluster = SeasonsCluster.from_url(cfg.url, **common)
        assert isinstance(cluster, SeasonsCluster)  # from_url builds its own class (cls)
        return cluster
    client = SeasonsRedis.from_url(cfg.url, **common)
    assert isinstance(client, SeasonsRedis)
    return client


def make_async_client(cfg: RedisSettings) -> AsyncRedisClient:
    """The asyncio twin of :func:`make_client`, for the HTTP server's reads on a cluster or
    over TLS (:func:`seasons.executor.async_executor`)."""
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": cfg.socket_timeout,
        "socket_connect_timeout": 5,
        "retry": retry_policy(asynchronous=True),
    }
    if cfg.password:
        common["password"] = cfg.password
    if cfg.cluster:
        cluster = SeasonsAsyncCluster.from_url(cfg.url, **common)
        assert isinstance(cluster, SeasonsAsyncCluster)
        return cluster
    common["retry_on_error"] = [ConnectionError, TimeoutError]
    common["health_check_interval"] = 30
    client = SeasonsAsyncRedis.from_url(cfg.url, **common)
    assert isinstance(client, SeasonsAsyncRedis)
    return client


def when_reachable(
    build: Callable[[], T], *, initial: float, cap: float, stop: threading.Event, what: str
) -> T | None:
    """``build()``, tried again while it raises :class:`BackendUnavailable` (a cluster client
    connects when it is built), backing off from ``initial`` seconds doubling up to ``cap``;
    None if ``stop`` is set meanwhile. For long-lived processes started before their Redis."""
    delay = initial
    while True:
        try:
            return build()
        except BackendUnavailable as exc:
            log.warning(
                "%s: Redis is unreachable at start (%s); trying again in %.1fs", what, exc, delay
            )
            if stop.wait(delay):
                return None
            delay = min(delay * 2, cap)


# --- what differs on a cluster ------------------------------------------------------------


def is_cluster(client: object) -> TypeIs[RedisCluster]:
    return isinstance(client, RedisCluster)


def on_each_master(client: RedisClient, call: Callable[[redis.Redis], T]) -> list[T]:
    """``call(node)`` on the server itself, or on each master of a cluster in turn (replicas
    are skipped); a cluster's nodes are plain redis-py clients, so errors are translated here."""
    if not is_cluster(client):
        return [call(client)]
    with translated():
        return [call(client.get_redis_connection(n)) for n in client.get_primaries()]


def scan_keys(
    client: RedisClient, match: str, *, count: int = 1000, kind: str | None = None
) -> Iterator[list[str]]:
    """SCAN, in batches: on a single server, or on every master of a cluster in turn (each
    master holds only its own slots' keys; replicas are skipped)."""
    nodes = (
        [client.get_redis_connection(n) for n in client.get_primaries()]
        if is_cluster(client)
        else [client]
    )
    with translated():
        for node in nodes:
            cursor = 0
            while True:
                cursor, batch = node.scan(cursor, match=match, count=count, _type=kind)
                if batch:
                    yield [text(k) for k in batch]
                if cursor == 0:
                    break


def on_one_connection(client: RedisClient, key: str, fill: Callable[[Pipeline], None]) -> list[Any]:
    """Run the commands that ``fill`` queues on a pipeline over ONE connection to the master
    that serves ``key`` (the server itself when not on a cluster), and return their replies.

    This is for ``WAIT``, which counts the replicas that acknowledged the writes of its own
    connection, while a pool may hand each command another one. On a cluster the pipeline
    goes to the slot's master itself, so the redirections that redis-py follows for single
    commands are followed here: MOVED (the slot moved, e.g. after a failover) re-reads the
    slot map, ASK (the slot is being migrated) sends the pipeline once to the node named,
    after ASKING; CLUSTERDOWN/TRYAGAIN wait a little. None of these ran the commands, so
    they are sent again, up to :data:`SLOT_ATTEMPTS` times. A connection error (after
    re-reading the slot map) is :class:`BackendUnreachable`: the commands may or may not
    have run.
    """
    if not is_cluster(client):
        pipe = client.pipeline(transaction=False)
        fill(pipe)
        return list(pipe.execute())
    with translated():  # the node's pipeline is a plain redis-py one
        return _on_the_slots_master(client, key, fill)


def _on_the_slots_master(
    client: RedisCluster, key: str, fill: Callable[[Pipeline], None]
) -> list[Any]:
    ask: AskError | None = None
    for attempt in range(SLOT_ATTEMPTS):
        node = client.get_node(host=ask.host, port=ask.port) if ask else None
        node = node or client.get_node_from_key(key)
        pipe = client.get_redis_connection(node).pipeline(transaction=False)
        if ask:
            pipe.execute_command("ASKING")
        fill(pipe)
        try:
            replies = list(pipe.execute())
            return replies[1:] if ask else replies
        except (ConnectionError, TimeoutError):
            client.nodes_manager.initialize()
            raise
        except MovedError:
            ask = None
            client.nodes_manager.initialize()
        except AskError as exc:
            ask = exc
        except NOT_RUN:
            if attempt == SLOT_ATTEMPTS - 1:
                raise
            ask = None
            time.sleep(min(1.0, 0.05 * 2**attempt))
            client.nodes_manager.initialize()
    raise ClusterError(f"the slot of {key!r} kept moving: gave up after {SLOT_ATTEMPTS} tries")
