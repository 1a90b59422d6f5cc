"""Shared fixtures: one real redis-server per test session, emptied before each test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import settings as hypothesis_settings
from redis_server import RedisServer

from config import Settings, load_settings

# The whole suite must stay well under 10 minutes on 2 cores; `dev` is for quick local loops.
hypothesis_settings.register_profile("ci", max_examples=40, deadline=None)
hypothesis_settings.register_profile("dev", max_examples=25, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server for the whole session (no persistence, free port on 127.0.0.1)."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """URL of the session's server, FLUSHALLed before the test (restarted if a test stopped it)."""
    if not redis_server.running:
        redis_server.start()
    client = redis_server.client()
    try:
        client.flushall()
    finally:
        client.close()
    return redis_server.url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    """A client (bytes responses) on the emptied server."""
    client = redis.Redis.from_url(redis_url, decode_responses=False)
    try:
        yield client
    finally:
        client.close()


SettingsFactory = Callable[..., Settings]


@pytest.fixture
def settings_factory(redis_url: str, tmp_path: Path) -> SettingsFactory:
    """``make(**overrides)``: Settings on the test server, ignoring the caller's environment.

    An empty TOML file is passed so that neither ``$SEASONS_CONFIG`` nor a ``./seasons.toml``
    in the working directory leaks in. ``redis=`` overrides merge with the test server's URL.
    """
    # In a directory of its own, so a test writing tmp_path / "seasons.toml" does not change it.
    toml = tmp_path / "settings_factory" / "seasons.toml"
    toml.parent.mkdir()
    toml.write_text("")

    def make(**overrides: Any) -> Settings:
        redis_overrides = {"url": redis_url, **overrides.pop("redis", {})}
        return load_settings(environ={}, path=toml, redis=redis_overrides, **overrides)

    return make
