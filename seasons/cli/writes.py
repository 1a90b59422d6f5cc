"""Write commands: ``submit`` one event, ``import`` a file of them (docs/contract.md#writes,
docs/cli.md).

``import`` reads the file twice: first it checks every line (parsing, the batch validation of
docs/contract.md#writes, and the closed-day / archived-season checks of the write script, without
writing), then, only if nothing is wrong anywhere, it writes in batches of
:data:`IMPORT_BATCH` events. A problem on any line is exit status 2 with nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime
from typing import IO, Any

import click
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from seasons.api import Seasons
from seasons.cli.common import (
    CliError,
    CliState,
    cli,
    console,
    fmt_score,
    json_option,
    pass_state,
    print_json,
)
from seasons.cli.eventfile import Format, Line, Problem, detect_format, parse_number, read_events
from seasons.cli.text import HIDDEN, plural
from seasons.errors import BatchRejected, InvalidInput
from seasons.models import WriteResult

IMPORT_BATCH = 1000
MAX_REPORTED = 20  # problems listed on stderr; the rest are counted


class _Number(click.ParamType):
    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        number = parse_number(str(value))
        if number is None:
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


def parse_meta(items: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; a value that reads as a JSON scalar (number, true, false, null,
    a quoted string) is that, anything else is the string as given."""
    meta: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="'--meta'")
        meta[key] = _meta_value(text)
    return meta


def _meta_value(text: str) -> Any:
    def refuse(name: str) -> Any:  # NaN and Infinity are names, not numbers, here
        raise ValueError(name)

    try:
        value = json.loads(text, parse_constant=refuse)
    except ValueError:
        return text
    return value if value is None or isinstance(value, str | int | float | bool) else text


@cli.command(context_settings={"ignore_unknown_options": True})  # VALUE may be negative
@click.argument("board")
@click.argument("member")
@click.argument("value", type=_Number())
@click.option("--ts", help="Event time: RFC 3339 with offset, or epoch seconds (default: now).")
@click.option("--event-id", help="Makes the write idempotent for 48 hours.")
@click.option(
    "--batch-id",
    help="The write's batch id (default: a new one): the same id and event sent again "
    "within 48 hours answer the first result.",
)
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="Metadata field; repeatable.")
@click.option(
    "--standing",
    is_flag=True,
    help="Also print the member's rank and score after the write (read in the same step).",
)
@click.option(
    "--standing-window",
    metavar="WINDOW",
    help="The window of --standing (default: season).",
)
@json_option
@pass_state
def submit(
    state: CliState,
    board: str,
    member: str,
    value: float,
    ts: str | None,
    event_id: str | None,
    batch_id: str | None,
    meta: tuple[str, ...],
    standing: bool,
    standing_window: str | None,
    as_json: bool,
) -> None:
    """Record one score event: VALUE for MEMBER on BOARD."""
    metadata = parse_meta(meta) or None
    try:
        result = state.app.submit(
            board, member, value, ts=ts, event_id=event_id, metadata=metadata,
            batch_id=batch_id, standing=standing, standing_window=standing_window,
        )  # fmt: skip
    except BatchRejected as exc:
        reasons = "; ".join(p["message"] for p in exc.details)
        raise InvalidInput(f"rejected, nothing written: {reasons}", exc.details) from None
    if as_json:
        # The output as before batch ids; scores in the HTTP API's form (Score).
        print_json(result.model_dump(mode="json", exclude={"batch_id"}))
        return
    if result.duplicates:
        click.echo(f"duplicate: event {event_id!r} was already applied; nothing changed")
    else:
        click.echo(f"applied: {member} {value} on {board}")
    for s in result.standings or ():
        where = f"{s.window} {s.period}" if s.period else f"{s.window} (no period that day)"
        if s.rank is None:
            click.echo(f"standing: {s.member} is not on {where}")
        else:
            mark = f" {HIDDEN}" if s.hidden else ""
            click.echo(
                f"standing: {s.member} rank {s.rank}{mark} on {where}, score {fmt_score(s.score)}"
            )


# --- import -----------------------------------------------------------------------------------


