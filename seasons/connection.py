"""Redis clients for one Seasons process: a single server or a cluster (SPEC section 12)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.exceptions import ClusterDownError, ConnectionError, TimeoutError
from redis.retry import Retry

from config.settings import RedisSettings
from seasons.errors import BackendUnavailable

UNAVAILABLE = (ConnectionError, TimeoutError, ClusterDownError)


def make_client(cfg: RedisSettings) -> Any:
    """A client with retries on connection errors and string replies."""
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "retry": Retry(ExponentialBackoff(cap=1.0, base=0.05), 3),
        "retry_on_error": [ConnectionError, TimeoutError],
        "health_check_interval": 30,
    }
    if cfg.password:
        common["password"] = cfg.password
    if cfg.cluster:
        return RedisCluster.from_url(cfg.url, **common)
    return redis.Redis.from_url(cfg.url, **common)


def make_async_client(cfg: RedisSettings) -> Any:
    """The asyncio twin of :func:`make_client`, for the HTTP server's hot reads: they then
    wait for Redis on the event loop instead of a threadpool thread."""
    from redis.asyncio import Redis as AsyncRedis
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
    from redis.asyncio.retry import Retry as AsyncRetry

    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "retry": AsyncRetry(ExponentialBackoff(cap=1.0, base=0.05), 3),
    }
    if cfg.password:
        common["password"] = cfg.password
    if cfg.cluster:
        return AsyncRedisCluster.from_url(cfg.url, **common)
    common["retry_on_error"] = [ConnectionError, TimeoutError]
    common["health_check_interval"] = 30
    return AsyncRedis.from_url(cfg.url, **common)


@contextmanager
def backend_errors() -> Iterator[None]:
    """Turn 'Redis cannot be reached' into :class:`BackendUnavailable`."""
    try:
        yield
    except UNAVAILABLE as exc:
        raise BackendUnavailable(f"Redis is unreachable: {exc}") from exc
