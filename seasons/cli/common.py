"""What every ``seasons`` command shares: the group, settings and app, errors, output.

Settings are loaded once per invocation, on first use (so ``--help`` works with a broken
config); the :class:`~seasons.api.Seasons` app is built on first use too. Every error of
the :mod:`seasons.errors` hierarchy becomes a message on stderr and an exit status, in one
place (:class:`SeasonsGroup`), for the commands of every module. Redis errors are among them:
the Redis clients raise Seasons errors (:mod:`seasons.connection`); any other exception is a
bug and ends with its traceback.

Two answers would mislead a newcomer, so they say what is wrong instead:

- an unknown board while no configuration file was loaded names the ways to load one;
- an empty read (``top`` with nobody ranked, ``rank``/``around`` of a member not ranked) from
  a namespace that holds no Seasons data at all (no namespace marker, no key) says that this
  is probably the wrong Redis or namespace: on stderr, exit status 1, nothing on stdout. It
  is not bad input (the same query is right against the right Redis), and a script must not
  take an empty board from the wrong server for an answer. The check runs only after an
  empty answer, so it costs nothing otherwise (the HTTP service never runs it).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from rich.console import Console

from seasons import windows as win
from seasons.api import Seasons
from seasons.audit import MAX_REASON
from seasons.clock import Clock, system_clock
from seasons.config.loading import ConfigError, load_settings
from seasons.config.settings import Settings, config_path
from seasons.connection import scan_keys
from seasons.errors import (
    BackendUnavailable,
    BatchRejected,
    EvictionPolicy,
    InvalidInput,
    NotFound,
    NotRanked,
    SeasonsError,
    UnknownBoard,
    UnsupportedRedis,
)
from seasons.redact import REDACTED, mask_url
from seasons.redis_health import check_version

# Exit statuses.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2  # bad usage or bad input; click uses 2 for its usage errors too
EXIT_NOT_FOUND = 3


F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A failure: its message goes to stderr, exit status 1."""

    exit_code = EXIT_FAILURE


class BadInputError(CliError):
    exit_code = EXIT_USAGE


class NotFoundError(CliError):
    exit_code = EXIT_NOT_FOUND


def stacks_on_sigusr1() -> None:
    """A long-running command (worker, serve) writes every thread's stack to stderr (its log)
    on SIGUSR1: what it is doing when it does not stop (scripts/demo asks before it kills)."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def cli_error(message: str, status: int) -> CliError:
    """The click exception that prints ``message`` and exits with ``status``."""
    cls = {EXIT_USAGE: BadInputError, EXIT_NOT_FOUND: NotFoundError}.get(status, CliError)
    return cls(message)


def exit_status(exc: SeasonsError) -> int:
    """The exit status of an error: bad input or a server Seasons must not run on 2, not
    found 3, anything else 1."""
    if isinstance(exc, InvalidInput | EvictionPolicy | UnsupportedRedis):
        return EXIT_USAGE
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    return EXIT_FAILURE  # BackendUnavailable, Conflict, ArchiveError, ...


def describe(exc: SeasonsError) -> str:
    """The error's message, with every problem of a rejected batch on its own line."""
    if isinstance(exc, BatchRejected) and len(exc.details) > 1:
        lines = [f"  event {p['index']}: {p['message']}" for p in exc.details]
        return "batch rejected, nothing written:\n" + "\n".join(lines)
    return exc.message


class CliState:
    """Per-invocation state: the clock, and the settings and app, each built once on use.

    Tests pass their own with ``CliRunner().invoke(cli, args, obj=CliState(clock=...))``.
    """

    def __init__(self, clock: Clock = system_clock, settings: Settings | None = None):
        self.clock = clock
        self.config_file: Path | None = None
        self._settings = settings
        # Whether the settings came with a TOML file (settings given by a caller count as
        # configured): without one, no board is configured.
        self.file_loaded = settings is not None
        self._app: Seasons | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            try:
                self._settings = load_settings(path=self.config_file)
            except ConfigError as exc:
                raise BadInputError(str(exc)) from None
            self.file_loaded = (self.config_file or config_path(os.environ)) is not None
        return self._settings

    @property
    def app(self) -> Seasons:
        """The app, built on first use; its Redis is refused (UnsupportedRedis, exit 2) when
        older than Seasons needs: one ``INFO server`` per invocation."""
        if self._app is None:
            app = Seasons(self.settings, clock=self.clock)
            try:
                check_version(app.client)
            except BaseException:
                app.close()
                raise
            self._app = app
        return self._app

    def namespace_is_empty(self) -> bool:
        """Whether the namespace holds no Seasons data at all: no namespace marker (the worker
        and ``seasons demo`` write it) and no key under ``<namespace>:``."""
        app = self.app
        if app.client.exists(app.keys.marker()):
            return False
        return not any(batch for batch in scan_keys(app.client, f"{app.keys.ns}:*"))

    def no_data_error(self) -> CliError:
        settings = self.settings
        return CliError(
            f"no Seasons data in namespace {settings.namespace!r} at "
            f"{mask_url(settings.redis.url)}: is this the right Redis and namespace? "
            "(redis.url / SEASONS_REDIS__URL, namespace / SEASONS_NAMESPACE; for the demo, "
            "`source var/demo/env` first)"
        )

    def require_data(self) -> None:
        """After an empty read: fail with :meth:`no_data_error` when the namespace holds no
        Seasons data at all (see the module's docstring)."""
        if self.namespace_is_empty():
            raise self.no_data_error()

    def explain(self, exc: SeasonsError) -> CliError:
        """The CLI error for a Seasons error, saying what a newcomer needs to know."""
        message = describe(exc)
        if isinstance(exc, UnknownBoard | BackendUnavailable) and not self.file_loaded:
            what = (
                "no boards are configured"
                if isinstance(exc, UnknownBoard)
                else ("redis.url is its default unless SEASONS_REDIS__URL is set")
            )
            message = message.rstrip(".") + (
                f"; no configuration file was loaded, so {what}: name one with --config FILE "
                "or SEASONS_CONFIG=FILE, or put a seasons.toml in the current directory (for "
                "the demo: `source var/demo/env`)"
            )
        elif isinstance(exc, NotRanked) and self._app is not None:
            try:
                if self.namespace_is_empty():
                    return self.no_data_error()
            except SeasonsError:
                pass  # Redis went away meanwhile: the original error stands
        return cli_error(message, exit_status(exc))

    def close(self) -> None:
        if self._app is not None:
            self._app.close()
            self._app = None


