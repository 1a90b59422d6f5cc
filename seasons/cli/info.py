"""``seasons config``: the effective settings, after environment, TOML file and defaults."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from config.loading import config_path
from seasons.cli.common import CliState, cli, json_option, pass_state, print_json, redacted_settings


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
