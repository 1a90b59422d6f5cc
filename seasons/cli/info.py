"""``seasons config``: the effective settings, after environment, TOML file and defaults; and
what ``seasons status`` shows about safety: safe mode and the Redis server."""

from __future__ import annotations

import json
import os
from typing import Any

import click
from rich.console import Console

from seasons.cli.common import CliState, cli, json_option, pass_state, print_json, redacted_settings
from seasons.config.loading import config_path


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += _flatten(value, f"{name}.")
        else:
            out.append((name, value))
    return out


@cli.command("config")
@json_option
@pass_state
def config_(state: CliState, as_json: bool) -> None:
    """Print the effective settings (tokens and passwords redacted)."""
    data = redacted_settings(state.settings)
    if as_json:
        print_json(data)
        return
    source = state.config_file or config_path(os.environ)
    click.echo(f"# settings file: {source or 'none'}; SEASONS_* environment variables override it")
    for name, value in _flatten(data):
        click.echo(f"{name} = {json.dumps(value, ensure_ascii=False)}")


# --- `seasons status`: safe mode and the Redis server (called by the status command) -------

ADVICE = {
    "data_loss": (
        "Redis lost Seasons' data (restart without persistence, FLUSHALL, an empty replica "
        "promoted). Run `seasons restore --all` to load the archives back, or "
        "`seasons acknowledge-loss` to accept the loss."
    ),
    "marker_mismatch": (
        "This Redis is not the one whose archives are in archive.dir: check redis.url, "
        "namespace and archive.dir. If both are right, run `seasons acknowledge-loss`."
    ),
    "archive_conflict": (
        "A close would have changed an archive file on disk: Redis holds other standings "
        "(an old RDB or AOF loaded?). Check the archive, `seasons restore` it, then run "
        "`seasons acknowledge-loss`."
    ),
}


def print_safety(out: Console, safe_mode: dict[str, Any] | None, health: dict[str, Any]) -> None:
    """Safe mode first and loudly, then one line on the Redis server."""
    if safe_mode is not None:
        reason = str(safe_mode.get("reason", "unknown"))
        out.print(
            f"[bold red]SAFE MODE ({reason})[/] since {safe_mode.get('detected_at', '?')} "
            f"(worker {safe_mode.get('worker', '?')}): closes, archives and the sweep are "
            "stopped",
            markup=True,
        )
        out.print(f"  {safe_mode.get('message', '')}", markup=False)
        advice = ADVICE.get(
            reason, "Check Redis and the archives, then `seasons acknowledge-loss`."
        )
        out.print(f"  [bold]what to do:[/] {advice}", markup=True)
    limit = health.get("maxmemory") or 0
    used = health.get("used_memory", 0)
    memory = f"{used} of {limit} bytes" if limit else f"{used} bytes (no maxmemory)"
    out.print(f"redis: maxmemory-policy {health.get('policy')}, memory {memory}", markup=False)
    if health.get("evicting") and health.get("eviction_allowed"):
        out.print(
            "[bold yellow]warning:[/] Redis may evict Seasons' keys (redis.allow_eviction "
            "is set): scores, event ids, job state and archive keys can vanish",
            markup=True,
        )
    for code, message in health.get("problems", {}).items():
        out.print(f"[bold red]{code}:[/] {message}", markup=True)
