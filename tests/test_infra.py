"""The test infrastructure (a real redis-server) and configuration loading
(README.md#configuration)."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from redis_server import RedisServer, find_redis_server

from seasons.config import ConfigError, Settings, load_settings

# -- the redis-server fixture ---------------------------------------------------------------


def test_fixture_is_a_real_redis_server(redis_server: RedisServer, r: redis.Redis) -> None:
    info = r.info("server")
    assert info["redis_version"]
    assert int(info["tcp_port"]) == redis_server.port
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert r.config_get("save") == {"save": ""}
    assert r.config_get("appendonly") == {"appendonly": "no"}


def test_each_test_starts_empty(r: redis.Redis) -> None:
    assert r.dbsize() == 0
    r.set("left-behind", 1)  # the next test's redis_url fixture must flush this


def test_each_test_starts_empty_again(r: redis.Redis) -> None:
    assert r.dbsize() == 0


def test_responses_are_bytes(r: redis.Redis) -> None:
    r.set("k", "v")
    assert r.get("k") == b"v"


def test_find_redis_server_honours_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEASONS_TEST_REDIS_SERVER", "/opt/redis/bin/redis-server")
    assert find_redis_server() == "/opt/redis/bin/redis-server"


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_server_comes_back_on_the_same_port(how: str) -> None:
    with RedisServer() as server:
        port, pid = server.port, server.pid
        client = redis.Redis.from_url(server.url, socket_timeout=2)
        try:
            client.set("k", "v")
            getattr(server, how)()
            assert not server.running
            with pytest.raises(redis.ConnectionError):
                client.ping()

            server.start()
            assert server.running
            assert server.port == port
            assert server.pid != pid
            assert client.ping()  # the same client reconnects
            assert client.get("k") is None  # no persistence: it comes back empty
        finally:
            client.close()
    assert not server.running
    assert not server.dir.exists()


def test_extra_args_reach_the_server() -> None:
    with RedisServer(args=["--maxmemory-policy", "noeviction", "--databases", "4"]) as server:
        client = server.client(decode_responses=True)
        try:
            assert client.config_get("databases") == {"databases": "4"}
        finally:
            client.close()


def test_a_taken_fixed_port_is_an_error(redis_server: RedisServer) -> None:
    with pytest.raises(RuntimeError, match="bind"):
        RedisServer(port=redis_server.port)


# -- configuration ------------------------------------------------------------------------


@pytest.fixture
def load(tmp_path: Path) -> Callable[..., Settings]:
    """``load(toml_text, environ)``: settings from exactly this TOML text and environment."""

    def _load(
        toml: str = "", environ: dict[str, str] | None = None, **overrides: object
    ) -> Settings:
        path = tmp_path / "seasons.toml"
        path.write_text(toml)
        return load_settings(environ=environ or {}, path=path, **overrides)

    return _load


def refused(
    load: Callable[..., Settings], toml: str = "", environ: dict[str, str] | None = None
) -> str:
    with pytest.raises(ConfigError) as info:
        load(toml, environ)
    return str(info.value)


def test_defaults(load: Callable[..., Settings]) -> None:
    s = load()
    assert s.namespace == "seasons"
    assert s.timezone == "UTC"
    assert s.week_start == "monday"
    assert s.late_grace == timedelta(hours=1)
    assert s.retention == timedelta(days=35)
    assert s.redis.url == "redis://127.0.0.1:6379/0"
    assert s.boards == {}


def test_unknown_env_key_is_refused(load: Callable[..., Settings]) -> None:
    message = refused(load, environ={"SEASONS_REDIS__URLX": "redis://x"})
    assert "SEASONS_REDIS__URLX" in message


def test_env_without_prefix_is_ignored(load: Callable[..., Settings]) -> None:
    assert load(environ={"REDIS_URLX": "x", "SEASONS_CONFIG": "elsewhere.toml"}).timezone == "UTC"


def test_unknown_toml_key_is_refused(load: Callable[..., Settings]) -> None:
    assert "boards.k.agregate" in refused(load, '[boards.k]\nagregate = "sum"\n')
    assert "nmespace" in refused(load, 'nmespace = "x"\n')


def test_unparseable_nested_env_value_is_refused(load: Callable[..., Settings]) -> None:
    message = refused(load, environ={"SEASONS_BOARDS__K__WEEK_WEIGHTS": "[1, 2,"})
    assert "boards" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("PT2H", timedelta(hours=2)), ("P30D", timedelta(days=30)), ("90", timedelta(seconds=90))],
)
def test_durations(load: Callable[..., Settings], text: str, expected: timedelta) -> None:
    assert load(f'late_grace = "{text}"\n').late_grace == expected


def test_bad_duration_is_refused(load: Callable[..., Settings]) -> None:
    assert "late_grace" in refused(load, 'late_grace = "soon"\n')
    assert "worker.lock_ttl" in refused(load, environ={"SEASONS_WORKER__LOCK_TTL": "5 minutes"})


def test_bad_time_zone_is_refused(load: Callable[..., Settings]) -> None:
    message = refused(load, 'timezone = "Mars/Olympus_Mons"\n')
    assert "timezone" in message
    assert "Mars/Olympus_Mons" in message


def test_week_weights_need_seven(load: Callable[..., Settings]) -> None:
    message = refused(load, "[boards.kills]\nweek_weights = [1, 1, 2]\n")
    assert "boards.kills.week_weights" in message
    assert "7" in message


@pytest.mark.parametrize("field", ["week_weights", "season_weights"])
def test_weights_that_could_overflow_a_score_are_refused(
    load: Callable[..., Settings], field: str
) -> None:
    big = "[1, 1, 1, 1, 1, 1, 1e300]" if field == "week_weights" else "[1, 1e300]"
    message = refused(load, f"[boards.kills]\n{field} = {big}\n")
    assert f"boards.kills.{field}" in message and "at most" in message
    # The largest allowed weight times the largest score over the longest season is finite.
    fine = "[1, 1, 1, 1, 1, 1, 1000000]" if field == "week_weights" else "[1000000]"
    settings = load(f"[boards.kills]\n{field} = {fine}\n")
    assert math.isfinite(max(getattr(settings.boards["kills"], field)) * 2**53 * 3660)


def test_overlapping_seasons_are_refused(load: Callable[..., Settings]) -> None:
    toml = """
