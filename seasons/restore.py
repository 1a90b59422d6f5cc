"""``seasons restore``: load archive files back into Redis, checking everything they claim first.

A restore writes ``<ns>:{B}:archive:S`` (no TTL), fills in missing metadata in the board's
``meta`` hash and, for a season (not a snapshot ``S@<ts>``), marks it archived so late events
for it stay rejected. Before it writes anything it checks the file, its manifest, its season,
its lines, the amended versions and claims logs beside it and the archive key already in
Redis (:mod:`seasons.restore_checks`): any problem raises :class:`ArchiveRejected` (bad file)
or :class:`ArchiveExists` (other standings already in Redis) and nothing is written.

An archive of a board with earliest ties gets its reach set back beside the archive key, each
member reached at its line number: the times are gone, their order is the file's. The results
are written as they stood at the close, with the season's amended versions
(:mod:`seasons.restore_results`), and the claims logs' claims loaded back (HSETNX,
:mod:`seasons.restore_claims`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from seasons import restore_claims, restore_results, shards, ties
from seasons.amend import Amender
from seasons.archives import DATA_SUFFIX, TMP_TTL, Archives
from seasons.audit import Audit, Note
from seasons.catalog import archive_dir
from seasons.config.settings import Settings
from seasons.connection import RedisClient
from seasons.errors import ArchiveError, SeasonsError
from seasons.keys import SEASON_ARCHIVED, STATE_SEASON, Keys
from seasons.lifecycle import EventType, Lifecycle, event_id, run_stamp
from seasons.manifest import Manifest, is_amendment
from seasons.restore_checks import Action, Checked, Checker
from seasons.restore_leagues import LeagueChecked, LeagueRestored, LeagueRestorer, league_board
from seasons.scripts import Scripts
from seasons.standings import CHUNK, rejected

Progress = Callable[[int, int], None]  # (rows done, rows in all)


@dataclass(frozen=True, slots=True)
class Restored:
    """What a restore did with one file."""

    board: str
    season: str
    count: int
    action: Action
    file: str
    manifest: Manifest

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board, "season": self.season, "count": self.count,
            "action": self.action, "file": self.file,
        }  # fmt: skip


@dataclass(slots=True)
class RestoreAll:
    """``restore --all``: every file restored, or (when any failed its checks) none."""

    restored: list[Restored] = field(default_factory=list)
    failed: list[tuple[Path, SeasonsError]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # folders of boards not configured
    leagues: list[LeagueRestored] = field(default_factory=list)  # league periods restored

    @property
    def ok(self) -> bool:
        return bool(self.restored or self.leagues) and not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "restored": [r.to_dict() for r in self.restored],
            "leagues": [r.to_dict() for r in self.leagues],
            "failed": [{"file": str(f), **e.to_dict()} for f, e in self.failed],
            "skipped": self.skipped,
        }


class Restorer:
    """Checks and loads archive files of one namespace."""

    def __init__(self, client: RedisClient, settings: Settings, keys: Keys):
        self.client = client
        self.settings = settings
        self.keys = keys
        self.lifecycle = Lifecycle(client, keys, settings)
        self.audit = Audit(client, keys, settings)
        self.scripts = Scripts(client)
        archives = Archives(client, self.scripts, settings, keys)
        self.amender = Amender(client, archives, keys, self.lifecycle)
        self.checker = Checker(client, settings, keys, self.amender)
        self.leagues = LeagueRestorer(client, settings, keys)

    # --- one file -------------------------------------------------------------------------

    def restore(
        self, file: Path, now: datetime, *, force: bool = False, progress: Progress | None = None,
        note: Note | None = None,
    ) -> Restored:  # fmt: skip
        """Check ``file`` (``<season>.jsonl.gz`` next to its manifest), then load it; then
        append its audit entry (``note``: who and why). A refused file appends nothing."""
        checked = self.check(file, now, force=force)
        done = self.load(checked, now, progress=progress, total=len(checked.rows))
        self.audit.append(
            "restore", note or Note(), now, boards=[done.board],
            after={"all": False, "restored": [_audited(done)]},
        )  # fmt: skip
        return done

    def restore_league(
        self, file: Path, now: datetime, *, force: bool = False, note: Note | None = None
    ) -> LeagueRestored:
        """Check one league archive (``<board>/league/<window>-<P>.jsonl.gz``, with its
        manifest beside it and its claims log in the folder above), then load it
        (:mod:`seasons.restore_leagues`) and append its audit entry. A refused file writes
        and appends nothing."""
        board = league_board(self.settings, file)
        if board is None:
            raise rejected(file, "a league archive lies in <board>/league/ of a board with a "
                                 "league")  # fmt: skip
        [done] = self.leagues.load([self.leagues.check(board, file, now, force=force)])
        self.audit.append(
            "restore", note or Note(), now, boards=[board],
            after={"all": False, "restored": [], "leagues": [done.to_dict()]},
        )  # fmt: skip
        return done

    def is_league_file(self, file: Path) -> bool:
        """Whether ``file`` lies in a league's archive folder (:meth:`restore_league`)."""
        return league_board(self.settings, file) is not None

    def check(
        self, file: Path, now: datetime, *, force: bool = False, inside: Path | None = None
    ) -> Checked:
        """Every check of :mod:`seasons.restore_checks`; writes nothing. With ``inside``, the
        file and its manifest must really be in that folder (``restore --all``: no links out)."""
        return self.checker.check(file, now, force=force, inside=inside)

    def load(
        self, checked: Checked, now: datetime, *, progress: Progress | None = None,
        done: int = 0, total: int | None = None,
    ) -> Restored:  # fmt: skip
        """Write a checked file: its standings into the archive key (through a scratch key
        renamed into place), missing metadata, and the season's archived state. With earliest
        ties, the reach set too (reach = line number), written with the archive key, or on
        its own when the archive key is unchanged but the reach set is missing. With dense
        ties, the distinct set of the archive's scores, built again after it. Then the
        ``restore_done`` lifecycle event, its id naming the restore's start ``now`` (one
        restore, or one ``restore --all``): a restore run again is another event."""
        board, season = checked.manifest.board, checked.manifest.season
        rows = checked.rows
        total = len(rows) if total is None else total
        archive = self.keys.archive(board, season)
        meta = self.keys.meta(board)
        tmp = self.keys.tmp(board, f"restore:{season}")
        write = checked.action != "unchanged"
        reached = self.keys.reached(board, "archive", season)
        tmp_reached = self.keys.tmp(board, f"restore-reached:{season}")
        rule = ties.of(self.settings.boards[board])
        reach = rule.reach_set and (write or not self.client.exists(reached))
        if write:
            self.client.delete(tmp)
        if reach:
            self.client.delete(tmp_reached)
        for i in range(0, len(rows), CHUNK):
            part = rows[i : i + CHUNK]
            pipe = self.client.pipeline(transaction=False)
            if write:
                pipe.zadd(tmp, {m: s for _, m, s, _ in part})
                pipe.expire(tmp, TMP_TTL)
            if reach:
                # The rows of a checked file are its lines, in order: row i is line i + 1.
                pipe.zadd(tmp_reached, {row[1]: i + k + 1 for k, row in enumerate(part)})
                pipe.expire(tmp_reached, TMP_TTL)
            for _, m, _, md in part:
                if md:  # metadata stored since (newer) is kept
                    pipe.hsetnx(meta, m, _meta_json(md))
            pipe.execute()
            if progress:
                progress(done + i + len(part), total)
        pipe = self.client.pipeline(transaction=True)
        if write and rows:
            # As a raw command: redis-py's cluster pipeline refuses rename() by name, and
            # in this transaction every key is in the board's slot.
            pipe.execute_command("RENAME", tmp, archive)
            pipe.persist(archive)
        elif write:
            pipe.delete(archive)
        if reach and rows:
            pipe.execute_command("RENAME", tmp_reached, reached)
            pipe.persist(reached)
        elif reach:
            pipe.delete(reached)
        distinct = self.keys.distinct(board, "archive", season)
        dense = rule.distinct_set
        if dense:
            pipe.delete(distinct)  # whatever it held: built again below from the archive
        if "@" not in season:
            pipe.hset(self.keys.state(board), STATE_SEASON + season, SEASON_ARCHIVED)
        pipe.execute()
        cfg = self.settings.boards[board]
        if "@" not in season and shards.is_sharded(cfg):
            # Each store's writes check their own state (seasons.shards, jobs/closes.py
            # _mark): the archived season refuses them there too. Other slots, so after.
            pipe = self.client.pipeline(transaction=False)
            for store in shards.stores(board, cfg):
                pipe.hset(self.keys.state(store), STATE_SEASON + season, SEASON_ARCHIVED)
            pipe.execute()
        if dense:
            # The distinct set of the file's scores, built from the archive just written (or
            # left unchanged: the file's scores all the same), one member per distinct score
            # as Redis writes it. Until it exists, reads walk.
            self.scripts.archive_copy(
                keys=[archive, archive, distinct, distinct], args=["distinct"]
            )
        mf, at_close, replaced = checked.manifest, checked.closed, checked.action == "replaced"
        restore_results.store_results(self.amender, mf, rows, at_close, replaced=replaced)
        claims = self.keys.claims(board, season)
        restore_claims.store(self.client, claims, checked.claims, upgrade=False)
        restore_results.store_amended(
            self.amender, mf, at_close, checked.amended, checked.upgrades, replaced=replaced
        )
        kind = EventType.RESTORE_DONE
        run = run_stamp(now)
        self.lifecycle.emit(
            kind, event_id(kind, board=board, season=season, run=run),
            {"board": board, "season": season, "count": mf.count, "score_sum": mf.score_sum,
             "sha256": mf.sha256, "action": checked.action, "run": run},
            now,
        )  # fmt: skip
        if progress:
            progress(done + len(rows), total)
        return Restored(
            board, season, len(rows), checked.action, str(checked.file), checked.manifest
        )

    # --- every file of the namespace ------------------------------------------------------

    def files(self) -> tuple[list[Path], list[str]]:
        """(archive files of the configured boards, folders of boards not configured)."""
        found: list[Path] = []
        for board in sorted(self.settings.boards):
            folder = archive_dir(self.settings, board)
            if folder.is_dir():
                found += sorted(
                    p for p in folder.glob(f"*{DATA_SUFFIX}") if not is_amendment(p.name)
                )
        root = self.settings.archive.dir / self.settings.namespace
        others = (
            sorted(
                str(p) for p in root.iterdir() if p.is_dir() and p.name not in self.settings.boards
            )
            if root.is_dir()
            else []
        )
        return found, others

    def restore_all(
        self,
        now: datetime,
        *,
        force: bool = False,
        progress: Progress | None = None,
        note: Note | None = None,
    ) -> RestoreAll:
        """Check every archive file of the namespace, the leagues' included; if all pass,
        load them all. If any fails, nothing is written and the report lists every failure."""
        report = RestoreAll()
        files, report.skipped = self.files()
        league_files, aside = self.leagues.files()
        report.skipped += aside
        checked: list[Checked] = []
        for file in files:
            try:
                c = self.check(file, now, force=force, inside=self.settings.archive.dir)
                if c.manifest.board != file.parent.name:
                    raise rejected(
                        file, f"its manifest names board {c.manifest.board!r}, but the file "
                        f"is in the folder of board {file.parent.name!r}",
                    )  # fmt: skip
                checked.append(c)
            except ArchiveError as exc:  # Redis errors are not the file's: they stop the run
                report.failed.append((file, exc))
        leagues: list[LeagueChecked] = []
        for board, file in league_files:
            try:
                leagues.append(
                    self.leagues.check(
                        board, file, now, force=force, inside=self.settings.archive.dir
                    )
                )
            except ArchiveError as exc:
                report.failed.append((file, exc))
        if report.failed:
            return report
        total = sum(len(c.rows) for c in checked)
        done = 0
        for c in checked:
            report.restored.append(self.load(c, now, progress=progress, done=done, total=total))
            done += len(c.rows)
        report.leagues = self.leagues.load(leagues)
        # One entry for the run, when it loaded every file (none when any was refused, or
        # when there was none).
        if not report.ok:
            return report
        boards = [r.board for r in report.restored] + [r.board for r in report.leagues]
        self.audit.append(
            "restore", note or Note(), now, boards=list(dict.fromkeys(boards)),
            after={"all": True, "restored": [_audited(r) for r in report.restored],
                   "leagues": [r.to_dict() for r in report.leagues]},
        )  # fmt: skip
        return report


def _audited(done: Restored) -> dict[str, Any]:
    """What an audit entry records of one file restored (no member: the file's lines)."""
    return {
        "board": done.board, "season": done.season, "action": done.action,
        "count": done.count, "sha256": done.manifest.sha256,
    }  # fmt: skip


def _meta_json(meta: dict[str, Any]) -> str:
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
