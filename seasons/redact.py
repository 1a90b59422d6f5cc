"""What may be shown of a URL or a query string: the secrets they may carry are replaced.

Settings hold secrets inside URLs (a password in ``redis.url``, its ``?password=``; a token in
a hook's query string), and a client may send one in a request's query (``?token=...``). One
rule for every URL Seasons prints or logs (``seasons config``, CLI errors, logs):

- the userinfo's password is replaced by :data:`REDACTED`, its user name kept
  (``redis://app:<redacted>@host``: an ACL user names, it does not open); a userinfo without
  a ``:`` is replaced whole (``https://<redacted>@host``: it may be a token used as a name);
- every query value is replaced, its name kept (``?password=<redacted>``); a part without
  ``=`` is replaced whole;
- a fragment is replaced whole;
- the scheme, host, port and path are kept: they say where, not how to get in. A secret in a
  path (``/hooks/<token>``) cannot be told from a name and is shown: use the query, or the
  hook's ``secret``.

The access log of ``seasons serve`` applies the query rule too, keeping the values of the
query parameters Seasons itself takes (:mod:`seasons.http.access_log`).
"""

from __future__ import annotations

from collections.abc import Container
from urllib.parse import unquote_plus, urlsplit, urlunsplit

REDACTED = "<redacted>"


def mask_query(query: str, keep: Container[str] = ()) -> str:
    """``query`` (without its ``?``) with the value of every parameter not named in ``keep``
    (names as decoded) replaced by :data:`REDACTED`, and every part without ``=`` whose name
    is not in ``keep`` replaced whole."""
    parts = []
    for part in query.split("&"):
        name, eq, _ = part.partition("=")
        if not part or unquote_plus(name) in keep:
            parts.append(part)
        else:
            parts.append(f"{name}={REDACTED}" if eq else REDACTED)
    return "&".join(parts)


def mask_url(url: str) -> str:
    """``url`` as it may be printed or logged (the module's rule). Never raises: a text that
    is not a URL is shown as :data:`REDACTED`."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed [ of an IPv6 address
        return REDACTED
    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}:{REDACTED}@{hostport}" if colon else f"{REDACTED}@{hostport}"
    query = mask_query(parts.query) if parts.query else ""
    fragment = REDACTED if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
