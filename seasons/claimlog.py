"""The claims log of a season: the claims of its rewards, durable outside Redis.

A claim answered ``already_claimed: false`` is what an app pays out on, so it must outlive
Redis: :meth:`seasons.rewards.Rewards.claim` appends it here, fsynced, before it answers. The
log sits beside the season's archive files (``<archive.dir>/<ns>/<board>/<season>`` +
:data:`CLAIMS_SUFFIX`), and ``seasons restore`` loads it back into the claims hash with the
archive (:mod:`seasons.restore_claims`); a forget rewrites it without the member.

One JSON line per answer ``false`` (a first claim, or a resend with its claim id, which
appends the same claim again): ``{"board", "season", "member", "reward", "rank", "claim_id",
"claimed_at"}``, what the claims hash holds. Each line is one ``write`` on an ``O_APPEND``
descriptor under an exclusive ``flock`` (held for the write only, not the fsync), so the
processes of ``seasons serve --workers N`` append whole lines one after the other, and a write
cut short (a full disk) is cut off again before anyone appends after it. A rewrite (a forget)
holds the same lock; an appender that finds the file it opened replaced (renamed over by a
rewrite) opens the new one, so no claim is written into a file that is gone.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seasons.catalog import archive_dir
from seasons.config.settings import Settings
from seasons.errors import ClaimsLogUnavailable
from seasons.files import atomic_write, fsync_dir, open_regular

CLAIMS_SUFFIX = ".claims.jsonl"
UPGRADES_SUFFIX = ".upgrades.jsonl"
FIELDS = ("board", "season", "member", "reward", "rank", "claim_id", "claimed_at")
# A claim's line is well under this (members, claim ids <= 128 bytes, rewards <= 256): one
# write of it is appended whole, also on filesystems that split larger writes.
MAX_LINE = 4096
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC


def log_path(settings: Settings, board: str, season: str) -> Path:
    """Where the claims of ``season`` on ``board`` are logged."""
    return archive_dir(settings, board) / f"{season}{CLAIMS_SUFFIX}"


def upgrades_path(settings: Settings, board: str, season: str) -> Path:
    """Where the upgrade claims of an amended season are logged (seasons.amend): apart from
    the claims log, which keeps a member's first claim where the upgrades keep its latest."""
    return archive_dir(settings, board) / f"{season}{UPGRADES_SUFFIX}"


def beside(data_file: Path, season: str) -> Path:
    """The claims log next to an archive data file (or a copy of one, with its manifest)."""
    return data_file.with_name(f"{season}{CLAIMS_SUFFIX}")


@dataclass(frozen=True, slots=True)
class LoggedClaim:
    """One line of a claims log."""

    board: str
    season: str
    member: str
    reward: str
    rank: int
    claim_id: str
    claimed_at: str

    def line(self) -> bytes:
        row = {k: getattr(self, k) for k in FIELDS}
        return (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    def stored(self) -> str:
        """The claims hash's value, as ``seasons/lua/claim.lua`` writes it."""
        row = {"claimed_at": self.claimed_at, "reward": self.reward, "rank": self.rank,
               "claim_id": self.claim_id}  # fmt: skip
        return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def append(path: Path, claim: LoggedClaim) -> None:
    """Append ``claim`` and fsync it (and the directory, when this creates the file); raises
    :class:`ClaimsLogUnavailable` saying why when it cannot."""
    data = claim.line()
    try:
        _make_dirs(path.parent)
        while True:
            fd, created = _open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not _same_file(fd, path):
                    continue  # replaced by a rewrite since it was opened: open the new one
                _write_line(fd, data)
                # Concurrent claims fsync side by side. A rewrite that takes the lock before
                # this fsync copies the line into its own file and fsyncs that.
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                fsync_dir(path.parent)
            return
    except OSError as exc:
        raise ClaimsLogUnavailable(
            f"the claim is recorded in Redis but could not be written to the claims log "
            f"{path} ({exc.strerror or exc}): it is not answered until it is; claim again "
            f"with the same claim id {claim.claim_id!r} once archive.dir is writable",
            {"file": str(path), "claim_id": claim.claim_id},
        ) from exc


def _write_line(fd: int, data: bytes) -> None:
    """Append ``data`` after the last whole line, under the exclusive lock: a last line
    without its newline (its write cut short by a lost power before its fsync, so never
    answered) is cut off first, and a write cut short here is cut off again."""
    end = os.fstat(fd).st_size
    if end and os.pread(fd, 1, end - 1) != b"\n":
        tail = os.pread(fd, min(end, MAX_LINE), end - min(end, MAX_LINE))
        if (cut := tail.rfind(b"\n")) >= 0 or len(tail) == end:
            end = end - len(tail) + cut + 1
            os.ftruncate(fd, end)
        else:  # not a line of ours (longer than any): kept for restore to report
            data = b"\n" + data
    written = os.write(fd, data)
    if written != len(data):  # a regular file writes short only when it is full
        os.ftruncate(fd, end)
        raise OSError(errno.ENOSPC, f"wrote {written} of {len(data)} bytes")


def _open(path: Path) -> tuple[int, bool]:
    try:
        return os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o644), True
    except FileExistsError:
        return os.open(path, _OPEN_FLAGS), False


