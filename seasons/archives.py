"""Archives of seasons (docs/contract.md#archives): the archive key, the files, verify, export
(restore: :mod:`seasons.restore`; the lines: :mod:`seasons.standings`).

A season ``S`` of board ``B`` is archived as:

- ``<ns>:{B}:archive:S``: a sorted set, the season's final standings, no TTL. Reads of the
  season use it once it exists. Member metadata stays in the board's ``meta`` hash, which the
  sweep keeps for every member on an archive. Like the live board it holds visible members
  only; the hidden and banned members' standings go to its twin, ``<ns>:{B}:hidden:archive:S``
  (Redis only: the files are the public board's).
- ``<archive.dir>/<ns>/<B>/S.jsonl.gz``: one ``{"rank","member","score","metadata"}`` line per
  member in rank order (rank per the board's ``ties``; on a board with reward tiers a
  ``"reward"`` too, from the season's results: :mod:`seasons.results`), gzip without a time
  stamp so the same
  standings give the same bytes; written to a temporary file, fsynced, renamed, and the
  directory fsynced.
- ``<archive.dir>/<ns>/<B>/S.manifest.json``: ``{"board","season","count","score_sum",
  "sha256","created_at","tiers","removed"}`` (:mod:`seasons.manifest`); ``score_sum`` is
  ``math.fsum`` of the scores in
  file order; ``tiers`` and ``removed`` keep the results as they stood at the close
  (:mod:`seasons.closed`): a forget rewrites the files without the member, the others' lines
  keeping their ranks and rewards, and the member's gap recorded in ``removed``.
- ``<archive.dir>/<ns>/<B>/S.claims.jsonl``: the season's claims (:mod:`seasons.claimlog`).

Snapshots of a running season use the id ``S@<UTC timestamp>`` for the same three things.
"""

from __future__ import annotations

import gzip
import math
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import replace as replace_fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, cast

from seasons import closed, shards, ties
from seasons import windows as win
from seasons.catalog import archive_dir
from seasons.clock import utc_text
from seasons.config.settings import Settings
from seasons.connection import RedisClient
from seasons.errors import ArchiveError, ArchiveExists
from seasons.files import atomic_write, fsync_dir
from seasons.keys import Keys
from seasons.manifest import Manifest, sha256_of
from seasons.reads import Reads
from seasons.results import Results, batched
from seasons.scripts import Scripts
from seasons.shard_archive import beside as shard_beside
from seasons.shard_archive import gather, scratch
from seasons.standings import CHUNK, Row, Standings, line, read_rows

TMP_TTL = timedelta(hours=1)
DATA_SUFFIX = ".jsonl.gz"
MANIFEST_SUFFIX = ".manifest.json"

Progress = Callable[[int, int], None]  # (rows done, rows in all)
Checkpoint = Callable[[str], None]


def _no_checkpoint(name: str) -> None:
    return None


def _tmp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")


