"""The worker's heartbeat: ``<ns>:heartbeat``, a JSON string with a TTL of three beats.

``seasons status`` and ``/readyz`` read it: present means a worker beat within the last
three intervals. A worker deletes it when it stops, but only if it still holds its own value
(another worker may have beaten since): a compare-and-delete, which is what releasing a lock
is, so it is redis-py's Lock's release script with the last value written as the token.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from datetime import datetime
from typing import Any

from redis.exceptions import LockNotOwnedError

from seasons.config.settings import Settings
from seasons.connection import RedisClient
from seasons.keys import Keys


class Heartbeat:
    def __init__(self, client: RedisClient, settings: Settings, keys: Keys):
        self.client = client
        self.key = keys.heartbeat()
        self.interval = settings.worker.heartbeat_interval
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.last: str | None = None

    @property
    def ttl_ms(self) -> int:
        return max(1000, int(3 * self.interval.total_seconds() * 1000))

    def beat(
        self,
        now: datetime,
        jobs: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Write the heartbeat; ``extra`` adds fields (the worker's ``redis`` memory figures
        and ``safe_mode``)."""
        value = json.dumps({
            "worker": self.worker, "pid": os.getpid(), "host": socket.gethostname(),
            "at": now.isoformat(), "interval_seconds": self.interval.total_seconds(),
            **({"jobs": jobs} if jobs else {}), **(extra or {}),
        }, separators=(",", ":"))  # fmt: skip
        self.client.set(self.key, value, px=self.ttl_ms)
        self.last = value

    def stop(self) -> bool:
        """Delete the heartbeat if it is still ours; True if it was deleted."""
        if self.last is None:
            return False
        try:
            self.client.lock(self.key, thread_local=False).do_release(self.last)
        except LockNotOwnedError:
            return False  # expired, or another worker's beat since
        return True


def read(client: RedisClient, keys: Keys, now: datetime) -> dict[str, Any] | None:
    """The current heartbeat with its age in seconds, or None if no worker is alive."""
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.heartbeat())
    pipe.pttl(keys.heartbeat())
    raw, pttl = pipe.execute()
    if raw is None:
        return None
    try:
        data: dict[str, Any] = json.loads(raw)
        data["age_seconds"] = round((now - datetime.fromisoformat(data["at"])).total_seconds(), 3)
    except (ValueError, KeyError, TypeError):
        data = {"raw": raw}
    data["expires_in_seconds"] = round(pttl / 1000, 3) if pttl and pttl > 0 else None
    return data
