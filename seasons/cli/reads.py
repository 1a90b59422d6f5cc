"""Read commands: ``top``, ``rank``, ``around``, ``climb``, ``history``.

``--json`` prints exactly the HTTP API's JSON for the same query; without it, a table (with a
column for each part of a composite board's scores).
"""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich.table import Table

from seasons.cli.common import (
    CliState,
    cli,
    console,
    fmt_meta,
    fmt_score,
    json_option,
    pass_state,
    period_option,
    print_json,
    window_option,
)
from seasons.cli.text import HIDDEN
from seasons.errors import NotRanked
from seasons.models import Entry, EntryDetail, HistoryPoint, Page
from seasons.read_limits import DEFAULT_TO_TEXT, parse_targets


def _period_id(state: CliState, board: str, window: str, period: str) -> str:
    """The id that ``current``/``previous`` stand for (pure: no Redis)."""
    return state.app.reads.target(board, window, period)[0]


def _not_ranked(state: CliState, board: str, member: str, window: str, period: str) -> NotRanked:
    return state.app.reads.not_ranked(board, window, member, period)


def _part_names(rows: Sequence[Entry | HistoryPoint]) -> list[str]:
    """The composite parts of the rows' scores (none on a board without them)."""
    return next((list(r.parts) for r in rows if r.parts), [])


def _part_cells(parts: dict[str, int] | None, names: list[str]) -> list[str]:
    return [str(parts[n]) if parts and n in parts else "" for n in names]


def _entries_table(title: str, entries: list[Entry], highlight: str | None = None) -> Table:
    names = _part_names(entries)
    table = Table(title=title, title_justify="left")
    table.add_column("rank", justify="right")
    table.add_column("member")
    table.add_column("score", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    table.add_column("metadata")
    for e in entries:
        style = "bold" if e.member == highlight else None
        member = f"{e.member} {HIDDEN}" if e.hidden else e.member
        cells = [str(e.rank), member, fmt_score(e.score), *_part_cells(e.parts, names)]
        table.add_row(*cells, fmt_meta(e.metadata), style=style)
    return table


def _parts_text(parts: dict[str, int]) -> str:
    """The parts of a composite score in words: ``level 51 · power 117771``."""
    return " · ".join(f"{name} {value}" for name, value in parts.items())


def _page_title(page: Page) -> str:
    return f"{page.board} · {page.window} {page.period} · {page.total} ranked"


@cli.command()
@click.argument("board")
@window_option("season")
@period_option
@click.option("--limit", "-n", type=int, default=10, show_default=True, help="At most 1000.")
@click.option("--offset", "-k", type=int, default=0, show_default=True, help="Entries to skip.")
@json_option
@pass_state
def top(
    state: CliState, board: str, window: str, period: str, limit: int, offset: int, as_json: bool
) -> None:
    """The best entries of BOARD, best first."""
    page = state.app.top(board, window, period=period, limit=limit, offset=offset)
    if page.total == 0:
        state.require_data()  # nobody ranked: say so if this is the wrong Redis or namespace
    if as_json:
        print_json(page)
    else:
        console().print(_entries_table(_page_title(page), page.entries))


@cli.command()
@click.argument("board")
@click.argument("member")
@window_option("season")
@period_option
@json_option
@pass_state
def rank(state: CliState, board: str, member: str, window: str, period: str, as_json: bool) -> None:
    """The rank and score of MEMBER on BOARD (exit status 3 if not ranked)."""
    entry = state.app.rank(board, member, window, period=period)
    if entry is None:
        raise _not_ranked(state, board, member, window, period)
    if as_json:
        print_json(entry)
    else:
        title = f"{board} · {window} {_period_id(state, board, window, period)}"
        out = console()
        out.print(_entries_table(title, [entry]))
        out.print(_standing(entry))


def _standing(entry: EntryDetail) -> str:
    """Where the entry stands on its board, in words."""
    ahead = f"ahead of {entry.percentile:.4g}% of the {entry.total} ranked"
    if entry.gap_up is None:
        return f"{ahead} · no better score on the board"
    return f"{ahead} · {fmt_score(entry.gap_up)} to the next better score"


@cli.command()
@click.argument("board")
@click.argument("member")
@window_option("season")
@period_option
@click.option(
    "--to", "to", default=DEFAULT_TO_TEXT, show_default=True,
    help="Ranks to reach, comma separated (1 to 1000 of them, each 1 to 10^9).",
)  # fmt: skip
@json_option
@pass_state
def climb(
    state: CliState, board: str, member: str, window: str, period: str, to: str, as_json: bool
) -> None:
    """The score at each rank of --to and how far MEMBER's score is from it (exit status 3
    if not ranked)."""
    result = state.app.climb(board, member, window, to=parse_targets(to), period=period)
    if result is None:
        raise _not_ranked(state, board, member, window, period)
    if as_json:
        print_json(result)
        return
    # The member's own place is a line above the table: as the table's title it would wrap
    # to the table's width.
    out = console()
    out.print(
        f"{board} · {window} {result.period} · {member}: rank {result.rank}"
        + (f" {HIDDEN}" if result.hidden else "")
        + f", score {fmt_score(result.score)}",
        highlight=False,
    )
    if result.parts:  # on a line of their own: that line is long already
        out.print(_parts_text(result.parts), highlight=False)
    names = next((list(t.parts) for t in result.targets if t.parts), [])
    table = Table()
    table.add_column("to rank", justify="right")
    table.add_column("score there", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    table.add_column("gap", justify="right")
    for t in result.targets:
        cells = [str(t.rank), fmt_score(t.score), *_part_cells(t.parts, names)]
        table.add_row(*cells, fmt_score(t.gap))
    out.print(table)


@cli.command()
@click.argument("board")
@click.argument("member")
@window_option("season")
@period_option
@click.option("--size", "-s", type=int, default=5, show_default=True, help="At most 101.")
@json_option
@pass_state
def around(
    state: CliState, board: str, member: str, window: str, period: str, size: int, as_json: bool
) -> None:
    """SIZE entries centred on MEMBER (shifted at either end of the board)."""
    page = state.app.around(board, member, window, size=size, period=period)
    if page is None:
        raise _not_ranked(state, board, member, window, period)
    if as_json:
        print_json(page)
    else:
        console().print(_entries_table(_page_title(page), page.entries, highlight=member))


@cli.command()
@click.argument("board")
@click.argument("member")
@window_option("day")
@click.option(
    "--last", "-l", type=int, default=None,
    help="At most 400; default: the window's own number (14 days, 12 weeks, months or seasons).",
)  # fmt: skip
@json_option
@pass_state
def history(
    state: CliState, board: str, member: str, window: str, last: int | None, as_json: bool
) -> None:
    """MEMBER's rank and score on BOARD in each of the last LAST periods, oldest first."""
    app = state.app
    result = app.run(app.reads.history(board, member, window, last=last))
    if as_json:
        print_json(result)
        return
    # The title is a line above the table: as the table's title it would wrap to the
    # table's width, narrower than the title.
    out = console()
    out.print(f"{board} · {member} · last {len(result.history)} {window}s", highlight=False)
    names = _part_names(result.history)
    table = Table()
    table.add_column("period")
    table.add_column("rank", justify="right")
    table.add_column("score", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for point in result.history:
        rank = str(point.rank or "-") + (f" {HIDDEN}" if point.hidden else "")
        cells = [point.period, rank, fmt_score(point.score)]
        table.add_row(*cells, *_part_cells(point.parts, names))
    out.print(table)
