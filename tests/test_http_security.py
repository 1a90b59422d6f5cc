"""HTTP access that does not trust the network, and limits checked before any work.

Real uvicorn servers (in a thread, or a subprocess for memory) on the session's Redis. With
empty tokens, writes and admin calls are accepted only from a direct client on 127.0.0.1 /
::1 with a local ``Host``: a peer on 127.0.0.2 (a client socket bound there), any forwarding
header, uvicorn rewriting the peer from ``X-Forwarded-For``, a foreign ``Host`` or ``Origin``
are all refused, and the data set (``DEBUG DIGEST``) is unchanged. Bodies, URLs, content
types and query parameters are refused before the body is read; the peak memory of the
server process (``VmHWM``) shows a 100 MB body is never buffered.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, serving
from redis_server import free_port

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.http.guard import MAX_URL_BYTES

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
SCORE = {"events": [{"board": "kills", "member": "ann", "value": 1}]}
LOOKUP = "/v1/boards/kills/day/lookup"
WRITES = {"Authorization": f"Bearer {WRITE_TOKEN}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
TOKENS = {"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN}
# Every call that changes data, with a body that would succeed from a local client.
CHANGES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/scores", SCORE),
    ("POST", "/v1/admin/rollup", None),
    ("POST", "/v1/admin/rebuild", {}),
    ("POST", "/v1/admin/snapshot", {"season": "S3"}),
    ("DELETE", "/v1/admin/members/p001", None),
    ("POST", "/v1/admin/boards/kills/clear", {"window": "day", "period": "current"}),
    ("POST", "/v1/admin/demo/reset", {"days": 1, "players": 1}),
]


@pytest.fixture
def settings_for(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> Callable[..., Settings]:
    """Settings of a demo namespace (so that a demo reset would work if let through)."""

    def make(**api: Any) -> Settings:
        return settings_factory(
            **SETTINGS, namespace="demo-sec", api=api, archive={"dir": str(tmp_path / "a")}
        )

    return make


@pytest.fixture
def serve(settings_for: Callable[..., Settings]) -> Iterator[Callable[..., str]]:
    """``serve(api={...}, **uvicorn_options)``: a seeded app served; its base URL."""
    with contextlib.ExitStack() as stack:

        def start(api: dict[str, Any] | None = None, **options: Any) -> str:
            settings = settings_for(**(api or {}))
            facade = stack.enter_context(Seasons(settings, clock=ManualClock(START)))
            facade.submit_many(
                [{"board": "kills", "member": f"p{i:03d}", "value": i} for i in range(5)]
            )
            return stack.enter_context(serving(create_app(settings, app=facade), **options))

        yield start


def digest(r: Any) -> Any:
    return r.execute_command("DEBUG", "DIGEST")


def client(base: str, source: str = "127.0.0.1", **kwargs: Any) -> httpx.Client:
    """An HTTP client whose socket is bound to ``source`` (127.0.0.2 is a remote peer)."""
    transport = httpx.HTTPTransport(local_address=source)
    return httpx.Client(base_url=base, transport=transport, timeout=30, **kwargs)


def call(c: httpx.Client, method: str, path: str, body: Any, **headers: str) -> httpx.Response:
    return c.request(method, path, json=body, headers=headers)


def error(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error", "message", "details"} and body["error"] == code, body
    return body


# --- who may write with empty tokens -----------------------------------------------------------


def test_a_peer_on_127_0_0_2_cannot_write_or_administer(serve: Callable[..., str], r: Any) -> None:
    base = serve()
    before = digest(r)
    with client(base, "127.0.0.2") as remote:
        for method, path, body in CHANGES:
            found = error(call(remote, method, path, body), 403, "forbidden")
            assert found["details"]["reason"] == "remote", path
        assert remote.get("/v1/boards/kills/day").status_code == 200  # reads are public
    assert digest(r) == before
    # The same call from 127.0.0.1 does write: the digest can tell.
    with client(base) as local:
        assert call(local, "POST", "/v1/scores", SCORE).status_code == 200
    assert digest(r) != before


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-For": "127.0.0.1"},
        {"Forwarded": "for=127.0.0.1"},
        {"X-Real-IP": "127.0.0.1"},
        {"X-Forwarded-Host": "localhost"},
        {"X-Forwarded-Proto": "http"},
        {"Via": "1.1 proxy"},
    ],
    ids=lambda h: next(iter(h)),
)
def test_any_forwarding_header_loses_the_loopback_exemption(
    serve: Callable[..., str], r: Any, headers: dict[str, str]
) -> None:
    base = serve()
    before = digest(r)
    with client(base) as local:
        for method, path, body in CHANGES:
            found = error(call(local, method, path, body, **headers), 403, "forbidden")
            assert found["details"]["reason"] == "proxy_headers"
            assert found["details"]["headers"] == [k.lower() for k in headers]
    assert digest(r) == before


def test_uvicorn_trusting_every_proxy_still_lets_no_one_in(
    serve: Callable[..., str], r: Any
) -> None:
    """The container case: uvicorn rewrites the peer from X-Forwarded-For for everyone."""
    base = serve(proxy_headers=True, forwarded_allow_ips="*")
    before = digest(r)
    for source, xff in (("127.0.0.2", "127.0.0.1"), ("127.0.0.1", "203.0.113.5"),
                        ("127.0.0.2", "::1")):  # fmt: skip
        with client(base, source) as c:
            for method, path, body in CHANGES:
                found = error(call(c, method, path, body, **{"X-Forwarded-For": xff}), 403,
                              "forbidden")  # fmt: skip
                assert found["details"]["reason"] == "proxy_headers"
    assert digest(r) == before


def test_host_and_origin_must_be_local(serve: Callable[..., str], r: Any) -> None:
    base = serve()
    before = digest(r)
    refused = [
        ({"Host": "evil.example"}, "host"),
        ({"Host": "evil.example:8080"}, "host"),
        ({"Host": "localhost.evil.example"}, "host"),
        ({"Host": "127.0.0.1.nip.io"}, "host"),
        ({"Host": "127.0.0.2"}, "host"),
        ({"Host": "localhost:80x"}, "host"),
        ({"Host": "localhost", "Origin": "http://evil.example"}, "origin"),
        ({"Host": "localhost:8080", "Origin": "http://localhost:9090"}, "origin"),
        ({"Host": "localhost", "Origin": "null"}, "origin"),
        ({"Host": "localhost", "Sec-Fetch-Site": "cross-site"}, "origin"),
        ({"Host": "localhost", "Sec-Fetch-Site": "same-site"}, "origin"),
    ]
    with client(base) as local:
        for headers, reason in refused:
            for method, path, body in CHANGES:
                found = error(call(local, method, path, body, **headers), 403, "forbidden")
                assert found["details"]["reason"] == reason, headers
        assert digest(r) == before
        for headers in ({"Host": "localhost:8080"}, {"Host": "127.0.0.1"}, {"Host": "[::1]:9"},
                        {"Host": "LOCALHOST"},
                        {"Host": "localhost:8080", "Origin": "http://localhost:8080",
                         "Sec-Fetch-Site": "same-origin"}):  # fmt: skip
            assert call(local, "POST", "/v1/scores", SCORE, **headers).status_code == 200, headers


def test_through_a_trusted_proxy_the_client_is_from_x_forwarded_for(
    serve: Callable[..., str], r: Any
) -> None:
    proxies = ["127.0.0.2", "10.0.0.0/8"]
    base = serve(api={"trusted_proxies": proxies})
    before = digest(r)
    named = [
        # Rightmost address that is not a trusted proxy; what the client wrote before it is
        # not believed.
        ({"X-Forwarded-For": "198.51.100.1, 203.0.113.9, 10.1.1.1"}, "203.0.113.9"),
        ({"X-Forwarded-For": "127.0.0.1"}, "127.0.0.1"),
        ({"Forwarded": 'for="[2001:db8::1]:443";proto=https'}, "2001:db8::1"),
        ({"Forwarded": "for=192.0.2.60:8080, for=10.0.0.7"}, "192.0.2.60"),
        ({}, "127.0.0.2"),  # a proxy that names no one is still a proxy
    ]
    with client(base, "127.0.0.2") as proxy:
        for headers, who in named:
            found = error(call(proxy, "POST", "/v1/scores", SCORE, **headers), 403, "forbidden")
            assert found["details"] == {"setting": "api.write_token", "reason": "proxy",
                                        "client": who}, headers  # fmt: skip
    assert digest(r) == before


def test_through_a_trusted_proxy_a_token_is_required_and_enough(
    serve: Callable[..., str], r: Any
) -> None:
    base = serve(api={**TOKENS, "trusted_proxies": ["127.0.0.2"]})
    xff = {"X-Forwarded-For": "203.0.113.9"}
    with client(base, "127.0.0.2") as proxy:
        before = digest(r)
        error(call(proxy, "POST", "/v1/scores", SCORE, **xff), 401, "unauthorized")
        error(call(proxy, "POST", "/v1/admin/rollup", None, **xff, **WRITES), 401, "unauthorized")
        assert digest(r) == before
        assert call(proxy, "POST", "/v1/scores", SCORE, **xff, **WRITES).status_code == 200
        assert call(proxy, "POST", "/v1/admin/rollup", None, **xff, **ADMIN).status_code == 200


# --- limits before work ------------------------------------------------------------------------


def test_unknown_query_parameters_are_named_and_tokens_never_taken_from_the_url(
    serve: Callable[..., str], r: Any
) -> None:
    base = serve(api=TOKENS)
    with client(base) as c:
        body = error(c.get("/v1/boards/kills/day?limti=5&offset=1"), 422, "unknown_parameter")
        assert body["details"] == {"unknown": ["limti"], "known": ["limit", "offset", "period"]}
        assert "'limti'" in body["message"]
        body = error(c.get("/healthz?verbose=1&x=2"), 422, "unknown_parameter")
        assert body["details"]["unknown"] == ["verbose", "x"]
        # Names are percent-decoded as the route would decode them.
        assert c.get("/v1/boards/kills/day?%6Cimit=2").json()["entries"][1]["rank"] == 2
        before = digest(r)
        for token in (WRITE_TOKEN, ADMIN_TOKEN):
            for name in ("token", "access_token"):
                for method, path, payload in CHANGES[:2]:
                    resp = c.request(method, f"{path}?{name}={token}", json=payload)
                    assert error(resp, 422, "unknown_parameter")["details"]["unknown"] == [name]
                    assert token not in resp.text
        assert digest(r) == before


def test_a_long_url_gets_414(serve: Callable[..., str]) -> None:
    base = serve()
    with client(base) as c:
        member = "m" * (MAX_URL_BYTES - 100)
        # Just under the limit: the route answers (the member is refused as too long).
        assert c.get(f"/v1/boards/kills/day/members/{member}").json()["error"] != "url_too_long"
        error(c.get(f"/v1/boards/kills/day/members/{member}x{'y' * 100}"), 414, "url_too_long")
        error(c.get("/v1/boards/kills/day", params={"period": "p" * MAX_URL_BYTES}), 414,
              "url_too_long")  # fmt: skip
        error(c.post(f"/v1/scores?{'a' * MAX_URL_BYTES}", json=SCORE), 414, "url_too_long")


@pytest.mark.parametrize(
    "media",
    ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
     "multipart/form-data; boundary=x", "application/xml", "json"],
)  # fmt: skip
def test_json_routes_refuse_other_content_types(
    serve: Callable[..., str], r: Any, media: str
) -> None:
    base = serve()
    before = digest(r)
    raw = json.dumps(SCORE).encode()
    with client(base) as c:
        for method, path, _ in CHANGES:
            if method == "POST":
                resp = c.post(path, content=raw, headers={"Content-Type": media})
                assert error(resp, 415, "unsupported_media_type")["details"] == {
                    "content_type": media
                }
        resp = c.post(LOOKUP, content=b'{"members": ["p001"]}', headers={"Content-Type": media})
        error(resp, 415, "unsupported_media_type")
    assert digest(r) == before


def test_json_content_types_are_accepted(serve: Callable[..., str]) -> None:
    base = serve()
    with client(base) as c:
        for media in ("application/json", "application/json; charset=utf-8",
                      "Application/JSON", "application/vnd.seasons+json"):  # fmt: skip
            resp = c.post(LOOKUP, content=b'{"members": ["p001"]}', headers={"Content-Type": media})
            assert resp.status_code == 200 and resp.json()[0]["member"] == "p001", media
        # No Content-Type at all is taken as JSON.
        resp = c.post(LOOKUP, content=b'{"members": ["p001"]}')
        assert resp.status_code == 200 and resp.json()[0]["member"] == "p001", resp.text


def test_bodies_over_the_limit_get_413_by_length_and_while_streaming(
    serve: Callable[..., str], r: Any
) -> None:
    base = serve(api={**TOKENS, "max_body_bytes": 64 * 1024})
    members = {"members": ["p001"] * 20_000}  # ~200 KB of JSON
    raw = json.dumps(members).encode()
    assert len(raw) > 64 * 1024
    before = digest(r)
    with client(base) as c:
        body = error(c.post(LOOKUP, json=members), 413, "body_too_large")
        assert body["details"] == {"limit": 64 * 1024, "setting": "api.max_body_bytes"}

        def chunks(data: bytes) -> Iterator[bytes]:  # no Content-Length: chunked
            for i in range(0, len(data), 8192):
                yield data[i : i + 8192]

        error(c.post(LOOKUP, content=chunks(raw), headers={"Content-Type": "application/json"}),
              413, "body_too_large")  # fmt: skip
        big = {"events": SCORE["events"] * 3000}
        error(c.post("/v1/scores", json=big, headers=WRITES), 413, "body_too_large")
        assert digest(r) == before
        # Under the limit, streamed or not, the body reaches the route whole.
        small = json.dumps({"members": ["p001", "p002"]}).encode()
        for content in (small, chunks(small)):
            resp = c.post(LOOKUP, content=content, headers={"Content-Type": "application/json"})
            assert [e["member"] for e in resp.json()] == ["p002", "p001"]
        streamed = json.dumps(SCORE).encode()
        resp = c.post("/v1/scores", content=chunks(streamed),
                      headers={"Content-Type": "application/json", **WRITES})  # fmt: skip
        assert resp.status_code == 200 and resp.json()["applied"] == 1


def test_guard_answers_are_counted_by_route_and_status(serve: Callable[..., str]) -> None:
    base = serve(api={"max_body_bytes": 4096})
    with client(base) as c:
        c.post("/v1/scores", content=b"x", headers={"Content-Type": "text/plain"})
        c.post(LOOKUP, json={"members": ["a" * 5000]})
        c.get("/v1/boards/kills/day?bogus=1")
        with client(base, "127.0.0.2") as remote:
            remote.post("/v1/admin/rollup")
        text = c.get("/metrics").text
    for method, route, status in (
        ("POST", "/v1/scores", 415), ("POST", "/v1/boards/{board}/{window}/lookup", 413),
        ("GET", "/v1/boards/{board}/{window}", 422), ("POST", "/v1/admin/rollup", 403),
    ):  # fmt: skip
        line = (f'seasons_http_requests_total{{method="{method}",route="{route}",'
                f'status="{status}"}} 1.0')  # fmt: skip
        assert line in text, line


def test_tokens_never_appear_in_logs(
    serve: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    base = serve(api=TOKENS)
    with client(base) as c, client(base, "127.0.0.2") as remote:
        for who in (c, remote):
            for headers in ({}, WRITES, ADMIN, {"Authorization": f"Bearer {WRITE_TOKEN}x"}):
                for method, path, body in CHANGES[:3]:
                    call(who, method, path, body, **headers)
                    who.request(method, f"{path}?token={ADMIN_TOKEN}", json=body)
                    who.get(f"/v1/boards/kills/day?token={WRITE_TOKEN}")
    # The server's records (this test's own client, httpx, logs the URLs it was given).
    server = [rec for rec in caplog.records if not rec.name.startswith(("httpx", "httpcore"))]
    assert "uvicorn.access" in {rec.name for rec in server}  # the access log was seen
    text = "\n".join(f"{rec.getMessage()} {rec.exc_text or ''}" for rec in server)
    assert "token=<redacted>" in text
    for token in (WRITE_TOKEN, ADMIN_TOKEN):
        assert token not in text


def test_openapi_documents_bearer_auth_and_the_guard_answers(serve: Callable[..., str]) -> None:
    with client(serve()) as c:
        schema = c.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    post = schema["paths"]["/v1/scores"]["post"]
    assert post["security"] == [{"HTTPBearer": []}]
    assert {"401", "403", "413", "414", "415", "422"} <= set(post["responses"])
    assert "security" not in schema["paths"]["/v1/boards/{board}/{window}"]["get"]
    assert {"414", "422"} <= set(schema["paths"]["/healthz"]["get"]["responses"])


def test_a_route_the_guard_did_not_check_fails_closed(
    settings_for: Callable[..., Settings], r: Any
) -> None:
    """The access dependencies only confirm the guard's check: without the guard (a route its
    table missed), a write answers 500 and writes nothing."""
    import warnings

    from seasons.http.guard import Guard

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    app = create_app(settings_for(), clock=ManualClock(START))
    app.user_middleware = [m for m in app.user_middleware if m.cls is not Guard]
    before = digest(r)
    with TestClient(app, client=("127.0.0.1", 5000), base_url="http://localhost",
                    raise_server_exceptions=False) as c:  # fmt: skip
        error(c.post("/v1/scores", json=SCORE), 500, "internal_error")
        error(c.post("/v1/admin/rollup"), 500, "internal_error")
    assert digest(r) == before


# --- memory: a server process never buffers a large body ---------------------------------------


@pytest.fixture
def uvicorn_process(redis_url: str, tmp_path: Path) -> Iterator[tuple[int, int]]:
    """``seasons.http.app:from_environment`` under uvicorn in a subprocess (tokens set,
    default ``api.max_body_bytes``): (pid, port)."""
    port = free_port()
    config = tmp_path / "seasons.toml"
    config.write_text(
        f"[redis]\nurl = {json.dumps(redis_url)}\n"
        f"[api]\nwrite_token = {json.dumps(WRITE_TOKEN)}\nadmin_token = {json.dumps(ADMIN_TOKEN)}\n"
        '[boards.kills]\naggregate = "sum"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "seasons.http.app:from_environment",
         "--host", "127.0.0.1", "--port", str(port), "--no-proxy-headers", "--no-access-log"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "uvicorn did not start"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            time.sleep(0.05)
        yield proc.pid, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def peak_rss(pid: int) -> int:
    """The process's peak resident memory in bytes (VmHWM: a freed buffer still counts)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def send_big(port: int, path: str, size: int, *, chunked: bool, token: str | None = None) -> int:
    """POST ``size`` bytes of JSON-looking body on a raw socket while reading the answer;
    the status. The body is sent from a thread, so an early answer is read as it comes."""
    head = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json"]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(30)
    block = b'{"members": [' + b'"x", ' * (MB // 5)

    def body() -> None:
        with contextlib.suppress(OSError):
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            sent = 0
            while sent < size:
                part = block[: size - sent]
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
                sent += len(part)
            if chunked:
                sock.sendall(b"0\r\n\r\n")

    sender = threading.Thread(target=body, daemon=True)
    sender.start()
    reply = b""
    try:
        while b"\r\n" not in reply:
            data = sock.recv(65536)
            assert data, "connection closed before an answer"
            reply += data
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        sender.join(timeout=30)
    return int(reply.split(b" ", 2)[1])


def test_a_100_mb_body_is_never_buffered(uvicorn_process: tuple[int, int]) -> None:
    pid, port = uvicorn_process
    for _ in range(2):  # warm up: the routes' first calls allocate what they keep
        send_big(port, "/v1/scores", 1024, chunked=False, token=WRITE_TOKEN)
        send_big(port, LOOKUP, 1024, chunked=True)
    before = peak_rss(pid)
    assert send_big(port, "/v1/scores", 100 * MB, chunked=False) == 401
    assert send_big(port, "/v1/scores", 100 * MB, chunked=True) == 401
    assert send_big(port, LOOKUP, 100 * MB, chunked=False) == 413
    assert send_big(port, LOOKUP, 100 * MB, chunked=True) == 413  # read up to 16 MB only
    assert send_big(port, "/v1/scores", 100 * MB, chunked=True, token=WRITE_TOKEN) == 413
    grown = peak_rss(pid) - before
    assert grown < 50 * MB, f"peak RSS grew by {grown / MB:.0f} MB"
    assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
