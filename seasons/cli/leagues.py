"""Leagues: ``league`` (a member's cohort, a cohort by id, or a period's overview) and
``league-claim`` (a cohort reward, exactly once).

``--json`` prints exactly the HTTP API's JSON for the same query. Exit statuses are those of
every command: 3 for a member without cohort (``not_in_league``), an unknown cohort or a
member without reward, 1 before the period's close (a claim), 2 for bad input.
"""

from __future__ import annotations

import click
from rich.table import Table

from seasons.cli.common import (
    CliState,
    cli,
    console,
    fmt_score,
    json_option,
    pass_state,
    print_json,
)
from seasons.models import LeagueCohort

period_option = click.option(
    "--period", "-p", default="current", show_default=True,
    help="A period id of the league's window, current or previous.",
)  # fmt: skip


def _cohort_table(c: LeagueCohort) -> Table:
    state = "final" if c.final else f"live, resets at {c.resets_at}"
    title = f"{c.board} · {c.window} {c.period} · cohort {c.cohort} · {c.tier} · {state}"
    table = Table(title=title, title_justify="left")
    for name in ("rank", "member", "score", "zone", "tier after", "reward"):
        table.add_column(name, justify="right" if name in ("rank", "score") else "left")
    for r in c.rows:
        mark = " (you)" if r.member == c.member else ""
        table.add_row(
            "-" if r.rank is None else str(r.rank), r.member + mark, fmt_score(r.score),
            r.zone or "-", r.tier_after, r.reward or "-",
        )  # fmt: skip
    return table


@cli.command()
@click.argument("board")
@click.argument("member", required=False)
@period_option
@click.option("--cohort", "-c", type=int, default=None, help="A cohort by id.")
@json_option
@pass_state
def league(
    state: CliState, board: str, member: str | None, period: str, cohort: int | None,
    as_json: bool,
) -> None:  # fmt: skip
    """The league of BOARD: MEMBER's cohort with its standings and zones, a cohort by id
    (--cohort), or without either the members and cohorts per tier of the period (exit
    status 3 for a member without cohort or an unknown cohort)."""
    if member is not None and cohort is not None:
        raise click.UsageError("give MEMBER or --cohort, not both")
    found = state.app.league(board, member, period=period, cohort=cohort)
    if as_json:
        print_json(found)
        return
    out = console()
    if isinstance(found, LeagueCohort):
        out.print(_cohort_table(found))
        line = f"promote {found.promote}, demote {found.demote}"
        if found.promotion_score is not None:
            line += f", promotion at {fmt_score(found.promotion_score)}"
        if found.member_tier is not None:
            line += f"; {found.member}'s tier: {found.member_tier}"
        out.print(line)
        return
    table = Table(title=f"{found.board} · {found.window} {found.period}", title_justify="left")
    for name in ("tier", "members", "cohorts"):
        table.add_column(name, justify="left" if name == "tier" else "right")
    for t in found.tiers:
        table.add_row(t.tier, str(t.members), str(t.cohorts))
    out.print(table)


@cli.command("league-claim")
@click.argument("board")
@click.argument("member")
@click.option("--period", "-p", required=True, help="The league period's id.")
@click.option("--id", "claim_id", default=None, help="The claim's id (default: a new one).")
@json_option
@pass_state
def league_claim(
    state: CliState, board: str, member: str, period: str, claim_id: str | None, as_json: bool
) -> None:
    """Claim MEMBER's cohort reward of a league period on BOARD, exactly once (exit status 0
    on the first claim and on one already made, 3 without reward, 1 before the close)."""
    done = state.app.claim_league(board, period, member, claim_id=claim_id)
    if as_json:
        print_json(done)
        return
    when = "already claimed at" if done.already_claimed else "claimed now, at"
    click.echo(f"{member}: {done.reward} (rank {done.rank}) {when} {done.claimed_at}")
