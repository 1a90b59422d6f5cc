"""Archives of seasons (SPEC section 8): the archive key, the files, verify, restore, export.

A season ``S`` of board ``B`` is archived as:

- ``<ns>:{B}:archive:S``: a sorted set, the season's final standings, no TTL. Reads of the
  season use it once it exists. Member metadata stays in the board's ``meta`` hash, which the
  sweep keeps for every member on an archive.
- ``<archive.dir>/<ns>/<B>/S.jsonl.gz``: one ``{"rank","member","score","metadata"}`` line per
  member in rank order (rank per the board's ``ties``), gzip without a time stamp so the same
  standings give the same bytes; written to a temporary file, fsynced, renamed, and the
  directory fsynced.
- ``<archive.dir>/<ns>/<B>/S.manifest.json``: ``{"board","season","count","score_sum",
  "sha256","created_at"}``; ``score_sum`` is ``math.fsum`` of the scores in file order.

Snapshots of a running season use the id ``S@<UTC timestamp>`` for the same three things.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from config.settings import Settings
from seasons import timewindows as tw
from seasons.catalog import archive_dir
from seasons.errors import ArchiveError, InvalidInput, UnknownBoard
from seasons.keys import SEASON_ARCHIVED, STATE_SEASON, Keys
from seasons.reads import Reader
from seasons.scripts import Scripts

CHUNK = 1000
TMP_TTL = timedelta(hours=1)
DATA_SUFFIX = ".jsonl.gz"
MANIFEST_SUFFIX = ".manifest.json"

Progress = Callable[[int, int], None]  # (rows done, rows in all)
Checkpoint = Callable[[str], None]
Row = tuple[int, str, float, dict[str, Any]]


def _no_checkpoint(name: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Manifest:
    board: str
    season: str
    count: int
    score_sum: float
    sha256: str
    created_at: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def load(cls, path: Path) -> Manifest:
        try:
            data = json.loads(path.read_text())
            return cls(
                board=str(data["board"]), season=str(data["season"]), count=int(data["count"]),
                score_sum=float(data["score_sum"]), sha256=str(data["sha256"]),
                created_at=str(data["created_at"]),
            )  # fmt: skip
        except FileNotFoundError:
            raise ArchiveError(f"manifest {path} does not exist", {"file": str(path)}) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ArchiveError(
                f"manifest {path} is unreadable: {exc}", {"file": str(path)}
            ) from None


def line(rank: int, member: str, score: float, metadata: dict[str, Any]) -> str:
    """One archive line, exactly as written to files."""
    row = {"rank": rank, "member": member, "score": score, "metadata": metadata}
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through a temporary file in its directory: fsync, rename, fsync the
    directory. A crash leaves the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(4)}")
    try:
        with tmp.open("wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_rows(path: Path) -> list[Row]:
    """The lines of an archive or export file (.jsonl.gz or .jsonl)."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    rows: list[Row] = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, text in enumerate(f, start=1):
                d = json.loads(text)
                rank, member, score, meta = d["rank"], d["member"], d["score"], d["metadata"]
                if (
                    not isinstance(rank, int) or not isinstance(member, str)
                    or isinstance(score, bool) or not isinstance(score, int | float)
                    or not math.isfinite(score) or not isinstance(meta, dict)
                ):  # fmt: skip
                    raise ValueError(f"line {n} is not a rank/member/score/metadata row")
                rows.append((rank, member, float(score), meta))
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(
            f"{path} is not a valid archive file: {exc}", {"file": str(path)}
        ) from exc
    return rows