def _write_synced(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    with path.open("wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _place(tmp: Path, path: Path) -> None:
    """Move a written, fsynced ``tmp`` to ``path`` unless ``path`` exists (a hard link, which
    never replaces), then fsync the directory."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise ArchiveExists(
            f"{path} appeared while it was being written: archives are write-once",
            {"file": str(path)},
        ) from None
    fsync_dir(path.parent)


def _place_bytes(path: Path, data: bytes) -> None:
    tmp = _tmp_path(path)
    try:
        _write_synced(tmp, lambda f: _write_all(f, data))
        _place(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _standings(rows: list[Row]) -> list[tuple[int, str, float]]:
    return [(rank, member, score) for rank, member, score, _ in rows]


def _figures(m: Manifest) -> tuple[str, str, int, float, str]:
    return m.board, m.season, m.count, m.score_sum, m.sha256


class Archives:
    """Archive keys and files of one namespace."""

    def __init__(self, client: RedisClient, scripts: Scripts, settings: Settings, keys: Keys):
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys
        self.standings = Standings(client, settings, keys)

    def paths(self, board: str, archive_id: str) -> tuple[Path, Path]:
        """(data file, manifest) of an archive."""
        folder = archive_dir(self.settings, board)
        return folder / f"{archive_id}{DATA_SUFFIX}", folder / f"{archive_id}{MANIFEST_SUFFIX}"

    # --- archiving ------------------------------------------------------------------------

    def season_source(self, board: str, season_id: str, archive_id: str) -> str:
        """The key season ``season_id``'s archive ``archive_id`` is copied from: the live
        season key, or on a sharded board its stores gathered into one key of the board's
        slot (:func:`seasons.shard_archive.gather`), their twins into another, which
        :meth:`copy` copies to the archive's twin."""
        if not shards.is_sharded(self.settings.boards[board]):
            return self.keys.season(board, season_id)
        args = (self.client, self.settings, self.keys, board, "season", season_id, archive_id)
        gather(*args, hidden=True)
        return gather(*args)

    def copy(self, board: str, source: str, archive_id: str) -> int:
        """Copy a live board into ``archive:<archive_id>`` (no TTL); returns its size.

        If the live key is gone but the archive exists (a rerun after expiry), the archive
        is kept. Returns -1 when neither exists.

        A board with ``ties = "earliest"``: the live board's reach set is copied beside the
        archive (``reached:archive:<archive_id>``, no TTL) in the same atomic call; with
        ``ties = "dense"`` its distinct set (``distinct:archive:<archive_id>``, no TTL; built
        from the archive when the live board has none).
        """
        keys = [source, self.keys.archive(board, archive_id)]
        args: list[str] = []
        cfg = self.settings.boards[board]
        rule = ties.of(cfg)
        beside = rule.beside(self.keys)
        if beside is not None:
            parsed = self.keys.parse(source)
            if parsed is None or parsed.board != board:
                raise ValueError(f"{source!r} is not a key of board {board!r}")
            # A sharded board's source is the stores' keys gathered, their reach sets beside.
            side = shard_beside(source, cfg) if shards.is_sharded(cfg) else None
            keys += [side or beside(board, parsed.kind, parsed.ident),
                     beside(board, "archive", archive_id)]  # fmt: skip
            if rule.distinct_set:
                args = ["distinct"]
        size = int(self.scripts.archive_copy(keys=keys, args=args))
        # Its twin: the hidden and banned members' standings (the live board's twin, or a
        # sharded board's twins gathered by season_source) copied to the twin of the archive
        # key, Redis only, no TTL, so that a member made visible later can be brought back
        # (seasons.amend); their reach set alike. Twins keep no distinct set. No twin at all
        # (a board without hidden members) costs archive_copy.lua's two EXISTS.
        if shards.is_sharded(cfg):
            gathered = scratch(self.keys, board, archive_id, hidden=True)
            twins = [gathered, self.keys.twin_of(keys[1])]
            if rule.reach_set:
                twins += [cast(str, shard_beside(gathered, cfg)), self.keys.twin_of(keys[3])]
        else:
            twins = [self.keys.twin_of(k) for k in keys[: 4 if rule.reach_set else 2]]
        self.scripts.archive_copy(keys=twins, args=[])
        return size

    def write_files(
        self,
        board: str,
        archive_id: str,
        now: datetime,
        checkpoint: Checkpoint = _no_checkpoint,
        *,
        replace: bool = False,
    ) -> Manifest:
        """Export the archive key to the data file, then write the manifest.

        Archives are write-once: an existing data file or manifest is never replaced with
        other content (only ``replace=True``, for erasure, rewrites them: the members still
        on the key keep their ranks at the close, the manifest its ``created_at`` and
        ``tiers``, and each member gone gets a gap in ``removed``). The gzip has no
        time stamp, so a rerun of a close (after a crash) produces the same bytes and keeps
        the files it finds: a data file with the same standings (rank, member, score), and a
        manifest that describes it (its ``created_at`` kept). Anything else raises
        :class:`ArchiveExists` naming the file, what it holds and what would have been
        written, and writes nothing.
        """
        data, manifest_path = self.paths(board, archive_id)
        data.parent.mkdir(parents=True, exist_ok=True)
        for stale in data.parent.glob(f".{archive_id}.*.tmp-*"):  # left by a killed run
            stale.unlink(missing_ok=True)
        key = self.keys.archive(board, archive_id)
        scores: list[float] = []
        # Rewards go into the lines when the board has tiers and the results exist (the
        # close computes them first); older archives are written again as they were.
        results = Results(self.client, self.standings, self.keys)
        rewarded = bool(self.settings.boards[board].rewards) and (
            results.summary(board, archive_id) is not None
        )

        before: Manifest | None = None  # a forget's: the manifest it rewrites
        at_close: dict[str, int] = {}  # member -> its rank at the close, when forgotten some
        if replace:
            before, at_close = self._as_closed_before(board, archive_id, data, manifest_path)

        def write(f: IO[bytes]) -> None:
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
                for part in batched(self.standings.rows(board, key), CHUNK):
                    given = self._rewards(results, board, archive_id, part) if rewarded else None
                    for i, (rank, member, score, meta) in enumerate(part):
                        extra = () if given is None else (given[i],)
                        kept_rank = at_close.get(member, rank)
                        gz.write(line(kept_rank, member, score, meta, *extra).encode())
                        scores.append(score)

        if replace:
            atomic_write(data, write)
            checkpoint("archive:data-written")
            manifest = self._manifest(board, archive_id, data, scores, now)
            if before is not None:
                manifest = replace_fields(
                    manifest, created_at=before.created_at, tiers=before.tiers,
                    removed=before.removed,
                )  # fmt: skip
            atomic_write(manifest_path, lambda f: _write_all(f, manifest.to_json().encode()))
            return manifest
        tmp = _tmp_path(data)
        try:
            _write_synced(tmp, write)
            fresh = self._manifest(board, archive_id, tmp, scores, now)
            kept = self._kept(data, manifest_path, tmp, fresh)
            if kept is None:
                _place(tmp, data)
            else:
                fresh = kept
        finally:
            tmp.unlink(missing_ok=True)
        checkpoint("archive:data-written")
        if manifest_path.exists():
            return Manifest.load(manifest_path)  # checked by _kept: it describes the data
        _place_bytes(manifest_path, fresh.to_json().encode())
        return fresh

    @staticmethod
    def _rewards(
        results: Results, board: str, archive_id: str, part: list[Row]
    ) -> list[str | None]:
        try:
            return results.rewards(board, archive_id, [m for _, m, _, _ in part])
        except KeyError as exc:
            raise ArchiveError(
                f"the results of {board} {archive_id} lack member {exc.args[0]!r} of its "
                "archive: results and archive disagree",
                {"board": board, "season": archive_id},
            ) from None

    def _manifest(
        self, board: str, archive_id: str, data: Path, scores: list[float], now: datetime
    ) -> Manifest:
        return Manifest(
            board=board, season=archive_id, count=len(scores), score_sum=math.fsum(scores),
            sha256=sha256_of(data),
            created_at=utc_text(now, "seconds"),
            tiers=closed.tier_rules(self.settings.boards[board]), removed=[],
        )  # fmt: skip

    def _as_closed_before(
        self, board: str, archive_id: str, data: Path, manifest_path: Path
    ) -> tuple[Manifest | None, dict[str, int]]:
        """For a forget's rewrite: the manifest on disk (its date, tiers and gaps, the gaps
        of the members now gone from the archive key added) and the rank at the close of
        each member still on the key (seasons.closed), so the others keep theirs. A file
        or manifest that no longer matches the key gives no ranks and no gaps: the file is
        written from the key as it stands, as a close would (an unreadable manifest: a new
        one, dated now)."""
        key = self.keys.archive(board, archive_id)
        cfg = self.settings.boards[board]
        try:
            before = Manifest.load(manifest_path)
            old = [(m, s) for _, m, s, _ in read_rows(data)]
            gaps = closed.manifest_gaps(before.removed, len(old))
        except (ArchiveError, ValueError):
            return None, {}
        kept: set[str] = set()
        for part in batched(old, CHUNK):
            now_scores = self.client.zmscore(key, [m for m, _ in part])
            kept.update(m for (m, s), held in zip(part, now_scores, strict=True) if held == s)
        if len(kept) != int(self.client.zcard(key)):
            return replace_fields(before, removed=[]), {}
        gaps = closed.forgotten(old, gaps, kept)
        on_key = [(m, s) for m, s in old if m in kept]
        try:
            tiers = closed.manifest_tiers(before.tiers, cfg)
            ranked = closed.as_closed([s for _, s in on_key], gaps, tiers, cfg)
        except ValueError:
            return replace_fields(before, removed=[]), {}
        at_close = {m: r for (m, _), r in zip(on_key, ranked.ranks, strict=True)}
        return replace_fields(before, removed=[g.to_dict() for g in gaps]), at_close

    def _kept(self, data: Path, manifest_path: Path, tmp: Path, fresh: Manifest) -> Manifest | None:
        """What of an archive already on disk a write keeps: None when there is no data
        file, else the manifest of the data file kept. Raises :class:`ArchiveExists` when
        the files on disk hold other standings than ``tmp`` (described by ``fresh``)."""
        would = f"this run would write {fresh.count} members (sha256 {fresh.sha256})"
        kept: Manifest | None = None
        if data.exists():
            digest = sha256_of(data)
            if digest == fresh.sha256:
                kept = fresh
            else:
                try:
                    existing = read_rows(data)
                except ArchiveError:
                    existing = None
                if existing is None or _standings(existing) != _standings(read_rows(tmp, gz=True)):
                    held = "unreadable" if existing is None else f"{len(existing)} members"
                    raise ArchiveExists(
                        f"archive file {data} already exists with other standings ({held}, "
                        f"sha256 {digest}); {would}. Archives are write-once: nothing was "
                        "written; restore the archive or move the file away",
                        {"file": str(data), "sha256": digest, "would_write": fresh.sha256},
                    )
                # The same standings with other metadata (written since the first run):
                # the file written first stands.
                kept = replace_fields(fresh, sha256=digest)
        if manifest_path.exists():
            target = kept or fresh
            try:
                found: Manifest | None = Manifest.load(manifest_path)
            except ArchiveError:
                found = None
            if found is None or _figures(found) != _figures(target):
                held = (
                    "unreadable" if found is None
                    else f"count {found.count}, score_sum {found.score_sum}, sha256 {found.sha256}"
                )  # fmt: skip
                raise ArchiveExists(
                    f"manifest {manifest_path} already exists with other content ({held}); "
                    f"{would} (score_sum {fresh.score_sum}). Archives are write-once: nothing "
                    "was written; restore the archive or move the files away",
                    {"file": str(manifest_path), "would_write": fresh.sha256},
                )
        return kept

    def verify(self, board: str, archive_id: str, live: str | None = None) -> Manifest:
        """Check an archive: file sha256 == manifest, count and score_sum match the lines,
        the archive key holds exactly the file's standings and, when ``live`` is given and
        still exists, the live board too. Raises :class:`ArchiveError` naming the mismatch."""
        data, manifest_path = self.paths(board, archive_id)
        manifest = Manifest.load(manifest_path)
        rewards: dict[str, str | None] = {}
        rows = self._checked_rows(data, manifest, rewards)
        if rewards:
            self._verify_rewards(board, archive_id, data, rows, rewards)
        in_file = {m: s for _, m, s, _ in rows}
        key = self.keys.archive(board, archive_id)
        archived = self._scores(key)
        if archived != in_file:
            raise ArchiveError(
                f"archive key of {board} {archive_id} ({len(archived)} members) differs from "
                f"its file {data} ({len(in_file)} members)",
                {"board": board, "season": archive_id},
            )
        if live is not None and self.client.exists(live):
            on_board = self._scores(live)
            if on_board != archived:
                raise ArchiveError(
                    f"archive of {board} {archive_id} differs from the live board {live}",
                    {"board": board, "season": archive_id},
                )
        return manifest

    def _scores(self, key: str) -> dict[str, float]:
        """Every member of the sorted set ``key`` with its score (redis-py types a reply as
        any of its forms; with scores, it is (member, score) pairs)."""
        return dict(cast(list[tuple[str, float]], self.client.zrange(key, 0, -1, withscores=True)))

    def _verify_rewards(
        self, board: str, archive_id: str, data: Path, rows: list[Row],
        rewards: dict[str, str | None],
    ) -> None:  # fmt: skip
        """The rewards in a file are the results': every line has one, equal to the results
        hash's (when the results exist: after a restore they may not, yet)."""
        results = Results(self.client, self.standings, self.keys)
        if results.summary(board, archive_id) is None:
            return
        if len(rewards) != len(rows):
            raise ArchiveError(
                f"{data}: {len(rows) - len(rewards)} lines lack a reward", {"file": str(data)}
            )
        for part in batched(rows, CHUNK):
            members = [m for _, m, _, _ in part]
            stored = self._rewards(results, board, archive_id, part)
            for member, reward in zip(members, stored, strict=True):
                if rewards[member] != reward:
                    raise ArchiveError(
                        f"{data}: member {member!r} has reward {rewards[member]!r} in the "
                        f"file but {reward!r} in the results of {board} {archive_id}",
                        {"file": str(data), "member": member},
                    )

    def _checked_rows(
        self, data: Path, manifest: Manifest, rewards: dict[str, str | None] | None = None
    ) -> list[Row]:
        if not data.is_file():
            raise ArchiveError(f"archive file {data} does not exist", {"file": str(data)})
        digest = sha256_of(data)
        if digest != manifest.sha256:
            raise ArchiveError(
                f"{data} does not match its manifest (sha256 {digest}, manifest says "
                f"{manifest.sha256}): the file was changed after it was written",
                {"file": str(data)},
            )
        rows = read_rows(data, rewards=rewards)
        total = math.fsum(s for _, _, s, _ in rows)
        if len(rows) != manifest.count or total != manifest.score_sum:
            raise ArchiveError(
                f"{data} holds {len(rows)} members with score sum {total}; its manifest says "
                f"{manifest.count} and {manifest.score_sum}",
                {"file": str(data)},
            )
        return rows

    # --- export -----------------------------------------------------------------------------

    def export(
        self,
        board: str,
        window: str,
        period: str,
        out: Path | None,
        now: datetime,
        progress: Progress | None = None,
    ) -> int:
        """Write any board (archives and snapshots too) as archive lines to ``out``
        (``.gz``: gzip, else plain JSON lines; None: stdout). Returns the number of lines.

        The board is copied to a scratch key first, so the export is one consistent view (with
        earliest ties, its reach set too, to a scratch key of its own, in the same
        transaction).
        """
        reads = Reads(self.settings, self.keys)
        pid, live, archive = reads.target(board, window, period, now)
        use_archive = bool(self.client.exists(archive))
        source = archive if use_archive else live
        token = secrets.token_hex(6)
        gathered = gathered_reach = None
        cfg = self.settings.boards[board]
        if not use_archive and shards.is_sharded(cfg):
            # Its stores gathered into one key of the board's slot first (their metadata
            # into the board's), as a close does (seasons.shard_archive).
            spec = win.spec(window).name
            source = gathered = gather(self.client, self.settings, self.keys, board, spec, pid,
                                       f"export:{token}")  # fmt: skip
            gathered_reach = shard_beside(gathered, cfg)
        tmp = self.keys.tmp(board, f"export:{token}")
        tmp_reached: str | None = None
        pipe = self.client.pipeline(transaction=True)
        pipe.copy(source, tmp)
        pipe.expire(tmp, TMP_TTL)
        pipe.zcard(tmp)
        beside = reads.beside(board, window, pid)
        if ties.of(cfg).reach_set and beside is not None:
            live_reached, archive_reached = beside
            if gathered_reach is not None:  # a sharded board's stores' reach sets, gathered
                live_reached = gathered_reach
            tmp_reached = self.keys.tmp(board, f"export-reached:{token}")
            pipe.copy(archive_reached if use_archive else live_reached, tmp_reached)
            pipe.expire(tmp_reached, TMP_TTL)
        total = int(pipe.execute()[2])
        count = 0

        def emit(sink: Callable[[str], Any]) -> None:
            nonlocal count
            for rank, member, score, meta in self.standings.rows(board, tmp, tmp_reached):
                sink(line(rank, member, score, meta))
                count += 1
                if progress and (count % CHUNK == 0 or count == total):
                    progress(count, total)

        try:
            if out is None:
                emit(sys.stdout.write)
                sys.stdout.flush()
            elif out.name.endswith(".gz"):

                def write_gz(f: IO[bytes]) -> None:
                    with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
                        emit(lambda text: gz.write(text.encode()))

                atomic_write(out, write_gz)
            else:
                atomic_write(out, lambda f: emit(lambda text: _write_all(f, text.encode())))
        finally:
            self.client.delete(tmp)
            if gathered is not None:
                self.client.delete(gathered, *([gathered_reach] if gathered_reach else []))
            if tmp_reached is not None:
                self.client.delete(tmp_reached)
        return count


def _write_all(f: IO[bytes], data: bytes) -> None:
    f.write(data)


def snapshot_id(season_id: str, now: datetime) -> str:
    """``S@<UTC timestamp>``, e.g. ``S3@20261129T212300Z``."""
    return f"{season_id}@{now.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}"
