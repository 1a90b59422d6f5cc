"""Operator commands: ``worker``, ``rollup``, ``snapshot``, ``rebuild``, ``reshard``, ``restore``,
``acknowledge-loss``, ``export``, ``status``, ``forget``, ``clear`` (docs/operations.md,
docs/cli.md).

Each runs one job's operation now on the command's app (the job object built by
``seasons.jobs.registry``, no worker or scheduler); long ones (rebuild, restore, export) show
a progress bar on stderr when it is a terminal.
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

from seasons import catalog
from seasons import windows as win
from seasons.audit import Note, cli_actor
from seasons.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    CliState,
    cli,
    console,
    describe,
    json_option,
    pass_state,
    print_json,
    reason_option,
    stacks_on_sigusr1,
)
from seasons.cli.info import print_status
from seasons.cli.text import plural
from seasons.errors import InvalidInput
from seasons.jobs import registry
from seasons.jobs.integrity import mark_recovered, read_safe_mode
from seasons.jobs.report import jobs_report
from seasons.jobs.rollup import ALL, REBUILDS
from seasons.jobs.state import fault_from_env, no_checkpoint
from seasons.jobs.worker import run_worker
from seasons.reshard import reshard as move_shards
from seasons.restore import RestoreAll, Restorer
from seasons.writes import new_batch_id

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# `seasons worker --help`: the jobs as the registry declares them (\b keeps click's lines).
WORKER_HELP = "Run the worker's jobs until SIGTERM/SIGINT.\n\n\b\n" + "\n".join(
    f"{job.name} (every worker.{job.interval})\n    {job.does}" for job in registry.JOBS
)


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


@cli.command(help=WORKER_HELP)
@click.option("--log-level", default="INFO", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))  # fmt: skip
@pass_state
def worker(state: CliState, log_level: str) -> None:
    logging.basicConfig(level=log_level, format=LOG_FORMAT, stream=sys.stderr)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    stacks_on_sigusr1()
    code = run_worker(lambda: state.app, state.settings, fault=fault_from_env())
    sys.exit(code)


@cli.command()
@click.option("--board", "-b", default=None, help="Only this board (default: all).")
@json_option
@pass_state
def rollup(state: CliState, board: str | None, as_json: bool) -> None:
    """Reconcile the open week, month and season boards with their day keys now."""
    outcomes = registry.rollup_of(state.app.backend).run(state.clock(), board)
    rows = [asdict(o) for o in outcomes]
    lines = [
        f"{o.target}: {plural(o.size, 'entry')} ({o.mode}, {o.changed} repaired)" for o in outcomes
    ]
    _emit(as_json, {"rollups": rows}, "\n".join(lines) or "nothing to roll up")


@cli.command()
@click.option("--season", "-s", required=True, help="Season id, e.g. S3.")
@json_option
@pass_state
def snapshot(state: CliState, season: str, as_json: bool) -> None:
    """Archive a season: a running one as S@<UTC time> (changing nothing else); an ended
    one is closed now (late events for it are rejected from then on)."""
    results = registry.closes_of(state.app.backend).snapshot(season, state.clock())
    lines = []
    for r in results:
        m = r.manifest
        figures = (
            f"{plural(m.count, 'member')}, sha256 {m.sha256[:12]}" if m else "no archive files"
        )
        lines.append(f"{r.board} {r.season}: {r.action.replace('_', ' ')} ({figures})")
    _emit(as_json, {"snapshots": [r.to_dict() for r in results]}, "\n".join(lines))


@cli.command()
@click.option("--board", "-b", default=None, help="Only this board (default: all).")
@click.option("--window", "-w", type=click.Choice(REBUILDS), default=ALL,
              show_default=True)  # fmt: skip
@click.option("--period", "-p", default="current", show_default=True,
              help="Day or week id (YYYY-MM-DD), month id (YYYY-MM), season id, current or "
                   "previous.")  # fmt: skip
@json_option
@pass_state
def rebuild(state: CliState, board: str | None, window: str, period: str, as_json: bool) -> None:
    """Recompute week, month and/or season boards from their day keys (after a weight
    change, or to repair them)."""
    with _bar("rebuilding") as bar:
        done = [0]

        def advance(n: int) -> None:
            done[0] += n
            if bar:
                bar(done[0], None)

        outcomes = registry.rollup_of(state.app.backend).rebuild(
            state.clock(), board=board, window=window, period=period, progress=advance
        )
    lines = [f"{o.target}: {plural(o.size, 'entry')} ({o.mode})" for o in outcomes]
    _emit(as_json, {"rebuilt": [asdict(o) for o in outcomes]}, "\n".join(lines) or "nothing")


@cli.command()
@click.option("--board", "-b", required=True, help="The board whose keys move.")
@click.option(
    "--from",
    "old",
    type=int,
    required=True,
    help="The shard count its keys have now (the settings name the new one).",
)
@click.option(
    "--force", is_flag=True, help="Move a running season's entries too (stop every writer first)."
)
@json_option
@pass_state
def reshard(state: CliState, board: str, old: int, force: bool, as_json: bool) -> None:
    """Move a board's live keys to the shard count its settings name (boards.<b>.shards),
    at a season boundary, with every writer stopped (docs/sharding.md)."""
    app = state.app
    with _bar("resharding") as bar:
        moved = [0]

        def advance(n: int) -> None:
            moved[0] += n
            if bar:
                bar(moved[0], None)

        done = move_shards(
            app.client, state.settings, app.keys, board, old, state.clock(), force=force,
            progress=advance,
        )  # fmt: skip
    _emit(
        as_json, done.to_dict(),
        f"{board}: {plural(done.keys_moved, 'key')} moved from {old} to {done.new} shards "
        f"({plural(done.entries, 'entry')}), {plural(len(done.deleted), 'old key')} deleted "
        "or emptied",
    )  # fmt: skip


@cli.command()
@click.argument("file", required=False,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))  # fmt: skip
@click.option("--all", "everything", is_flag=True,
              help="Every archive file of the namespace (after Redis lost its data).")  # fmt: skip
@click.option("--force", is_flag=True,
              help="Replace an archive key that holds other standings than the file.")  # fmt: skip
@reason_option
@json_option
@pass_state
def restore(
    state: CliState, file: Path | None, everything: bool, force: bool, reason: str | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Load an archive file (<season>.jsonl.gz) back into Redis, or with --all every archive
    file under <archive.dir>/<namespace>/<board>/ (the leagues' archives and claims
    included), after checking everything it claims.

    Refused, writing nothing (exit 2): a file that does not match its manifest, a running
    or future season, bad lines. An archive key with other standings needs --force (else
    exit 1); the same standings again change nothing. --all loads nothing unless every file
    checks out, then ends safe mode.
    """
    if (file is None) == (not everything):
        raise click.UsageError("give one archive FILE or --all")
    app = state.app
    note = Note.of(cli_actor(), reason)
    restorer = Restorer(app.client, app.settings, app.keys)
    if file is not None and restorer.is_league_file(file):
        lg = restorer.restore_league(file, state.clock(), force=force, note=note)
        _emit(as_json, lg.to_dict(), f"{lg.action} {lg.board} league {lg.window} {lg.period}: "
              f"{plural(lg.count, 'outcome')}, {plural(lg.claims, 'claim')}")  # fmt: skip
        return
    if file is not None:
        with _bar("restoring") as bar:
            done = restorer.restore(file, state.clock(), force=force, progress=bar, note=note)
        text = f"{done.action} {done.board} {done.season}: {plural(done.count, 'member')}"
        _emit(as_json, {"restored": asdict(done.manifest), "action": done.action}, text)
        return
    with _bar("restoring all") as bar:
        report = restorer.restore_all(state.clock(), force=force, progress=bar, note=note)
    if report.ok:
        mark_recovered(app.client, app.keys, app.settings, reason="restore --all")
    _restore_all_output(report, as_json, app.settings.archive.dir / app.settings.namespace)
    if not report.ok:
        refused = [e for _, e in report.failed]
        bad_input = refused and all(isinstance(e, InvalidInput) for e in refused)
        sys.exit(EXIT_USAGE if bad_input else EXIT_FAILURE)


