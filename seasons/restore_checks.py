"""What a restore (:mod:`seasons.restore`) checks of an archive file before it writes anything.

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
- the season's amended versions beside the file, if any (:mod:`seasons.restore_results`);
- the claims logs beside the file, if any (:mod:`seasons.restore_claims`), hold claims of this
  season whose rewards and ranks are the members' results;
- the archive key, if it exists, holds the same standings (archives are write-once), unless
  ``force`` is given. The same standings again are a no-op.

Any problem raises :class:`ArchiveRejected` (bad file) or :class:`ArchiveExists` (other
standings already in Redis). Reading a file costs at most what its manifest's ``count``
allows (:func:`seasons.standings.read_checked`), whatever the file holds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, cast

from seasons import calendar, claimlog, closed
from seasons.amend import Amender
from seasons.archives import DATA_SUFFIX, MANIFEST_SUFFIX
from seasons.claimlog import LoggedClaim
from seasons.closed import AsClosed
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import RedisClient, text
from seasons.errors import ArchiveError, ArchiveExists, ArchiveRejected, BadPeriod
from seasons.keys import Keys
from seasons.manifest import Manifest, is_amendment
from seasons.restore_claims import logged
from seasons.restore_results import Version, results_had, versions
from seasons.standings import (
    LineReward,
    Row,
    lines_rejected,
    open_verified,
    read_checked,
    rejected,
)

Action = Literal["restored", "replaced", "unchanged"]

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


class Checker:
    """Checks archive files of one namespace; writes nothing."""

    def __init__(self, client: RedisClient, settings: Settings, keys: Keys, amender: Amender):
        self.client = client
        self.settings = settings
        self.keys = keys
        self.amender = amender

    def check(
        self, file: Path, now: datetime, *, force: bool = False, inside: Path | None = None
    ) -> Checked:
        """Every check of the module docstring. With ``inside``, the file and its manifest
        must really be in that folder (``restore --all``: no links out)."""
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
        cfg = self.settings.boards[manifest.board]
        with open_verified(file, manifest.sha256, inside=inside) as data:
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
        amended = [] if "@" in manifest.season else versions(self.amender, file, manifest, inside)
        had = results_had(rows, at_close, amended)
        claims = logged(claimlog.beside(file, manifest.season), manifest, had, inside, first=True)
        upgrades_log = file.with_name(manifest.season + claimlog.UPGRADES_SUFFIX)
        upgrades = logged(upgrades_log, manifest, had, inside, first=False)
        action = self._compare(file, manifest, rows, force)
        return Checked(file, manifest, rows, action, at_close, claims, amended, upgrades)

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
        raise lines_rejected(file, problems)
    return result
