"""What an archive file claims: its manifest (``<archive.dir>/<ns>/<B>/S.manifest.json``,
docs/contract.md#archives), ``{"board","season","count","score_sum","sha256","created_at",
"tiers","removed"}``, and the sha256 that ties it to its data file.

:class:`Manifest` checks every field when one is made, read from a file
(:meth:`Manifest.load`, bounded) or written by a close, a forget's rewrite or a restore
(:mod:`seasons.archives`, :mod:`seasons.restore`, ``jobs/integrity.py``).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from dataclasses import MISSING, asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from seasons.config.settings import NAME_RE
from seasons.errors import ArchiveError
from seasons.events import shown
from seasons.files import MANIFEST_MAX, open_regular

# In the names of the files of amended results (seasons.amend): ``<S>.amend-<n>.jsonl.gz`` and
# its manifest. They sit beside the archives but are none: listings and restore leave them out.
AMEND_MARK = ".amend-"


def is_amendment(name: str) -> bool:
    """Whether a file name in an archive folder is an amendment's, not a season archive's."""
    return AMEND_MARK in name


_SHA256 = re.compile(r"[0-9a-f]{64}")
_SEASON = re.compile(r"[A-Za-z0-9_-]{1,64}(@[A-Za-z0-9]{1,32})?")  # S, or a snapshot S@<ts>


@dataclass(frozen=True, slots=True)
class Manifest:
    """What an archive file claims. Every field is checked when one is made (read from a
    file or written by a close), so code that holds a Manifest never fails on its fields."""

    board: str
    season: str
    count: int
    score_sum: float
    sha256: str
    created_at: str  # ISO 8601 with a zone: the close's time (a forget's rewrite keeps it)
    # The results as they stood at the close (seasons.closed, which checks their entries):
    # the reward tiers then, and a gap per member forgotten since. None in manifests written
    # before them.
    tiers: list[dict[str, Any]] | None = None
    removed: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if why := _manifest_problem(self):
            raise ValueError(why)
        # JSON may give a whole number; the sum compared with the lines' fsum is a float.
        object.__setattr__(self, "score_sum", float(self.score_sum))

    @property
    def created(self) -> datetime:
        """``created_at`` as an aware datetime."""
        return datetime.fromisoformat(self.created_at)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def load(cls, path: Path, *, inside: Path | None = None) -> Manifest:
        """The manifest at ``path``: a regular file (``inside`` that folder, if given) of at
        most :data:`MANIFEST_MAX` bytes holding a JSON object of the fields, each of its type
        and form. Raises :class:`ArchiveError` naming the first problem."""
        try:
            with open_regular(path, inside=inside) as f:
                raw = f.read(MANIFEST_MAX + 1)
        except FileNotFoundError:
            raise ArchiveError(f"manifest {path} does not exist", {"file": str(path)}) from None
        except OSError as exc:
            raise ArchiveError(
                f"manifest {path} is unreadable: {exc.strerror or exc}", {"file": str(path)}
            ) from None
        except ArchiveError as exc:
            raise ArchiveError(f"manifest {exc.message}", exc.details) from None
        try:
            if len(raw) > MANIFEST_MAX:
                raise ValueError(f"it is larger than {MANIFEST_MAX} bytes")
            data = json.loads(raw.decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"it is a JSON {type(data).__name__}, not an object")
            missing = [k for k in MANIFEST_REQUIRED if k not in data]
            if missing:
                raise ValueError(f"it lacks {', '.join(missing)}")
            return cls(**{k: data[k] for k in MANIFEST_FIELDS if k in data})
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError too
            raise ArchiveError(
                f"manifest {path} is invalid: {exc}", {"file": str(path), "problem": str(exc)}
            ) from None


MANIFEST_FIELDS = tuple(f.name for f in fields(Manifest))
MANIFEST_REQUIRED = tuple(f.name for f in fields(Manifest) if f.default is MISSING)


def _manifest_problem(m: Manifest) -> str | None:
    """Why ``m``'s fields are not a manifest's, or None. Values are checked as JSON gives
    them: no text where a number belongs, no booleans for numbers."""
    for name in ("board", "season", "sha256", "created_at"):
        value = getattr(m, name)
        if not isinstance(value, str):
            return f"{name} must be a text, got {type(value).__name__}"
    if not re.fullmatch(NAME_RE.strip("^$"), m.board):
        return f"board {shown(m.board)} is not a board name"
    if not _SEASON.fullmatch(m.season):
        return f"season {shown(m.season)} is not a season id (S, or S@<YYYYMMDDTHHMMSSZ>)"
    if isinstance(m.count, bool) or not isinstance(m.count, int) or m.count < 0:
        return f"count {shown(m.count)} is not an integer of 0 or more"
    if isinstance(m.score_sum, bool) or not isinstance(m.score_sum, int | float):
        return f"score_sum must be a number, got {type(m.score_sum).__name__}"
    if isinstance(m.score_sum, int) and abs(m.score_sum) > sys.float_info.max:
        return f"score_sum is an integer of {m.score_sum.bit_length()} bits, not a double"
    if not math.isfinite(m.score_sum):
        return f"score_sum {m.score_sum} is not finite"
    if not _SHA256.fullmatch(m.sha256):
        return f"sha256 {shown(m.sha256)} is not 64 lowercase hexadecimal digits"
    try:
        created = datetime.fromisoformat(m.created_at)
    except ValueError:
        return f"created_at {shown(m.created_at)} is not an ISO 8601 time"
    if created.tzinfo is None:
        return f"created_at {shown(m.created_at)} has no zone (write it in UTC with Z)"
    try:
        created.astimezone(UTC)  # as results and events date it
    except OverflowError:
        return f"created_at {shown(m.created_at)} is out of range in UTC"
    return None


def sha256_of(path: Path) -> str:
    with path.open("rb") as f:
        return sha256_read(f)


def sha256_read(f: IO[bytes]) -> str:
    """The sha256 of what is left to read in ``f``, read in blocks."""
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()
