"""Data-loss detection and safe mode: the worker never archives over what Redis forgot.

A namespace carries a *marker*, ``<ns>:marker`` (JSON ``{"id", "created_at"}``, no TTL),
and a copy of it on disk, ``<archive.dir>/<ns>/marker.json``, beside the archives. Before
every closes pass (and at start) the worker checks them (:meth:`Integrity.check`):

- the Redis marker is present and equals the disk copy: all is well (a missing disk copy is
  written);
- present but different from the disk copy: this Redis is not the one whose archives are on
  disk (``marker_mismatch``);
- absent, while the disk copy exists, or an archive manifest of the namespace has no archive
  key in Redis, or this process saw the marker before: Redis lost Seasons' data
  (``data_loss``: a restart without persistence, FLUSHALL, an empty replica promoted);
- absent with none of those (a fresh namespace, or an upgrade from a version without a
  marker): the marker is created (SET NX) with its disk copy.

On detection, and when a close meets an archive file it would change (``archive_conflict``),
the worker enters *safe mode*: ``<ns>:safe_mode`` (JSON ``{"reason", "message",
"detected_at", "worker"}``, no TTL, written again if Redis loses it again). In safe mode the
worker runs no closes, no archives and no sweep; rollup and heartbeat go on, and every
heartbeat logs it at ERROR. An operator restores the archives (``seasons restore --all``) or
acknowledges the loss; both call :func:`mark_recovered`, which writes a fresh marker and
deletes the safe-mode key, and the worker leaves safe mode on its next pass.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from seasons.archives import MANIFEST_SUFFIX
from seasons.catalog import archive_dir
from seasons.config.settings import Settings
from seasons.connection import RedisClient, text
from seasons.errors import ArchiveError
from seasons.files import atomic_write
from seasons.keys import Keys
from seasons.lifecycle import EventType, Lifecycle, event_id
from seasons.manifest import Manifest, is_amendment

log = logging.getLogger(__name__)

MARKER_FILE = "marker.json"

# Reasons of safe mode.
DATA_LOSS = "data_loss"
MARKER_MISMATCH = "marker_mismatch"
ARCHIVE_CONFLICT = "archive_conflict"

WHAT_TO_DO = (
    "closes, archives and the sweep are stopped. Check Redis's persistence and the archives, "
    "then run `seasons restore --all` to load the archives back, or `seasons acknowledge-loss` "
    "to accept the loss; the worker resumes by itself"
)


def marker_path(settings: Settings) -> Path:
    """The disk copy of the namespace marker, beside the namespace's archive folders."""
    return settings.archive.dir / settings.namespace / MARKER_FILE


def new_marker(now: datetime, reason: str | None = None) -> str:
    """A fresh marker value (a JSON string); ``reason`` says why it replaced another."""
    data: dict[str, str] = {
        "id": secrets.token_hex(16),
        "created_at": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if reason:
        data["reason"] = reason
    return json.dumps(data, separators=(",", ":"))


def marker_id(raw: str | bytes | None) -> str | None:
    """The id of a marker value; the raw text itself when it is not a marker's JSON."""
    if raw is None:
        return None
    text = raw.decode() if isinstance(raw, bytes) else raw
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(data, dict) and isinstance(data.get("id"), str):
        return data["id"]
    return text.strip()


def read_disk_marker(settings: Settings) -> str | None:
    """The disk copy of the marker, or None when there is none."""
    try:
        return marker_path(settings).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


def write_disk_marker(settings: Settings, value: str) -> None:
    """Write the disk copy of the marker (atomically: a crash leaves the old copy or this)."""
    data = (value + "\n").encode()

    def write(f: IO[bytes]) -> None:
        f.write(data)

    atomic_write(marker_path(settings), write)


def read_safe_mode(client: RedisClient, keys: Keys) -> dict[str, Any] | None:
    """The safe-mode record (``reason``, ``message``, ``detected_at``, ``worker``), or None
    when the namespace is not in safe mode. Raises BackendUnavailable when Redis is down."""
    raw = client.get(keys.safe_mode())
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"reason": "unknown", "message": f"unreadable safe-mode record: {raw!r}"}
    return data