class Archives:
    """Archive keys and files of one namespace."""

    def __init__(self, client: Any, scripts: Scripts, settings: Settings, keys: Keys):
        self.client = client
        self.scripts = scripts
        self.settings = settings
        self.keys = keys

    def paths(self, board: str, archive_id: str) -> tuple[Path, Path]:
        """(data file, manifest) of an archive."""
        folder = archive_dir(self.settings, board)
        return folder / f"{archive_id}{DATA_SUFFIX}", folder / f"{archive_id}{MANIFEST_SUFFIX}"

    # --- reading a board in rank order ------------------------------------------------------

    def rows(self, board: str, key: str) -> Iterator[Row]:
        """(rank, member, score, metadata) of every member of ``key``, best first.

        Read in chunks: only for keys that do not change meanwhile (archives, scratch copies).
        """
        cfg = self.settings.boards[board]
        desc = cfg.order == "desc"
        start = 0
        prev_score: float | None = None
        prev_rank = 0
        while True:
            chunk = self.client.zrange(key, start, start + CHUNK - 1, desc=desc, withscores=True)
            if not chunk:
                return
            members = [m for m, _ in chunk]
            metas = self.client.hmget(self.keys.meta(board), members)
            for i, ((member, score), raw) in enumerate(zip(chunk, metas, strict=True)):
                position = start + i + 1
                shared = cfg.ties == "shared" and score == prev_score
                rank = prev_rank if shared else position
                prev_score, prev_rank = score, rank
                yield rank, member, float(score), json.loads(raw) if raw else {}
            start += len(chunk)

    # --- archiving ------------------------------------------------------------------------

    def copy(self, board: str, source: str, archive_id: str) -> int:
        """Copy a live board into ``archive:<archive_id>`` (no TTL); returns its size.

        If the live key is gone but the archive exists (a rerun after expiry), the archive
        is kept. Returns -1 when neither exists.
        """
        return int(self.scripts.archive_copy(keys=[source, self.keys.archive(board, archive_id)]))

    def write_files(
        self, board: str, archive_id: str, now: datetime, checkpoint: Checkpoint = _no_checkpoint
    ) -> Manifest:
        """Export the archive key to the data file, then write the manifest."""
        data, manifest_path = self.paths(board, archive_id)
        for stale in data.parent.glob(f".{archive_id}.*.tmp-*"):  # left by a killed run
            stale.unlink(missing_ok=True)
        scores: list[float] = []

        key = self.keys.archive(board, archive_id)

        def write(f: IO[bytes]) -> None:
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
                for rank, member, score, meta in self.rows(board, key):
                    gz.write(line(rank, member, score, meta).encode())
                    scores.append(score)

        atomic_write(data, write)
        checkpoint("archive:data-written")
        manifest = Manifest(
            board=board, season=archive_id, count=len(scores), score_sum=math.fsum(scores),
            sha256=sha256_of(data), created_at=_stamp(now),
        )  # fmt: skip
        atomic_write(manifest_path, lambda f: _write_all(f, manifest.to_json().encode()))
        return manifest

    def verify(self, board: str, archive_id: str, live: str | None = None) -> Manifest:
        """Check an archive: file sha256 == manifest, count and score_sum match the lines,
        the archive key holds exactly the file's standings and, when ``live`` is given and
        still exists, the live board too. Raises :class:`ArchiveError` naming the mismatch."""
        data, manifest_path = self.paths(board, archive_id)
        manifest = Manifest.load(manifest_path)
        rows = self._checked_rows(data, manifest)
        in_file = {m: s for _, m, s, _ in rows}
        key = self.keys.archive(board, archive_id)
        archived = dict(self.client.zrange(key, 0, -1, withscores=True))
        if archived != in_file:
            raise ArchiveError(
                f"archive key of {board} {archive_id} ({len(archived)} members) differs from "
                f"its file {data} ({len(in_file)} members)",
                {"board": board, "season": archive_id},
            )
        if live is not None and self.client.exists(live):
            on_board = dict(self.client.zrange(live, 0, -1, withscores=True))
            if on_board != archived:
                raise ArchiveError(
                    f"archive of {board} {archive_id} differs from the live board {live}",
                    {"board": board, "season": archive_id},
                )
        return manifest

    def _checked_rows(self, data: Path, manifest: Manifest) -> list[Row]:
        if not data.is_file():
            raise ArchiveError(f"archive file {data} does not exist", {"file": str(data)})
        digest = sha256_of(data)
        if digest != manifest.sha256:
            raise ArchiveError(
                f"{data} does not match its manifest (sha256 {digest}, manifest says "
                f"{manifest.sha256}): the file was changed after it was written",
                {"file": str(data)},
            )
        rows = read_rows(data)
        total = math.fsum(s for _, _, s, _ in rows)
        if len(rows) != manifest.count or total != manifest.score_sum:
            raise ArchiveError(
                f"{data} holds {len(rows)} members with score sum {total}; its manifest says "
                f"{manifest.count} and {manifest.score_sum}",
                {"file": str(data)},
            )
        return rows

    # --- restore ----------------------------------------------------------------------------

    def restore(self, file: Path, now: datetime, progress: Progress | None = None) -> Manifest:
        """Load an archive file back into its archive key, after checking its manifest.

        A file that does not match its manifest is refused and nothing is written. Metadata
        from the file fills in members that have none (newer metadata is kept). A season
        that has ended is marked archived, so late events for it stay rejected.
        """
        file = Path(file)
        if not file.name.endswith(DATA_SUFFIX):
            raise InvalidInput(f"{file}: an archive file's name ends with {DATA_SUFFIX}")
        manifest = Manifest.load(file.with_name(file.name[: -len(DATA_SUFFIX)] + MANIFEST_SUFFIX))
        if manifest.board not in self.settings.boards:
            raise UnknownBoard(manifest.board, list(self.settings.boards))
        base = manifest.season.split("@", 1)[0]
        span = tw.season_by_id(base, self.settings)
        rows = self._checked_rows(file, manifest)
        board, archive_id = manifest.board, manifest.season
        tmp = self.keys.tmp(board, f"restore:{archive_id}")
        self.client.delete(tmp)
        for i in range(0, len(rows), CHUNK):
            part = rows[i : i + CHUNK]
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(tmp, {m: s for _, m, s, _ in part})
            pipe.expire(tmp, TMP_TTL)
            for _, m, _, meta in part:
                if meta:
                    pipe.hsetnx(self.keys.meta(board), m, _meta_json(meta))
            pipe.execute()
            if progress:
                progress(i + len(part), len(rows))
        pipe = self.client.pipeline(transaction=True)
        if rows:
            # As a raw command: redis-py's cluster pipeline refuses rename() by name, and in
            # this transaction every key is in the board's slot.
            pipe.execute_command("RENAME", tmp, self.keys.archive(board, archive_id))
            pipe.persist(self.keys.archive(board, archive_id))
        else:
            pipe.delete(self.keys.archive(board, archive_id))
        if "@" not in archive_id and now >= tw.season_end(span, self.settings.zone):
            pipe.hset(self.keys.state(board), STATE_SEASON + archive_id, SEASON_ARCHIVED)
        pipe.execute()
        if progress:
            progress(len(rows), len(rows))
        return manifest

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

        The board is copied to a scratch key first, so the export is one consistent view.
        """
        reader = Reader(self.client, self.scripts, self.settings, self.keys)
        _, live, archive = reader.target(board, window, period, now)
        source = archive if self.client.exists(archive) else live
        tmp = self.keys.tmp(board, f"export:{secrets.token_hex(6)}")
        pipe = self.client.pipeline(transaction=True)
        pipe.copy(source, tmp)
        pipe.expire(tmp, TMP_TTL)
        pipe.zcard(tmp)
        total = int(pipe.execute()[2])
        count = 0

        def emit(sink: Callable[[str], Any]) -> None:
            nonlocal count
            for rank, member, score, meta in self.rows(board, tmp):
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
        return count


def _write_all(f: IO[bytes], data: bytes) -> None:
    f.write(data)


def _meta_json(meta: dict[str, Any]) -> str:
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def snapshot_id(season_id: str, now: datetime) -> str:
    """``S@<UTC timestamp>``, e.g. ``S3@20261129T212300Z``."""
    return f"{season_id}@{now.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}"
