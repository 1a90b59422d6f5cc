"""Files Seasons keeps beside Redis (archives, manifests, claims logs, the namespace marker).

Reading one that something outside Seasons may have put in place: only a regular file, opened
without blocking, so a FIFO or a device is refused at once instead of hanging or reading
forever. Writing one whole: through a temporary file, fsynced and renamed, the directory
fsynced, so a crash leaves the old file or the new one."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, NoReturn

from seasons.errors import ArchiveError

# Bytes of a manifest read at most: ~300 at a close, ~40 more per member forgotten since (its
# gap in "removed"), so this bounds memory while leaving room for ~400 000 erasures.
MANIFEST_MAX = 16 * 1024 * 1024


def open_regular(path: Path, *, inside: Path | None = None) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file, else :class:`ArchiveError`. It is
    opened without blocking and checked after the open (a FIFO would block a plain open
    forever; a device such as /dev/zero never ends), so what is read is what was checked.
    With ``inside``, its real path (symlinks resolved) must be in that folder. The error's
    ``details["problem"]`` says what is wrong without the path."""
    if inside is not None:
        real, root = Path(os.path.realpath(path)), Path(os.path.realpath(inside))
        if not real.is_relative_to(root):
            _not_regular(path, f"is a link to {real}, outside {root}")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            _not_regular(path, f"is not a regular file (a {_file_kind(mode)})")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _not_regular(path: Path, problem: str) -> NoReturn:
    raise ArchiveError(f"{path} {problem}", {"file": str(path), "problem": problem})


def _file_kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "directory", stat.S_ISFIFO: "FIFO", stat.S_ISCHR: "character device",
        stat.S_ISBLK: "block device", stat.S_ISSOCK: "socket",
    }  # fmt: skip
    return next((name for test, name in kinds.items() if test(mode)), "special file")


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
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
