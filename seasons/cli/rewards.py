"""Rewards of a season: ``rewards`` (results, claims) and ``claim`` (exactly once).

``--json`` prints exactly the HTTP API's JSON for the same query. Exit statuses are those of
every command: ``claim`` exits 0 on the first claim and on one already made (it says which),
3 for a member without reward (``no_reward``, a not-found), 1 while the results are not
computed or are provisional (a conflict), 2 for bad input.
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
from seasons.models import MemberReward, RewardsPage, RewardsSummary
from seasons.read_limits import MAX_LIMIT

season_option = click.option(
    "--season", "-s", required=True,
    help="Season id (S3), or a snapshot S3@YYYYMMDDTHHMMSSZ (provisional results).",
)  # fmt: skip


def _rows_table(title: str, rows: list[MemberReward]) -> Table:
    table = Table(title=title, title_justify="left")
    for name in ("rank", "member", "score", "reward", "claimed"):
        table.add_column(name, justify="right" if name in ("rank", "score") else "left")
    for r in rows:
        claimed = r.claimed_at if r.claimed_at is not None else "no"
        if r.void:  # an amended season's member hidden or banned since: its claim kept
            claimed += " (void)"
        table.add_row(str(r.rank), r.member, fmt_score(r.score), r.reward or "-", claimed)
    return table


def _summary_line(summary: RewardsSummary) -> str:
    """The line above the tiers (a line, not the table's title: a title wraps to the width
    of its narrow table)."""
    state = "provisional" if summary.provisional else "final"
    return (
        f"{summary.board} · {summary.season} · {state} results of {summary.computed_at} · "
        f"{summary.total} ranked, {summary.granted} rewarded, {summary.claimed} claimed"
    )


def _tiers_table(summary: RewardsSummary) -> Table:
    table = Table()
    for name in ("tier", "reward", "granted", "claimed"):
        table.add_column(name, justify="right" if name in ("granted", "claimed") else "left")
    for t in summary.tiers:
        table.add_row(t.tier, t.reward, str(t.count), str(t.claimed))
    return table


@cli.command()
@click.argument("board")
@season_option
@click.option("--member", "-m", default=None, help="One member's result and claim.")
@click.option("--limit", "-n", type=int, default=100, show_default=True,
              help=f"At most {MAX_LIMIT}.")  # fmt: skip
@click.option("--offset", "-k", type=int, default=0, show_default=True, help="Entries to skip.")
@json_option
@pass_state
def rewards(
    state: CliState, board: str, season: str, member: str | None, limit: int, offset: int,
    as_json: bool,
) -> None:  # fmt: skip
    """A season's results on BOARD: each member's rank, score, reward and claim, with the
    tiers (exit status 3 for a member without result, 1 before the results exist)."""
    found = state.app.rewards(board, season, member, offset=offset, limit=limit)
    if as_json:
        print_json(found)
        return
    out = console()
    if isinstance(found, RewardsPage):
        out.print(_summary_line(found.summary))
        out.print(_tiers_table(found.summary))
        out.print(_rows_table(f"results {offset + 1}-{offset + len(found.entries)}",
                              found.entries))  # fmt: skip
    else:
        state_text = " (provisional)" if found.provisional else ""
        out.print(_rows_table(f"{board} · {season}{state_text}", [found]))


@cli.command()
@click.argument("board")
@click.argument("member")
@season_option
@click.option(
    "--id", "claim_id", default=None,
    help="The claim's id (default: a new one). Sent again with the id of the claim that "
    "recorded the reward, the answer is 'claimed now' again.",
)  # fmt: skip
@json_option
@pass_state
def claim(
    state: CliState, board: str, member: str, season: str, claim_id: str | None, as_json: bool
) -> None:
    """Claim MEMBER's reward of a season on BOARD, exactly once (exit status 0 on the first
    claim and on one already made, 3 without reward, 1 before the results exist or on a
    snapshot's provisional results)."""
    done = state.app.claim(board, season, member, claim_id=claim_id)
    if as_json:
        print_json(done)
        return
    when = "already claimed at" if done.already_claimed else "claimed now, at"
    # An amended season (docs/fair-play.md): a better reward claimed after a first claim, or
    # the kept claim of a member hidden or banned since.
    flag = " [upgrade]" if done.upgrade else " [void: hidden or banned]" if done.void else ""
    click.echo(f"{member}: {done.reward} (rank {done.rank}) {when} {done.claimed_at}{flag}")
