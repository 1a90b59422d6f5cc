"""Who may write and administer: bearer tokens, or a direct local client when none is set.

Reads need no token. A write (``POST /v1/scores``) takes ``api.write_token`` or an admin
token; an admin call takes an admin token: ``api.admin_token`` (named ``admin``) or one of
``api.admin_tokens`` (each with its name). The name of the token that authorised an admin
call is its actor in the audit trail (:mod:`seasons.audit`); a write token is never an
admin's (the settings refuse one equal to an admin token). Tokens are compared with
:func:`secrets.compare_digest`, are read from the ``Authorization: Bearer`` header only (never
the query string) and never appear in a response or a log line.

With the operation's tokens left empty (for admin calls: ``api.admin_token`` and
``api.admin_tokens`` both), the call is accepted only from a client that is provably on this
host and talking to it directly (its actor is then ``local``):

* the peer address (the TCP connection's, from the ASGI scope) is ``127.0.0.1``, ``::1`` or
  ``::ffff:127.0.0.1``; not the rest of 127.0.0.0/8, where a reverse proxy may listen;
* the request carries no forwarding header at all (:data:`FORWARDING`): a proxy that sets
  them, or an ASGI server that rewrote the peer address from them (uvicorn with
  ``--proxy-headers`` and ``FORWARDED_ALLOW_IPS=*``), is never taken for loopback;
* the peer is not one of ``api.trusted_proxies`` (a request through a proxy needs a token);
* ``Host`` is ``localhost``, ``127.0.0.1`` or ``[::1]`` with any port, so a web page that
  reaches the port through DNS rebinding (``Host: evil.example``) is refused;
* an ``Origin`` header, if any, is this same host, and ``Sec-Fetch-Site``, if any, is
  ``same-origin`` or ``none``: a page of another site open in a local browser can send a
  simple cross-site POST without a CORS preflight, and browsers mark it with these.

The checks read headers only, so :mod:`seasons.http.guard` runs them before the body is read.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from typing import Any, Literal

from seasons.config.settings import ADMIN_TOKEN_NAME, ApiSettings
from seasons.http.errors import Forbidden, Unauthorized

Level = Literal["write", "admin"]
LOCAL = "local"  # the actor of a call accepted from loopback without a token
WRITER = "write"  # the actor of a call authorised by api.write_token

# Request headers by which a proxy (or a client pretending to be one) names another client.
# X-Forwarded-* are matched by prefix (For, Host, Proto, Port, Prefix, Server, ...).
FORWARDING = frozenset(
    {b"forwarded", b"x-real-ip", b"x-client-ip", b"true-client-ip", b"cf-connecting-ip", b"via"}
)
FORWARDED_PREFIX = b"x-forwarded-"
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
_LOOPBACK_PEERS = (IPv4Address("127.0.0.1"), IPv6Address("::1"))
# A same-origin fetch() and a typed URL; "same-site" is another origin (another port too).
_LOCAL_FETCH_SITES = frozenset({b"same-origin", b"none"})
# Content-Encoding values that leave a body as sent.
_NO_CODING = frozenset({b"", b"identity"})
# Longest header text quoted back in a message.
_QUOTE = 100


@dataclass
class Head:
    """The request headers the access rules and the body limits read, gathered in one pass
    over the ASGI header list."""

    authorization: bytes | None = None
    host: bytes | None = None
    hosts: int = 0
    origin: bytes | None = None
    fetch_site: bytes | None = None
    content_type: bytes | None = None
    content_length: bytes | None = None
    # A Content-Encoding other than identity (the last such one), which no route decodes.
    content_encoding: bytes | None = None
    forwarding: list[tuple[bytes, bytes]] = field(default_factory=list)

    @classmethod
    def of(cls, scope: MutableMapping[str, Any]) -> Head:
        head = cls()
        for name, value in scope["headers"]:
            if name == b"authorization":
                head.authorization = value if head.authorization is None else head.authorization
            elif name == b"host":
                head.host, head.hosts = value, head.hosts + 1
            elif name == b"content-type":
                head.content_type = value
            elif name == b"content-length":
                head.content_length = value
            elif name == b"content-encoding" and value.strip().lower() not in _NO_CODING:
                head.content_encoding = value
            elif name == b"origin":
                head.origin = value
            elif name == b"sec-fetch-site":
                head.fetch_site = value
            elif name in FORWARDING or name.startswith(FORWARDED_PREFIX):
                head.forwarding.append((name, value))
        return head


def bearer(value: bytes | None) -> bytes | None:
    """The token of an ``Authorization: Bearer <token>`` header value, or None."""
    if value is None:
        return None
    scheme, _, token = value.partition(b" ")
    token = token.strip()
    return token if scheme.lower() == b"bearer" and token else None


def parse_address(text: str) -> IPv4Address | IPv6Address | None:
    """An IP address (IPv4-mapped IPv6 as IPv4, zone id dropped), or None if ``text`` is not one."""
    try:
        addr: IPv4Address | IPv6Address = ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def is_loopback_peer(host: str | None) -> bool:
    """True for exactly 127.0.0.1, ::1 and ``::ffff:127.0.0.1``; not the rest of 127/8."""
    return host is not None and parse_address(host) in _LOOPBACK_PEERS


def is_local_host(value: bytes | None) -> bool:
    """True for a ``Host`` of ``localhost``, ``127.0.0.1`` or ``[::1]``, with or without a port."""
    if value is None:
        return False
    text = value.decode("latin-1").lower()
    if text.startswith("["):
        end = text.find("]") + 1
        name, rest = text[:end], text[end:]
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
    if rest and not (rest[0] == ":" and rest[1:].isdigit() and rest[1:].isascii()):
        return False
    return name in LOCAL_HOSTS


class Proxies:
    """``api.trusted_proxies``: the peers whose forwarding headers name the client."""

    def __init__(self, networks: Iterable[str]):
        self.networks: tuple[IPv4Network | IPv6Network, ...] = tuple(
            ip_network(n, strict=False) for n in networks
        )

    def trusts(self, host: str | None) -> bool:
        if not self.networks or host is None:
            return False
        addr = parse_address(host)
        return addr is not None and any(addr in net for net in self.networks)

    def client(self, peer: str | None, head: Head) -> str | None:
        """The client a trusted proxy names: the rightmost ``X-Forwarded-For`` address that is
        not itself a trusted proxy (else the ``Forwarded: for=`` one, by the same rule); the
        peer itself when it is not a trusted proxy or names no one."""
        if not self.trusts(peer):
            return peer
        for header, split in ((b"x-forwarded-for", _xff), (b"forwarded", _forwarded_for)):
            hops = [h for name, value in head.forwarding if name == header for h in split(value)]
            if not hops:
                continue
            for hop in reversed(hops):
                if not self.trusts(hop):
                    return hop
            return hops[0]
        return peer


def _xff(value: bytes) -> list[str]:
    return [hop.strip() for hop in value.decode("latin-1").split(",") if hop.strip()]


def _forwarded_for(value: bytes) -> list[str]:
    """The ``for=`` nodes of a ``Forwarded`` header (RFC 7239), ports and brackets removed."""
    hops = []
    for element in value.decode("latin-1").split(","):
        for pair in element.split(";"):
            key, _, node = pair.strip().partition("=")
            if key.lower() != "for":
                continue
            node = node.strip().strip('"')
            if node.startswith("["):
                node = node[1 : node.find("]")] if "]" in node else node[1:]
            elif node.count(":") == 1:
                node = node.partition(":")[0]
            hops.append(node)
    return hops


class Gate:
    """The access rules of one app, built once from its settings (see the module's doc)."""

    def __init__(self, api: ApiSettings):
        self._write = api.write_token.encode()
        # (actor name, token) of every admin token; api.admin_token's name is "admin".
        self._admins = tuple(
            (name, token.encode())
            for name, token in (
                (ADMIN_TOKEN_NAME, api.admin_token),
                *((t.name, t.token) for t in api.admin_tokens),
            )
            if token
        )
        self.proxies = Proxies(api.trusted_proxies)

    def check(self, level: Level, head: Head, peer: str | None) -> str:
        """Let the call through, answering its actor (the admin token's name, ``write`` for
        the write token, ``local`` for a loopback client without one), or raise
        :class:`Unauthorized` (401) / :class:`Forbidden` (403)."""
        given = bearer(head.authorization)
        if given is not None:
            if level == "write" and self._write and secrets.compare_digest(given, self._write):
                return WRITER
            for name, token in self._admins:
                if secrets.compare_digest(given, token):
                    return name
        if not (self._write if level == "write" else self._admins):
            self._local_only(level, head, peer)
            return LOCAL
        if given is None:
            raise Unauthorized(f"{level} calls need an 'Authorization: Bearer <token>' header")
        raise Unauthorized(f"the bearer token is not valid for {level} calls")

    def _local_only(self, level: Level, head: Head, peer: str | None) -> None:
        setting = f"api.{level}_token"
        without = f"{level} calls without {setting} configured"
        if self.proxies.trusts(peer):
            client = self.proxies.client(peer, head)
            raise Forbidden(
                f"{without} are refused through a proxy (client {client}); configure "
                f"{setting} and send it as a bearer token",
                {"setting": setting, "reason": "proxy", "client": client},
            )
        if head.forwarding:
            names = sorted({name.decode("latin-1") for name, _ in head.forwarding})
            raise Forbidden(
                f"{without} are accepted only from a direct local client; this one carries "
                f"proxy headers ({', '.join(names)[:_QUOTE]})",
                {"setting": setting, "reason": "proxy_headers", "headers": names[:10]},
            )
        if not is_loopback_peer(peer):
            raise Forbidden(
                f"{level} calls from remote clients need {setting} to be configured; "
                "without it they are accepted from loopback (127.0.0.1, ::1) only",
                {"setting": setting, "reason": "remote"},
            )
        if head.hosts != 1 or not is_local_host(head.host):
            host = (head.host or b"").decode("latin-1")[:_QUOTE]
            raise Forbidden(
                f"{without} need a Host of localhost, 127.0.0.1 or [::1] (got {host!r})",
                {"setting": setting, "reason": "host"},
            )
        if head.origin is not None and not _same_origin(head.origin, head.host):
            raise Forbidden(
                f"{without} are refused from a web page of another origin "
                f"({head.origin.decode('latin-1')[:_QUOTE]!r})",
                {"setting": setting, "reason": "origin"},
            )
        if head.fetch_site is not None and head.fetch_site.lower() not in _LOCAL_FETCH_SITES:
            raise Forbidden(
                f"{without} are refused from a web page of another site (Sec-Fetch-Site: "
                f"{head.fetch_site.decode('latin-1')[:_QUOTE]})",
                {"setting": setting, "reason": "origin"},
            )


def _same_origin(origin: bytes, host: bytes | None) -> bool:
    """True if ``Origin`` is this server as the client addressed it (``http(s)://<Host>``)."""
    if host is None:
        return False
    scheme, sep, rest = origin.lower().partition(b"://")
    return bool(sep) and scheme in (b"http", b"https") and rest == host.lower()
