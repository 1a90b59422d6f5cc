"""The results a restore writes back (:mod:`seasons.results`): as they stood at the close, and
the season's amended versions (:mod:`seasons.amend`) with the best results and the upgrade
claims.

A season's amended versions, ``<S>.amend-<n>`` beside its file, come back with it: each
checked against its manifest like the close's file, 2, 3, ... without a gap (else
:class:`ArchiveRejected`, nothing written), then written as the amendments left them (the
version hashes, the best results merged in version order, the ``amended:<S>`` marker) with the
upgrade claims log's latest claim of each member. A claim of either log may claim the reward a
member had in any version (:func:`results_had`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from seasons import amend_files, restore_claims
from seasons.amend import Amender
from seasons.archives import DATA_SUFFIX, MANIFEST_SUFFIX
from seasons.claimlog import LoggedClaim
from seasons.closed import AsClosed
from seasons.errors import ArchiveError, ArchiveRejected
from seasons.keys import STATE_AMENDED
from seasons.manifest import AMEND_MARK, Manifest
from seasons.restore_claims import Had
from seasons.results import Results
from seasons.standings import Row, rejected


@dataclass(frozen=True, slots=True)
class Version:
    """One amended version of a season's results, read from its checked files."""

    version: int
    manifest: Manifest
    rows: dict[str, str]  # member -> result JSON, as the version's hash holds it


def versions(
    amender: Amender, file: Path, manifest: Manifest, inside: Path | None
) -> list[Version]:
    """The amended versions beside ``file`` (``<S>.amend-<n>``), each checked against its
    manifest as the close's file is: 2, 3, ... without a gap, of this board and season."""
    out: list[Version] = []
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
                amender.archives, data, file.with_name(stem + MANIFEST_SUFFIX), inside
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


def results_had(rows: list[Row], result: AsClosed, versions: Iterable[Version]) -> Had:
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


def store_results(
    amender: Amender, manifest: Manifest, rows: list[Row], at_close: AsClosed, *, replaced: bool
) -> None:
    """The results of the standings loaded as they stood at the close: each line's rank and
    reward as :func:`seasons.closed.as_closed` recomputed them, the tiers' counts and total
    with the members forgotten since, dated with the archive's manifest; complete results of
    the same standings are kept (``replaced``: the results of other standings are not)."""
    board, season = manifest.board, manifest.season
    keys = amender.keys
    if replaced:
        amender.client.unlink(keys.results(board, season))
    ranked = ((r, m, s) for r, (_, m, s, _) in zip(at_close.ranks, rows, strict=True))
    Results(amender.client, amender.standings, keys).store(
        board, season, ranked, at_close.matcher, manifest.created,
        provisional="@" in season, absent=at_close.absent,
    )  # fmt: skip


def store_amended(
    amender: Amender, manifest: Manifest, at_close: AsClosed, amended: list[Version],
    upgrades: list[LoggedClaim], *, replaced: bool,
) -> None:  # fmt: skip
    """The amended versions as the amendments left them: each version's hash (one already
    there is kept: write-once), the best results merged version by version in order, as each
    amendment merged them, the upgrade claims (HSETNX: one in Redis stands) and the latest
    version's marker, last. ``replaced``: the versions of other standings go first."""
    board, season = manifest.board, manifest.season
    client, keys = amender.client, amender.keys
    if replaced:
        latest = amender.latest(board, season)
        stale = [keys.amended(board, season, n) for n in range(2, latest + 1)]
        client.unlink(keys.best(board, season), keys.upgrades(board, season), *stale)
        client.hdel(keys.state(board), STATE_AMENDED + season)
    if not amended:
        return
    tiers = at_close.matcher.tiers
    for v in amended:
        amender.store(board, season, v.version, v.rows, tiers, v.manifest.created_at)
    for v in amended:
        amender.merge_best(board, season, v.version, tiers)
    restore_claims.store(client, keys.upgrades(board, season), upgrades, upgrade=True)
    client.hset(keys.state(board), STATE_AMENDED + season, str(amended[-1].version))
