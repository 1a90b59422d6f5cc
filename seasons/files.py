"""Opening a file that something outside Seasons may have put in place (an archive file or
manifest to restore, a claims log, a manifest listed by the catalog): only a regular file,
opened without blocking, so a FIFO or a device is refused at once instead of hanging or
reading forever."""

from __future__ import annotations

import os
import stat
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