def _restore_all_output(report: RestoreAll, as_json: bool, root: Path) -> None:
    if as_json:
        print_json({**report.to_dict(), "recovered": report.ok})
        return
    for r in report.restored:
        click.echo(f"{r.action} {r.board} {r.season}: {plural(r.count, 'member')}")
    for lg in report.leagues:
        click.echo(f"{lg.action} {lg.board} league {lg.window} {lg.period}: "
                   f"{plural(lg.count, 'outcome')}, {plural(lg.claims, 'claim')}")  # fmt: skip
    for folder in report.skipped:
        click.echo(f"skipped {folder}: not a configured board or league", err=True)
    for path, exc in report.failed:
        click.echo(f"FAILED {path}: {describe(exc)}", err=True)
    if report.failed:
        click.echo(f"{plural(len(report.failed), 'archive file')} failed the checks: nothing "
                   "was restored; fix or move them away and run again", err=True)  # fmt: skip
    elif not report.restored:
        click.echo(f"no archive files under {root}: nothing restored (to accept Redis as it "
                   "is, run `seasons acknowledge-loss`)", err=True)  # fmt: skip
    else:
        click.echo("recovered: the namespace marker is renewed and safe mode is over")


@cli.command("acknowledge-loss")
@json_option
@pass_state
def acknowledge_loss(state: CliState, as_json: bool) -> None:
    """Accept Redis as it is after a data loss: renew the namespace marker and end safe mode
    without restoring archives (what is not in Redis stays lost)."""
    app = state.app
    found = read_safe_mode(app.client, app.keys)
    mark_recovered(app.client, app.keys, app.settings, reason="acknowledged")
    if as_json:
        print_json({"safe_mode": found, "acknowledged": True})
        return
    if found is None:
        click.echo("not in safe mode; the namespace marker is renewed")
        return
    reason, message = found.get("reason", "?"), found.get("message", "")
    seen = f"detected {found.get('detected_at', '?')} by {found.get('worker', '?')}"
    click.echo(f"safe mode was: {reason}: {message} ({seen})")
    click.echo("acknowledged: the namespace marker is renewed and safe mode is over")


