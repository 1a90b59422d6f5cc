"""The audit trail: who did which admin action, when and why, appended to one Redis Stream,
``<ns>:audit`` (docs/security.md#the-audit-trail).

Each action that changes or erases data on an operator's word (:data:`ACTIONS`: forget,
clear, restore; moderation and held events append theirs the same way) appends one entry
when it is done, through :meth:`Audit.append`, on every path: the Python API, the CLI and
HTTP run the same code. A refused or failed action appends nothing. An entry's fields:
``at`` (ISO 8601 UTC), ``actor``, ``action``, ``member`` (the member's salted hash, or
empty), ``boards`` (JSON list), ``reason`` (text, or empty), ``before`` and ``after`` (JSON),
``request_id`` (an admin request's, or empty). The stream is bounded (``audit.max_len``,
XADD MAXLEN ~) and no route deletes it.

Erasure. A stream cannot be edited in place, so an entry never holds a member id: it holds
HMAC-SHA256 of the id under a random salt of the namespace (``audit_salt``, written once,
SET NX), and ``audit_members`` maps that hash back to the id for reads. Forgetting a member
deletes its mapping in the script that appends the forget's own entry: from then on its
entries name only a hash that nothing in Redis turns back into the id. ``before`` and
``after`` therefore never carry a member id: callers put the member in ``member`` only.

An action that may be answered again (a clear resumed or asked again under its id) passes a
once-id: the entry is appended once per once-id, checked in the same script (the ids are
kept with the stream, trimmed with it, as the lifecycle stream's are).
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from seasons.clock import utc_text
from seasons.config.settings import ADMIN_TOKEN_NAME, Settings
from seasons.connection import RedisClient, text
from seasons.errors import BadCursor, InvalidInput, UnknownAction
from seasons.events import member_problem
from seasons.keys import Keys
from seasons.lifecycle import MAX_ID_PART, STREAM_ID
from seasons.models import AuditEntry, AuditPage
from seasons.scripts import script

# The actions of the trail and when each is appended: declared once, read by the checks of
# the reads' `action` filter and by the docs. Moderation and held events add theirs here.
ACTIONS: dict[str, str] = {
    "forget": "a member was erased everywhere (seasons forget, DELETE /v1/admin/members/...)",
    "clear": "a period of a board was cleared (seasons clear, POST .../clear), once per clear id",
    "restore": "archive files were loaded back (seasons restore FILE, or --all: one entry)",
    "held_approve": "a held event was applied (seasons held approve, POST .../approve)",
    "held_reject": "a held event was dropped (seasons held reject, POST .../reject)",
    "hide": "a member was hidden, or its hidden mode or reason changed (seasons hide, PUT "
    ".../moderation): one entry per call, naming the boards that changed",
    "unhide": "a hidden member was made visible again (seasons unhide, PUT .../moderation)",
    "ban": "a member was banned, or its ban's mode or reason changed (seasons ban, PUT "
    ".../moderation)",
    "unban": "a banned member was made visible again (seasons unban, PUT .../moderation)",
}

DEFAULT_ACTOR = "python"  # the Python API's actor when none is given
LOCAL_ACTOR = "local"  # an admin call from a loopback client without a token
ADMIN_ACTOR = ADMIN_TOKEN_NAME  # api.admin_token
MAX_REASON = 500  # characters of a reason
MAX_ACTOR = 200  # characters of an actor given to the Python API
MAX_LIMIT = 1000  # entries one read returns at most
# An X-Request-ID taken as the client sent it; any other is replaced by a generated one.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
_SCAN = 500  # entries read per XREVRANGE while a filter skips some


def cli_actor() -> str:
    """The CLI's actor: ``cli:<the OS user>``."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no user name in the environment or the passwd file
        user = "unknown"
    return f"cli:{user}"


