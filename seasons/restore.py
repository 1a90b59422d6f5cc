"""``seasons restore``: load archive files back into Redis, checking everything they claim first.

A restore writes ``<ns>:{B}:archive:S`` (no TTL), fills in missing metadata in the board's
``meta`` hash and, for a season (not a snapshot ``S@<ts>``), marks it archived so late events
for it stay rejected. Before it writes anything it checks that:

- the data file and its manifest are regular files (with ``--all``: really inside
  ``archive.dir``), the manifest's fields each of their type and form
  (:class:`seasons.manifest.Manifest`);
- the data file matches its manifest (sha256, count, ``score_sum``) and is named after the
  manifest's season; the manifest's board is configured;
- the season is configured and has ended: an archive key is what reads of a season use, so
  restoring a running or future season would hide its live board. A snapshot ``S@<ts>``
  needs its base season ``S`` and loads only into ``archive:S@<ts>``, which reads of ``S``
  never use;
- every line is a valid entry: a member by the write path's rule, a finite score within
  ±2^53, flat metadata within its limits, no member twice, ranks from 1 in the board's order
  (earliest ties: ranks are line numbers and equal scores may come in any member order, the
  order of their reach times, which the file does not hold);
- each line's rank, and its ``reward`` if it has one, are those of the close as
  :mod:`seasons.closed` recomputes them (the lines' order, the gaps forgets left, the tiers the
  manifest recorded), with or without ``force``: a line's reward is never trusted;
- the claims log beside the file, if any (:mod:`seasons.claimlog`), holds claims of this
  season whose rewards and ranks are the members' results;
- the archive key, if it exists, holds the same standings (archives are write-once), unless
  ``force`` is given. The same standings again are a no-op.

Any problem raises :class:`ArchiveRejected` (bad file) or :class:`ArchiveExists` (other
standings already in Redis) and nothing is written. Reading a file costs at most what its
manifest's ``count`` allows (:func:`seasons.standings.read_checked`), whatever the file
holds.

An archive of a board with earliest ties gets its reach set back beside the archive key, each
member reached at its line number: the times are gone, their order is the file's. The results
are written as they stood at the close, and the claims log's claims loaded back (HSETNX).

A season's amended versions (:mod:`seasons.amend`), ``<S>.amend-<n>`` beside its file, come
back with it: each checked against its manifest like the close's file, 2, 3, ... without a gap
(else :class:`ArchiveRejected`, nothing written), then written as the amendments left them
(the version hashes, the best results merged in version order, the ``amended:<S>`` marker)
with the upgrade claims log's latest claim of each member. A claim of either log may claim the
reward a member had in any version.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from seasons import amend_files, calendar, claimlog, closed, ties
from seasons.amend import Amender
from seasons.archives import DATA_SUFFIX, MANIFEST_SUFFIX, TMP_TTL, Archives
from seasons.audit import Audit, Note
from seasons.catalog import archive_dir
from seasons.claimlog import LoggedClaim
from seasons.closed import AsClosed
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import RedisClient, text
from seasons.errors import (
    ArchiveError,
    ArchiveExists,
    ArchiveRejected,
    BadPeriod,
    SeasonsError,
)
from seasons.files import open_regular
from seasons.keys import SEASON_ARCHIVED, STATE_AMENDED, STATE_SEASON, Keys
from seasons.lifecycle import EventType, Lifecycle, event_id, run_stamp
from seasons.manifest import AMEND_MARK, Manifest, is_amendment, sha256_read
from seasons.results import Results
from seasons.scripts import Scripts
from seasons.standings import (
    CHUNK,
    KEPT_PROBLEMS,
    SHOWN_PROBLEMS,
    STOP_AFTER,
    LineReward,
    Row,
    Standings,
    read_checked,
    rejected,
)

Progress = Callable[[int, int], None]  # (rows done, rows in all)
Action = Literal["restored", "replaced", "unchanged"]
Had = dict[str, set[tuple[int, str | None]]]  # member -> (rank, reward) in each version

_SNAPSHOT_STAMP = re.compile(r"\d{8}T\d{6}Z")


@dataclass(frozen=True, slots=True)
class Checked:
    """An archive file that passed every check, ready to load."""

    file: Path
    manifest: Manifest
    rows: list[Row]
    action: Action
    closed: AsClosed  # each line's rank and reward at the close (seasons.closed)
    claims: list[LoggedClaim]  # the claims log beside the file: one claim per member
    amended: list[Version]  # the versions n >= 2 beside the file (seasons.amend), in order
    upgrades: list[LoggedClaim]  # the upgrade claims log beside the file: the latest a member


@dataclass(frozen=True, slots=True)
class Version:
    """One amended version of a season's results, read from its checked files."""

    version: int
    manifest: Manifest
    rows: dict[str, str]  # member -> result JSON, as the version's hash holds it


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

    @property
    def ok(self) -> bool:
        return bool(self.restored) and not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "restored": [r.to_dict() for r in self.restored],
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

    def check(
        self, file: Path, now: datetime, *, force: bool = False, inside: Path | None = None
    ) -> Checked:
        """Every check of the module docstring; writes nothing. With ``inside``, the file
        and its manifest must really be in that folder (``restore --all``: no links out)."""
        file = Path(file)
        if not file.name.endswith(DATA_SUFFIX):
            raise rejected(file, f"an archive file's name ends with {DATA_SUFFIX}")
        if is_amendment(file.name):
            raise rejected(
                file,
                "it is a file of amended results (seasons.amend), not a season's archive: "
                "restore the season's <season>.jsonl.gz",
            )
        stem = file.name[: -len(DATA_SUFFIX)]
        try:
            manifest = Manifest.load(file.with_name(stem + MANIFEST_SUFFIX), inside=inside)
        except ArchiveError as exc:
            raise ArchiveRejected(f"{exc.message}; nothing restored", exc.details) from None
        if manifest.board not in self.settings.boards:
            known = ", ".join(sorted(self.settings.boards)) or "none"
            raise rejected(
                file, f"its manifest names board {manifest.board!r}, which is not configured "
                f"(configured: {known})",
            )  # fmt: skip
        if manifest.season != stem:
            raise rejected(
                file, f"its manifest is of season {manifest.season!r}, but the file is named "
                f"after {stem!r}: a renamed file would load into the wrong archive key",
            )  # fmt: skip
        self._check_season(file, manifest.season, now)
        try:
            data = open_regular(file, inside=inside)
        except FileNotFoundError:
            raise rejected(file, "the archive file does not exist") from None
        except OSError as exc:
            raise rejected(file, f"is unreadable: {exc.strerror or exc}") from None
        except ArchiveError as exc:
            raise rejected(file, exc.details["problem"]) from None
        cfg = self.settings.boards[manifest.board]
        with data:
            # One open file is hashed, then read: the lines checked are the bytes hashed.
            digest = sha256_read(data)
            if digest != manifest.sha256:
                raise rejected(
                    file, f"does not match its manifest (sha256 {digest}, manifest says "
                    f"{manifest.sha256}): the file was changed after it was written",
                )  # fmt: skip
            data.seek(0)
            # Lines after a forget's gap keep their ranks at the close: as_closed checks those.
            rows, rewards = read_checked(
                data, file, cfg, manifest.count, check_ranks=not manifest.removed
            )
        total = math.fsum(s for _, _, s, _ in rows)
        if len(rows) != manifest.count or total != manifest.score_sum:
            raise rejected(
                file, f"holds {len(rows)} members with score sum {total}; its manifest says "
                f"{manifest.count} and {manifest.score_sum}",
            )  # fmt: skip
        at_close = _as_closed(file, manifest, rows, rewards, cfg)
        amended = [] if "@" in manifest.season else self._versions(file, manifest, inside)
        had = _results_had(rows, at_close, amended)
        claims = _logged(claimlog.beside(file, manifest.season), manifest, had, inside, first=True)
        upgrades_log = file.with_name(manifest.season + claimlog.UPGRADES_SUFFIX)
        upgrades = _logged(upgrades_log, manifest, had, inside, first=False)
        action = self._compare(file, manifest, rows, force)
        return Checked(file, manifest, rows, action, at_close, claims, amended, upgrades)

    def _versions(self, file: Path, manifest: Manifest, inside: Path | None) -> list[Version]:
        """The amended versions beside ``file`` (``<S>.amend-<n>``), each checked against its
        manifest as the close's file is: 2, 3, ... without a gap, of this board and season."""
        out: list[Version] = []
        archives = self._amender().archives
        try:
            found = amend_files.versions(file.parent, manifest.season)
            if found != list(range(2, len(found) + 2)):
                raise rejected(
                    file, f"the amended versions beside it are {found}: versions run 2, 3, ... "
                    "without a gap (a version's files are missing)",
                )  # fmt: skip
            for n in found:
                stem = f"{manifest.season}{AMEND_MARK}{n}"
                data = file.with_name(stem + DATA_SUFFIX)
                mf, rows = amend_files.read(
                    archives, data, file.with_name(stem + MANIFEST_SUFFIX), inside
                )
                if (mf.board, mf.season) != (manifest.board, manifest.season):
                    raise rejected(data, f"its manifest is of {mf.board} {mf.season}")
                out.append(Version(n, mf, rows))
        except ArchiveRejected:
            raise
        except ArchiveError as exc:
            raise ArchiveRejected(f"{exc.message}; nothing restored", exc.details) from None
        except OSError as exc:
            raise rejected(file, f"an amended version is unreadable: {exc}") from None
        return out

    def _amender(self) -> Amender:
        scripts = Scripts(self.client)
        archives = Archives(self.client, scripts, self.settings, self.keys)
        return Amender(self.client, archives, self.keys, self.lifecycle)

    def _check_season(self, file: Path, season: str, now: datetime) -> None:
        base, at, stamp = season.partition("@")
        try:
            span = calendar.season_by_id(base, self.settings)
        except BadPeriod as exc:
            raise rejected(file, exc.message) from None
        if at:
            # A snapshot loads into archive:S@<ts> only, which no read of S uses.
            if not _SNAPSHOT_STAMP.fullmatch(stamp):
                raise rejected(file, f"snapshot id {season!r} is not <season>@<YYYYMMDDTHHMMSSZ>")
            try:
                taken = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
            except ValueError:
                raise rejected(file, f"snapshot id {season!r} has no valid UTC time") from None
            if taken > now:
                raise rejected(file, f"snapshot {season!r} is dated in the future")
            return
        zone = self.settings.zone
        if now < calendar.day_start(span.start, zone):
            raise rejected(
                file, f"season {base} has not started (first day {span.start}): only seasons "
                "that have ended can be restored",
            )  # fmt: skip
        if now < calendar.season_end(span, zone):
            raise rejected(
                file, f"season {base} is running (last day {span.end}): restoring it would "
                "hide its live board from reads; only seasons that have ended can be restored",
            )  # fmt: skip

    def _compare(self, file: Path, manifest: Manifest, rows: list[Row], force: bool) -> Action:
        key = self.keys.archive(manifest.board, manifest.season)
        kind = text(self.client.type(key))
        if kind == "none":
            return "restored"
        stored: dict[str, float] | None = None
        if kind == "zset":
            # (member, score) pairs: redis-py's types cannot tell them from withscores=True.
            pairs = cast(
                "list[tuple[bytes | str, float]]", self.client.zrange(key, 0, -1, withscores=True)
            )
            stored = {text(m): s for m, s in pairs}
        wanted = {m: s for _, m, s, _ in rows}
        if stored == wanted:
            return "unchanged"
        if force:
            return "replaced"
        if stored is None:
            what = f"is a {kind}, not a sorted set"
        else:
            what = f"holds {len(stored)} members that differ from the file's {len(wanted)}"
            diff = next(
                (m for m in sorted(set(stored) | set(wanted)) if stored.get(m) != wanted.get(m)),
                None,
            )
            if diff is not None:
                what += (
                    f" (e.g. {diff!r}: {stored.get(diff)} in Redis, {wanted.get(diff)} in the file)"
                )
        raise ArchiveExists(
            f"archive key {key} {what}; archives are write-once: restore with --force to "
            f"replace it with {file}",
            {"file": str(file), "key": key},
        )

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
        if dense:
            # The distinct set of the file's scores, built from the archive just written (or
            # left unchanged: the file's scores all the same), one member per distinct score
            # as Redis writes it. Until it exists, reads walk.
            Scripts(self.client).archive_copy(
                keys=[archive, archive, distinct, distinct], args=["distinct"]
            )
        self._results(checked)
        self._claims(checked)
        self._amended(checked)
        mf = checked.manifest
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

    def _results(self, checked: Checked) -> None:
        """The results of the standings loaded (:mod:`seasons.results`) as they stood at the
        close: each line's rank and reward as :func:`seasons.closed.as_closed` recomputed
        them, the tiers' counts and total with the members forgotten since, dated with the
        archive's manifest; complete results of the same standings are kept."""
        board, season = checked.manifest.board, checked.manifest.season
        if checked.action == "replaced":  # of other standings
            self.client.unlink(self.keys.results(board, season))
        standings = Standings(self.client, self.settings, self.keys)
        at_close = checked.closed
        ranks = at_close.ranks
        ranked = ((r, m, s) for r, (_, m, s, _) in zip(ranks, checked.rows, strict=True))
        Results(self.client, standings, self.keys).store(
            board, season, ranked, at_close.matcher, checked.manifest.created,
            provisional="@" in season, absent=at_close.absent,
        )  # fmt: skip

    def _claims(self, checked: Checked) -> None:
        """The claims of the claims log back into the claims hash, each with HSETNX: a claim
        in Redis (made since, or never lost) stands."""
        key = self.keys.claims(checked.manifest.board, checked.manifest.season)
        for i in range(0, len(checked.claims), CHUNK):
            pipe = self.client.pipeline(transaction=False)
            for c in checked.claims[i : i + CHUNK]:
                pipe.hsetnx(key, c.member, c.stored())
            pipe.execute()

    def _amended(self, checked: Checked) -> None:
        """The amended versions as the amendments left them (seasons.amend): each version's
        hash (one already there is kept: write-once), the best results merged version by
        version in order, as each amendment merged them, the upgrade claims (HSETNX: one in
        Redis stands) and the latest version's marker, last."""
        board, season = checked.manifest.board, checked.manifest.season
        amender = self._amender()
        if checked.action == "replaced":  # the versions of other standings
            latest = amender.latest(board, season)
            stale = [self.keys.amended(board, season, n) for n in range(2, latest + 1)]
            upgrades = self.keys.upgrades(board, season)
            self.client.unlink(self.keys.best(board, season), upgrades, *stale)
            self.client.hdel(self.keys.state(board), STATE_AMENDED + season)
        if not checked.amended:
            return
        tiers = checked.closed.matcher.tiers
        for v in checked.amended:
            amender.store(board, season, v.version, v.rows, tiers, v.manifest.created_at)
        for v in checked.amended:
            amender.merge_best(board, season, v.version, tiers)
        key = self.keys.upgrades(board, season)
        for i in range(0, len(checked.upgrades), CHUNK):
            pipe = self.client.pipeline(transaction=False)
            for c in checked.upgrades[i : i + CHUNK]:
                pipe.hsetnx(key, c.member, c.stored()[:-1] + ',"upgrade":true}')  # claim.lua's
            pipe.execute()
        self.client.hset(
            self.keys.state(board), STATE_AMENDED + season, str(checked.amended[-1].version)
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
        """Check every archive file of the namespace; if all pass, load them all. If any
        fails, nothing is written and the report lists every failure."""
        report = RestoreAll()
        files, report.skipped = self.files()
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
        if report.failed:
            return report
        total = sum(len(c.rows) for c in checked)
        done = 0
        for c in checked:
            report.restored.append(self.load(c, now, progress=progress, done=done, total=total))
            done += len(c.rows)
        # One entry for the run, when it loaded every file (none when any was refused, or
        # when there was none).
        if not report.restored:
            return report
        self.audit.append(
            "restore", note or Note(), now, boards=[r.board for r in report.restored],
            after={"all": True, "restored": [_audited(r) for r in report.restored]},
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


# --- results as they stood at the close, and the claims log (seasons.closed, seasons.claimlog)


def _as_closed(
    file: Path, manifest: Manifest, rows: list[Row], rewards: list[LineReward],
    cfg: BoardSettings,
) -> AsClosed:  # fmt: skip
    """Each line's rank and reward at the close, recomputed from the lines' order, the
    manifest's gaps and tiers (:mod:`seasons.closed`); raises :class:`ArchiveRejected` when a
    line's rank, or its ``reward``, is not the recomputed one: a line's reward is never
    trusted, with ``--force`` or not. A manifest without ``tiers`` (written before them) has
    its lines' rewards recomputed from the configured tiers but not compared: a forget before
    then rewrote the lines' ranks and kept the rewards of the close, which no longer match."""
    try:
        tiers = closed.manifest_tiers(manifest.tiers, cfg)
        gaps = closed.manifest_gaps(manifest.removed, len(rows))
        result = closed.as_closed([s for _, _, s, _ in rows], gaps, tiers, cfg)
    except ValueError as exc:
        raise rejected(file.with_name(manifest.season + MANIFEST_SUFFIX), str(exc)) from None
    ranked = len(rows) + len(gaps)
    problems: list[tuple[int, str]] = []
    for n, (row, rank) in enumerate(zip(rows, result.ranks, strict=True), start=1):
        if row[0] != rank:
            problems.append((n, f"rank {row[0]} should be {rank} (ties={cfg.ties!r}, with the "
                                f"manifest's {len(gaps)} removed lines)"))  # fmt: skip
    compared = rewards if manifest.tiers is not None else []
    for n, (has, reward) in enumerate(compared, start=1):
        if has and reward != result.reward(n - 1):
            problems.append((n, f"reward {reward!r} is not the one rank {result.ranks[n - 1]} "
                                f"gets, {result.reward(n - 1)!r} (the manifest's tiers, of "
                                f"{ranked} ranked at the close)"))  # fmt: skip
    if problems:
        raise _linesrejected(file, problems)
    return result


def _results_had(rows: list[Row], result: AsClosed, versions: list[Version]) -> Had:
    """Each member's (rank, reward) in every version of the results: the close's (version
    1, recomputed), then each amended version's. A member forgotten since has none."""
    had: Had = {}
    for i, (_, member, _, _) in enumerate(rows):
        had.setdefault(member, set()).add((result.ranks[i], result.reward(i)))
    for v in versions:
        for member, value in v.rows.items():
            row = json.loads(value)
            had.setdefault(member, set()).add((row["rank"], row["reward"]))
    return had


def _logged(
    path: Path, manifest: Manifest, had: Had, inside: Path | None, *, first: bool
) -> list[LoggedClaim]:
    """The claims of a claims log (``<S>.claims.jsonl``, or the upgrade claims of
    ``<S>.upgrades.jsonl``), one per member: its ``first`` (as HSETNX kept it) or its last
    (as the upgrades hash keeps the latest), leaving out members without a result (forgotten);
    raises :class:`ArchiveRejected` for a line that is not a claim of this season, or whose
    reward and rank the member had in no version of the results (a first claim made after an
    amendment claims the amended reward)."""
    found: dict[str, LoggedClaim] = {}
    problems: list[tuple[int, str]] = []
    try:
        for n, raw in claimlog.lines(path, inside=inside):
            try:
                c = claimlog.parse(raw)
            except ValueError as exc:
                problems.append((n, str(exc)))
                continue
            results = had.get(c.member)
            if (c.board, c.season) != (manifest.board, manifest.season):
                problems.append((n, f"is a claim of {c.board} {c.season}, not of "
                                    f"{manifest.board} {manifest.season}"))  # fmt: skip
            elif results is not None and (c.rank, c.reward) not in results:
                problems.append((n, f"claims {c.reward!r} at rank {c.rank}, but member "
                                    f"{c.member!r} has {_had(results)}"))  # fmt: skip
            elif results is not None and not (first and c.member in found):
                found[c.member] = c
            if len(problems) >= STOP_AFTER:
                break  # the log is clearly bad: reading it further only costs
    except ArchiveError as exc:
        raise rejected(path, f"the claims log {exc.details['problem']}") from None
    except OSError as exc:
        raise rejected(path, f"the claims log is unreadable: {exc}") from None
    if problems:
        raise _linesrejected(path, problems)
    return list(found.values())


def _had(results: set[tuple[int, str | None]]) -> str:
    return " or ".join(f"{w!r} at rank {r}" for r, w in sorted(results, key=str))


def _linesrejected(file: Path, problems: list[tuple[int, str]]) -> ArchiveRejected:
    lines = len({n for n, _ in problems})
    shown = "; ".join(f"line {n}: {p}" for n, p in problems[:SHOWN_PROBLEMS])
    rest = len(problems) - SHOWN_PROBLEMS
    more = f" (and {rest} more)" if rest > 0 else ""
    return ArchiveRejected(
        f"{file}: {len(problems)} problems on {lines} lines, nothing restored: {shown}{more}",
        {
            "file": str(file), "lines": lines, "problems": len(problems),
            "first": [{"line": n, "problem": p} for n, p in problems[:KEPT_PROBLEMS]],
        },
    )  # fmt: skip
