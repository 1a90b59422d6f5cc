"""``seasons events``: the last lifecycle events, newest first (``GET /v1/lifecycle``)."""

from __future__ import annotations

import json

import click
from rich.table import Table

from seasons.cli.common import CliState, cli, console, json_option, pass_state, print_json
from seasons.lifecycle import MAX_LIMIT


@cli.command()
@click.option(
    "--limit", "-n", type=int, default=20, show_default=True, help=f"At most {MAX_LIMIT}."
)
@click.option("--after", default=None, help="A stream id: only the events older than it.")
@json_option
@pass_state
def events(state: CliState, limit: int, after: str | None, as_json: bool) -> None:
    """The last lifecycle events (the <namespace>:lifecycle stream), newest first."""
    found = state.app.lifecycle(limit, after)
    if as_json:
        print_json(found)
        return
    table = Table(title="lifecycle events, newest first")
    table.add_column("stream id", overflow="fold")
    table.add_column("at", overflow="fold")
    table.add_column("type", overflow="fold")
    table.add_column("id", no_wrap=True)  # what a consumer matches on: never cut
    table.add_column("data", overflow="fold")
    for ev in found.events:
        data = json.dumps(ev.data, separators=(",", ":"), ensure_ascii=False)
        table.add_row(ev.stream_id, ev.at, ev.type, ev.id, data)
    console().print(table)