[[seasons.list]]
id = "winter"
start = "2026-12-01"
end = "2027-02-28"

[[seasons.list]]
id = "spring"
start = "2027-02-28"
end = "2027-05-31"
"""
    message = refused(load, toml)
    assert "seasons.list" in message
    assert "winter" in message and "spring" in message


def test_adjacent_seasons_are_fine(load: Callable[..., Settings]) -> None:
    toml = """
[[seasons.list]]
id = "spring"
start = "2027-03-01"
end = "2027-05-31"

[[seasons.list]]
id = "winter"
start = "2026-12-01"
end = "2027-02-28"
"""
    assert [s.id for s in load(toml).seasons.list] == ["winter", "spring"]


@pytest.mark.parametrize("retention", ["PT1H", "PT30M"])
def test_retention_must_outlive_late_grace(load: Callable[..., Settings], retention: str) -> None:
    message = refused(load, f'late_grace = "PT1H"\nretention = "{retention}"\n')
    assert "retention" in message and "late_grace" in message


def test_every_problem_is_named(load: Callable[..., Settings]) -> None:
    message = refused(load, 'timezone = "Nowhere/Land"\nlate_grace = "soon"\n')
    assert "timezone" in message and "late_grace" in message


def test_env_over_toml_over_defaults(load: Callable[..., Settings]) -> None:
    toml = 'timezone = "Europe/Paris"\n[redis]\nurl = "redis://toml:6379/0"\n'
    assert load().timezone == "UTC"
    from_toml = load(toml)
    assert from_toml.timezone == "Europe/Paris"
    assert from_toml.redis.url == "redis://toml:6379/0"

    from_env = load(toml, {"SEASONS_TIMEZONE": "Asia/Tokyo", "SEASONS_REDIS__WAIT_REPLICAS": "1"})
    assert from_env.timezone == "Asia/Tokyo"
    assert from_env.redis.url == "redis://toml:6379/0"  # nested sections merge, key by key
    assert from_env.redis.wait_replicas == 1


def test_env_sets_board_fields(load: Callable[..., Settings]) -> None:
    s = load('[boards.kills]\norder = "asc"\n', {"SEASONS_BOARDS__KILLS__AGGREGATE": "max"})
    assert s.boards["kills"].aggregate == "max"
    assert s.boards["kills"].order == "asc"


def test_missing_config_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(environ={}, path=tmp_path / "absent.toml")


def test_settings_factory_points_at_the_test_server(
    settings_factory: Callable[..., Settings], redis_url: str
) -> None:
    s = settings_factory(timezone="Europe/Berlin", redis={"wait_replicas": 0})
    assert s.redis.url == redis_url
    assert s.timezone == "Europe/Berlin"
