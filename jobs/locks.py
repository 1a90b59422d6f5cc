"""Job locks: one Redis key per job run, so that every close and archive happens once even
when two workers run at the same time (docs/operations.md#the-worker).

A lock is redis-py's :class:`redis.lock.Lock` on the key ``keys.lock(name)``: ``SET key token
NX PX ttl`` with a random token, and Lua scripts of redis-py's own (registered by it on the
client, cluster included: each touches only the lock's key) so that only the holder extends or
releases it. A worker that dies holding a lock loses it when the TTL runs out; the next run
resumes from the job state.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import redis.lock
from redis.exceptions import LockNotOwnedError

from seasons.connection import RedisClient
from seasons.errors import LockLost
from seasons.keys import Keys

__all__ = ["Lock", "LockLost", "locked"]

log = logging.getLogger(__name__)


class Lock:
    """One held job lock (see :func:`locked`): its TTL renewed at each checkpoint of a run."""

    def __init__(self, lock: redis.lock.Lock, name: str, ttl: float):
        self._lock = lock
        self.name = name
        self.ttl = ttl  # seconds

    def extend(self) -> None:
        """Push the expiry out by a full TTL; raise :class:`LockLost` if no longer held."""
        try:
            self._lock.extend(self.ttl, replace_ttl=True)
        except LockNotOwnedError:
            raise LockLost(self.name) from None

    def release(self) -> None:
        """Delete the lock; :class:`LockLost` if it expired or another worker holds it now."""
        try:
            self._lock.release()
        except LockNotOwnedError:
            raise LockLost(self.name) from None


@contextmanager
def locked(client: RedisClient, keys: Keys, name: str, ttl: timedelta) -> Iterator[Lock | None]:
    """Hold the lock ``name`` for the block (expiring after ``ttl`` unless extended), or yield
    None if another worker holds it.

    The lock is released on the way out; if Redis is unreachable then, or the lock was lost
    meanwhile, that is logged and the key simply expires (or stays the new holder's).
    """
    seconds = max(0.001, ttl.total_seconds())  # redis-py sets PX from it, in whole ms
    # thread_local=False: the token belongs to this run, whichever thread extends it.
    held = client.lock(keys.lock(name), timeout=seconds, blocking=False, thread_local=False)
    if not held.acquire():
        log.info("lock %s is held by another worker; skipping", name)
        yield None
        return
    lock = Lock(held, name, seconds)
    try:
        yield lock
    finally:
        try:
            lock.release()
        except LockLost:
            log.warning("lock %s was lost before it was released (expired or taken over)", name)
        except Exception as exc:  # Redis gone: the TTL frees it
            log.warning("could not release lock %s (%s); it expires by itself", name, exc)
