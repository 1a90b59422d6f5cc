"""From ``scripts/demo`` to the CLI in one paste, and what the CLI says when it is pointed at
the wrong place: no configuration file, a Redis without Seasons data, a Redis too old.

The demo test runs ``scripts/demo`` as a real process (its own redis-server, worker and HTTP
server), sources ``var/demo/env`` in bash and queries the demo with the ``seasons`` found on
PATH; the checks of the CLI run it as a real process too, on the session's redis-server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from redis_server import RedisServer, free_port

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import load_settings
from seasons.demo import demo_events

ROOT = Path(__file__).resolve().parent.parent
SEASONS = ROOT / ".venv" / "bin" / "seasons"
DEMO_START_TIMEOUT = 90.0
# A hang guard, not a speed check: a worker and a server stopping on SIGTERM on a loaded
# 2-core machine took longer than 30 s once.
DEMO_STOP_TIMEOUT = 90.0

TOML = """
namespace = "{ns}"
timezone = "UTC"

[boards.kills]
aggregate = "sum"
"""


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the developer's SEASONS_* variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    return env | extra


def session_members(sid: int) -> list[int]:
    """The processes of session ``sid`` (the demo and everything it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        if int(fields[3]) == sid and fields[0] != "Z":  # field 6: session id
            found.append(int(entry.name))
    return found


# --- scripts/demo -> var/demo/env -> seasons -------------------------------------------------


def test_the_demo_writes_an_env_file_that_points_the_cli_at_it(tmp_path: Path) -> None:
    """``scripts/demo`` writes var/demo/env once it is up; in bash, ``source var/demo/env``
    makes ``seasons top kills`` answer from the demo's Redis with the data it seeded; when the
    demo stops, the file and every process it started are gone; the worker logs no WARNING."""
    http_port = free_port()
    # The demo's folder (var/demo unless SEASONS_DEMO_DIR) of this test's own, so that a demo
    # running in the checkout is left alone.
    demo_dir = tmp_path / "demo"
    env_file, worker_log = demo_dir / "env", demo_dir / "worker.log"
    out = (tmp_path / "demo.out").open("w+")
    demo = subprocess.Popen(
        [str(ROOT / "scripts" / "demo")],
        cwd=tmp_path,  # scripts/demo moves to the checkout itself
        env=clean_env(SEASONS_API__PORT=str(http_port), SEASONS_DEMO_DIR=str(demo_dir)),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + DEMO_START_TIMEOUT
        while not env_file.exists():
            assert demo.poll() is None, Path(out.name).read_text()
            assert time.monotonic() < deadline, Path(out.name).read_text()
            time.sleep(0.2)
        lines = env_file.read_text().splitlines()
        exports = dict(
            line.removeprefix("export ").split("=", 1)
            for line in lines
            if line.startswith("export")
        )
        assert {"PATH", "SEASONS_CONFIG", "SEASONS_REDIS__URL", "SEASONS_URL"} <= set(exports)
        assert exports["PATH"] == f'{ROOT / ".venv" / "bin"}:"$PATH"'
        assert exports["SEASONS_CONFIG"] == str(ROOT / "config" / "demo.toml")
        assert exports["SEASONS_URL"] == f"http://127.0.0.1:{http_port}"
        redis_url = exports["SEASONS_REDIS__URL"]
        # The demo prints its summary just after it writes the file: wait for the lines.
        printed = Path(out.name).read_text()
        while f"source {env_file}" not in printed and time.monotonic() < deadline:
            time.sleep(0.1)
            printed = Path(out.name).read_text()
        assert f"source {env_file}" in printed and f"127.0.0.1:{http_port}" in printed

        # In a fresh bash, from another directory, with no SEASONS_* of its own.
        answer = subprocess.run(
            ["bash", "-c", f"source {env_file} && cd / && seasons top kills -n 20 --json"],
            env=clean_env(PATH="/usr/bin:/bin"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert answer.returncode == 0, answer.stderr
        page = json.loads(answer.stdout)
        check_against_the_seeded_events(page, redis_url, exports)

        # curl's variable answers too: the same board over HTTP.
        over_http = subprocess.run(
            ["bash", "-c", f'source {env_file} && curl -sf "$SEASONS_URL/v1/boards/kills/season"'],
            env=clean_env(PATH="/usr/bin:/bin"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert over_http.returncode == 0, over_http.stderr
        assert json.loads(over_http.stdout)["total"] == page["total"]

        # A second demo on the same folder would share its env file and archives: refused,
        # leaving the running one's env file as it was.
        before = env_file.read_bytes()
        second = subprocess.run(
            [str(ROOT / "scripts" / "demo")],
            cwd=tmp_path,
            env=clean_env(SEASONS_API__PORT=str(free_port()), SEASONS_DEMO_DIR=str(demo_dir)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"a demo is already running at http://127.0.0.1:{http_port}" in second.stderr
        assert env_file.read_bytes() == before
        assert session_members(demo.pid)  # the demo's processes are running

        # SIGUSR1 makes the worker write its threads' stacks to its log (what scripts/demo
        # asks of a process that does not stop), and it goes on running.
        (worker,) = [
            p for p in session_members(demo.pid)
            if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[-2:-1] == [b"worker"]
        ]  # fmt: skip
        os.kill(worker, signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while "most recent call first" not in worker_log.read_text():
            assert time.monotonic() < deadline, worker_log.read_text()
            time.sleep(0.1)
        assert worker in session_members(demo.pid)
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=DEMO_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            # What the demo printed and the processes logged: why it did not stop.
            tails = [p.read_text()[-4000:] for p in (worker_log, demo_dir / "serve.log")
                     if p.exists()]  # fmt: skip
            pytest.fail(f"the demo did not stop:\n{Path(out.name).read_text()[-3000:]}\n{tails}")
        finally:
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGKILL)
                demo.wait()
    printed = Path(out.name).read_text()
    out.close()
    if "did not stop within" in printed:
        # The demo stops in any case (SIGKILL after its grace period), and this test checks
        # that; a process that needed it is a bug to find, with the stacks it logged.
        tails = {p.name: p.read_text()[-6000:] for p in (worker_log, demo_dir / "serve.log")}
        warnings.warn(f"scripts/demo killed a process on Ctrl-C:\n{printed[-2000:]}\n{tails}",
                      stacklevel=1)  # fmt: skip
    assert demo.returncode == 0, printed
    assert not env_file.exists()  # it would point at a Redis that is gone
    assert session_members(demo.pid) == []  # Redis, the worker and the server ended with it
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(redis_url, socket_connect_timeout=1).ping()
    log = worker_log.read_text()
    assert "worker" in log and "started" in log
    assert " WARNING " not in log and " ERROR " not in log, log


def check_against_the_seeded_events(
    page: dict[str, Any], redis_url: str, exports: dict[str, str]
) -> None:
    """``top kills`` of the current season against the demo's events summed in plain Python:
    a season's fourth week counts double (config/demo.toml, season_weights = [1, 1, 1, 2])."""
    settings = load_settings(
        environ={},
        path=exports["SEASONS_CONFIG"],
        redis={"url": redis_url},
        archive={"dir": exports["SEASONS_ARCHIVE__DIR"]},
    )
    # The events are what `seasons demo` generated a moment ago: the same days and values
    # (only today's timestamps depend on the instant, within today).
    with Seasons(settings, clock=ManualClock(datetime.now(UTC))) as app:
        now = app.clock()
        events = [
            e
            for e in demo_events(app, now, days=35, players=200, rng_seed=7)
            if e["board"] == "kills"
        ]
    zone = settings.zone
    today = now.astimezone(zone).date()
    anchor, length = settings.seasons.anchor, settings.seasons.length_days
    season_start = anchor + timedelta(days=length * ((today - anchor).days // length))
    expected: dict[str, float] = defaultdict(float)
    for e in events:
        day = e["ts"].astimezone(zone).date()
        if season_start <= day <= today:
            week = (day - season_start).days // 7
            expected[e["member"]] += e["value"] * (2 if week == 3 else 1)
    assert page["board"] == "kills" and page["window"] == "season"
    assert page["total"] == len(expected) > 0
    entries = page["entries"]
    assert len(entries) == 20
    assert [e["rank"] for e in entries] == list(range(1, 21))
    for e in entries:
        assert e["score"] == expected[e["member"]], e["member"]
    assert [e["score"] for e in entries] == sorted(expected.values(), reverse=True)[:20]


def test_a_demo_that_cannot_start_exits_with_the_failing_step_s_status(tmp_path: Path) -> None:
    """A config ``seasons demo`` refuses (exit 2): the demo stops what it started, writes no
    var/demo/env and exits 2 with the message naming the key. The config is named relative
    to the caller's directory."""
    (tmp_path / "bad.toml").write_text('namespace = "demo"\nretention = "soon"\n')
    env_file = tmp_path / "demo" / "env"
    demo = subprocess.Popen(
        [str(ROOT / "scripts" / "demo")],
        cwd=tmp_path,
        env=clean_env(
            SEASONS_CONFIG="bad.toml",
            SEASONS_API__PORT=str(free_port()),
            SEASONS_DEMO_DIR=str(tmp_path / "demo"),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stdout, stderr = demo.communicate(timeout=120)
    assert demo.returncode == 2, stdout + stderr
    assert "retention" in stderr and "not a duration" in stderr
    assert not env_file.exists()
    assert session_members(demo.pid) == []  # its redis-server is gone too


# --- no configuration file, no data -----------------------------------------------------------


def seasons(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SEASONS), *args], cwd=cwd, env=clean_env(**env), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_without_a_config_file_an_unknown_board_says_how_to_load_one(
    redis_url: str, tmp_path: Path
) -> None:
    result = seasons("top", "kills", cwd=tmp_path, SEASONS_REDIS__URL=redis_url)
    assert result.returncode == 2 and result.stdout == ""
    message = result.stderr
    assert "unknown board 'kills'" in message
    assert "no configuration file was loaded" in message
    for way in ("--config", "SEASONS_CONFIG", "seasons.toml", "source var/demo/env"):
        assert way in message, way

    # With ./seasons.toml (found by itself) the board exists, and another one is only unknown.
    (tmp_path / "seasons.toml").write_text(TOML.format(ns="cfgfound"))
    result = seasons("top", "deaths", cwd=tmp_path, SEASONS_REDIS__URL=redis_url)
    assert result.returncode == 2
    assert "unknown board 'deaths' (configured: kills)" in result.stderr
    assert "no configuration file was loaded" not in result.stderr


def test_an_unreachable_redis_without_a_config_file_says_how_to_load_one(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    result = seasons("top", "kills", cwd=tmp_path, SEASONS_REDIS__URL=url)
    assert result.returncode == 1
    assert "unreachable" in result.stderr and "no configuration file was loaded" in result.stderr


def test_a_namespace_without_seasons_data_is_named_not_printed_as_empty(
    redis_url: str, tmp_path: Path
) -> None:
    """``top`` and ``rank`` on a namespace holding no Seasons data: a message naming the
    namespace and the Redis on stderr, nothing on stdout, exit status 1. Once the namespace
    holds anything (a write, or only its marker), an empty board is an empty answer."""
    config = tmp_path / "seasons.toml"
    config.write_text(TOML.format(ns="fresh"))
    env = {"SEASONS_CONFIG": str(config), "SEASONS_REDIS__URL": redis_url}
    client = redis.Redis.from_url(redis_url)
    client.set("other:thing", "1")  # someone else's key on the same Redis
    for args in (["top", "kills"], ["top", "kills", "--json"], ["rank", "kills", "ann"]):
        result = seasons(*args, cwd=tmp_path, **env)
        assert result.returncode == 1, (args, result.stderr)
        assert result.stdout == ""
        assert f"no Seasons data in namespace 'fresh' at {redis_url}" in result.stderr
        assert "right Redis" in result.stderr
    assert client.keys("fresh:*") == []  # the check wrote nothing

    # A write without a worker (no marker yet): the namespace holds data; last week is empty.
    wrote = seasons("submit", "kills", "ann", "3", cwd=tmp_path, **env)
    assert wrote.returncode == 0, wrote.stderr
    assert client.get("fresh:marker") is None
    empty = seasons("top", "kills", "-w", "week", "-p", "previous", "--json", cwd=tmp_path, **env)
    assert empty.returncode == 0, empty.stderr
    assert json.loads(empty.stdout)["total"] == 0
    not_ranked = seasons("rank", "kills", "zed", cwd=tmp_path, **env)
    assert not_ranked.returncode == 3 and "not ranked" in not_ranked.stderr

    # Only the marker (what the worker writes first): still a namespace of Seasons.
    for key in client.keys("fresh:*"):
        client.delete(key)
    client.set("fresh:marker", '{"id":"x","created_at":"2026-01-01T00:00:00Z"}')
    result = seasons("top", "kills", "--json", cwd=tmp_path, **env)
    assert result.returncode == 0 and json.loads(result.stdout)["total"] == 0
    client.close()


# --- Redis older than 7.0 ---------------------------------------------------------------------

# The processes below are the real `seasons` entry point on the session's real redis-server,
# with the minimum raised above it (seasons.redis_health.MIN_REDIS, read at each check): the
# refusal a Redis 6.2 gets, without a Redis 6.2.
RAISED_MINIMUM = (
    "import sys, seasons.redis_health as h; h.MIN_REDIS = (99, 0); "
    "from seasons.cli import main; main()"
)


@pytest.mark.parametrize(
    "args",
    [["top", "kills"], ["submit", "kills", "ann", "1"], ["demo", "--days", "1"], ["worker"],
     ["serve", "--port", "0"]],
    ids=["read", "write", "demo", "worker", "serve"],
)  # fmt: skip
def test_every_process_refuses_a_redis_older_than_the_minimum(
    redis_server: RedisServer, redis_url: str, tmp_path: Path, args: list[str]
) -> None:
    config = tmp_path / "seasons.toml"
    config.write_text(TOML.format(ns="tooold"))
    found = redis_server.client().info("server")["redis_version"]
    result = subprocess.run(
        [sys.executable, "-c", RAISED_MINIMUM, *args],
        cwd=tmp_path,
        env=clean_env(SEASONS_CONFIG=str(config), SEASONS_REDIS__URL=redis_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert f"Redis {found} is too old: Seasons needs Redis 99.0 or later" in result.stderr
    assert "apt-get install redis-server" in result.stderr and "brew install redis" in result.stderr
    assert "Traceback" not in result.stderr
    assert redis.Redis.from_url(redis_url).keys("tooold:*") == []  # refused before any write


def test_setup_refuses_a_redis_server_older_than_7(tmp_path: Path) -> None:
    """scripts/setup reads ``redis-server --version`` and refuses 6.2 with what to install.
    The binary is a stand-in that only answers ``--version`` as Redis 6.2.14 does (setup runs
    nothing else of it)."""
    old = tmp_path / "redis-server"
    old.write_text(
        "#!/bin/sh\necho 'Redis server v=6.2.14 sha=00000000:0 malloc=libc bits=64 build=1'\n"
    )
    old.chmod(0o755)
    result = subprocess.run(
        [str(ROOT / "scripts" / "setup")],
        env=clean_env(
            SEASONS_TEST_REDIS_SERVER=str(old), SEASONS_SETUP_BROWSER="0", SEASONS_SETUP_WRK="0"
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "Redis 6.2.14, too old: Seasons needs Redis 7.0 or later" in result.stderr
    assert "apt-get install redis-server" in result.stderr and "brew install redis" in result.stderr
