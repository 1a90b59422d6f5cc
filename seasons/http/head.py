"""HEAD answered as GET without its body (RFC 9110, 9.3.2), on every route that answers GET.

FastAPI's routes take only the methods they declare, so a ``HEAD`` got 405, ``/healthz``
included. This layer hands what is inside it (the guard, the fast reads, the routes) a
``HEAD`` as a ``GET``, so it is checked, routed and answered exactly as the ``GET`` would
be. The server writes no body for ``HEAD``, deciding by the scope's method as each message is
sent: around the sends the method reads ``HEAD`` again, so the answer has the ``GET``'s status
and headers (its ``Content-Length`` too) and no body. The request metrics, outside this
layer, and the access log count it as ``HEAD``.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """The ASGI layer (see the module's doc). Add it outside the guard, inside the metrics."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_as_head(message: Message) -> None:
            # The scope itself, not a copy, is handed on: the layers outside read what those
            # inside write in it (the route a request took, for the metrics).
            scope["method"] = "HEAD"
            try:
                await send(message)
            finally:
                scope["method"] = "GET"

        scope["method"] = "GET"
        try:
            await self.app(scope, receive, send_as_head)
        finally:
            scope["method"] = "HEAD"
