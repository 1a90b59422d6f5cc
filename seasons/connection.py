"""Redis clients for one Seasons process: a single server or a cluster (SPEC section 12)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
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

from seasons.config.settings import RedisSettings
from seasons.errors import BackendFull, BackendReadOnly, BackendUnavailable

# ClusterError covers CLUSTERDOWN, MASTERDOWN and "TTL exhausted" (redirections that never
# settle); RedisClusterException is what the cluster client raises when no node answers.
UNAVAILABLE = (ConnectionError, TimeoutError, ClusterError, SlotNotCoveredError, TryAgainError)
# Errors of a command that was not run: the cluster is down or a multi-key command met a
# slot being migrated; wait a little and send it again (MOVED and ASK are handled apart).
NOT_RUN = (TryAgainError, ClusterError, SlotNotCoveredError)
SLOT_ATTEMPTS = 5

T = TypeVar("T")
log = logging.getLogger(__name__)


def retry_policy(*, asynchronous: bool = False) -> Any:
    """How every Seasons client and executor retries a command after a connection error or
    timeout (redis-py's :class:`Retry`): 3 more tries, backing off from 50 ms up to 1 s."""
    if asynchronous:
        from redis.asyncio.retry import Retry as AsyncRetry

        return AsyncRetry(ExponentialBackoff(cap=1.0, base=0.05), 3)
    return Retry(ExponentialBackoff(cap=1.0, base=0.05), 3)


def make_client(cfg: RedisSettings) -> Any:
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
        # It connects at once: a cluster that cannot be reached is BackendUnavailable here.
        with backend_errors():
            return RedisCluster.from_url(cfg.url, **common)
    return redis.Redis.from_url(cfg.url, **common)


def make_async_client(cfg: RedisSettings) -> Any:
    """The asyncio twin of :func:`make_client`, for the HTTP server's reads on a cluster or
    over TLS (:func:`seasons.executor.async_executor`)."""
    from redis.asyncio import Redis as AsyncRedis
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": cfg.socket_timeout,
        "socket_connect_timeout": 5,
        "retry": retry_policy(asynchronous=True),
    }
    if cfg.password:
        common["password"] = cfg.password
    if cfg.cluster:
        return AsyncRedisCluster.from_url(cfg.url, **common)
    common["retry_on_error"] = [ConnectionError, TimeoutError]
    common["health_check_interval"] = 30
    return AsyncRedis.from_url(cfg.url, **common)


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


@contextmanager
def backend_errors() -> Iterator[None]:
    """Turn 'Redis cannot be reached' into :class:`BackendUnavailable`, and Redis refusing a
    write into :class:`BackendFull` / :class:`BackendReadOnly`."""
    try:
        yield
    except UNAVAILABLE as exc:
        raise BackendUnavailable(f"Redis is unreachable: {exc}") from exc
    except ResponseError as exc:
        found = refusal(exc)
        if found is None:
            raise
        raise found from exc
    except (CrossSlotTransactionError, InvalidPipelineStack):
        raise  # a bug of ours, not an outage
    except RedisClusterException as exc:
        raise BackendUnavailable(f"Redis Cluster is unreachable: {exc}") from exc


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


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def scan_keys(
    client: Any, match: str, *, count: int = 1000, kind: str | None = None
) -> Iterator[list[str]]:
    """SCAN, in batches: on a single server, or on every master of a cluster in turn (each
    master holds only its own slots' keys; replicas are skipped)."""
    nodes = (
        [client.get_redis_connection(n) for n in client.get_primaries()]
        if is_cluster(client)
        else [client]
    )
    for node in nodes:
        cursor = 0
        while True:
            cursor, batch = node.scan(cursor, match=match, count=count, _type=kind)
            if batch:
                yield list(batch)
            if cursor == 0:
                break


def on_one_connection(client: Any, key: str, fill: Callable[[Any], None]) -> list[Any]:
    """Run the commands that ``fill`` queues on a pipeline over ONE connection to the master
    that serves ``key`` (the server itself when not on a cluster), and return their replies.

    This is for ``WAIT``, which counts the replicas that acknowledged the writes of its own
    connection, while a pool may hand each command another one. On a cluster the pipeline
    goes to the slot's master itself, so the redirections that redis-py follows for single
    commands are followed here: MOVED (the slot moved, e.g. after a failover) re-reads the
    slot map, ASK (the slot is being migrated) sends the pipeline once to the node named,
    after ASKING; CLUSTERDOWN/TRYAGAIN wait a little. None of these ran the commands, so
    they are sent again, up to :data:`SLOT_ATTEMPTS` times. A connection error is raised as
    it is (after re-reading the slot map): the commands may or may not have run.
    """
    if not is_cluster(client):
        pipe = client.pipeline(transaction=False)
        fill(pipe)
        return list(pipe.execute())
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