def new_request_id() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class Note:
    """Who does an action and why: what its audit entry records besides the action itself.
    Build it with :meth:`of`, which checks what a caller gave."""

    actor: str = DEFAULT_ACTOR
    reason: str | None = None
    request_id: str | None = None

    @classmethod
    def of(
        cls, actor: str = DEFAULT_ACTOR, reason: str | None = None, request_id: str | None = None
    ) -> Note:
        """Raises :class:`~seasons.errors.InvalidInput` for an empty or overlong actor, a
        reason over :data:`MAX_REASON` characters, a request id that is not 1-128 of
        ``A-Z a-z 0-9 . _ : @ / + = -``; before the action changes anything."""
        if (
            not isinstance(actor, str) or not actor.strip() or len(actor) > MAX_ACTOR
            or not _printable(actor)
        ):  # fmt: skip
            raise InvalidInput(
                f"actor must be 1-{MAX_ACTOR} characters of UTF-8 text without control "
                f"characters, got {str(actor)[:50]!r}",
                {"field": "actor"},
            )
        if reason is not None and len(reason) > MAX_REASON:
            raise InvalidInput(
                f"reason is {len(reason)} characters; at most {MAX_REASON}",
                {"field": "reason", "length": len(reason), "max": MAX_REASON},
            )
        if reason is not None and not _printable(reason, "\t\n"):
            raise InvalidInput(
                "reason must be UTF-8 text without control characters (tabs and newlines are kept)",
                {"field": "reason"},
            )
        if request_id is not None and not REQUEST_ID.fullmatch(request_id):
            raise InvalidInput(
                "request_id must be 1-128 characters of A-Z a-z 0-9 . _ : @ / + = -",
                {"field": "request_id"},
            )
        return cls(actor, reason or None, request_id)