@cli.command()
@click.argument("board")
@click.option("--window", "-w", type=click.Choice(win.WINDOWS), default="season",
              show_default=True)  # fmt: skip
@click.option("--period", "-p", default="current", show_default=True,
              help="Period id, current or previous; S@<timestamp> for a snapshot.")  # fmt: skip
@click.option("--out", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write (.jsonl.gz or .jsonl); default stdout.")  # fmt: skip
@pass_state
def export(state: CliState, board: str, window: str, period: str, out: Path | None) -> None:
    """Write a board as JSON lines {rank, member, score, metadata} in rank order."""
    with _bar("exporting") as bar:
        archives = registry.archives_of(state.app.backend)
        count = archives.export(board, window, period, out, state.clock(), bar)
    if out is not None:
        click.echo(f"exported {plural(count, 'entry')} to {out}", err=True)


@cli.command()
@json_option
@pass_state
def status(state: CliState, as_json: bool) -> None:
    """The worker's heartbeat, each job's last and next run, and the seasons' states."""
    now = state.clock()
    app = state.app
    report = jobs_report(app, now)
    seasons = catalog.seasons(app.client, app.settings, app.keys, now)
    if as_json:  # exactly GET /v1/jobs, with GET /v1/seasons as "seasons"
        print_json({**report.model_dump(mode="json"), "seasons": seasons.model_dump(mode="json")})
        return
    print_status(console(), report, seasons, app.settings.zone)


@cli.command()
@click.argument("member")
@reason_option
@json_option
@pass_state
def forget(state: CliState, member: str, reason: str | None, as_json: bool) -> None:
    """Remove a member everywhere: every live and archived board, its metadata, and the
    archive files it appears in (rewritten with new manifests)."""
    report = state.app.forget(member, actor=cli_actor(), reason=reason)
    text = (
        "\n".join(
            f"{b}: removed from {plural(len(r.keys), 'key')}"
            + (", metadata" if r.metadata else "")
            + (f", {plural(r.held, 'held event')}" if r.held else "")
            + (
                f", rewrote {plural(len(r.files_rewritten), 'archive file')}"
                if r.files_rewritten
                else ""
            )
            for b, r in report.boards.items()
        )
        or f"{member!r} was on no board"
    )
    _emit(as_json, report.model_dump(), text)


@cli.command()
@click.argument("board")
@click.option("--window", "-w", required=True, type=click.Choice(win.WINDOWS),
              help="The window of the period (one the board keeps).")  # fmt: skip
@click.option("--period", "-p", required=True,
              help="Period id (" + "; ".join(f"{w.name}: {w.ids}" for w in win.SPECS.values())
                   + "), current or previous.")  # fmt: skip
@click.option("--with-days", is_flag=True,
              help="A rolled-up window: clear its days too (else only recompute it).")  # fmt: skip
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--id", "run_id", default=None,
              help="The clear's id (default: generated). The same id again resumes a clear "
                   "that was stopped, or answers the one that finished; it never deletes "
                   "twice.")  # fmt: skip
@reason_option
@json_option
@pass_state
def clear(
    state: CliState, board: str, window: str, period: str, with_days: bool, yes: bool,
    run_id: str | None, reason: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Clear one period of a board (a test event, an incident).

    A day: its key is deleted and every rolled-up board holding it (week, month, season,
    all-time) recomputed from its remaining days. A rolled-up window: the board is recomputed
    from its days; with --with-days its days are cleared first. Metadata is left to the sweep.

    Refused, changing nothing (exit 1): a closing or archived season, a day folded into an
    all-time base, a board to recompute with days past retention, another clear of the board
    running. Bad input exits 2. Without --yes it asks first (on stderr); any answer but y
    changes nothing and exits 1.
    """
    app = state.app
    note = Note.of(cli_actor(), reason)  # checked before anything is asked or done
    job = registry.clear_of(app.backend, checkpoint=fault_from_env() or no_checkpoint)
    now = state.clock()
    if not yes:
        plan = job.plan(board, window, period, now, with_days=with_days)
        click.echo(plan.describe(), err=True)
        click.confirm("go ahead?", abort=True, err=True)
    if run_id is None:  # named now, so that a clear stopped midway can be resumed
        run_id = new_batch_id()
        click.echo(f"clear id {run_id} (if it stops midway: run again with --id {run_id})",
                   err=True)  # fmt: skip
    result = job.run(board, window, period, now, with_days=with_days, run_id=run_id, note=note)
    lines = [f"clear {result.run_id}: {result.window} {result.period} of {result.board}"]
    lines += [f"deleted {key}" for key in result.deleted]
    lines += [f"rebuilt {o.target}: {plural(o.size, 'entry')} ({o.mode})" for o in result.rebuilt]
    _emit(as_json, result.model_dump(), "\n".join(lines))
