"""What the Redis server itself says about Seasons' safety: eviction policy, memory, role.

Read from ``INFO memory`` and ``INFO replication``, which managed services allow where
``CONFIG GET`` is disabled; on a cluster from every master (the worst one counts). The worker
reads it at start and on every heartbeat, ``seasons serve`` at start and in ``/readyz``,
``seasons status`` and ``/metrics`` to show it.

Any ``maxmemory-policy`` but ``noeviction`` lets Redis drop Seasons' keys silently (day boards,
event ids, job state, archives): :func:`check_eviction` refuses it unless
``redis.allow_eviction`` is set deliberately.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

from seasons.config.settings import Settings
from seasons.connection import backend_errors, is_cluster
from seasons.errors import EvictionPolicy

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"


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


def _nodes(client: Any) -> list[Any]:
    if is_cluster(client):
        return [client.get_redis_connection(n) for n in client.get_primaries()]
    return [client]


def read(client: Any, settings: Settings) -> RedisHealth:
    """The server's eviction policy, memory and role. Raises BackendUnavailable when Redis
    cannot be reached."""
    policies: list[str] = []
    read_only = False
    worst = (-1.0, 0, 0)  # (used / maxmemory, used, maxmemory) of the fullest master
    with backend_errors():
        for node in _nodes(client):
            memory = node.info("memory")
            replication = node.info("replication")
            policies.append(str(memory.get("maxmemory_policy", SAFE_POLICY)))
            used = int(memory.get("used_memory", 0)) - int(
                memory.get("mem_not_counted_for_evict", 0)
            )
            limit = int(memory.get("maxmemory", 0))
            worst = max(worst, (used / limit if limit else 0.0, used, limit))
            read_only = read_only or replication.get("role") == "slave"
    bad = [p for p in policies if p != SAFE_POLICY]
    return RedisHealth(
        policy=bad[0] if bad else SAFE_POLICY, used_memory=worst[1], maxmemory=worst[2],
        read_only=read_only, eviction_allowed=settings.redis.allow_eviction,
    )  # fmt: skip


def check_eviction(client: Any, settings: Settings, *, what: str) -> RedisHealth:
    """Refuse a server that may evict keys (:class:`EvictionPolicy`), unless
    ``redis.allow_eviction`` is set: then warn. ``what`` names the process in the warning."""
    health = read(client, settings)
    if health.evicting:
        if not settings.redis.allow_eviction:
            raise EvictionPolicy(eviction_message(health.policy), {"policy": health.policy})
        log.warning(
            "%s: Redis's maxmemory-policy is %r and redis.allow_eviction is set: Redis may "
            "evict Seasons' keys, losing scores, event ids and job state", what, health.policy,
        )  # fmt: skip
    return health