class Audit:
    """The audit trail of one namespace: append, read back newest first."""

    def __init__(self, client: RedisClient, keys: Keys, settings: Settings):
        self.client = client
        self.keys = keys
        self.settings = settings
        self._append = client.register_script(script("audit_append").source)

    # --- the members' hashes ----------------------------------------------------------------

    def _salt(self, create: bool) -> bytes | None:
        """The namespace's salt (read each time: it is never cached across a data loss)."""
        key = self.keys.audit_salt()
        found = self.client.get(key)
        if found is None and create:
            self.client.set(key, secrets.token_hex(32), nx=True)
            found = self.client.get(key)
        if found is None:
            return None
        return found if isinstance(found, bytes) else str(found).encode()

    @staticmethod
    def _hash(salt: bytes, member: str) -> str:
        return hmac.new(salt, member.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()

    def member_hash(self, member: str) -> str:
        """What entries naming ``member`` hold in place of its id."""
        salt = self._salt(create=True)
        assert salt is not None
        return self._hash(salt, member)

    # --- appending --------------------------------------------------------------------------

    def append(
        self, action: str, note: Note, at: datetime, *, member: str | None = None,
        boards: Iterable[str] = (), before: Any = None, after: Any = None,
        once: str | None = None, forgotten: bool = False,
    ) -> str | None:  # fmt: skip
        """Append one entry of ``action`` (one of :data:`ACTIONS`); returns its stream id, or
        None when ``once`` was appended already. ``before`` and ``after`` are JSON values
        that name no member id. ``forgotten``: ``member`` is being erased, so the entry
        holds its hash only and the hash's mapping is deleted in the same script."""
        if action not in ACTIONS:  # a programming error, never the caller's input
            raise ValueError(f"unknown audit action {action!r}")
        digest = self.member_hash(member) if member is not None else ""
        fields = {
            "at": utc_text(at), "actor": note.actor, "action": action, "member": digest,
            "boards": _json(sorted(set(boards))), "reason": note.reason or "",
            "before": _json(before), "after": _json(after), "request_id": note.request_id or "",
        }  # fmt: skip
        mapped = member if member is not None and not forgotten else ""
        found = self._append(
            keys=[self.keys.audit(), self.keys.audit_members(), self.keys.audit_ids()],
            args=[self.settings.audit.max_len, once or "", digest, mapped,
                  *(x for pair in fields.items() for x in pair)],
        )  # fmt: skip
        return text(found) if found else None

    # --- reading ----------------------------------------------------------------------------

    def read(
        self, *, member: str | None = None, action: str | None = None, limit: int = 20,
        after: str | None = None,
    ) -> AuditPage:  # fmt: skip
        """Up to ``limit`` entries, newest first, of ``action`` and/or naming ``member`` if
        given; with ``after`` (a stream id: a page's ``next``), only those older than it.
        Raises :class:`~seasons.errors.UnknownAction`, :class:`~seasons.errors.BadCursor`,
        :class:`~seasons.errors.InvalidMember` or :class:`~seasons.errors.InvalidInput`
        (limit) before any Redis call."""
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(
                f"limit must be 1-{MAX_LIMIT}, got {limit}", {"limit": limit, "max": MAX_LIMIT}
            )
        if action is not None and action not in ACTIONS:
            raise UnknownAction(
                f"unknown action {action[:64]!r}: the actions are {', '.join(ACTIONS)}",
                {"action": action[:64], "known": list(ACTIONS)},
            )
        if member is not None and (problem := member_problem(member, stored=True)) is not None:
            raise problem
        top = "+" if after is None else _cursor(after)
        if top is None:
            return AuditPage(entries=[], next=None)
        digest: str | None = None
        if member is not None:
            salt = self._salt(create=False)
            if salt is None:  # no entry has ever named a member
                return AuditPage(entries=[], next=None)
            digest = self._hash(salt, member)
        filtered = digest is not None or action is not None
        raw: list[tuple[str, dict[str, str]]] = []
        while len(raw) < limit:
            count = _SCAN if filtered else limit - len(raw)
            found = self.client.xrevrange(self.keys.audit(), top, "-", count=count) or []
            for sid, fields in found:
                if sid is None or not fields:
                    continue
                got = {text(k): text(v) for k, v in fields.items()}
                if (digest is None or got.get("member") == digest) and (
                    action is None or got.get("action") == action
                ):
                    raw.append((text(sid), got))
                    if len(raw) == limit:
                        break
            if len(found) < count:
                break
            last = found[-1][0]
            if last is None:
                break
            top = "(" + text(last)
        names = self._names({got["member"] for _, got in raw if got.get("member")})
        entries = [_entry(sid, got, names) for sid, got in raw]
        return AuditPage(entries=entries, next=entries[-1].stream_id if len(raw) == limit else None)

    def _names(self, digests: set[str]) -> dict[str, str]:
        if not digests:
            return {}
        ordered = sorted(digests)
        found = self.client.hmget(self.keys.audit_members(), ordered)
        return {d: text(m) for d, m in zip(ordered, found, strict=True) if m is not None}


def _printable(value: str, allowed: str = "") -> bool:
    """Text Redis can store as UTF-8 (no lone surrogate) without control characters but
    ``allowed``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not any((ord(c) < 32 or 127 <= ord(c) < 160) and c not in allowed for c in value)


def _cursor(after: str) -> str | None:
    """XREVRANGE's exclusive top for ``after``; None when nothing can be older (0-0)."""
    parts = [int(p) for p in after.split("-")] if STREAM_ID.fullmatch(after) else []
    if not parts or max(parts) > MAX_ID_PART:
        raise BadCursor(
            f"after must be a stream id (<ms>-<seq>, e.g. 1764621420000-0), got {after[:64]!r}",
            {"after": after[:64]},
        )
    return None if parts in ([0, 0], [0]) else "(" + after


def _entry(sid: str, got: Mapping[str, str], names: Mapping[str, str]) -> AuditEntry:
    digest = got.get("member") or None
    return AuditEntry(
        stream_id=sid, at=got.get("at", ""), actor=got.get("actor", ""),
        action=got.get("action", ""), member=names.get(digest) if digest else None,
        member_hash=digest, boards=_loads(got.get("boards"), []),
        reason=got.get("reason") or None, before=_loads(got.get("before"), None),
        after=_loads(got.get("after"), None), request_id=got.get("request_id") or None,
    )  # fmt: skip


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _loads(raw: str | None, default: Any) -> Any:
    if not raw:
        return default
    try:
        return json.loads(raw)
    except ValueError:
        return default
