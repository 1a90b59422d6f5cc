"""The HTTP protocol of ``seasons serve`` (seasons.http.server): uvicorn's httptools protocol
writing each response in one system call. Served for real by uvicorn, next to the plain
httptools protocol on the same app: the same responses byte for byte (but the Date header),
for keep-alive, pipelined requests, ``Connection: close``, HEAD, a body and a response larger
than the socket's buffer. The transport proxy itself: one write per turn, close and abort."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import SETTINGS, serving

from seasons import Seasons
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.http.server import HttpTools, OneWritePerTurn


@pytest.fixture
def app(settings_factory: Callable[..., Settings], tmp_path: Path) -> Iterator[Seasons]:
    settings = settings_factory(**{**SETTINGS, "archive": {"dir": str(tmp_path / "archive")}})
    with Seasons(settings) as s:
        s.submit_many(
            [{"board": "kills", "member": f"m{i}", "value": i, "metadata": {"n": "x" * 200}}
             for i in range(1000)]
        )  # fmt: skip
        yield s


@pytest.fixture
def urls(app: Seasons) -> Iterator[dict[str, str]]:
    with (
        serving(create_app(app.settings, app=app), http=HttpTools, loop="uvloop") as one,
        serving(create_app(app.settings, app=app), http="httptools", loop="uvloop") as two,
    ):
        yield {"one write": one, "plain": two}


def exchange(url: str, raw: bytes, *, until_closed: bool = False, expect: int = 1) -> bytes:
    """Send ``raw`` on one connection; read until ``expect`` responses came (or it closed)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return data
            data += chunk
            if not until_closed and _complete(data) >= expect:
                return data


def _complete(data: bytes) -> int:
    """How many whole responses (with Content-Length) ``data`` holds."""
    n = 0
    while b"\r\n\r\n" in data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length:")), 0,
        )  # fmt: skip
        if len(rest) < length:
            break
        n, data = n + 1, rest[length:]
    return n


def undated(data: bytes) -> bytes:
    return b"\r\n".join(line for line in data.split(b"\r\n") if not line.startswith(b"date:"))


def get(path: str, *extra: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: localhost\r\n" + "".join(extra) + "\r\n").encode()


def test_the_same_responses_as_uvicorns_own_protocol(urls: dict[str, str]) -> None:
    cases: list[tuple[bytes, dict[str, Any]]] = [
        (get("/v1/boards/kills/day?limit=5"), {}),
        # Three requests in one packet (HTTP/1.1 pipelining): three answers, in order.
        (get("/healthz") + get("/v1/boards/kills/day?limit=2") + get("/v1/boards/nope/day"),
         {"expect": 3}),
        (get("/v1/boards/kills/day?limit=3", "Connection: close\r\n"), {"until_closed": True}),
        (b"HEAD /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n", {"expect": 1}),
        # A body larger than a socket buffer: flow control, then the rest.
        (get("/v1/boards/kills/day?limit=1000"), {}),
        (b"POST /v1/boards/kills/day/lookup HTTP/1.1\r\nHost: localhost\r\n"
         b"Content-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"members\": [\"m3\"]}\n\n",
         {}),
    ]  # fmt: skip
    for raw, how in cases:
        one, plain = (undated(exchange(urls[k], raw, **how)) for k in ("one write", "plain"))
        assert one == plain, raw
        assert one.startswith(b"HTTP/1.1 "), one[:100]
    big = exchange(urls["one write"], get("/v1/boards/kills/day?limit=1000"))
    assert len(big) > 200_000 and big.count(b'"rank":') == 1000


def test_keep_alive(urls: dict[str, str], app: Seasons) -> None:
    want = app.top("kills", "day", limit=10).model_dump()
    with httpx.Client(base_url=urls["one write"]) as http:
        for _ in range(50):
            assert http.get("/v1/boards/kills/day").json() == want


class Recorder:
    """A transport that records each system-call-level write."""

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []
        self.closed = False

    def writelines(self, data: list[bytes]) -> None:
        self.calls.append(list(data))

    def write(self, data: bytes) -> None:
        self.calls.append([data])

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


def test_writes_of_one_turn_go_out_at_once_close_writes_them_abort_drops_them() -> None:
    import asyncio

    async def go() -> Recorder:
        loop = asyncio.get_running_loop()
        real = Recorder()
        proxy = OneWritePerTurn(real, loop)  # type: ignore[arg-type]
        proxy.write(b"head")
        proxy.write(b"body")
        assert real.calls == []  # not yet: at the end of this turn
        await asyncio.sleep(0)
        assert real.calls == [[b"head", b"body"]]
        proxy.write(b"last")
        proxy.close()  # a close writes what is kept first
        assert real.calls[-1] == [b"last"] and real.closed
        real.closed = False
        proxy.write(b"dropped")
        proxy.abort()
        await asyncio.sleep(0)
        assert real.calls[-1] == [b"last"]
        assert proxy.is_closing() is True  # the rest goes to the real transport
        return real

    asyncio.run(go())
