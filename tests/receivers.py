"""Webhook receivers that misbehave on the wire, for tests/test_hooks.py and bench/hooks.py.

:class:`Raw` is a thread-per-connection HTTP receiver on a bare socket: it reads each request
whole (headers and ``Content-Length`` body), then an *answer* writes whatever bytes it likes,
as no HTTP server library would: an endless body (:func:`endless`), an answer dripped a byte
at a time (:func:`drip`), or a plain 200 (:func:`ok`). Every answer says ``Connection: close``
(or never ends), so one connection carries one request. It records, per connection, when the
request came, when the connection ended (the client closed it, or the answer was done) and
the bytes written to it: what the client made the receiver send, measured where it was sent.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CHUNK = 64 * 1024
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
ENDLESS_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
)


@dataclass
class Exchange:
    """One connection's request and what was written back."""

    request: bytes  # the body
    came: float  # time.monotonic() when the request was read whole
    sent: int = 0  # bytes written back
    ended: float | None = None  # time.monotonic() when the client closed it or the answer ended
    done: threading.Event = field(default_factory=threading.Event)


# An answer: writes to the connection, adding what it wrote to ``exchange.sent``, and returns
# when the client closed the connection or it is done.
Answer = Callable[[socket.socket, Exchange], None]


def ok(conn: socket.socket, exchange: Exchange) -> None:
    conn.sendall(OK)
    exchange.sent += len(OK)


def endless(limit: int) -> Answer:
    """A 200 whose body (no length: until the connection closes) never ends, up to ``limit``
    bytes (a bound for a client that reads it all, which would otherwise never stop)."""

    def answer(conn: socket.socket, exchange: Exchange) -> None:
        conn.sendall(ENDLESS_HEAD)
        exchange.sent += len(ENDLESS_HEAD)
        chunk = b"x" * CHUNK
        while exchange.sent < limit:
            try:
                conn.sendall(chunk)
            except OSError:  # the client closed it
                return
            exchange.sent += len(chunk)

    return answer


def drip(text: bytes, *, head: bytes = b"", every: float = 1.0, limit: float = 20.0) -> Answer:
    """Write ``head`` at once, then ``text`` one byte every ``every`` seconds (then hold the
    connection open) for up to ``limit`` seconds; end as soon as the client closes it."""

    def answer(conn: socket.socket, exchange: Exchange) -> None:
        conn.sendall(head)
        exchange.sent += len(head)
        ends = time.monotonic() + limit
        at = 0
        while time.monotonic() < ends:
            readable, _, _ = select.select([conn], [], [], every)
            if readable and not conn.recv(CHUNK):  # the client closed it
                return
            if at < len(text):
                try:
                    conn.sendall(text[at : at + 1])
                except OSError:
                    return
                at += 1
                exchange.sent += 1

    return answer


class Raw:
    """The receiver: ``answers(n)`` is the answer to the n-th connection (from 0)."""

    def __init__(self, answers: Callable[[int], Answer]):
        self.answers = answers
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            with self.lock:
                self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                body = _read_request(conn)
            except OSError:
                return
            if body is None:
                return
            with self.lock:
                n = len(self.exchanges)
                exchange = Exchange(body, time.monotonic())
                self.exchanges.append(exchange)
            try:
                self.answers(n)(conn, exchange)
            except OSError:
                pass
            finally:
                exchange.ended = time.monotonic()
                exchange.done.set()

    def close(self) -> None:
        self.sock.close()
        with self.lock:
            for conn in self.conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


def _read_request(conn: socket.socket) -> bytes | None:
    """The body of the request on ``conn``, or None if it closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = conn.recv(CHUNK)
        if not got:
            return None
        data += got
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        got = conn.recv(CHUNK)
        if not got:
            return None
        body += got
    return body
