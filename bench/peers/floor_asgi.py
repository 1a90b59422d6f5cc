"""The floor of the Python HTTP stack, for ``bench.http_peers``: a one-route ASGI app that
answers ``GET /healthz`` with the body Seasons sends, served by uvicorn as ``seasons serve``
serves (httptools, uvloop, no access log, no server header). No framework, no middleware, no
Redis: what any Python ASGI service pays per request before its own work.

Run: ``python -m uvicorn bench.peers.floor_asgi:app --http httptools --loop uvloop``.
"""

from __future__ import annotations

from typing import Any

_HEAD = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", b"15")],
}
_BODY = {"type": "http.response.body", "body": b'{"status":"ok"}'}
_NOT_FOUND = {"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]}


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    if scope["path"] == "/healthz":
        await send(_HEAD)
        await send(_BODY)
    else:
        await send(_NOT_FOUND)
        await send({"type": "http.response.body", "body": b""})