def _make_dirs(folder: Path) -> None:
    """``folder`` and its missing parents, each new one's entry fsynced in its parent (a claim
    may come before the season's archive files created the board's folder)."""
    if folder.is_dir():
        return
    _make_dirs(folder.parent)
    try:
        folder.mkdir()
    except FileExistsError:
        return  # made by another process meanwhile (or not a folder: the open will say)
    fsync_dir(folder.parent)


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino)


def json_object(raw: bytes, fields: Sequence[str]) -> dict[str, Any]:
    """One line of a file Seasons writes as JSON lines (a claims log, a league archive): an
    object of exactly ``fields``; raises ValueError with a sentence."""
    try:
        d = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"is not JSON ({exc})") from None
    if not isinstance(d, dict) or set(d) != set(fields):
        raise ValueError(f"is not an object of exactly the fields {', '.join(fields)}")
    return d


def parse(raw: bytes) -> LoggedClaim:
    """One line; raises ValueError with a sentence."""
    if not raw:
        raise ValueError(f"is longer than {MAX_LINE} bytes")
    d = json_object(raw, FIELDS)
    texts = [k for k in FIELDS if k != "rank" and not (isinstance(d[k], str) and d[k])]
    if texts:
        raise ValueError(f"{', '.join(texts)} must be non-empty texts")
    rank = d["rank"]
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank {rank!r} is not a positive integer")
    return LoggedClaim(**d)


def lines(path: Path, *, inside: Path | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number from 1, bytes) of each whole line of the log; none when it does not
    exist. A last line without its newline is left out: its write was cut short (a crash),
    so its claim was never answered. A line over :data:`MAX_LINE` is read no further and
    given as ``b""`` (not a claim). The log must be a regular file (``inside`` that folder,
    if given): else :class:`~seasons.errors.ArchiveError`."""
    try:
        f = open_regular(path, inside=inside)
    except FileNotFoundError:
        return
    with f:
        n = 0
        while raw := f.readline(MAX_LINE + 1):
            n += 1
            if len(raw) > MAX_LINE:
                while not raw.endswith(b"\n") and (raw := f.readline(MAX_LINE)):
                    pass  # the rest of an overlong line
                yield n, b""
            elif raw.endswith(b"\n"):
                yield n, raw


def without_member(path: Path, member: str) -> bool:
    """Rewrite the log without ``member``'s lines (a temporary file, fsynced, renamed over
    it, the directory fsynced), under the exclusive lock; returns whether it held any."""
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX)  # appenders wait, then find the file replaced
        if _same_file(fd, path):
            break
        os.close(fd)  # another rewrite replaced it meanwhile
    try:
        with os.fdopen(os.dup(fd), "rb") as f:
            kept = [raw for raw in f if not _of(raw, member)]
            f.seek(0)
            if sum(1 for _ in f) == len(kept):
                return False
        atomic_write(path, lambda out: out.writelines(kept))
        return True
    finally:
        os.close(fd)


def _of(raw: bytes, member: str) -> bool:
    try:
        d: Any = json.loads(raw)
    except ValueError:
        return False  # not a claim: kept as it is, restore reports it
    return isinstance(d, dict) and d.get("member") == member
