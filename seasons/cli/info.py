"""``seasons config``: the effective settings, after environment, TOML file and defaults; and
how ``seasons status`` prints: safe mode, the Redis server, the worker and its jobs, the
seasons (its ``--json`` is the HTTP JSON instead)."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import click
from rich.console import Console
from rich.table import Table

from seasons.catalog import SeasonsList
from seasons.cli.common import CliState, cli, json_option, pass_state, print_json, redacted_settings
from seasons.config.loading import config_path
from seasons.jobs.report import JobsReport, RedisReport, SafeMode


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += _flatten(value, f"{name}.")
        else:
            out.append((name, value))
    return out


@cli.command("config")
@json_option
@pass_state
def config_(state: CliState, as_json: bool) -> None:
    """Print the effective settings (tokens and passwords redacted)."""
    data = redacted_settings(state.settings)
    if as_json:
        print_json(data)
        return
    source = state.config_file or config_path(os.environ)
    click.echo(f"# settings file: {source or 'none'}; SEASONS_* environment variables override it")
    for name, value in _flatten(data):
        click.echo(f"{name} = {json.dumps(value, ensure_ascii=False)}")


# --- `seasons status`: safe mode and the Redis server (called by the status command) -------

ADVICE = {
    "data_loss": (
        "Redis lost Seasons' data (restart without persistence, FLUSHALL, an empty replica "
        "promoted). Run `seasons restore --all` to load the archives back, or "
        "`seasons acknowledge-loss` to accept the loss."
    ),
    "marker_mismatch": (
        "This Redis is not the one whose archives are in archive.dir: check redis.url, "
        "namespace and archive.dir. If both are right, run `seasons acknowledge-loss`."
    ),
    "archive_conflict": (
        "A close would have changed an archive file on disk: Redis holds other standings "
        "(an old RDB or AOF loaded?). Check the archive, `seasons restore` it, then run "
        "`seasons acknowledge-loss`."
    ),
}


def print_safety(
    out: Console, safe_mode: SafeMode | None, health: RedisReport, zone: ZoneInfo
) -> None:
    """Safe mode first and loudly, then one line on the Redis server."""
    if safe_mode is not None:
        since = local_time(safe_mode.detected_at, zone)
        out.print(
            f"[bold red]SAFE MODE ({safe_mode.reason})[/] since {since} "
            f"(worker {safe_mode.worker or '?'}): closes, archives and the sweep are stopped",
            markup=True,
        )
        out.print(f"  {safe_mode.message}", markup=False)
        advice = ADVICE.get(
            safe_mode.reason, "Check Redis and the archives, then `seasons acknowledge-loss`."
        )
        out.print(f"  [bold]what to do:[/] {advice}", markup=True)
    limit, used = health.maxmemory, health.used_memory
    memory = f"{used} of {limit} bytes" if limit else f"{used} bytes (no maxmemory)"
    out.print(f"redis: maxmemory-policy {health.policy}, memory {memory}", markup=False)
    if health.evicting and health.eviction_allowed:
        out.print(
            "[bold yellow]warning:[/] Redis may evict Seasons' keys (redis.allow_eviction "
            "is set): scores, event ids, job state and archive keys can vanish",
            markup=True,
        )
    for code, message in health.problems.items():
        out.print(f"[bold red]{code}:[/] {message}", markup=True)


def local_time(when: datetime | None, zone: ZoneInfo) -> str:
    """An instant as ``seasons status`` shows it: to the second, in ``zone``, without the
    zone (the jobs table's title names it once) nor the year (80 columns)."""
    if when is None:
        return "-"
    return when.astimezone(zone).strftime("%m-%d %H:%M:%S")


def print_hooks(out: Console, report: JobsReport, zone: ZoneInfo) -> None:
    """The webhooks' deliveries, and each one's last failed attempt below the table."""
    if not report.hooks:
        return
    table = Table(title="webhooks", title_justify="left")
    for col in ("hook", "delivered", "pending", "retrying", "failed"):
        table.add_column(col, no_wrap=True)
    for name, hook in report.hooks.items():
        failed = f"[bold red]{hook.failed}[/]" if hook.failed else "0"
        table.add_row(name, str(hook.delivered), str(hook.pending), str(hook.retrying), failed)
    out.print(table)
    for name, hook in report.hooks.items():
        if (last := hook.last_error) is not None:
            what = "given up" if last.final else "to retry"
            out.print(
                f"hook {name}: last error at {local_time(last.at, zone)}: event {last.event} "
                f"{what}: {last.error}", markup=False, overflow="fold",
            )  # fmt: skip


def print_status(out: Console, report: JobsReport, seasons: SeasonsList, zone: ZoneInfo) -> None:
    """``seasons status`` as text, in 80 columns: safety, the worker, its jobs (local times
    in the configured zone, named in the title), the seasons and their boards' states."""
    print_safety(out, report.safe_mode, report.redis, zone)
    beat = report.worker
    if beat is None:
        out.print("worker: [bold red]no heartbeat[/] (no worker running?)")
    else:
        out.print(f"worker: {beat.worker or '?'} alive, last beat {beat.age_seconds}s ago")
    jobs = Table(title=f"jobs (times in {zone.key})", title_justify="left")
    for col in ("job", "last end", "status", "next run", "runs"):
        jobs.add_column(col, no_wrap=True)
    for name, job in report.jobs.items():
        runs = f"{job.runs}" + (f" ({job.failures} failed)" if job.failures else "")
        jobs.add_row(
            name, local_time(job.last_end, zone), job.last_status or "-",
            local_time(job.next_run, zone), runs,
        )  # fmt: skip
    out.print(jobs)
    for name, job in report.jobs.items():  # below the table: an error takes whole lines
        if job.last_error:
            out.print(f"{name}: last error: {job.last_error}", markup=False, overflow="fold")
    print_hooks(out, report, zone)
    table = Table(title=f"seasons (current: {seasons.current or 'none'})", title_justify="left")
    for col in ("season", "first day", "last day", "status"):
        table.add_column(col, no_wrap=True)
    table.add_column("boards", overflow="fold")
    for season in seasons.seasons:
        boards = " ".join(
            f"{b}={info.state}" + (f"({info.archive.count})" if info.archive else "")
            for b, info in season.boards.items()
        )
        table.add_row(season.season, str(season.first_day), str(season.last_day), season.status,
                      boards)  # fmt: skip
    out.print(table)
