"""``seasons held list|approve|reject BOARD [EVENT_ID]``: reviewing the events a board's
per-member limits held (docs/writes.md#held-events), as ``Seasons.held/approve/reject`` and
the admin routes ``/v1/admin/boards/{board}/held`` do. Exit 0 on success (a decision
repeated included), 2 on bad input (an unknown board among it), 3 for an unknown held event,
1 when the decision is refused (decided the other way, season closed)."""

from __future__ import annotations

import click

from seasons.audit import cli_actor
from seasons.cli.common import (
    CliState,
    cli,
    json_option,
    pass_state,
    print_json,
    reason_option,
)
from seasons.cli.text import plural
from seasons.held import MAX_LIMIT
from seasons.models import HeldDecision


@cli.group()
def held() -> None:
    """Review the events a board's limits held (member_rate, max_period_gain)."""


@held.command("list")
@click.argument("board")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=100, show_default=True,
              help="Events listed.")  # fmt: skip
@click.option("--after", metavar="EVENT_ID", help="List those after this one (a page's next).")
@json_option
@pass_state
def list_held(state: CliState, board: str, limit: int, after: str | None, as_json: bool) -> None:
    """The events held on BOARD, oldest arrival first."""
    page = state.app.held(board, limit=limit, after=after)
    if as_json:
        print_json(page.model_dump(mode="json"))
        return
    for e in page.events:
        click.echo(
            f"{e.event_id}\t{e.member}\t{e.value:g}\t{e.reason}\t"
            f"score {'-' if e.score is None else f'{e.score:g}'} (limit {e.limit:g}, {e.window})"
        )
    click.echo(f"{plural(len(page.events), 'held event')}" + (
        f"; more: --after {page.next}" if page.next else ""), err=True)  # fmt: skip


def _report(decision: HeldDecision, as_json: bool) -> None:
    if as_json:
        print_json(decision.model_dump(mode="json"))
        return
    done = "approved" if decision.action == "approve" else "rejected"
    if decision.repeated:
        click.echo(f"{decision.event_id}: {done} already; nothing changed")
    elif decision.applied:
        click.echo(f"{decision.event_id}: {done}, applied {decision.after.member} "
                   f"{decision.after.value:g} on {decision.board}")  # fmt: skip
    else:
        click.echo(f"{decision.event_id}: {done}")


@held.command()
@click.argument("board")
@click.argument("event_id")
@reason_option
@json_option
@pass_state
def approve(state: CliState, board: str, event_id: str, reason: str | None, as_json: bool) -> None:
    """Apply the held event EVENT_ID of BOARD once, with its original ts."""
    _report(state.app.approve(board, event_id, actor=cli_actor(), reason=reason), as_json)


@held.command()
@click.argument("board")
@click.argument("event_id")
@reason_option
@json_option
@pass_state
def reject(state: CliState, board: str, event_id: str, reason: str | None, as_json: bool) -> None:
    """Drop the held event EVENT_ID of BOARD: it is never applied."""
    _report(state.app.reject(board, event_id, actor=cli_actor(), reason=reason), as_json)