class _Bars:
    """Byte progress bars on stderr, only when stderr is a terminal."""

    def __init__(self, total: int | None):
        err = console(stderr=True)
        self.total = total
        self.progress = (
            Progress(
                TextColumn("{task.description:>8}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=err,
                transient=True,
            )
            if err.is_terminal
            else None
        )

    def __enter__(self) -> _Bars:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def task(self, description: str) -> Callable[[int], None] | None:
        progress = self.progress
        if progress is None:
            return None
        task = progress.add_task(description, total=self.total)
        return lambda n: progress.advance(task, n)


def _batches(
    stream: IO[bytes], fmt: Format, on_bytes: Callable[[int], None] | None
) -> Iterator[tuple[list[Line], list[Problem]]]:
    """The file's events in batches, with the lines that are not events."""
    stream.seek(0)
    lines: list[Line] = []
    problems: list[Problem] = []
    for item in read_events(stream, fmt, on_bytes):
        if isinstance(item, Problem):
            problems.append(item)
            continue
        lines.append(item)
        if len(lines) == IMPORT_BATCH:
            yield lines, problems
            lines, problems = [], []
    if lines or problems:
        yield lines, problems


def _check_batch(app: Seasons, lines: list[Line], now: datetime, backfill: bool) -> list[Problem]:
    """What the write path would refuse in this batch, without writing anything."""
    try:
        valid = app.writes.validate([ln.event for ln in lines], now, backfill=backfill)
    except BatchRejected as exc:
        return [Problem(lines[p["index"]].line, p["message"]) for p in exc.details]
    except InvalidInput as exc:
        return [Problem(lines[0].line, exc.message)]
    refused = app.writes.refusals(valid, now, backfill=backfill)
    return [Problem(lines[p["index"]].line, p["message"]) for p in refused]


def _report(problems: list[Problem], total: int, name: str) -> str:
    lines = [str(p) for p in sorted(problems, key=lambda p: p.line)[:MAX_REPORTED]]
    more = total - len(lines)
    if more > 0:
        lines.append(f"... and {more} more")
    return f"{name}: {plural(total, 'bad line')}, nothing written:\n  " + "\n  ".join(lines)


def _open(file: str, stack: ExitStack) -> IO[bytes]:
    """The file, or standard input copied to a temporary file (read twice, size known)."""
    if file != "-":
        return stack.enter_context(open(file, "rb"))
    spool: IO[bytes] = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115
    shutil.copyfileobj(sys.stdin.buffer, spool)
    spool.seek(0)
    return spool


@cli.command("import")
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=str)
)
@click.option(
    "--backfill",
    is_flag=True,
    help="Also write days that are over or closed (not archived seasons, not past retention).",
)
@json_option
@pass_state
def import_(state: CliState, file: str, backfill: bool, as_json: bool) -> None:
    """Import score events from FILE (JSON lines or CSV; '-' reads standard input).

    CSV needs the header board,member,value[,ts][,event_id][,metadata]. Every line is checked
    before anything is written: one bad line (exit status 2) and nothing is written.
    """
    app = state.app
    name = "<stdin>" if file == "-" else file
    with ExitStack() as stack:
        stream = _open(file, stack)
        fmt = detect_format(file, stream.read(4096))
        size = os.fstat(stream.fileno()).st_size
        bars = stack.enter_context(_Bars(size))
        now = state.clock()
        problems: list[Problem] = []
        bad = events = 0
        for lines, parse_problems in _batches(stream, fmt, bars.task("checking")):
            found = parse_problems + (_check_batch(app, lines, now, backfill) if lines else [])
            bad += len(found)
            events += len(lines)
            problems = sorted(problems + found, key=lambda p: p.line)[:MAX_REPORTED]
        if bad:
            raise InvalidInput(_report(problems, bad, name))
        applied = duplicates = written = 0
        for lines, _ in _batches(stream, fmt, bars.task("writing")):
            try:
                # Each chunk is a batch with a new id: the facade resends it after a timeout
                # without applying it twice; running the import again is a new submission,
                # made idempotent by the file's event ids (reported as duplicates).
                result = app.submit_many([ln.event for ln in lines], backfill=backfill)
            except BatchRejected as exc:  # the state changed since the check (a close ran)
                first = lines[exc.details[0]["index"]].line
                raise CliError(
                    f"{name}: import stopped at line {first}: {exc.details[0]['message']}; "
                    f"the {plural(written, 'event')} before line {lines[0].line} were written "
                    f"({applied} applied, {plural(duplicates, 'duplicate')}), none after",
                ) from None
            applied += result.applied
            duplicates += result.duplicates
            written += len(lines)
    total = WriteResult(applied=applied, duplicates=duplicates)
    if as_json:
        print_json(total)
    else:
        click.echo(
            f"imported {plural(events, 'event')} from {name}: {applied} applied, "
            f"{plural(duplicates, 'duplicate')}",
            file=sys.stdout,
        )
