"""Webhooks: the lifecycle stream delivered to each ``[[hooks]]`` URL (docs/operations.md#webhooks).

Each hook reads the stream ``keys.lifecycle()`` through a consumer group of its own,
``hook:<name>``, created at ``$`` the first time a worker runs with the hook configured: a new
hook gets the events appended from then on. A pass of the hooks job (:meth:`Hooks.run`), for
each hook:

1. retries the entries pending in its group whose next try is due (XPENDING, then XCLAIM to
   this worker's consumer), and delivers entries pending with no try recorded at once: they
   were read by a worker that died mid-delivery (or stopped in the middle of it);
2. reads new entries (XREADGROUP ``>``) and delivers them (an entry of a type the hook does
   not want is acknowledged without a request).

A delivery is one POST (:func:`request_of`, :func:`post`) with one deadline, the hook's
``timeout``, over all of it: connecting, sending, the status line and headers, and the body,
of which at most :data:`ANSWER_CAP` bytes are read. The deadline is asyncio's
(``asyncio.timeout``), which cancels whatever the request awaits: a receiver that drips its
answer a byte at a time cannot stretch it, as per-read timeouts alone would let it. A 2xx
acknowledges the entry (XACK) and counts it ``delivered``; anything else schedules the next
try after :func:`backoff` (exponential, full jitter), until ``max_age`` after the entry's
first attempt: then the entry is acknowledged and counted ``failed``. Delivery is at least
once: an entry is acknowledged only after its 2xx, so a worker killed in between, or a
delivery aborted at shutdown, delivers it again, with the same ``id`` in its signed body.

Fairness: a pass runs every hook at once, each on an asyncio task of its own with its own
budget (at most :data:`PER_PASS` deliveries, and none started once its ``timeout`` has passed
since the pass began), so one hook's slow or silent receiver never delays another hook's
deliveries, and a pass lasts at most about twice the longest ``timeout``. Redis calls stay
synchronous on the pass's event loop (each is short, and Redis is every hook's). A watcher task
calls the worker's ``alive`` every :data:`TICK` while the pass runs: it extends the pass's lock
and raises ``Stopping`` at shutdown, which cancels the deliveries in flight (their entries stay
pending, retried by the next pass), so SIGTERM never waits on a receiver.

State, in the hash ``keys.hook(name)`` (no TTL): ``delivered`` and ``failed`` (counters),
``last_error`` (JSON: event, error, at, final) and ``try:<entry id>`` (JSON: attempts,
first and next try in epoch seconds, error) for each entry being retried.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import random
import ssl
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

import httpx
import redis
from pydantic import BaseModel, Field

from seasons.config.settings import HookSettings, Settings
from seasons.connection import RedisClient, decoded, text
from seasons.keys import Keys

log = logging.getLogger(__name__)

BACKOFF_BASE = 1.0  # seconds before the second try, at most (full jitter)
BACKOFF_CAP = 600.0  # seconds between tries, at most
PER_PASS = 20  # deliveries per hook per pass: a pass is bounded, whatever the backlog
SKIP_PER_PASS = 10_000  # entries of types a hook does not take, acknowledged per pass at most
PENDING_SCAN = 1000  # pending entries looked at per hook per pass for due retries
IDLE_CONSUMER = 3600_000  # ms: a consumer of a group idle this long with nothing pending goes
SIGNATURE_HEADER = "X-Seasons-Signature"
# Bytes of an answer's body read at most: the status decides, the body is read only so that a
# short one leaves the connection reusable (past it, the connection is closed; the network
# read in hand may hold up to 64 KiB, httpcore's read size).
ANSWER_CAP = 4096
TICK = 0.5  # seconds between the pass's calls of ``alive`` while deliveries are in flight


def group_of(hook: str) -> str:
    """The consumer group of hook ``hook`` on the lifecycle stream."""
    return f"hook:{hook}"


def backoff(attempts: int, rng: random.Random, base: float = BACKOFF_BASE,
            cap: float = BACKOFF_CAP) -> float:  # fmt: skip
    """Seconds to wait after ``attempts`` failed tries: full jitter, uniform in
    ``[0, min(cap, base * 2 ** (attempts - 1))]``, drawn from ``rng``."""
    ceiling = min(cap, base * 2.0 ** min(max(attempts - 1, 0), 60))
    return rng.uniform(0.0, ceiling)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``X-Seasons-Signature``: ``sha256=`` and the hex HMAC-SHA256, keyed by the hook's
    secret, of the timestamp header's text, a dot, and the body's bytes."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


class Event(NamedTuple):
    """One lifecycle stream entry."""

    entry: str  # the stream entry id
    id: str  # the event's stable id
    type: str
    at: str
    data: str  # a JSON object's text

    @classmethod
    def of(cls, entry: str, fields: Mapping[Any, Any]) -> Event:
        f = decoded(fields)
        return cls(text(entry), f.get("id", ""), f.get("type", ""), f.get("at", ""),
                   f.get("data", "{}"))  # fmt: skip

    def body(self) -> bytes:
        try:
            data = json.loads(self.data)
        except ValueError:
            data = self.data
        payload = {"id": self.id, "type": self.type, "at": self.at, "data": data}
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def request_of(hook: HookSettings, event: Event, timestamp: int) -> tuple[bytes, dict[str, str]]:
    """The body and headers of the POST delivering ``event`` at ``timestamp`` (unix seconds)."""
    body = event.body()
    headers = {
        "Content-Type": "application/json",
        "X-Seasons-Event-Id": event.id,
        "X-Seasons-Event-Type": event.type,
        "X-Seasons-Timestamp": str(timestamp),
        SIGNATURE_HEADER: signature(hook.secret, timestamp, body),
    }
    return body, headers


class Answer(NamedTuple):
    """What one POST came to."""

    ok: bool  # a 2xx status
    error: str  # why not, for the log and ``last_error``
    away: bool  # no status at all (timeout, refused, reset): the hook's pass ends here


async def post(http: httpx.AsyncClient, hook: HookSettings, body: bytes,
               headers: Mapping[str, str]) -> Answer:  # fmt: skip
    """POST ``body`` to the hook within its ``timeout``, the whole exchange: the status decides;
    at most :data:`ANSWER_CAP` bytes of the body are read (raw: a compressed answer is never
    inflated), and an answer longer than that, or still coming at the deadline, is cut off by
    closing the connection. A status that arrived before the deadline stands."""
    seconds = hook.timeout.total_seconds()
    status: int | None = None
    try:
        async with asyncio.timeout(seconds):
            async with http.stream(
                "POST", hook.url, content=body, headers=dict(headers), timeout=seconds
            ) as response:
                status = response.status_code
                read = 0
                async for chunk in response.aiter_raw():
                    read += len(chunk)
                    if read > ANSWER_CAP:
                        break
    except (TimeoutError, httpx.TimeoutException):
        if status is None:
            return Answer(False, f"no answer within {seconds:g}s", away=True)
    except httpx.HTTPError as exc:
        if status is None:
            return Answer(False, f"{type(exc).__name__}: {exc}", away=True)
    assert status is not None
    if 200 <= status < 300:
        return Answer(True, "", away=False)
    return Answer(False, f"HTTP {status}", away=False)


class Try(BaseModel):
    """The retries of one pending entry: ``try:<entry id>`` in the hook's hash."""

    attempts: int = 0
    first: float | None = None  # epoch seconds of the first attempt
    next: float = 0.0  # epoch seconds: due from then on
    error: str = ""


