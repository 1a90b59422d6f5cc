"""The files of amended results (seasons.amend): ``<archive.dir>/<ns>/<B>/<S>.amend-<n>.jsonl.gz``
and ``<S>.amend-<n>.manifest.json`` for version ``n`` >= 2 of a season's results.

One line per member of the version in rank order (equal ranks by member bytes), as an
archive's (``{"rank","member","score","metadata","reward"}``) but with empty metadata (the
close's file has it), gzip without a time stamp: a rerun writes the same bytes. The manifest
is an archive's (:class:`seasons.manifest.Manifest`; ``season`` the season's id, the version in
the file name; ``created_at`` the version's computation). Write-once like the close's files
(placed by hard link, never replaced; a file already there is kept when it holds the same
bytes, else :class:`ArchiveExists`), and verified like them. Only a forget rewrites them.
"""

from __future__ import annotations

import glob
import gzip
import json
import math
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace as replace_fields
from pathlib import Path
from typing import IO

from seasons.archives import (
    DATA_SUFFIX,
    MANIFEST_SUFFIX,
    Archives,
    _place,
    _place_bytes,
    _tmp_path,
    _write_synced,
)
from seasons.catalog import archive_dir
from seasons.config.settings import Settings
from seasons.errors import ArchiveError, ArchiveExists
from seasons.files import atomic_write, open_regular
from seasons.manifest import AMEND_MARK, Manifest, sha256_of
from seasons.results import result_json
from seasons.standings import line

Lines = list[tuple[str, float]]  # (line, its score) in file order


def paths(settings: Settings, board: str, season: str, version: int) -> tuple[Path, Path]:
    """(data file, manifest) of version ``version`` of ``season``'s results on ``board``."""
    stem = f"{season}{AMEND_MARK}{version}"
    folder = archive_dir(settings, board)
    return folder / f"{stem}{DATA_SUFFIX}", folder / f"{stem}{MANIFEST_SUFFIX}"


def lines(rows: dict[str, str]) -> Lines:
    """The lines of a version's rows (member -> result JSON), in file order."""
    parsed = [(json.loads(v), m) for m, v in rows.items()]
    parsed.sort(key=lambda x: (x[0]["rank"], x[1].encode("utf-8", "surrogatepass")))
    return [(line(r["rank"], m, r["score"], {}, r["reward"]), float(r["score"])) for r, m in parsed]


def _gz(ordered: Lines) -> Callable[[IO[bytes]], None]:
    def write(f: IO[bytes]) -> None:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
            for text_line, _ in ordered:
                gz.write(text_line.encode())

    return write


def write_once(
    data: Path, manifest_path: Path, ordered: Lines, template: Manifest,
    checkpoint: Callable[[str], None],
) -> Manifest:  # fmt: skip
    """Write the data file then the manifest (``template`` with the data's figures), each
    unless the same is there already; :class:`ArchiveExists` when other content is."""
    data.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_path(data)
    try:
        _write_synced(tmp, _gz(ordered))
        digest = sha256_of(tmp)
        if not data.exists():
            with suppress(ArchiveExists):  # placed meanwhile by a concurrent amendment
                _place(tmp, data)
        if sha256_of(data) != digest:
            raise ArchiveExists(
                f"amendment file {data} already exists with other content: amendments are "
                "write-once; nothing was written",
                {"file": str(data), "would_write": digest},
            )
    finally:
        tmp.unlink(missing_ok=True)
    checkpoint("data-written")
    manifest = replace_fields(
        template, count=len(ordered), score_sum=math.fsum(s for _, s in ordered), sha256=digest
    )
    if not manifest_path.exists():
        with suppress(ArchiveExists):  # placed meanwhile by a concurrent amendment
            _place_bytes(manifest_path, manifest.to_json().encode())
    if Manifest.load(manifest_path) != manifest:
        raise ArchiveExists(
            f"amendment manifest {manifest_path} already exists with other content: "
            "amendments are write-once; nothing was written",
            {"file": str(manifest_path)},
        )
    checkpoint("manifest-written")
    return manifest


def versions(folder: Path, season: str) -> list[int]:
    """The versions of ``season`` whose data file is in ``folder``, in order; ArchiveError
    for a file of the season's amendments not named by a version number."""
    prefix = f"{season}{AMEND_MARK}"
    found = []
    for p in folder.glob(f"{glob.escape(prefix)}*{DATA_SUFFIX}"):
        n = p.name[len(prefix) : -len(DATA_SUFFIX)]
        if not (n.isascii() and n.isdigit()):
            raise ArchiveError(f"{p} is not named <season>{AMEND_MARK}<n>{DATA_SUFFIX}", {})
        found.append(int(n))
    return sorted(found)


def read(
    archives: Archives, data: Path, manifest_path: Path, inside: Path | None = None
) -> tuple[Manifest, dict[str, str]]:
    """A version's manifest and rows (member -> result JSON), checked as the close's files
    are: regular files (``inside`` that folder, if given), sha256, count and score sum as the
    manifest says, every line valid. :class:`ArchiveError`."""
    manifest = Manifest.load(manifest_path, inside=inside)
    with open_regular(data, inside=inside):
        pass  # a regular file in the folder, no link out: then read by its name
    rewards: dict[str, str | None] = {}
    rows = archives._checked_rows(data, manifest, rewards)
    return manifest, {m: result_json(r, s, rewards.get(m)) for r, m, s, _ in rows}


def verify(archives: Archives, data: Path, manifest_path: Path, stored: dict[str, str]) -> Manifest:
    """The files hold exactly ``stored`` (member -> result JSON): sha256, count and score
    sum as the manifest says, every line's rank, score and reward. :class:`ArchiveError`."""
    manifest, in_file = read(archives, data, manifest_path)
    if in_file != stored:
        raise ArchiveError(
            f"{data} differs from the version of the results it was written from",
            {"file": str(data)},
        )
    return manifest


def rewrite(data: Path, manifest_path: Path, rows: dict[str, str]) -> None:
    """A forget's rewrite: the files from ``rows`` (the version without the member; the
    others keep their lines), the manifest's figures updated and its date kept."""
    ordered = lines(rows)
    atomic_write(data, _gz(ordered))
    new = replace_fields(
        Manifest.load(manifest_path), count=len(ordered),
        score_sum=math.fsum(s for _, s in ordered), sha256=sha256_of(data),
    )  # fmt: skip
    body = new.to_json().encode()

    def write_manifest(f: IO[bytes]) -> None:
        f.write(body)

    atomic_write(manifest_path, write_manifest)
