"""Shared fixtures: one real redis-server per test session, emptied before each test; and, for
the test modules marked ``both_backends``, the same tests once more on a local Redis Cluster.

The ``backend`` fixture is "single" or "cluster". Modules (or tests) marked
``pytest.mark.both_backends`` run once per backend; every other test runs on the single server.
``redis_url``, ``redis_settings``, ``settings_factory``, ``connect`` and ``r`` all follow the
backend, so a test written for one server runs unchanged on the cluster. The cluster (3
masters, 1 replica each) is started once per session, when a test first needs it.
``SEASONS_TEST_CLUSTER=0`` runs the marked tests on the single server only.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastapi.dependencies.models
import pytest
import redis
from hypothesis import settings as hypothesis_settings
from redis_cluster import ClusterClient, LocalCluster, find_redis_cli
from redis_server import RedisServer

from seasons.config import Settings, load_settings

# The whole suite must stay well under 10 minutes on 2 cores; `dev` is for quick local loops.
hypothesis_settings.register_profile("ci", max_examples=40, deadline=None)
hypothesis_settings.register_profile("dev", max_examples=25, deadline=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

BACKENDS = ("single", "cluster")
CLUSTER_ENV = "SEASONS_TEST_CLUSTER"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "both_backends: run on a single redis-server and again on a local Redis Cluster",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("both_backends") is None:
        return  # the backend fixture's default: the single server
    wanted = BACKENDS if os.environ.get(CLUSTER_ENV, "1") != "0" else BACKENDS[:1]
    metafunc.parametrize("backend", wanted, indirect=True, scope="session")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Hypothesis tests draw a quarter of their examples on the cluster: the point there is
    the cluster client under the same scripts, which the single server already explores."""
    test = getattr(item, "obj", None)
    callspec = getattr(item, "callspec", None)
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is None or callspec is None or callspec.params.get("backend") != "cluster":
        return (yield)
    fewer = hypothesis_settings(current, max_examples=max(10, current.max_examples // 4))
    test._hypothesis_internal_use_settings = fewer  # type: ignore[union-attr]
    try:
        return (yield)
    finally:
        test._hypothesis_internal_use_settings = current  # type: ignore[union-attr]


@pytest.fixture(autouse=True)
def _forget_the_apps_fastapi_caches() -> Iterator[None]:
    """FastAPI classifies each route's callables through lru_caches of 4 096 entries each
    (``fastapi.dependencies.models``), which keep the callables, and through their closures
    whole apps, alive. A service builds one app; the suite builds hundreds, and thousands of
    them kept alive make every garbage collection of the test process walk millions of
    objects. Emptied after each test, whatever their names in the FastAPI installed."""
    yield
    for value in vars(fastapi.dependencies.models).values():
        if isinstance(value, functools._lru_cache_wrapper):
            value.cache_clear()


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """ "single" or "cluster" (see the module docstring)."""
    return str(getattr(request, "param", "single"))


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server for the whole session (no persistence, free port on 127.0.0.1)."""
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    """A local Redis Cluster for the whole session: 3 masters with 1 replica each."""
    try:
        find_redis_cli()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with LocalCluster() as cluster:
        yield cluster


@pytest.fixture
def redis_url(backend: str, request: pytest.FixtureRequest) -> str:
    """URL of the session's server (or of one node of the cluster), emptied before the test
    (a server that a test stopped is restarted)."""
    if backend == "cluster":
        cluster: LocalCluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        return cluster.url
    server: RedisServer = request.getfixturevalue("redis_server")
    if not server.running:
        server.start()
    client = server.client()
    try:
        client.flushall()
    finally:
        client.close()
    return server.url


@pytest.fixture
def redis_settings(redis_url: str, backend: str) -> dict[str, Any]:
    """The ``[redis]`` settings of the test's backend."""
    return {"url": redis_url, "cluster": backend == "cluster"}


@pytest.fixture
def connect(redis_settings: dict[str, Any], request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``connect(**kwargs)``: a new client of the test's backend (a cluster client on the
    cluster), closed after the test."""

    def make(**kwargs: Any) -> Any:
        client: Any
        if redis_settings["cluster"]:
            client = ClusterClient.from_url(redis_settings["url"], **kwargs)
        else:
            client = redis.Redis.from_url(redis_settings["url"], **kwargs)
        request.addfinalizer(client.close)
        return client

    return make


@pytest.fixture
def r(connect: Callable[..., Any]) -> redis.Redis:
    """A client (bytes responses) on the emptied server or cluster."""
    client: redis.Redis = connect(decode_responses=False)
    return client


SettingsFactory = Callable[..., Settings]


@pytest.fixture
def settings_factory(redis_settings: dict[str, Any], tmp_path: Path) -> SettingsFactory:
    """``make(**overrides)``: Settings on the test server, ignoring the caller's environment.

    An empty TOML file is passed so that neither ``$SEASONS_CONFIG`` nor a ``./seasons.toml``
    in the working directory leaks in. ``redis=`` overrides merge with the test backend's.
    """
    # In a directory of its own, so a test writing tmp_path / "seasons.toml" does not change it.
    toml = tmp_path / "settings_factory" / "seasons.toml"
    toml.parent.mkdir()
    toml.write_text("")

    def make(**overrides: Any) -> Settings:
        redis_overrides = {**redis_settings, **overrides.pop("redis", {})}
        return load_settings(environ={}, path=toml, redis=redis_overrides, **overrides)

    return make
