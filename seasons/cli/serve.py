"""``seasons serve`` (the HTTP API and web page) and ``seasons demo`` (seed demo data)."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from seasons import redis_health
from seasons.cli.common import (
    EXIT_USAGE,
    CliState,
    cli,
    cli_error,
    json_option,
    pass_state,
    print_json,
    stacks_on_sigusr1,
)
from seasons.config.settings import ApiSettings, Settings
from seasons.connection import RedisClient, when_reachable
from seasons.errors import BackendUnavailable

SIGNALS = (signal.SIGTERM, signal.SIGINT)
# prometheus_client's multiprocess directory (seasons.http.metrics.MULTIPROC_ENV; not
# imported from there: prometheus_client must not be imported before it is set).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
log = logging.getLogger("seasons.serve")


@cli.command()
@click.option("--host", default=None, help="Address to listen on (default: api.host, 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port (default: api.port, 8080).")  # fmt: skip
@click.option("--workers", type=click.IntRange(1, 64), default=None,
              help="Server processes sharing the port (default: api.workers, 1).")  # fmt: skip
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))  # fmt: skip
@pass_state
def serve(
    state: CliState, host: str | None, port: int | None, workers: int | None, log_level: str
) -> None:
    """Serve the HTTP API (/v1/..., /docs) and the web page (/) until interrupted."""
    settings = state.settings
    host = host or settings.api.host
    port = settings.api.port if port is None else port
    workers = settings.api.workers if workers is None else workers
    refuse_open_bind(host, settings.api)
    stacks_on_sigusr1()
    if workers > 1:
        _serve_workers(state, host, port, workers, log_level)
        return

    import uvicorn

    from seasons.http.app import create_app

    app = _app_when_reachable(
        lambda: create_app(settings, clock=state.clock, freeze_gc=True), state
    )
    if app is None:
        return  # stopped while waiting for Redis
    client = app.state.services.seasons.client
    redis_health.check_redis(client, settings, what="serve")  # a Redis to refuse: exit 2
    check_bindable(host, port)
    # One process: the app holds one Redis connection pool and one set of metrics.
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **_server_options(
        settings, log_level)))  # fmt: skip

    def stop() -> None:
        server.should_exit = True

    watch = EvictionWatch(client, settings, stop)
    click.echo(f"seasons: serving http://{_url_host(host)}:{port}/ (Ctrl-C stops)", err=True)
    threading.Thread(target=watch.run, name="eviction-watch", daemon=True).start()
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits 1 when it cannot bind after all (a race)
        raise cli_error(f"cannot listen on {_url_host(host)}:{port}", EXIT_USAGE) from exc
    finally:
        watch.stop.set()
    if watch.refused is not None:
        raise cli_error(watch.refused, EXIT_USAGE)


def _server_options(settings: Settings, log_level: str) -> dict[str, Any]:
    """uvicorn's options, the same for one process and for workers. httptools and uvloop:
    uvicorn's pure-Python parser and asyncio's loop cost about twice the CPU per request
    (docs/benchmarks.md#the-http-server); httptools with one write per response, the request
    head's limits and the head's and body's deadlines (:mod:`seasons.http.server`). The app decides
    itself which peers' forwarding headers to trust (api.trusted_proxies): uvicorn must not
    rewrite the client address from them (it would, for FORWARDED_ALLOW_IPS=*)."""
    from seasons.http.server import protocol

    return {
        "loop": "uvloop", "http": protocol(settings.api), "log_level": log_level,
        "access_log": settings.api.access_log, "server_header": False,
        "proxy_headers": False,
    }  # fmt: skip


def _serve_workers(state: CliState, host: str, port: int, workers: int, log_level: str) -> None:
    """``workers`` uvicorn processes on one listening socket (uvicorn's supervisor). Each
    builds its app from the environment and the config file, as this command read them
    (:func:`seasons.http.app.from_environment`); request metrics are kept in a directory
    shared by the workers (prometheus_client's multiprocess mode), so any worker's
    /metrics shows the sum. SIGTERM or SIGINT stops every worker, then the supervisor."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from seasons.api import Seasons

    settings = state.settings
    facade = _app_when_reachable(lambda: Seasons(settings), state)
    if facade is None:
        return
    try:
        redis_health.check_redis(facade.client, settings, what="serve")
        check_bindable(host, port)
        if state.config_file is not None:  # the workers read the same file
            os.environ["SEASONS_CONFIG"] = str(state.config_file)
        with metrics_dir():
            config = uvicorn.Config(
                "seasons.http.app:from_environment", factory=True, host=host, port=port,
                workers=workers, **_server_options(settings, log_level),
            )  # fmt: skip
            try:
                sock = config.bind_socket()
            except SystemExit as exc:
                raise cli_error(f"cannot listen on {_url_host(host)}:{port}", EXIT_USAGE) from exc
            supervisor = Multiprocess(config, sockets=[sock])
            watch = EvictionWatch(facade.client, settings, supervisor.should_exit.set)
            click.echo(
                f"seasons: serving http://{_url_host(host)}:{port}/ with {workers} workers "
                "(Ctrl-C stops)", err=True,
            )  # fmt: skip
            threading.Thread(target=watch.run, name="eviction-watch", daemon=True).start()
            try:
                supervisor.run()
            finally:
                watch.stop.set()
                sock.close()
    finally:
        facade.close()
    if watch.refused is not None:
        raise cli_error(watch.refused, EXIT_USAGE)


@contextmanager
def metrics_dir() -> Iterator[Path]:
    """The directory of prometheus_client's multiprocess mode for the workers: the one in
    ``PROMETHEUS_MULTIPROC_DIR`` if set (its value files emptied first: values left from an
    earlier run would be added to this one's), else a new one, removed at the end."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink()
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix="seasons-metrics-"))
    os.environ[MULTIPROC_ENV] = str(path)
    try:
        yield path
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


def refuse_open_bind(host: str, api: ApiSettings) -> None:
    """Exit 2 before listening on a non-loopback address while a write or admin token is
    empty, unless ``api.allow_empty_tokens``: such calls are refused to remote clients anyway,
    but an operator who opens the port to the network most likely meant to set tokens."""
    empty = [f"api.{n}_token" for n in ("write", "admin") if not getattr(api, f"{n}_token")]
    if api.admin_tokens:  # admin calls need one of the named tokens
        empty = [name for name in empty if name != "api.admin_token"]
    if host in LOOPBACK_HOSTS or not empty or api.allow_empty_tokens:
        return
    raise cli_error(
        f"refusing to serve on {host} with {' and '.join(empty)} empty: set "
        f"{' and '.join(empty)} (SEASONS_API__WRITE_TOKEN, SEASONS_API__ADMIN_TOKEN), or set "
        "api.allow_empty_tokens = true to serve reads to the network with writes and admin "
        "calls accepted from 127.0.0.1/::1 only",
        EXIT_USAGE,
    )


def check_bindable(host: str, port: int) -> None:
    """Exit 2 with the reason when ``host:port`` cannot be listened on (in use, no such
    address, no permission), before saying "serving"."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
            probe.bind(address)
    except OSError as exc:
        raise cli_error(
            f"cannot listen on {_url_host(host)}:{port}: {exc.strerror or exc}", EXIT_USAGE
        ) from None


class EvictionWatch:
    """Reads Redis's eviction policy every ``worker.heartbeat_interval`` while the server runs;
    a policy that starts evicting (without ``redis.allow_eviction``) stops the server, which
    then exits with status 2, as it would have refused to start on it."""

    def __init__(self, client: RedisClient, settings: Settings, stop_server: Callable[[], None]):
        self.client = client
        self.settings = settings
        self.stop_server = stop_server
        self.stop = threading.Event()
        self.refused: str | None = None

    def run(self) -> None:
        interval = self.settings.worker.heartbeat_interval.total_seconds()
        while not self.stop.wait(interval):
            try:
                health = redis_health.read(self.client, self.settings)
            except BackendUnavailable:
                continue  # /readyz says so; the policy is read again next time
            if health.evicting and not self.settings.redis.allow_eviction:
                self.refused = redis_health.eviction_message(health.policy)
                log.error("stopping: %s", self.refused)
                self.stop_server()
                return


class _Stopped(BaseException):
    """SIGTERM or SIGINT while serve waits for its Redis. Raised by the handler itself, so
    that an attempt in progress is left at once: a client being built can wait on a socket
    for seconds (an address that accepts and does not answer), which a flag would only be
    read after. A BaseException, so that no ``except Exception`` on the way swallows it."""


def _app_when_reachable(build: Callable[[], Any], state: CliState) -> Any:
    """The app; on a cluster that no node of answers yet, wait for it (as the worker does,
    with ``worker.backoff_*``); None if SIGTERM/SIGINT came meanwhile. uvicorn installs its
    own signal handlers afterwards."""
    stop = threading.Event()

    def stopped(*_: Any) -> None:
        stop.set()
        raise _Stopped

    previous = {sig: signal.signal(sig, stopped) for sig in SIGNALS}
    try:
        backoff = state.settings.worker
        return when_reachable(
            build, initial=backoff.backoff_initial.total_seconds(),
            cap=backoff.backoff_max.total_seconds(), stop=stop, what="serve",
        )  # fmt: skip
    except _Stopped:
        return None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@cli.command()
@click.option("--days", type=click.IntRange(1, 60), default=35, show_default=True,
              help="Local days of scores, ending today (at most: days of a period reaching "
                   "back past retention are left out).")  # fmt: skip
@click.option("--players", type=click.IntRange(1, 100_000), default=200, show_default=True)
@json_option
@pass_state
def demo(state: CliState, days: int, players: int, as_json: bool) -> None:
    """Seed a demo data set: every configured board, DAYS days of PLAYERS players.

    Deterministic and idempotent (every event has an event id): running it twice within
    48 hours changes nothing.
    """
    from seasons.demo import seed_demo

    result = seed_demo(state.app, days=days, players=players)
    if as_json:
        print_json(result)
    else:
        boards = ", ".join(sorted(state.settings.boards)) or "none configured"
        click.echo(
            f"demo data: {result.applied} events applied, {result.duplicates} already there "
            f"(boards: {boards}; namespace {state.settings.namespace!r})"
        )