class HookFailure(BaseModel):
    """A hook's last failed attempt."""

    event: str = Field(description="The event's stable id")
    error: str
    at: datetime
    final: bool = Field(description="True: the event was given up (max_age passed)")


class HookSummary(BaseModel):
    """One hook's deliveries, as its state hash and consumer group hold them."""

    delivered: int = 0
    failed: int = Field(default=0, description="Events given up after max_age")
    pending: int = Field(
        default=0, description="Events not yet delivered: read and unacknowledged, or not read"
    )
    retrying: int = Field(default=0, description="Pending events whose delivery failed so far")
    last_error: HookFailure | None = None


class Hooks:
    """The deliveries of every configured hook, on one client, as consumer ``consumer``."""

    def __init__(
        self, client: RedisClient, keys: Keys, settings: Settings, *, consumer: str,
        clock: Callable[[], datetime], rng: random.Random | None = None,
    ):  # fmt: skip
        self.client, self.keys, self.settings = client, keys, settings
        self.consumer = consumer
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        self.stream = keys.lifecycle()
        self._tls: ssl.SSLContext | None = None

    def run(
        self, between: Callable[[str], None] | None = None,
        alive: Callable[[], None] | None = None,
    ) -> dict[str, int]:  # fmt: skip
        """One pass over every hook at once; how many events each delivered. ``between`` is
        called before each delivery (the worker's checkpoint: it stops the pass there, and
        extends the pass's lock); ``alive`` every :data:`TICK` seconds while the pass runs (it
        extends the lock; an exception from it, such as ``Stopping``, cancels the deliveries
        in flight and ends the pass with it)."""
        if not self.settings.hooks:
            return {}
        return asyncio.run(self._pass(between, alive))

    async def _pass(
        self, between: Callable[[str], None] | None, alive: Callable[[], None] | None
    ) -> dict[str, int]:
        # A client per pass: an asyncio client belongs to one event loop. The TLS context,
        # the costly part (the CA bundle), is built once.
        if self._tls is None:
            self._tls = httpx.create_ssl_context()
        async with httpx.AsyncClient(verify=self._tls, follow_redirects=False) as http:
            runs = {
                hook.name: asyncio.create_task(self.run_hook(http, hook, between))
                for hook in self.settings.hooks
            }
            tasks = [*runs.values(), asyncio.create_task(_watch(alive))]
            waiting = set(tasks)
            try:
                while not all(task.done() for task in runs.values()):
                    done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        if (failed := task.exception()) is not None:
                            raise failed
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        return {name: task.result() for name, task in runs.items()}

    def ensure_group(self, hook: HookSettings) -> None:
        """Create the hook's group at the stream's end, unless it exists."""
        try:
            self.client.xgroup_create(self.stream, group_of(hook.name), id="$", mkstream=True)
            log.info("hook %s: delivering lifecycle events from now on", hook.name)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def run_hook(
        self, http: httpx.AsyncClient, hook: HookSettings,
        between: Callable[[str], None] | None = None,
    ) -> int:  # fmt: skip
        """One pass of ``hook``: due retries, then new entries, at most :data:`PER_PASS`
        deliveries, none started once the hook's ``timeout`` has passed since the pass began;
        a receiver away (no status: timeout, connection refused) ends it."""
        self.ensure_group(hook)
        self.forget_idle_consumers(hook)
        loop = asyncio.get_running_loop()
        ends = loop.time() + hook.timeout.total_seconds()
        group, delivered, budget = group_of(hook.name), 0, PER_PASS

        def more() -> bool:
            return budget > 0 and loop.time() < ends

        for event, state in self._due(hook):
            if not more():
                return delivered
            budget -= 1
            if between is not None:
                between(f"hooks/{hook.name}")
            ok, away = await self.deliver(http, hook, event, state)
            delivered += ok
            if away:
                return delivered
        # New entries: those of types the hook does not take are acknowledged as read and
        # count against SKIP_PER_PASS only, so they never hold the hook's own events back.
        skipped = 0
        while more() and skipped < SKIP_PER_PASS:
            found: Any = self.client.xreadgroup(
                group, self.consumer, {self.stream: ">"}, count=budget
            )
            entries = [Event.of(e, f or {}) for _stream, got in found or [] for e, f in got]
            if not entries:
                break
            unwanted = [e.entry for e in entries if not hook.wants(e.type)]
            if unwanted:
                self.client.xack(self.stream, group, *unwanted)
                skipped += len(unwanted)
            for event in entries:
                if not hook.wants(event.type):
                    continue
                # Read, so pending on this consumer: one left undelivered now (the hook's
                # time is up) has no try recorded and goes first in the next pass.
                if not more():
                    return delivered
                budget -= 1
                if between is not None:
                    between(f"hooks/{hook.name}")
                ok, away = await self.deliver(http, hook, event, Try())
                delivered += ok
                if away:
                    return delivered
        return delivered

    def _due(self, hook: HookSettings) -> list[tuple[Event, Try]]:
        """The pending entries whose next try is due (or that have no try recorded: read by
        a worker that died before it recorded one), claimed by this consumer."""
        group, key = group_of(hook.name), self.keys.hook(hook.name)
        pending: Any = self.client.xpending_range(self.stream, group, "-", "+", PENDING_SCAN)
        if not pending:
            return []
        entries = [text(p["message_id"]) for p in pending]
        states = self.client.hmget(key, [f"try:{e}" for e in entries])
        now = self.clock().timestamp()
        due: list[tuple[str, Try]] = []
        for entry, raw in zip(entries, states, strict=True):
            state = Try.model_validate_json(raw) if raw else Try()
            if state.next <= now:
                due.append((entry, state))
            if len(due) >= PER_PASS:
                break
        out = []
        for entry, state in due:
            claimed: Any = self.client.xclaim(self.stream, group, self.consumer, 0, [entry])
            fields = claimed[0][1] if claimed else None
            if not fields:  # trimmed from the stream: nothing left to deliver
                self._give_up(hook, Event(entry, entry, "", "", "{}"), "trimmed from the stream")
                continue
            event = Event.of(entry, fields)
            if not hook.wants(event.type):  # its events changed since it was read
                self._delivered(hook, event, count=False)
                continue
            out.append((event, state))
        return out

    async def deliver(
        self, http: httpx.AsyncClient, hook: HookSettings, event: Event, state: Try
    ) -> tuple[bool, bool]:
        """Try ``event`` once; record the outcome. (delivered, receiver away)."""
        started = self.clock()
        body, headers = request_of(hook, event, int(started.timestamp()))
        answer = await post(http, hook, body, headers)
        if answer.ok:
            self._delivered(hook, event)
        else:
            self._failed(hook, event, state, answer.error, started)
        return answer.ok, answer.away

    def _delivered(self, hook: HookSettings, event: Event, *, count: bool = True) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.xack(self.stream, group_of(hook.name), event.entry)
        pipe.hdel(self.keys.hook(hook.name), f"try:{event.entry}")
        if count:
            pipe.hincrby(self.keys.hook(hook.name), "delivered", 1)
        pipe.execute()

    def _failed(
        self, hook: HookSettings, event: Event, state: Try, error: str, started: datetime
    ) -> None:
        now = self.clock()
        first = state.first if state.first is not None else started.timestamp()
        deadline = first + hook.max_age.total_seconds()
        log.warning("hook %s: event %s: %s", hook.name, event.id, error)
        if now.timestamp() >= deadline:
            self._give_up(hook, event, error)
            return
        attempts = state.attempts + 1
        later = now.timestamp() + backoff(attempts, self.rng)
        retry = Try(attempts=attempts, first=first, next=min(later, deadline), error=error)
        failure = HookFailure(event=event.id, error=error, at=now, final=False)
        self.client.hset(self.keys.hook(hook.name), mapping={
            f"try:{event.entry}": retry.model_dump_json(),
            "last_error": failure.model_dump_json(),
        })  # fmt: skip

    def _give_up(self, hook: HookSettings, event: Event, error: str) -> None:
        log.error("hook %s: gave up event %s after max_age: %s", hook.name, event.id, error)
        key = self.keys.hook(hook.name)
        failure = HookFailure(event=event.id, error=error, at=self.clock(), final=True)
        pipe = self.client.pipeline(transaction=False)
        pipe.xack(self.stream, group_of(hook.name), event.entry)
        pipe.hdel(key, f"try:{event.entry}")
        pipe.hincrby(key, "failed", 1)
        pipe.hset(key, "last_error", failure.model_dump_json())
        pipe.execute()

    def forget_idle_consumers(self, hook: HookSettings) -> None:
        """Drop the group's consumers of workers gone long ago (nothing pending on them)."""
        for found in self.client.xinfo_consumers(self.stream, group_of(hook.name)):
            name = text(found["name"])
            if name != self.consumer and not found["pending"] and found["idle"] > IDLE_CONSUMER:
                self.client.xgroup_delconsumer(self.stream, group_of(hook.name), name)