def mark_recovered(client: RedisClient, keys: Keys, settings: Settings, *, reason: str) -> None:
    """End safe mode after an operator restored or acknowledged: a fresh marker in Redis
    and on disk, then the safe-mode key deleted. The worker resumes on its next pass."""
    now = datetime.now(UTC)
    value = new_marker(now, reason)
    previous = client.get(keys.safe_mode())
    client.set(keys.marker(), value)
    # Disk after Redis: a crash in between leaves a mismatch, which keeps safe mode on
    # (and is cleared by running this again), never a silent resume.
    write_disk_marker(settings, value)
    client.delete(keys.safe_mode())
    log.warning("namespace %s recovered (%s); was in safe mode: %s", settings.namespace,
                reason, previous or "no")  # fmt: skip


class Integrity:
    """The worker's checks of one namespace, and its safe mode."""

    def __init__(self, client: RedisClient, settings: Settings, keys: Keys, worker: str):
        self.client = client
        self.settings = settings
        self.keys = keys
        self.worker = worker
        self.lifecycle = Lifecycle(client, keys, settings)
        self.seen_marker = False  # this process saw the Redis marker at least once
        # The safe-mode record while in safe mode (read by the heartbeat thread too), and the
        # marker id at the time: recovery writes a new one.
        self._lock = threading.Lock()
        self.safe: dict[str, Any] | None = None
        self._marker_at_entry: str | None = None

    @property
    def in_safe_mode(self) -> bool:
        return self.safe is not None

    def check(self, now: datetime) -> dict[str, Any] | None:
        """Check the marker (creating it on a fresh namespace) and keep safe mode up to date;
        returns the safe-mode record, None when closes may run."""
        with self._lock:
            if self.safe is None:
                adopted = read_safe_mode(self.client, self.keys)
                if adopted is not None:  # entered by an earlier run or another worker
                    self._adopt(adopted)
                    return self.safe
            elif self._recovered():
                self._leave()
            found = self._detect(now)
            if found is not None:
                self._enter(*found, now)
            elif self.safe is not None:
                self._rewrite()
            return self.safe

    def enter(self, reason: str, message: str, now: datetime) -> None:
        """Enter safe mode (e.g. ``archive_conflict`` from a close)."""
        with self._lock:
            self._enter(reason, message, now)

    def refresh(self) -> dict[str, Any] | None:
        """For the heartbeat: the safe-mode record, written again if Redis lost it."""
        with self._lock:
            if self.safe is None:
                adopted = read_safe_mode(self.client, self.keys)
                if adopted is not None:
                    self._adopt(adopted)
            elif self._recovered():
                self._leave()
            else:
                self._rewrite()
            return self.safe

    # --- internals ------------------------------------------------------------------------

    def _detect(self, now: datetime) -> tuple[str, str] | None:
        raw = self.client.get(self.keys.marker())
        disk = read_disk_marker(self.settings)
        if raw is not None:
            if disk is None:
                if self.safe is None:
                    write_disk_marker(self.settings, text(raw))
                self.seen_marker = True
                return None
            if marker_id(raw) != marker_id(disk):
                return MARKER_MISMATCH, (
                    f"the namespace marker in Redis ({marker_id(raw)}) differs from its copy "
                    f"on disk {marker_path(self.settings)} ({marker_id(disk)}): this Redis is "
                    "not the one whose archives are on disk"
                )
            self.seen_marker = True
            return None
        why = self._loss_evidence(disk)
        if why is not None:
            return DATA_LOSS, f"Redis lost Seasons' data: its namespace marker is gone ({why})"
        if self.safe is not None:
            return None  # safe mode for another reason: recovery writes the marker
        value = new_marker(now)
        created = self.client.set(self.keys.marker(), value, nx=True)
        if not created:  # another worker created it meanwhile
            value = text(self.client.get(self.keys.marker()) or value)
        write_disk_marker(self.settings, value)
        self.seen_marker = True
        log.info("namespace %s: marker created", self.settings.namespace)
        return None

    def _loss_evidence(self, disk: str | None) -> str | None:
        if disk is not None:
            return f"its copy {marker_path(self.settings)} exists"
        if self.seen_marker:
            return "this worker saw it earlier"
        missing = self._archives_without_keys()
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            return f"archive {missing[0]} has no archive key in Redis{more}"
        return None

    def _archives_without_keys(self) -> list[str]:
        """Archive manifests of the namespace whose archive key is missing in Redis (empty
        archives have no key, so they tell nothing)."""
        found: list[tuple[str, str, Path]] = []
        for board in sorted(self.settings.boards):
            folder = archive_dir(self.settings, board)
            if folder.is_dir():
                for path in sorted(folder.glob(f"*{MANIFEST_SUFFIX}")):
                    if is_amendment(path.name):
                        continue  # amended results (seasons.amend): no archive key of theirs
                    found.append((board, path.name[: -len(MANIFEST_SUFFIX)], path))
        missing = []
        for board, archive_id, path in found:
            try:
                if Manifest.load(path).count == 0:
                    continue
            except ArchiveError:
                continue
            if not self.client.exists(self.keys.archive(board, archive_id)):
                missing.append(str(path))
        return missing

    def _enter(self, reason: str, message: str, now: datetime) -> None:
        if self.safe is not None and self.safe.get("reason") == reason:
            self._rewrite()  # the same finding again: keep when it was first detected
            self._emit_loss()  # a no-op, unless the first emit failed (Redis refused it)
            return
        log.error("SAFE MODE (%s): %s; %s", reason, message, WHAT_TO_DO)
        self.safe = {
            "reason": reason, "message": message,
            "detected_at": now.astimezone(UTC).isoformat(), "worker": self.worker,
        }  # fmt: skip
        self._marker_at_entry = marker_id(self.client.get(self.keys.marker()))
        self._rewrite()
        self._emit_loss()

    def _leave(self) -> None:
        log.warning("safe mode (%s) ended: the marker was renewed; closes resume",
                    self.safe.get("reason") if self.safe else None)  # fmt: skip
        self.safe = None
        self._marker_at_entry = None

    def _adopt(self, record: dict[str, Any]) -> None:
        self.safe = record
        self._marker_at_entry = marker_id(self.client.get(self.keys.marker()))
        log.error("SAFE MODE (%s): %s; %s", record.get("reason"), record.get("message"),
                  WHAT_TO_DO)  # fmt: skip
        self._emit_loss()

    def _emit_loss(self) -> None:
        """The ``data_loss`` event of the safe-mode record, after the record is written.
        Also when a worker adopts a record (at its start): one that died between writing
        the record and emitting has its event appended then; its id (the record's
        ``detected_at``) makes every other emit of it a no-op."""
        safe = self.safe
        if safe is None or safe.get("reason") != DATA_LOSS:
            return
        detected = str(safe.get("detected_at", ""))
        try:
            at = datetime.fromisoformat(detected)
        except ValueError:  # a record not of our writing: still reported
            at = datetime.now(UTC)
        data = {k: safe.get(k) for k in ("reason", "message", "detected_at", "worker")}
        kind = EventType.DATA_LOSS
        self.lifecycle.emit(kind, event_id(kind, detected_at=detected), data, at)

    def _rewrite(self) -> None:
        self.client.set(self.keys.safe_mode(), json.dumps(self.safe, separators=(",", ":")))

    def _recovered(self) -> bool:
        """Safe mode was ended by :func:`mark_recovered`: the key is gone and a new marker
        stands in Redis and on disk (a Redis that only lost the key again has neither)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(self.keys.safe_mode())
        pipe.get(self.keys.marker())
        in_redis, raw = pipe.execute()
        if in_redis or raw is None:
            return False
        current = marker_id(raw)
        return current != self._marker_at_entry and current == marker_id(
            read_disk_marker(self.settings)
        )
