"""``seasons audit``: the audit trail, newest first (``GET /v1/admin/audit``)."""

from __future__ import annotations

import json

import click
from rich.table import Table

from seasons.audit import ACTIONS, MAX_LIMIT
from seasons.cli.common import CliState, cli, console, json_option, pass_state, print_json


@cli.command()
@click.option("--member", default=None, help="Only the entries naming this member.")
@click.option("--action", default=None, help=f"Only this action's entries: {', '.join(ACTIONS)}.")
@click.option(
    "--limit", "-n", type=int, default=20, show_default=True, help=f"At most {MAX_LIMIT}."
)
@click.option("--after", default=None, help="A stream id (a page's next): older entries only.")
@json_option
@pass_state
def audit(
    state: CliState, member: str | None, action: str | None, limit: int, after: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Who forgot, cleared or restored what, when and why (the <namespace>:audit stream),
    newest first. Bad input (an unknown action, a bad --after, --limit out of range) exits 2."""
    page = state.app.audit(member=member, action=action, limit=limit, after=after)
    if as_json:
        print_json(page)
        return
    table = Table(title="audit trail, newest first")
    for name in ("stream id", "at", "actor", "action", "member", "boards", "reason", "after"):
        table.add_column(name, overflow="fold")
    for e in page.entries:
        who = e.member if e.member is not None else (f"#{e.member_hash[:12]}" if e.member_hash
                                                     else "")  # fmt: skip
        after = json.dumps(e.after, separators=(",", ":"), ensure_ascii=False)
        table.add_row(e.stream_id, e.at, e.actor, e.action, who, ",".join(e.boards),
                      e.reason or "", after)  # fmt: skip
    console().print(table)
    if page.next is not None:
        click.echo(f"more: --after {page.next}", err=True)
