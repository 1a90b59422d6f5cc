"""The HTTP protocol of ``seasons serve`` (seasons.http.server) under hostile clients, and HEAD.

One real ``seasons serve`` process for the module (empty tokens: writes from local clients
only; ``api.header_timeout`` and ``api.body_timeout`` of 2 s), spoken to over raw sockets:

- a head of several MB sent in pieces gets 431 (the JSON error, connection closed) while
  another connection's ``GET /healthz`` is answered meanwhile; a header line over 16 KiB, or
  header lines over 64 KiB in all, get 431 too, and so does a chunked body's trailer of MBs;
- a client that dribbles its headers, or its body, gets 408 and is closed; one that sends
  nothing is closed; others are answered meanwhile;
- URLs of 9 KiB, 70 KiB and 1 MiB all get the JSON 414;
- ``HEAD`` on ``/healthz`` and on a board read: the GET's status and headers, no body;
- ``Transfer-Encoding: gzip, chunked`` gets 501, a ``Content-Encoding`` 415, nothing written;
- an absolute-form request line naming another host than ``Host`` gets 400, nothing written;
  one naming the same host is served;
- what httptools cannot parse gets the JSON 400, not uvicorn's plain text.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from redis_server import RedisServer, free_port
from test_redis_safety import Process

KiB = 1024
MB = 1024 * 1024
TIMEOUT = 2.0  # api.header_timeout and api.body_timeout of the module's server
# Every wait here: far past the 2 s deadlines, for a loaded machine; a server without them
# never answers, and the test fails at this bound.
PATIENCE = 15.0
LOOKUP = "/v1/boards/kills/day/lookup"
ERROR_KEYS = {"error", "message", "details"}


@pytest.fixture(scope="module")
def port(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """``seasons serve`` on the session's Redis, with 2 s deadlines; its port."""
    directory = tmp_path_factory.mktemp("protocol")
    config = directory / "seasons.toml"
    config.write_text(
        f'namespace = "protocol"\n[redis]\nurl = "{redis_server.url}"\n'
        f'[boards.kills]\n[archive]\ndir = "{directory / "archive"}"\n'
        f'[api]\nheader_timeout = "PT{TIMEOUT:g}S"\nbody_timeout = "PT{TIMEOUT:g}S"\n'
    )
    number = free_port()
    proc = Process(Path(config), "--port", str(number))
    try:
        proc.wait_for("serving")
        for _ in range(int(PATIENCE / 0.05)):  # a server that never answers fails here
            with contextlib.suppress(OSError):
                if ask(number, get("/healthz")).status == 200:
                    break
            time.sleep(0.05)
        else:
            pytest.fail(f"seasons serve never answered /healthz:\n{proc.output}")
        yield number
    finally:
        proc.close()


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    rest: bytes  # what came after the response (the next one, pipelined)
    closed: bool  # the server closed the connection after it

    def error(self, status: int, code: str) -> dict[str, Any]:
        assert self.status == status, (self.status, self.body[:300])
        assert self.headers["content-type"] == "application/json", self.headers
        found: dict[str, Any] = json.loads(self.body)
        assert set(found) == ERROR_KEYS and found["error"] == code, found
        return found


def parse(data: bytes, *, head_only: bool = False, closed: bool = False) -> Reply:
    head, sep, rest = data.partition(b"\r\n\r\n")
    assert sep, data[:300]
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = 0 if head_only else int(headers.get("content-length", 0))
    return Reply(int(lines[0].split(" ")[1]), headers, rest[:length], rest[length:], closed)


def get(path: str, *extra: str, method: str = "GET") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(extra) + "\r\n").encode()


def post(path: str, body: bytes, *extra: str, target: str | None = None) -> bytes:
    head = f"POST {target or path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(extra)
    if not any(h.lower().startswith("transfer-encoding") for h in extra):
        head += f"Content-Length: {len(body)}\r\n"
    return (head + "Content-Type: application/json\r\n\r\n").encode() + body


def read(sock: socket.socket, *, until_closed: bool = False, head_only: bool = False) -> Reply:
    """One response from ``sock`` (and, with ``until_closed``, everything until it closes)."""
    data = b""
    while True:
        if not until_closed and b"\r\n\r\n" in data:
            reply = parse(data, head_only=head_only)
            if len(reply.body) == int(reply.headers.get("content-length", 0)) or head_only:
                return reply
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return parse(data, head_only=head_only, closed=True)
        data += chunk


def ask(port: int, raw: bytes, **how: Any) -> Reply:
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(raw)
        return read(sock, **how)


