"""The claims logs a restore loads back (:mod:`seasons.claimlog`), beside a season's archive
file: ``<S>.claims.jsonl`` (each member's first claim, as HSETNX kept it) and
``<S>.upgrades.jsonl`` (the upgrade claims of amended results, :mod:`seasons.amend`: each
member's latest, as the upgrades hash keeps it).

Every line is checked first: a claim of this board and season, whose reward and rank the
member had in some version of the season's results (:data:`Had`; a first claim made after
an amendment claims the amended reward). Claims of members without a result (forgotten) are
left out. Loaded with HSETNX: a claim in Redis (made since, or never lost) stands.
"""

from __future__ import annotations

from pathlib import Path

from seasons import claimlog
from seasons.claimlog import LoggedClaim
from seasons.connection import RedisClient
from seasons.errors import ArchiveError
from seasons.manifest import Manifest
from seasons.standings import CHUNK, STOP_AFTER, lines_rejected, rejected

Had = dict[str, set[tuple[int, str | None]]]  # member -> (rank, reward) in each version


def logged(
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
        raise lines_rejected(path, problems)
    return list(found.values())


def _had(results: set[tuple[int, str | None]]) -> str:
    return " or ".join(f"{w!r} at rank {r}" for r, w in sorted(results, key=str))


def store(client: RedisClient, key: str, claims: list[LoggedClaim], *, upgrade: bool) -> None:
    """``claims`` back into the claims hash (or, ``upgrade``, the upgrades hash) ``key``, each
    with HSETNX: a claim in Redis (made since, or never lost) stands."""
    for i in range(0, len(claims), CHUNK):
        pipe = client.pipeline(transaction=False)
        for c in claims[i : i + CHUNK]:
            value = c.stored()
            if upgrade:
                value = value[:-1] + ',"upgrade":true}'  # as claim.lua stores an upgrade
            pipe.hsetnx(key, c.member, value)
        pipe.execute()
