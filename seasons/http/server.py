"""The HTTP protocol ``seasons serve`` gives uvicorn: httptools, with one write per response,
a bounded request head and deadlines for the head and the body.

**One write per response.** uvicorn's httptools protocol writes a response's status line and
headers as soon as the app sends ``http.response.start``, and its body on
``http.response.body``: two system calls and two TCP segments for every small JSON answer.
On a small machine a system call costs more than a fast read's Python
(``python -m bench.http_peers``, CPU columns), so :class:`HttpTools` hands uvicorn a
transport that keeps what is written during one turn of the event loop and writes it at the
end of that turn in one call. Flow control, closing and aborting go to the real transport
(a close writes what is kept first; an abort drops it, as the real transport would).

**A bounded head.** httptools gathers a header's value, and uvicorn the request target, by
joining the pieces each read brings, on the event loop and before any app code runs: one
64 MB header sent in 64 KB pieces held every other request for seconds. The protocol never
lets more than the limits' worth of an unfinished head (or of a chunked body's trailer
lines) reach the parser, and answers:

======  =============================  ==================================================
status  code                           when
======  =============================  ==================================================
414     url_too_long                   the request target over :data:`MAX_TARGET_BYTES`
                                       (shorter ones are the guard's to measure)
431     headers_too_large              one header line over :data:`MAX_HEADER_BYTES`, the
                                       header lines over :data:`MAX_HEADERS_BYTES` (a
                                       chunked body's trailer lines count with them)
501     unsupported_transfer_encoding  a ``Transfer-Encoding`` other than one ``chunked``
400     bad_request                    an absolute-form target (``POST http://h/...``)
                                       whose authority is not the ``Host`` header as sent;
                                       anything httptools cannot parse
408     request_timeout                the head not complete ``api.header_timeout`` after
                                       it began (or after the connection opened), the body
                                       not complete ``api.body_timeout`` after the head
======  =============================  ==================================================

Each is the app's JSON error (:mod:`seasons.http.errors`), and the connection is closed
after it. A connection idle from its start is closed at ``api.header_timeout`` without an
answer; one idle between requests is uvicorn's keep-alive timeout's. While the server itself
has stopped reading (a pipelined request waits, or the app has not taken the body so far)
the deadlines wait too: they time the client, not the app.
"""

from __future__ import annotations

import asyncio
import enum
from functools import partial
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from seasons.config.settings import ApiSettings
from seasons.errors import SeasonsError
from seasons.http.errors import (
    BadRequest,
    HeadersTooLarge,
    RequestTimeout,
    UnsupportedTransferEncoding,
    UrlTooLong,
    response_of,
)
from seasons.http.guard import MAX_URL_BYTES

# The request target as sent. The guard measures the decoded path (percent-encoding makes a
# byte three) plus the query against MAX_URL_BYTES, so a target over three times that is
# over its limit too; longer ones are refused here, before they are gathered.
MAX_TARGET_BYTES = 3 * MAX_URL_BYTES
# One header line (name, ": ", value, CRLF), and all of them together (Node's and nginx's
# orders of size).
MAX_HEADER_BYTES = 16 * 1024
MAX_HEADERS_BYTES = 64 * 1024
# Bytes of one unfinished head past which it can only be over a limit: the longest request
# line and header lines, and room for the method, the version and line ends.
HEAD_ROOM = MAX_TARGET_BYTES + MAX_HEADERS_BYTES + 1024


class Phase(enum.Enum):
    """Where a connection's current request is, for its deadline."""

    IDLE = "idle"  # between requests (or before the first byte)
    HEAD = "head"  # the request line and headers are arriving
    BODY = "body"  # the headers are in, the body is arriving


class _Refused(Exception):
    """Raised in a parser callback to stop the parser; the refusal is kept on the protocol."""


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


