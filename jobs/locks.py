"""Job locks: one Redis key per job run, so that every close and archive happens once even
when two workers run at the same time (SPEC section 7).

A lock is ``SET key token NX PX ttl`` with a random token; only the holder can extend or
release it (compare-and-delete in ``lock_extend.lua`` / ``lock_release.lua``). A worker that
dies holding a lock loses it when the TTL runs out; the next run resumes from the job state.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from seasons.keys import Keys
from seasons.scripts import Scripts

log = logging.getLogger(__name__)


class LockLost(Exception):
    """The lock expired or was taken by another worker while this one still worked."""

    def __init__(self, name: str):
        super().__init__(f"lost the lock {name!r} (expired or taken over); stopping this run")
        self.name = name


class Lock:
    """One job lock. Use :func:`locked` unless you need to hold it across calls."""

    def __init__(self, client: Any, scripts: Scripts, keys: Keys, name: str, ttl: timedelta):
        self.client = client
        self.scripts = scripts
        self.name = name
        self.key = keys.lock(name)
        self.ttl_ms = max(1, int(ttl.total_seconds() * 1000))
        self.token = secrets.token_hex(16)
        self.held = False

    def acquire(self) -> bool:
        """Take the lock if nobody holds it; True on success."""
        self.held = bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))
        return self.held

    def extend(self) -> None:
        """Push the expiry out by a full TTL; raise :class:`LockLost` if no longer held."""
        if not int(self.scripts.lock_extend(keys=[self.key], args=[self.token, self.ttl_ms])):
            self.held = False
            raise LockLost(self.name)

    def release(self) -> bool:
        """Delete the lock if this holder still has it; True if it did."""
        if not self.held:
            return False
        self.held = False
        return bool(int(self.scripts.lock_release(keys=[self.key], args=[self.token])))


@contextmanager
def locked(
    client: Any, scripts: Scripts, keys: Keys, name: str, ttl: timedelta
) -> Iterator[Lock | None]:
    """Hold the lock ``name`` for the block, or yield None if another worker holds it.

    The lock is released on the way out; if Redis is unreachable then, it simply expires.
    """
    lock = Lock(client, scripts, keys, name, ttl)
    if not lock.acquire():
        log.info("lock %s is held by another worker; skipping", name)
        yield None
        return
    try:
        yield lock
    finally:
        try:
            lock.release()
        except Exception as exc:  # Redis gone: the TTL frees it
            log.warning("could not release lock %s (%s); it expires by itself", name, exc)
