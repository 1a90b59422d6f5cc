"""What the Redis server itself says about Seasons' safety: eviction policy, memory, role.

Read from ``INFO memory`` and ``INFO replication``, which managed services allow where
``CONFIG GET`` is disabled; on a cluster from every master (the worst one counts). The worker
reads it at start and on every heartbeat, ``seasons serve`` at start and in ``/readyz``,
``seasons status`` and ``/metrics`` to show it. Every other ``seasons`` command that talks to
Redis checks the version only (:func:`check_version`, one ``INFO server``) when it connects.

Any ``maxmemory-policy`` but ``noeviction`` lets Redis drop Seasons' keys silently (day boards,
event ids, job state, archives): :func:`check_redis` refuses it unless
``redis.allow_eviction`` is set deliberately. It first refuses a server older than
:data:`MIN_REDIS` (``INFO server``), on which the scripts would fail.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from typing import Any

import redis

from seasons.config.settings import Settings
from seasons.connection import RedisClient, on_each_master
from seasons.errors import EvictionPolicy, UnsupportedRedis

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"
# The oldest Redis Seasons runs on. The read scripts declare `#!lua flags=no-writes` (script
# flags: 7.0); before that come ZADD GT/LT (write.lua), ZRANGE ... REV (read_range.lua) and
# COPY (archive_copy.lua, archives) in 6.2, SCAN ... TYPE (sweeps) in 6.0.
MIN_REDIS = (7, 0)
# Where a newer server comes from; scripts/setup says the same when it finds none.
GET_REDIS = (
    "Install Redis 7 or later: Debian 12 / Ubuntu 24.04 `apt-get install redis-server`, macOS "
    "`brew install redis`, or a container (`docker run -p 6379:6379 redis:7`), and point "
    "redis.url (SEASONS_REDIS__URL) at it"
)
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True, slots=True)
class RedisHealth:
    """The server's state as it concerns Seasons (on a cluster: the worst master)."""

    policy: str  # maxmemory-policy; on a cluster the first master's that is not noeviction
    used_memory: int  # bytes Redis counts against maxmemory
    maxmemory: int  # 0 = no limit
    read_only: bool  # a replica: every write is refused with READONLY
    eviction_allowed: bool  # redis.allow_eviction

    @property
    def evicting(self) -> bool:
        return self.policy != SAFE_POLICY

    @property
    def full(self) -> bool:
        """At maxmemory: with noeviction Redis refuses every write that needs memory."""
        return self.maxmemory > 0 and self.used_memory >= self.maxmemory

    @property
    def memory_ratio(self) -> float | None:
        return self.used_memory / self.maxmemory if self.maxmemory else None

    def problems(self) -> dict[str, str]:
        """Why Seasons is not ready on this server: {code: message}; empty when it is."""
        found = {}
        if self.read_only:
            found["backend_read_only"] = (
                "Redis is a read-only replica: point redis.url at the master"
            )
        if self.full:
            found["backend_full"] = (
                f"Redis is at its maxmemory ({self.used_memory} of {self.maxmemory} bytes) and "
                "refuses writes: raise maxmemory or free memory"
            )
        if self.evicting and not self.eviction_allowed:
            found["eviction_policy"] = eviction_message(self.policy)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self), "evicting": self.evicting, "full": self.full,
            "memory_ratio": self.memory_ratio, "problems": self.problems(),
        }  # fmt: skip


def eviction_message(policy: str) -> str:
    return (
        f"Redis's maxmemory-policy is {policy!r}: Redis may evict Seasons' keys (day boards, "
        "event ids, job state) without a word. Set `maxmemory-policy noeviction` on the server "
        "(redis.conf, CONFIG SET, or your provider's parameter group), or set "
        "redis.allow_eviction = true (SEASONS_REDIS__ALLOW_EVICTION=true) to run on it anyway"
    )


def _info(node: redis.Redis) -> tuple[dict[str, Any], dict[str, Any]]:
    return node.info("memory"), node.info("replication")


def read(client: RedisClient, settings: Settings) -> RedisHealth:
    """The server's eviction policy, memory and role. Raises BackendUnavailable when Redis
    cannot be reached."""
    policies: list[str] = []
    read_only = False
    worst = (-1.0, 0, 0)  # (used / maxmemory, used, maxmemory) of the fullest master
    for memory, replication in on_each_master(client, _info):
        policies.append(str(memory.get("maxmemory_policy", SAFE_POLICY)))
        used = int(memory.get("used_memory", 0)) - int(memory.get("mem_not_counted_for_evict", 0))
        limit = int(memory.get("maxmemory", 0))
        worst = max(worst, (used / limit if limit else 0.0, used, limit))
        read_only = read_only or replication.get("role") == "slave"
    bad = [p for p in policies if p != SAFE_POLICY]
    return RedisHealth(
        policy=bad[0] if bad else SAFE_POLICY, used_memory=worst[1], maxmemory=worst[2],
        read_only=read_only, eviction_allowed=settings.redis.allow_eviction,
    )  # fmt: skip


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``redis_version`` of ``INFO server`` as numbers (``"7.0.15"`` -> ``(7, 0, 15)``; a
    suffix such as ``-rc1`` is ignored), or None when it does not begin with X.Y."""
    m = _VERSION.match(text.strip())
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def version_problem(text: str) -> str | None:
    """Why Seasons cannot run on a Redis that reports ``redis_version`` ``text``; None when
    it can."""
    need = ".".join(map(str, MIN_REDIS))
    version = parse_version(text)
    if version is None:
        return (
            f"Redis reports its version as {text!r}, which Seasons cannot read; Seasons needs "
            f"Redis {need} or later. {GET_REDIS}"
        )
    if version[: len(MIN_REDIS)] < MIN_REDIS:
        return (
            f"Redis {text} is too old: Seasons needs Redis {need} or later (its Lua scripts "
            f"use script flags and ZADD GT/LT). {GET_REDIS}"
        )
    return None


def check_version(client: RedisClient) -> None:
    """Refuse a server older than :data:`MIN_REDIS` (on a cluster: any master older) with
    :class:`UnsupportedRedis`."""
    found = on_each_master(client, lambda node: str(node.info("server").get("redis_version")))
    for text in found:
        problem = version_problem(text)
        if problem is not None:
            minimum = ".".join(map(str, MIN_REDIS))
            raise UnsupportedRedis(problem, {"redis_version": text, "minimum": minimum})


def check_redis(client: RedisClient, settings: Settings, *, what: str) -> RedisHealth:
    """What the worker and ``seasons serve`` check at start: refuse a server older than
    :data:`MIN_REDIS` (:class:`UnsupportedRedis`), or one that may evict keys
    (:class:`EvictionPolicy`) unless ``redis.allow_eviction`` is set: then warn. ``what``
    names the process in the warning."""
    check_version(client)
    health = read(client, settings)
    if health.evicting:
        if not settings.redis.allow_eviction:
            raise EvictionPolicy(eviction_message(health.policy), {"policy": health.policy})
        log.warning(
            "%s: Redis's maxmemory-policy is %r and redis.allow_eviction is set: Redis may "
            "evict Seasons' keys, losing scores, event ids and job state", what, health.policy,
        )  # fmt: skip
    return health