def protocol(api: ApiSettings) -> partial[HttpTools]:
    """The protocol class to give uvicorn (its ``http`` option) for these settings. A
    partial of a module's class: uvicorn pickles it to each worker process."""
    return partial(
        HttpTools,
        header_timeout=api.header_timeout.total_seconds(),
        body_timeout=api.body_timeout.total_seconds(),
    )


class HttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol on a :class:`OneWritePerTurn` transport, with the head's
    limits and the deadlines of the module's doc."""

    def __init__(
        self, *args: Any, header_timeout: float = 10.0, body_timeout: float = 30.0, **kwargs: Any
    ):
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self._phase = Phase.IDLE
        self._room = HEAD_ROOM  # bytes the parser may still take in without a callback
        self._header_bytes = 0
        self._chunked = False  # a Transfer-Encoding: chunked came
        self._deadline: asyncio.TimerHandle | None = None
        self._refusal: SeasonsError | None = None
        self._refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
        proxy = OneWritePerTurn(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        super().connection_made(proxy)  # type: ignore[arg-type]
        self._arm(self.header_timeout)  # the first request's head, or nothing: closed

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # answered and closing: the rest is not parsed
        # What the parser takes in without handing anything on (a head; a chunked body's
        # trailers, header lines after the last chunk) gets at most HEAD_ROOM bytes: what
        # is past that is not parsed, nor joined. A piece of body hands itself on (on_body).
        rest: bytes | memoryview = data
        while len(rest) > self._room:
            if self._room == 0:
                self._refuse(self._head_too_large())
                return
            fits, rest = memoryview(rest)[: self._room], memoryview(rest)[self._room :]
            self._room = 0
            if not self._feed(fits):
                return
        self._room -= len(rest)
        if self._feed(rest) and self._deadline is None and self._phase is not Phase.IDLE:
            self._arm(self.header_timeout if self._phase is Phase.HEAD else self.body_timeout)

    def _feed(self, data: bytes | memoryview) -> bool:
        """Parse ``data``; False if the connection is no longer this protocol's to read (a
        request refused, or a WebSocket upgrade)."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:  # as uvicorn's own protocol
            if self._should_upgrade():
                self._disarm()  # the connection is the WebSocket protocol's from here on
                self._refused = True
                self.handle_websocket_upgrade()
                return False
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError as exc:
            refusal, self._refusal = self._refusal, None
            if refusal is None:
                reason = "" if isinstance(exc, httptools.HttpParserCallbackError) else f": {exc}"
                refusal = BadRequest(f"the request is not HTTP/1.1 as this server reads it{reason}")
            self._refuse(refusal)
            return False
        return True

    # --- the parser's callbacks ---------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._phase = Phase.HEAD
        self._header_bytes = 0
        self._chunked = False
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self.url += url
        if len(self.url) > MAX_TARGET_BYTES:
            self._stop(
                UrlTooLong(
                    f"the request target is longer than {MAX_TARGET_BYTES} bytes",
                    {"limit": MAX_TARGET_BYTES},
                )
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        line = len(name) + len(value) + 4
        self._header_bytes += line
        if line > MAX_HEADER_BYTES or self._header_bytes > MAX_HEADERS_BYTES:
            self._stop(self._head_too_large())
        super().on_header(name, value)
        if self.headers[-1][0] == b"transfer-encoding":
            # Only chunked is undone here; a body in another coding would reach the app as
            # the coded bytes.
            if self._chunked or value.strip().lower() != b"chunked":
                coding = value.decode("latin-1")[:100]
                self._stop(
                    UnsupportedTransferEncoding(
                        "the only Transfer-Encoding this server takes is one 'chunked' "
                        f"(got {coding!r}); send the body as it is, or chunked",
                        {"transfer_encoding": coding},
                    )
                )
            self._chunked = True

    def on_headers_complete(self) -> None:
        self._disarm()
        if self.url[:1] != b"/":
            self._check_authority()
        super().on_headers_complete()
        self._phase = Phase.BODY  # self.cycle is this request's from here on

    def on_body(self, body: bytes) -> None:
        self._room = HEAD_ROOM
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._phase = Phase.IDLE
        self._room = HEAD_ROOM
        self._disarm()
        super().on_message_complete()

    def _check_authority(self) -> None:
        """An absolute-form target (``http://host/path``, RFC 9112 3.2.2) names the host the
        request is for, in place of ``Host``: the access rules read ``Host``
        (:mod:`seasons.http.auth`), so the two must be the same."""
        scheme, sep, rest = self.url.partition(b"://")
        if not sep:
            return  # "*" or an authority-form: uvicorn's parsing refuses them
        authority = rest
        for end in (b"/", b"?", b"#"):
            authority = authority.partition(end)[0]
        hosts = [value.strip().lower() for name, value in self.headers if name == b"host"]
        if scheme.lower() in (b"http", b"https") and hosts == [authority.lower()]:
            return
        named = authority.decode("latin-1")[:100]
        host = b", ".join(hosts).decode("latin-1")[:100]
        self._stop(
            BadRequest(
                f"the request line names {named!r} but Host is {host!r}: a request target "
                "of the form http://host/path must name the host of its Host header",
                {"reason": "absolute_form", "target_host": named, "host": host},
            )
        )

    def _stop(self, refusal: SeasonsError) -> None:
        self._refusal = refusal
        raise _Refused(refusal.message)

    # --- refusals and deadlines -----------------------------------------------------------------

    def _head_too_large(self) -> HeadersTooLarge:
        return HeadersTooLarge(
            f"the request headers are too large: at most {MAX_HEADER_BYTES} bytes a header "
            f"line and {MAX_HEADERS_BYTES} bytes in all",
            {"header_limit": MAX_HEADER_BYTES, "limit": MAX_HEADERS_BYTES},
        )

    def _refuse(self, refusal: SeasonsError | None) -> None:
        """Answer ``refusal`` (None: none) and close; nothing more of the connection is read.
        No answer if the app has answered the request already; none either while an earlier
        (pipelined) request's answer is under way: the connection closes after that one."""
        self._refused = True
        self._disarm()
        if refusal is not None:
            self.logger.warning("refused a request: %s", refusal.message)
        cycle = self.cycle
        if self._phase is Phase.BODY:
            if cycle.response_started:
                refusal = None  # the app has answered this request already
        elif cycle is not None and not cycle.response_complete:
            cycle.keep_alive = False  # an earlier request's answer: closed after it
            return
        if refusal is not None:
            self.transport.write(self._answer(refusal))
        self.transport.close()

    def _answer(self, refusal: SeasonsError) -> bytes:
        """``refusal`` as the app would answer it (the one JSON error shape), as bytes."""
        response = response_of(refusal)
        lines = [STATUS_LINE[response.status_code]]
        for name, value in [*self.server_state.default_headers, *response.raw_headers]:
            lines += [name, b": ", value, b"\r\n"]
        lines += [b"connection: close\r\n\r\n", bytes(response.body)]
        return b"".join(lines)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._late)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _late(self) -> None:
        """The deadline of the head, or of the body, has come."""
        self._deadline = None
        if self.transport.is_closing():
            return
        phase = self._phase
        if self.flow.read_paused:  # the server is not reading: not the client's delay
            self._arm(self.header_timeout if phase is not Phase.BODY else self.body_timeout)
            return
        if phase is Phase.IDLE:
            self._refuse(None)  # nothing sent since the connection opened
            return
        setting, seconds = (
            ("api.header_timeout", self.header_timeout) if phase is Phase.HEAD
            else ("api.body_timeout", self.body_timeout)
        )  # fmt: skip
        self._refuse(
            RequestTimeout(
                f"the request's {phase.value} did not all arrive within {setting} ({seconds:g} s)",
                {"setting": setting, "seconds": seconds},
            )
        )
