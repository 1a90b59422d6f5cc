"""Operator commands: ``worker``, ``rollup``, ``snapshot``, ``rebuild``, ``restore``,
``export``, ``status``, ``forget`` (SPEC sections 7, 8 and 10).

Each builds the worker's job objects on the command's app and runs one operation now; long
ones (rebuild, restore, export) show a progress bar on stderr when it is a terminal.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from jobs.state import fault_from_env
from jobs.worker import Worker, jobs_report, run_worker
from seasons import catalog
from seasons.cli.common import CliState, cli, console, json_option, pass_state, print_json

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _worker(state: CliState) -> Worker:
    return Worker(state.app)


@contextmanager
def _bar(description: str) -> Iterator[Callable[[int, int | None], None] | None]:
    """A progress callback ``(done, total)`` drawing on stderr, or None off a terminal."""
    err = console(stderr=True)
    if not err.is_terminal:
        yield None
        return
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=err, transient=True,
    )  # fmt: skip
    task = progress.add_task(description, total=None)
    with progress:
        yield lambda done, total: progress.update(task, completed=done, total=total)


def _emit(as_json: bool, data: dict[str, Any], text: str) -> None:
    if as_json:
        print_json(data)
    else:
        click.echo(text)


@cli.command()
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))  # fmt: skip
@pass_state
def worker(state: CliState, log_level: str) -> None:
    """Run the worker (rollups, closes, archives, sweep, heartbeat) until SIGTERM/SIGINT."""
    logging.basicConfig(level=log_level, format=LOG_FORMAT, stream=sys.stderr)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    code = run_worker(lambda: state.app, state.settings, fault=fault_from_env())
    sys.exit(code)


@cli.command()
@click.option("--board", "-b", default=None, help="Only this board (default: all).")
@json_option
@pass_state
def rollup(state: CliState, board: str | None, as_json: bool) -> None:
    """Reconcile the open week and season boards with their day keys now."""
    outcomes = _worker(state).rollup.run(state.clock(), board)
    rows = [asdict(o) for o in outcomes]
    lines = [f"{o.target}: {o.size} entries ({o.mode}, {o.changed} repaired)" for o in outcomes]
    _emit(as_json, {"rollups": rows}, "\n".join(lines) or "nothing to roll up")


@cli.command()
@click.option("--season", "-s", required=True, help="Season id, e.g. S3.")
@json_option
@pass_state
def snapshot(state: CliState, season: str, as_json: bool) -> None:
    """Archive a season: a running one as S@<UTC time> (changing nothing else); an ended
    one is closed now (late events for it are rejected from then on)."""
    results = _worker(state).closes.snapshot(season, state.clock())
    lines = []
    for r in results:
        m = r.manifest
        figures = f"{m.count} members, sha256 {m.sha256[:12]}" if m else "no archive files"
        lines.append(f"{r.board} {r.season}: {r.action.replace('_', ' ')} ({figures})")
    _emit(as_json, {"snapshots": [r.to_dict() for r in results]}, "\n".join(lines))


@cli.command()
@click.option("--board", "-b", default=None, help="Only this board (default: all).")
@click.option("--window", "-w", type=click.Choice(["week", "season", "all"]), default="all",
              show_default=True)  # fmt: skip
@click.option("--period", "-p", default="current", show_default=True,
              help="Week or day id (YYYY-MM-DD), season id, current or previous.")  # fmt: skip
@json_option
@pass_state
def rebuild(state: CliState, board: str | None, window: str, period: str, as_json: bool) -> None:
    """Recompute week and/or season boards from their day keys (after a weight change, or
    to repair them)."""
    with _bar("rebuilding") as bar:
        done = [0]

        def advance(n: int) -> None:
            done[0] += n
            if bar:
                bar(done[0], None)

        outcomes = _worker(state).rollup.rebuild(
            state.clock(), board=board, window=window, period=period, progress=advance
        )
    lines = [f"{o.target}: {o.size} entries ({o.mode})" for o in outcomes]
    _emit(as_json, {"rebuilt": [asdict(o) for o in outcomes]}, "\n".join(lines) or "nothing")


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
@pass_state
def restore(state: CliState, file: Path, as_json: bool) -> None:
    """Load an archive file (<season>.jsonl.gz) back into Redis after checking its manifest."""
    with _bar("restoring") as bar:
        manifest = _worker(state).archives.restore(file, state.clock(), progress=bar)
    _emit(as_json, {"restored": asdict(manifest)},
          f"restored {manifest.board} {manifest.season}: {manifest.count} members")  # fmt: skip


@cli.command()
@click.argument("board")
@click.option("--window", "-w", type=click.Choice(["day", "week", "season"]), default="season",
              show_default=True)  # fmt: skip
@click.option("--period", "-p", default="current", show_default=True,
              help="Period id, current or previous; S@<timestamp> for a snapshot.")  # fmt: skip
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (.jsonl.gz or .jsonl); default stdout.")  # fmt: skip
@pass_state
def export(state: CliState, board: str, window: str, period: str, out: Path | None) -> None:
    """Write a board as JSON lines {rank, member, score, metadata} in rank order."""
    with _bar("exporting") as bar:
        count = _worker(state).archives.export(board, window, period, out, state.clock(), bar)
    if out is not None:
        click.echo(f"exported {count} entries to {out}", err=True)


@cli.command()
@json_option
@pass_state
def status(state: CliState, as_json: bool) -> None:
    """The worker's heartbeat, each job's last and next run, and the seasons' states."""
    now = state.clock()
    app = state.app
    report = jobs_report(app, now)
    seasons = catalog.seasons(app.client, app.settings, app.keys, now)
    if as_json:
        print_json({**report, "seasons": seasons.model_dump(mode="json")})
        return
    out = console()
    beat = report["worker"]
    if beat is None:
        out.print("worker: [bold red]no heartbeat[/] (no worker running?)")
    else:
        name, age = beat.get("worker", "?"), beat.get("age_seconds")
        out.print(f"worker: {name} alive, last beat {age}s ago")
    jobs = Table(title="jobs", title_justify="left")
    for col in ("job", "last start", "last end", "status", "next run", "error"):
        jobs.add_column(col)
    for name, s in report["jobs"].items():
        jobs.add_row(
            name, s.get("last_start", "-"), s.get("last_end", "-"), s.get("last_status", "-"),
            s.get("next_run", "-"), s.get("last_error", ""),
        )  # fmt: skip
    out.print(jobs)
    table = Table(title=f"seasons (current: {seasons.current or 'none'})", title_justify="left")
    for col in ("season", "first day", "last day", "status", "boards"):
        table.add_column(col)
    for s in seasons.seasons:
        boards = " ".join(
            f"{b}={info.state}" + (f"({info.archive.count})" if info.archive else "")
            for b, info in s.boards.items()
        )
        table.add_row(s.season, str(s.first_day), str(s.last_day), s.status, boards)
    out.print(table)


@cli.command()
@click.argument("member")
@json_option
@pass_state
def forget(state: CliState, member: str, as_json: bool) -> None:
    """Remove a member everywhere: every live and archived board, its metadata, and the
    archive files it appears in (rewritten with new manifests)."""
    report = _worker(state).sweeper.forget(member, state.clock())
    boards = report["boards"]
    text = (
        "\n".join(
            f"{b}: removed from {len(r['keys'])} keys"
            + (", metadata" if r["metadata"] else "")
            + (
                f", rewrote {len(r['files_rewritten'])} archive files"
                if r["files_rewritten"]
                else ""
            )
            for b, r in boards.items()
        )
        or f"{member!r} was on no board"
    )
    _emit(as_json, report, text)
