"""What the server's access log shows of a query string: no value Seasons does not take.

uvicorn writes its access log line (``"GET /path?query HTTP/1.1" 404``) from the scope it
handed to the app, whatever the app answered: a client that sends its token in the query
(``?token=...``, on any path, a 404 or a 405 as well) would have it written to the log. The
outermost layer of the app, :class:`SafeQuery`, replaces the value of every query parameter
that no route of Seasons takes with ``<redacted>`` (:func:`seasons.redact.mask_query`) in the
server's scope, and hands the app a copy that keeps the query as sent. The parameters the
routes take (``period``, ``limit``, ...) carry no secret: their values stay in the log. A URL
over the guard's limit (a 414) is logged without its query, as the guard refuses it unread.

A query of the routes' parameters only, the common case, costs a split and a set lookup per
part; the scope is copied only when something is hidden.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from seasons.http.guard import MAX_URL_BYTES, Rules
from seasons.redact import mask_query


class SafeQuery:
    """The ASGI layer (see the module's doc). Add it outside every other layer, so that the
    scope the server logs from is never the one the app reads."""

    def __init__(self, app: ASGIApp, rules: Rules):
        self.app = app
        self.names = frozenset(name for rule in rules.all for name in rule.names)
        # The names as sent, when they need no percent-decoding: the fast check.
        self._plain = frozenset(
            n.encode() for n in self.names if n.isascii() and "%" not in n and "+" not in n
        )

    def shown(self, path: str, query: bytes) -> bytes:
        """``query`` as the access log may show it (``query`` itself if nothing is hidden)."""
        if len(path) + len(query) > MAX_URL_BYTES:
            return b""
        for part in query.split(b"&"):
            if part and part.partition(b"=")[0] not in self._plain:
                break
        else:
            return query
        return mask_query(query.decode("latin-1"), self.names).encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (query := scope["query_string"]):
            shown = self.shown(scope["path"], query)
            if shown is not query:
                inner = dict(scope)  # the app reads the query as sent
                scope["query_string"] = shown  # the server logs this one
                await self.app(inner, receive, send)
                return
        await self.app(scope, receive, send)