def closed_after(sock: socket.socket) -> bool:
    """True if the server closes ``sock`` (nothing more comes) within PATIENCE."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@dataclass
class Sender:
    done: threading.Event  # set when the sender stopped: all sent, or the server closed
    all_sent: bool = False


@contextlib.contextmanager
def sending(sock: socket.socket, pieces: Iterator[bytes]) -> Iterator[Sender]:
    """Send ``pieces`` on ``sock`` from a thread, so that an early answer is read as it
    comes."""
    sender = Sender(threading.Event())

    def run() -> None:
        with contextlib.suppress(OSError):
            for piece in pieces:
                sock.sendall(piece)
            sender.all_sent = True
        sender.done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield sender
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        thread.join(timeout=PATIENCE)


def big_header(size: int, path: str = "/healthz") -> Iterator[bytes]:
    yield f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ".encode()
    piece = b"a" * (64 * KiB)
    for _ in range(size // len(piece)):
        yield piece
    yield b"\r\n\r\n"


# --- a bounded head ------------------------------------------------------------------------------


def test_a_header_of_several_mb_gets_431_and_others_are_answered_meanwhile(port: int) -> None:
    pieces = big_header(8 * MB)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as probe,
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as big,
    ):
        big.sendall(next(pieces) + next(pieces))  # 64 KiB of the header: not refused yet
        # Answered while the big head is unfinished on its open connection.
        probe.sendall(get("/healthz"))
        assert read(probe).status == 200
        with sending(big, pieces) as sender:  # the other 8 MB
            while not sender.done.is_set():
                probe.sendall(get("/healthz"))
                assert read(probe).status == 200
            reply = read(big, until_closed=True)
        body = reply.error(431, "headers_too_large")
        assert body["details"] == {"header_limit": 16 * KiB, "limit": 64 * KiB}
        assert reply.closed and reply.headers["connection"] == "close"
        probe.sendall(get("/healthz"))
        assert read(probe).status == 200


def test_a_chunked_body_with_a_trailer_of_several_mb_gets_431(port: int) -> None:
    body = b'{"members": ["p001"]}'
    head = post(LOOKUP, b"", "Transfer-Encoding: chunked\r\n")
    start = head + b"%x\r\n%s\r\n0\r\nX-Trailer: " % (len(body), body)
    piece = b"t" * (64 * KiB)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as probe,
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as big,
    ):
        big.sendall(start + piece)
        probe.sendall(get("/healthz"))
        assert read(probe).status == 200
        # 32 MB more: refused and closed long before (more than the sockets' buffers).
        with sending(big, iter([piece] * 512 + [b"\r\n\r\n"])) as sender:
            reply = read(big, until_closed=True)
            sender.done.wait(PATIENCE)
    reply.error(431, "headers_too_large")
    assert reply.closed and sender.done.is_set() and not sender.all_sent


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_of_mbs_reaches_the_route_whole(port: int, chunked: bool) -> None:
    body = json.dumps({"members": ["p001"] * 300_000}).encode()  # 2.4 MB
    assert len(body) > 2 * MB
    if chunked:
        pieces = [body[i : i + 100_000] for i in range(0, len(body), 100_000)]
        framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        raw = post(LOOKUP, framed, "Transfer-Encoding: chunked\r\n")
    else:
        raw = post(LOOKUP, body)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock,
        sending(sock, iter([raw[i : i + 256 * KiB] for i in range(0, len(raw), 256 * KiB)])),
    ):
        reply = read(sock)
    # The route read all of it: its own limit on the members asked.
    assert reply.error(422, "limit_exceeded")["details"]["limit"] == 1000


@pytest.mark.parametrize(
    "headers",
    [
        [f"X-Long: {'b' * (16 * KiB)}\r\n"],  # one line over 16 KiB
        [f"X-Many-{i}: {'c' * (10 * KiB)}\r\n" for i in range(7)],  # 70 KiB in lines of 10
    ],
    ids=["one-line", "all-lines"],
)
def test_header_lines_over_the_limits_get_431(port: int, headers: list[str]) -> None:
    reply = ask(port, get("/healthz", *headers), until_closed=True)
    reply.error(431, "headers_too_large")
    assert reply.closed


def test_header_lines_within_the_limits_are_served(port: int) -> None:
    headers = [f"X-Many-{i}: {'c' * (10 * KiB)}\r\n" for i in range(4)]  # 40 KiB
    headers.append(f"X-Long: {'b' * (16 * KiB - 10)}\r\n")  # a line of 16 KiB exactly
    assert ask(port, get("/healthz", *headers)).status == 200


def test_a_refused_head_behind_a_pipelined_request_lets_its_answer_out_first(port: int) -> None:
    # Both in one packet: the first request's answer is not written yet when the second's
    # head is refused; the first is answered whole, then the connection is closed.
    raw = get("/healthz") + get("/healthz", f"X-Long: {'b' * (20 * KiB)}\r\n")
    reply = ask(port, raw, until_closed=True)
    assert reply.status == 200 and json.loads(reply.body) == {"status": "ok"}
    assert reply.rest == b"" and reply.closed


@pytest.mark.parametrize("size", [9 * KiB, 70 * KiB, MB], ids=["9KiB", "70KiB", "1MiB"])
def test_urls_past_the_limit_get_the_json_414_at_every_length(port: int, size: int) -> None:
    path = "/v1/boards/kills/day/members/" + "m" * size
    with (
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock,
        sending(sock, iter([get(path)[i : i + 64 * KiB] for i in range(0, size + 100, 64 * KiB)])),
    ):
        reply = read(sock)
    reply.error(414, "url_too_long")


# --- deadlines ---------------------------------------------------------------------------------


def test_a_client_dribbling_its_headers_gets_408_and_others_are_answered(port: int) -> None:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as slow,
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as probe,
    ):
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answered = 0
        # A line at a time, never the blank line, while another client is answered: until
        # the server cuts the slow one (a server without the deadline never does, and the
        # test ends at the sockets' timeout).
        with contextlib.suppress(OSError):
            for _ in range(int(PATIENCE / 0.2)):
                slow.sendall(b"X-Drip: 1\r\n")
                probe.sendall(get("/healthz"))
                assert read(probe).status == 200
                answered += 1
                time.sleep(0.2)
        reply = read(slow, until_closed=True)
    body = reply.error(408, "request_timeout")
    assert body["details"] == {"setting": "api.header_timeout", "seconds": TIMEOUT}
    assert reply.closed
    assert answered >= 2  # the slow client's wait held nobody else up


def test_a_connection_that_sends_nothing_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as idle:
        assert closed_after(idle)  # within the sockets' timeout: never, without a deadline


def test_a_connection_idle_for_less_than_the_deadline_is_served(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        time.sleep(TIMEOUT / 4)
        sock.sendall(get("/healthz"))
        assert read(sock).status == 200


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_client_dribbling_its_body_gets_408(port: int, chunked: bool) -> None:
    body = b'{"members": ["p001"]}'
    framing = "Transfer-Encoding: chunked\r\n" if chunked else "Content-Length: 1000\r\n"
    head = (
        f"POST {LOOKUP} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{framing}\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as slow:
        slow.sendall(head)
        with contextlib.suppress(OSError):
            for byte in body:  # one byte every 0.2 s: never done within the deadline
                slow.sendall(b"1\r\n%c\r\n" % byte if chunked else bytes([byte]))
                time.sleep(0.2)
        reply = read(slow, until_closed=True)
    found = reply.error(408, "request_timeout")
    assert found["details"] == {"setting": "api.body_timeout", "seconds": TIMEOUT}
    assert reply.closed


def test_a_body_sent_in_time_is_read_whole(port: int) -> None:
    body = b'{"members": ["p001"]}'
    raw = post(LOOKUP, body)
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(raw[:-5])
        time.sleep(TIMEOUT / 4)
        sock.sendall(raw[-5:])
        reply = read(sock)
    assert reply.status == 200 and isinstance(json.loads(reply.body), list), reply.body


# --- HEAD ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/healthz", "/v1/boards/kills/day?limit=5", "/v1/seasons"])
def test_head_answers_as_get_without_the_body(port: int, path: str) -> None:
    scores = b'{"events": [{"board": "kills", "member": "ann", "value": 3}]}'
    assert ask(port, post("/v1/scores", scores)).status == 200
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        # HEAD then GET on one connection: the GET's answer follows the HEAD's headers at
        # once, so the HEAD's answer has no body.
        sock.sendall(get(path, method="HEAD") + get(path))
        data = b""
        while data.count(b"\r\n\r\n") < 2 or not data.endswith((b"}", b"]")):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    head = parse(data, head_only=True)
    got = parse(head.rest)
    assert head.status == got.status == 200
    assert got.body and int(head.headers["content-length"]) == len(got.body)
    assert {k: v for k, v in head.headers.items() if k != "date"} == {
        k: v for k, v in got.headers.items() if k != "date"
    }


def test_head_is_counted_as_head_by_the_route_it_took(port: int) -> None:
    assert ask(port, get("/healthz", method="HEAD"), head_only=True).status == 200
    metrics = ask(port, get("/metrics")).body.decode()
    line = 'seasons_http_requests_total{method="HEAD",route="/healthz",status="200"}'
    assert line in metrics, [x for x in metrics.splitlines() if "HEAD" in x]


def test_head_of_a_post_only_route_is_405_as_its_get(port: int) -> None:
    head = ask(port, get("/v1/scores", method="HEAD"), head_only=True)
    got = ask(port, get("/v1/scores"))
    assert head.status == got.status == 405
    assert head.headers["allow"] == got.headers["allow"]


# --- codings -------------------------------------------------------------------------------------


def test_transfer_codings_other_than_chunked_get_501(port: int) -> None:
    events = b'{"events": [{"board": "kills", "member": "gz", "value": 5}]}'
    coded = gzip.compress(events)
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(coded), coded)
    for coding in ("gzip, chunked", "deflate, chunked", "x-custom, chunked"):
        raw = post("/v1/scores", chunked, f"Transfer-Encoding: {coding}\r\n")
        reply = ask(port, raw, until_closed=True)
        found = reply.error(501, "unsupported_transfer_encoding")
        assert found["details"] == {"transfer_encoding": coding} and reply.closed
    raw = post(
        "/v1/scores", chunked, "Transfer-Encoding: gzip\r\n", "Transfer-Encoding: chunked\r\n"
    )
    ask(port, raw, until_closed=True).error(501, "unsupported_transfer_encoding")
    assert ask(port, get("/v1/boards/kills/day/members/gz")).status == 404  # nothing written
    plain = b"%x\r\n%s\r\n0\r\n\r\n" % (len(events), events)
    assert ask(port, post("/v1/scores", plain, "Transfer-Encoding: chunked\r\n")).status == 200
    assert ask(port, get("/v1/boards/kills/day/members/gz")).status == 200


def test_a_content_encoding_on_a_body_gets_415(port: int) -> None:
    events = b'{"events": [{"board": "kills", "member": "ce", "value": 5}]}'
    for coding in ("gzip", "br", "identity, gzip"):
        reply = ask(
            port, post("/v1/scores", gzip.compress(events), f"Content-Encoding: {coding}\r\n")
        )
        found = reply.error(415, "unsupported_content_encoding")
        assert found["details"] == {"content_encoding": coding}
        assert reply.headers["accept-encoding"] == "identity"
    reply = ask(port, post(LOOKUP, gzip.compress(b'{"members": []}'), "Content-Encoding: gzip\r\n"))
    reply.error(415, "unsupported_content_encoding")
    assert ask(port, get("/v1/boards/kills/day/members/ce")).status == 404  # nothing written
    assert ask(port, post("/v1/scores", events, "Content-Encoding: identity\r\n")).status == 200
    assert ask(port, get("/v1/boards/kills/day/members/ce")).status == 200


# --- the request line -----------------------------------------------------------------------------


def test_an_absolute_form_naming_another_host_is_refused(port: int) -> None:
    events = b'{"events": [{"board": "kills", "member": "abs", "value": 5}]}'
    for target in (
        "http://evil.example/v1/scores",
        f"http://evil.example:{port}/v1/scores",
        "http://127.0.0.1.evil.example/v1/scores",
        "ftp://127.0.0.1/v1/scores",
    ):
        reply = ask(port, post("/v1/scores", events, target=target), until_closed=True)
        found = reply.error(400, "bad_request")
        assert found["details"]["reason"] == "absolute_form" and reply.closed, target
    assert ask(port, get("/v1/boards/kills/day/members/abs")).status == 404  # nothing written
    # The authority is the Host as sent: the Host rules apply to it, and the path is served.
    reply = ask(port, post("/v1/scores", events, target="http://127.0.0.1/v1/scores"))
    assert reply.status == 200, reply.body
    assert ask(port, get("/v1/boards/kills/day/members/abs")).status == 200


def test_what_the_parser_refuses_gets_the_json_400(port: int) -> None:
    for raw in (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n",
                b"NOT HTTP AT ALL\r\n\r\n", b"GET /healthz HTTP/9.9\r\n\r\n"):  # fmt: skip
        reply = ask(port, raw, until_closed=True)
        reply.error(400, "bad_request")
        assert reply.closed


def test_the_server_still_answers(port: int) -> None:
    """After all of the above, on a fresh connection."""
    assert ask(port, get("/healthz")).status == 200
