"""``seasons serve`` (the HTTP API and web page) and ``seasons demo`` (seed demo data)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

import click

from seasons.cli.common import CliState, cli, json_option, pass_state, print_json
from seasons.connection import when_reachable

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@cli.command()
@click.option("--host", default=None, help="Address to listen on (default: api.host, 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="Port (default: api.port, 8080).")  # fmt: skip
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))  # fmt: skip
@pass_state
def serve(state: CliState, host: str | None, port: int | None, log_level: str) -> None:
    """Serve the HTTP API (/v1/..., /docs) and the web page (/) until interrupted."""
    import uvicorn

    from seasons.http.app import create_app

    settings = state.settings
    app = _app_when_reachable(
        lambda: create_app(settings, clock=state.clock, freeze_gc=True), state
    )
    if app is None:
        return  # stopped while waiting for Redis
    host = host or settings.api.host
    port = settings.api.port if port is None else port
    click.echo(f"seasons: serving http://{_url_host(host)}:{port}/ (Ctrl-C stops)", err=True)
    # One process: the app holds one Redis connection pool and one set of metrics.
    uvicorn.run(app, host=host, port=port, log_level=log_level, server_header=False)


def _app_when_reachable(build: Callable[[], Any], state: CliState) -> Any:
    """The app; on a cluster that no node of answers yet, wait for it (as the worker does,
    with ``worker.backoff_*``); None if SIGTERM/SIGINT came meanwhile. uvicorn installs its
    own signal handlers afterwards."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in SIGNALS}
    try:
        backoff = state.settings.worker
        return when_reachable(
            build, initial=backoff.backoff_initial.total_seconds(),
            cap=backoff.backoff_max.total_seconds(), stop=stop, what="serve",
        )  # fmt: skip
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@cli.command()
@click.option("--days", type=click.IntRange(1, 60), default=35, show_default=True,
              help="Local days of scores, ending today (days past retention are skipped; "
                   "the default reaches into the previous season).")  # fmt: skip
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
