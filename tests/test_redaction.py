"""Secrets never printed nor logged (docs/security.md#secrets-in-output).

- Every URL Seasons prints is masked by one rule (:func:`seasons.redact.mask_url`): the
  userinfo's password, every query value, the fragment. ``seasons config`` (text and
  ``--json``) and the CLI's "no Seasons data ... at <url>" error show ``redis.url`` and hook
  URLs masked; a ``redis.url`` redis-py cannot read is a configuration error (exit 2), never a
  traceback.
- A real ``seasons serve`` with its access log on: a token sent in the query string of any
  request (an unknown path, a method the path does not take, a trailing slash, an unknown
  parameter, a percent-encoded name, a part without ``=``) never reaches the log, while the
  values of the parameters Seasons takes stay; a trailing slash is a JSON 404, never a
  redirect whose ``Location`` repeats the query.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from http_support import seasons_serve
from redis_server import RedisServer

from seasons.redact import mask_url

TOKEN = "tok-5ecret-in-the-query"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:pw@127.0.0.1:6379/0", "redis://:<redacted>@127.0.0.1:6379/0"),
        ("redis://app:pw@h:1/0?password=pw2", "redis://app:<redacted>@h:1/0?password=<redacted>"),
        ("rediss://h/0?db=2&ssl_cert_reqs=none", "rediss://h/0?db=<redacted>&ssl_cert_reqs=<redacted>"),
        ("unix://:pw@/tmp/redis.sock?db=1", "unix://:<redacted>@/tmp/redis.sock?db=<redacted>"),
        ("redis://[::1]:6379/0?password=x", "redis://[::1]:6379/0?password=<redacted>"),
        ("https://ghp_tok@hooks.example/in?x=1", "https://<redacted>@hooks.example/in?x=<redacted>"),
        ("https://h.example/in?bare-token&a=1#frag", "https://h.example/in?<redacted>&a=<redacted>#<redacted>"),
        ("redis://:p@ss:w@rd@h:1/0", "redis://:<redacted>@h:1/0"),  # '@' in the password
        ("redis://:pw@[::1/0", "<redacted>"),  # not a URL: nothing of it
    ],
)  # fmt: skip
def test_a_printed_url_keeps_where_and_hides_how_to_get_in(url: str, shown: str) -> None:
    assert mask_url(url) == shown


# --- the CLI ------------------------------------------------------------------------------------


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``seasons ARGS`` as a process, with only the given SEASONS_* variables."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    return subprocess.run(
        [sys.executable, "-c", "from seasons.cli import main; main()", *args],
        cwd=cwd, env=environ | env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def private_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def test_config_masks_every_secret_of_its_urls(tmp_path: Path) -> None:
    config = tmp_path / "seasons.toml"
    config.write_text(
        '[[hooks]]\nname = "payouts"\nsecret = "hook-signing-key"\n'
        'url = "https://hooks.example/in?token=hook-query-token&team=7"\n'
        '[[hooks]]\nname = "other"\nsecret = "s2"\nurl = "https://basic-user-tok@other.example/x"\n'
    )
    env = {
        "SEASONS_CONFIG": str(config),
        "SEASONS_REDIS__URL": "redis://app:url-userinfo-pw@127.0.0.1:6390/0?password=url-query-pw",
    }
    secrets = ("url-userinfo-pw", "url-query-pw", "hook-query-token", "hook-signing-key",
               "basic-user-tok")  # fmt: skip
    text = cli("config", cwd=tmp_path, **env)
    as_json = cli("config", "--json", cwd=tmp_path, **env)
    for result in (text, as_json):
        assert result.returncode == 0, result.stderr
        for secret in secrets:
            assert secret not in result.stdout + result.stderr, secret
    data = json.loads(as_json.stdout)
    assert data["redis"]["url"] == "redis://app:<redacted>@127.0.0.1:6390/0?password=<redacted>"
    assert [h["url"] for h in data["hooks"]] == [
        "https://hooks.example/in?token=<redacted>&team=<redacted>",
        "https://<redacted>@other.example/x",
    ]
    assert 'redis.url = "redis://app:<redacted>@127.0.0.1:6390/0?password=<redacted>"' in (
        text.stdout
    )
    assert "https://hooks.example/in?token=<redacted>&team=<redacted>" in text.stdout


def test_the_no_data_error_masks_a_password_in_the_query(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    password = "query-only-pw-1234"
    with private_redis.client() as admin:
        admin.config_set("requirepass", password)
    url = f"redis://127.0.0.1:{private_redis.port}/0?password={password}"
    result = cli("top", "kills", cwd=tmp_path, SEASONS_REDIS__URL=url,
                 SEASONS_BOARDS__KILLS__AGGREGATE="sum", SEASONS_NAMESPACE="empty")  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "no Seasons data in namespace 'empty' at " in result.stderr
    assert f"127.0.0.1:{private_redis.port}/0?password=<redacted>" in result.stderr
    assert password not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:port-pw-5678/0",  # a password typed where the port goes
        "redis://:pw@[::1/0",
        "redis://127.0.0.1:6379/0?socket_timeout=soon",
    ],
)
def test_a_redis_url_redis_py_cannot_read_is_a_configuration_error(
    tmp_path: Path, url: str
) -> None:
    result = cli("top", "kills", cwd=tmp_path, SEASONS_REDIS__URL=url)
    assert result.returncode == 2, result.stderr
    assert "SEASONS_REDIS__URL (redis.url): is not a URL redis-py can read" in result.stderr
    assert "Traceback" not in result.stderr
    assert "port-pw-5678" not in result.stderr and url not in result.stderr


def test_a_hook_url_with_text_for_a_port_is_a_configuration_error(tmp_path: Path) -> None:
    config = tmp_path / "seasons.toml"
    config.write_text('[[hooks]]\nname = "x"\nsecret = "s"\nurl = "https://h.example:tok-99/in"\n')
    result = cli("config", cwd=tmp_path, SEASONS_CONFIG=str(config))
    assert result.returncode == 2, result.stderr
    assert "hooks[0].url: must be an http:// or https:// URL with a host" in result.stderr
    assert "tok-99" not in result.stdout + result.stderr and "Traceback" not in result.stderr


# --- the access log of seasons serve ------------------------------------------------------------

# (method, path and query, status): a token in the query of every kind of request.
REQUESTS = [
    ("GET", f"/nope?token={TOKEN}", 404),
    ("GET", f"/v1/scores?token={TOKEN}", 405),
    ("POST", f"/v1/boards/kills/season?token={TOKEN}", 405),
    ("GET", f"/v1/scores/?token={TOKEN}", 404),  # no redirect
    ("GET", f"/v1/boards/kills/season/?limit=3&token={TOKEN}", 404),
    ("GET", f"/v1/boards/kills/season?limit=3&token={TOKEN}", 422),
    ("POST", f"/v1/scores?token={TOKEN}", 422),
    ("GET", f"/healthz?access_token={TOKEN}", 422),
    ("GET", f"/v1/boards/kills/season?%74oken={TOKEN}", 422),  # the name percent-encoded
    ("GET", f"/v1/boards/kills/season?limit=2&{TOKEN}", 422),  # the token alone
    ("DELETE", f"/v1/admin/members/ann?token={TOKEN}", 422),
    ("PROPFIND", f"/metrics?token={TOKEN}", 405),
]


def test_no_query_token_reaches_the_access_log_on_any_path(redis_url: str, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    env = {
        "SEASONS_REDIS__URL": redis_url, "SEASONS_NAMESPACE": "logs",
        "SEASONS_BOARDS__KILLS__AGGREGATE": "sum", "SEASONS_API__ACCESS_LOG": "true",
        "SEASONS_API__WRITE_TOKEN": "w-token", "SEASONS_API__ADMIN_TOKEN": "a-token",
    }  # fmt: skip
    with (
        seasons_serve(env, log) as base,
        httpx.Client(base_url=base, timeout=10, follow_redirects=False) as client,
    ):
        for method, target, status in REQUESTS:
            resp = client.request(method, target)
            assert resp.status_code == status, (method, target, resp.text)
            assert "location" not in resp.headers
            assert set(resp.json()) == {"error", "message", "details"}
        # Over the URL limit: refused unread, logged without its query.
        long = client.get(f"/v1/boards/kills/season?period={'x' * 9000}&token={TOKEN}")
        assert long.status_code == 414 and long.json()["error"] == "url_too_long"
        # Seasons' own parameters keep their values: the log stays useful.
        assert client.get("/v1/boards/kills/season?limit=3&period=current").status_code == 200
    text = log.read_text()
    lines = [line for line in text.splitlines() if '" 4' in line or '" 2' in line]
    for method, target, _ in REQUESTS:
        path = target.partition("?")[0]
        assert any(f'"{method} {path}?' in line for line in lines), (method, target, text)
    assert TOKEN not in text, text
    assert "token=<redacted>" in text and "%74oken=<redacted>" in text
    assert '"GET /v1/boards/kills/season?limit=2&<redacted> HTTP/1.1" 422' in text
    assert '"GET /v1/boards/kills/season?limit=3&period=current HTTP/1.1" 200' in text
    assert '"GET /v1/boards/kills/season HTTP/1.1" 414' in text
