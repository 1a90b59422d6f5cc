"""``seasons hide|unhide|ban|unban MEMBER [--board B ...] [--mode shadow|open] --reason TEXT``
and ``seasons moderation MEMBER``: hidden and banned members (docs/fair-play.md), as
``Seasons.moderate`` and ``PUT /v1/admin/members/{member}/moderation`` do. ``unhide`` and
``unban`` both make the member visible on the boards named. Exit 0 on success (nothing to
change included), 2 on bad input (an unknown board, a missing or overlong reason)."""

from __future__ import annotations

from collections.abc import Callable

import click

from seasons.audit import MAX_REASON, cli_actor
from seasons.cli.common import CliState, cli, json_option, pass_state, print_json
from seasons.jobs.state import fault_from_env, no_checkpoint
from seasons.models import ModerationChange
from seasons.moderation import DEFAULT_MODE, MODES

# command -> (the state it sets, what it says)
COMMANDS = {
    "hide": ("hidden", "Hide MEMBER: absent from every public read, its writes kept aside."),
    "unhide": ("visible", "Make MEMBER visible again, with every score it earned."),
    "ban": ("banned", "Ban MEMBER: hidden, and its new events applied nowhere."),
    "unban": ("visible", "Make a banned MEMBER visible again."),
}


def _report(change: ModerationChange, as_json: bool) -> None:
    if as_json:
        print_json(change)
        return
    for b in change.boards:
        if b.changed:
            click.echo(f"{b.board}: {b.before.state} -> {b.after.state}"
                       + (f" ({b.after.mode})" if b.after.mode else ""))  # fmt: skip
        else:
            click.echo(f"{b.board}: {b.after.state} already; nothing changed")


def _command(name: str, state: str, text: str) -> Callable[..., None]:
    @click.argument("member")
    @click.option("--board", "-b", "boards", multiple=True,
                  help="A board (repeat for several; default: every board).")  # fmt: skip
    @click.option(
        "--mode",
        type=click.Choice(MODES),
        default=DEFAULT_MODE,
        show_default=True,
        help="The member's self-view: shadow (as if visible) or open (flagged).",
    )
    @click.option(
        "--reason",
        required=True,
        help=f"Why (at most {MAX_REASON} characters): recorded in the audit trail.",
    )
    @json_option
    @pass_state
    def run(
        cli_state: CliState, member: str, boards: tuple[str, ...], mode: str, reason: str,
        as_json: bool,
    ) -> None:  # fmt: skip
        # Crash tests kill the amendment that follows at a checkpoint (seasons.amend).
        cli_state.app.amender.checkpoint = fault_from_env() or no_checkpoint
        change = cli_state.app.moderate(
            member, state, mode=mode, boards=list(boards) or None, reason=reason,
            actor=cli_actor(),
        )  # fmt: skip
        _report(change, as_json)

    run.__doc__ = text
    return cli.command(name)(run)


for _name, (_state, _text) in COMMANDS.items():
    _command(_name, _state, _text)


@cli.command("moderation")
@click.argument("member")
@json_option
@pass_state
def show(cli_state: CliState, member: str, as_json: bool) -> None:
    """MEMBER's state, mode and reason on every board."""
    found = cli_state.app.moderation(member)
    if as_json:
        print_json(found)
        return
    for b in found.boards:
        extra = f"\t{b.mode}\t{b.at}\t{b.actor}\t{b.reason}" if b.state != "visible" else ""
        click.echo(f"{b.board}\t{b.state}{extra}")