class SeasonsGroup(click.Group):
    """The command group; turns the errors of any command into a message and a status."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SeasonsError as exc:
            state = ctx.find_object(CliState)
            if state is None:
                raise cli_error(describe(exc), exit_status(exc)) from None
            raise state.explain(exc) from None
        except ConfigError as exc:
            raise BadInputError(str(exc)) from None


@click.group(cls=SeasonsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML settings file (default: $SEASONS_CONFIG, else ./seasons.toml if present).",
)
@click.version_option(package_name="seasons", prog_name="seasons")
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None) -> None:
    """Seasons: time-windowed, seasonal leaderboards on Redis.

    Settings come from SEASONS_* environment variables over a TOML file over defaults.
    Exit status: 0 ok, 1 failure, 2 bad usage or input, 3 not found / not ranked.
    """
    state = ctx.ensure_object(CliState)
    if config_file is not None:
        state.config_file = config_file
    ctx.call_on_close(state.close)


pass_state = click.make_pass_decorator(CliState, ensure=True)


# --- shared options ---------------------------------------------------------------------------


def json_option(f: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print the HTTP API's JSON for the same query."
    )(f)


def window_option(default: str) -> Callable[[F], F]:
    def deco(f: F) -> F:
        return click.option(
            "--window",
            "-w",
            type=click.Choice(win.WINDOWS),
            default=default,
            show_default=True,
            help="Time window of the board (one it keeps: boards.<name>.windows).",
        )(f)

    return deco


def period_option(f: F) -> F:
    return click.option(
        "--period",
        "-p",
        default="current",
        show_default=True,
        help="Period id ("
        + "; ".join(f"{w.name}: {w.ids}" for w in win.SPECS.values())
        + "), current or previous.",
    )(f)


# --- output -----------------------------------------------------------------------------------


def console(*, stderr: bool = False) -> Console:
    """A rich console on the current stdout/stderr (colours only on a terminal)."""
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def print_json(data: BaseModel | dict[str, Any] | list[Any]) -> None:
    """Print exactly what the HTTP API would send (indented on a terminal)."""
    indent = 2 if sys.stdout.isatty() else None
    if isinstance(data, BaseModel):
        # The model's own JSON: its scores in their one form (seasons.models.Score).
        click.echo(data.model_dump_json(indent=indent))
        return
    click.echo(json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False))


def fmt_score(score: float | None) -> str:
    """Integral scores without a trailing ``.0`` (composite scores stay readable)."""
    if score is None:
        return "-"
    if score.is_integer() and abs(score) <= 2**53:
        return str(int(score))
    return repr(score)


def fmt_meta(meta: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in meta.items())


# --- settings for display ---------------------------------------------------------------------


def redacted_settings(settings: Settings) -> dict[str, Any]:
    """The effective settings as JSON, with tokens and passwords replaced (empty ones kept)
    and every URL masked (:func:`seasons.redact.mask_url`)."""
    data = settings.model_dump(mode="json")
    data["redis"]["url"] = mask_url(data["redis"]["url"])
    if data["redis"].get("password"):
        data["redis"]["password"] = REDACTED
    for name in ("write_token", "admin_token"):
        if data["api"].get(name):
            data["api"][name] = REDACTED
    for named in data["api"].get("admin_tokens", []):
        named["token"] = REDACTED
    for hook in data["hooks"]:
        hook["url"] = mask_url(hook["url"])
        hook["secret"] = REDACTED
    return data


reason_option = click.option(
    "--reason", default=None,
    help=f"Why (at most {MAX_REASON} characters): recorded in the audit trail (seasons audit).",
)  # fmt: skip
