"""Bearer tokens for writes and admin; loopback-only when no token is configured.

Reads need no token. A write (``POST /v1/scores``) takes ``api.write_token`` or
``api.admin_token``; an admin call takes ``api.admin_token``. With the operation's token left
empty, only loopback clients (127.0.0.0/8, ::1) may call it. Tokens are compared with
:func:`secrets.compare_digest` and never appear in a response or a log line.

The client address is what the ASGI server reports. Behind a reverse proxy on the same host,
run uvicorn with ``--proxy-headers`` (its default for 127.0.0.1) so that the proxy's
``X-Forwarded-For`` names the real client; otherwise every client looks like loopback.
"""

from __future__ import annotations

import secrets
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Literal

from fastapi import Request

from config.settings import ApiSettings
from seasons.http.errors import Forbidden, Unauthorized

Level = Literal["write", "admin"]


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped loopback (``::ffff:127.0.0.1``)."""
    if not host:
        return False
    try:
        addr: IPv4Address | IPv6Address = ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(addr, IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def bearer(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _matches(given: str, token: str) -> bool:
    return bool(token) and secrets.compare_digest(given.encode(), token.encode())


def authorize(request: Request, api: ApiSettings, level: Level) -> None:
    """Let the request through, or raise :class:`Unauthorized` (401) / :class:`Forbidden` (403)."""
    own = api.write_token if level == "write" else api.admin_token
    accepted = [own, api.admin_token] if level == "write" else [own]
    given = bearer(request)
    if given is not None and any(_matches(given, t) for t in accepted):
        return
    if not own:
        client = request.client.host if request.client else None
        if is_loopback(client):
            return
        setting = f"api.{level}_token"
        raise Forbidden(
            f"{level} calls from remote clients need {setting} to be configured; "
            "without it they are accepted from loopback only",
            {"setting": setting},
        )
    if given is None:
        raise Unauthorized(f"{level} calls need an 'Authorization: Bearer <token>' header")
    raise Unauthorized(f"the bearer token is not valid for {level} calls")