def summaries(client: RedisClient, keys: Keys, settings: Settings) -> dict[str, HookSummary]:
    """Each configured hook's deliveries: counters and last error from its hash, pending
    from its group (read but unacknowledged, plus the entries of its types it has not read
    yet)."""
    if not settings.hooks:
        return {}
    pipe = client.pipeline(transaction=False)
    for hook in settings.hooks:
        pipe.hgetall(keys.hook(hook.name))
    hashes = [decoded(found) for found in pipe.execute()]
    try:
        groups = {text(g["name"]): g for g in client.xinfo_groups(keys.lifecycle())}
    except redis.ResponseError:  # no stream yet
        groups = {}
    out = {}
    for hook, fields in zip(settings.hooks, hashes, strict=True):
        group = groups.get(group_of(hook.name))
        pending = 0
        if group is not None:
            pending = int(group.get("pending") or 0) + _lag(client, keys, hook, group)
        last = fields.get("last_error")
        out[hook.name] = HookSummary(
            delivered=int(fields.get("delivered", 0)), failed=int(fields.get("failed", 0)),
            pending=pending, retrying=sum(1 for f in fields if f.startswith("try:")),
            last_error=HookFailure.model_validate_json(last) if last else None,
        )  # fmt: skip
    return out


def _lag(client: RedisClient, keys: Keys, hook: HookSettings, group: Mapping[str, Any]) -> int:
    """Entries after the group's last delivered one that the hook takes: Redis's lag for a
    hook of every type; else counted (up to 10 000), as when Redis cannot tell (after a
    trim or a deletion)."""
    lag = group.get("lag")
    if lag is not None and (not hook.events or not lag):
        return int(lag)
    after = f"({text(group['last-delivered-id'])}"
    found: Any = client.xrange(keys.lifecycle(), after, "+", count=10_000)
    return sum(1 for entry, fields in found or [] if hook.wants(Event.of(entry, fields).type))


async def _watch(alive: Callable[[], None] | None) -> None:
    """Call ``alive`` every :data:`TICK` until cancelled (the pass's end)."""
    while True:
        await asyncio.sleep(TICK)
        if alive is not None:
            alive()
