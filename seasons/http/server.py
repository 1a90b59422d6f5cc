"""The HTTP protocol ``seasons serve`` gives uvicorn: httptools, with one write per response.

uvicorn's httptools protocol writes a response's status line and headers as soon as the app
sends ``http.response.start``, and its body on ``http.response.body``: two system calls and
two TCP segments for every small JSON answer. On a small machine a system call costs more
than a fast read's Python (``python -m bench.http_peers``, CPU columns), so
:class:`HttpTools` hands uvicorn a transport that keeps what is written during one turn of
the event loop and writes it at the end of that turn in one call. Nothing else changes:
flow control, closing and aborting go to the real transport (a close writes what is kept
first; an abort drops it, as the real transport would).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class OneWritePerTurn:
    """A transport proxy: the writes of one event-loop turn go out as one ``writelines``."""

    __slots__ = ("_transport", "_kept", "_loop")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._kept: list[bytes] = []
        self._loop = loop

    def write(self, data: bytes) -> None:
        if not self._kept:
            self._loop.call_soon(self._flush)
        self._kept.append(data)

    def writelines(self, data: Any) -> None:
        for chunk in data:
            self.write(chunk)

    def _flush(self) -> None:
        kept, self._kept = self._kept, []
        if kept and not self._transport.is_closing():
            self._transport.writelines(kept)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._kept = []
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # get_extra_info, pause_reading, is_closing...
        return getattr(self._transport, name)


class HttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol on a :class:`OneWritePerTurn` transport."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        proxy = OneWritePerTurn(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        super().connection_made(proxy)  # type: ignore[arg-type]
