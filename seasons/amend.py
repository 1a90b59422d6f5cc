"""Results amended after a late ban (docs/fair-play.md#results-amended-after-a-late-ban).

A season's results as the close wrote them are version 1 (``keys.results``, the archive
files), never changed. When a member is hidden, banned or made visible on a board, each season
of the board archived within ``rewards.amend_days`` of its close gets a new version of its
results if they now differ from the latest: the standings at the close (the public archive and
its twin, the members hidden then) without the members hidden or banned now, ranks closed up by
the board's tie rule, the tiers of the close applied again. Version ``n`` is the hash
``keys.amended(B, S, n)`` and the files ``<S>.amend-<n>.jsonl.gz`` and its manifest
(write-once, verified like the close's: :mod:`seasons.amend_files`). Each member's effective
result is the best it had in any version (``keys.best``): no honest member loses;
:mod:`seasons.rewards` reads it.

The amendment is resumable: its version is fixed by a marker in the board's state hash
(``amend:<S>`` -> n) before anything is written, every step is idempotent, and the marker
is dropped (``amended:<S>`` -> n recorded) in one transaction at the end. A run killed at any
checkpoint is finished by the next moderation call on the board or by the worker's close job
(:meth:`Amender.resume`), with the same files and results.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from seasons import amend_files as files
from seasons import claimlog, closed, ties
from seasons.archives import (
    TMP_TTL,
    Archives,
)
from seasons.clock import utc_text
from seasons.connection import RedisClient, text
from seasons.errors import ArchiveError
from seasons.keys import SEASON_ARCHIVED, STATE_AMEND, STATE_AMENDED, STATE_SEASON, Keys
from seasons.lifecycle import Lifecycle, event_id
from seasons.manifest import Manifest
from seasons.results import SUMMARY, Matcher, Tier, batched, result_json
from seasons.standings import CHUNK
from seasons.vocabulary import EventType

Checkpoint = Callable[[str], None]


def _no_checkpoint(name: str) -> None:
    return None


def latest_version(client: RedisClient, keys: Keys, board: str, season: str) -> int:
    """The latest version of ``season``'s results on ``board`` (1: never amended)."""
    raw = client.hget(keys.state(board), STATE_AMENDED + season)
    return 1 if raw is None else int(text(raw))


def version_key(keys: Keys, board: str, season: str, version: int) -> str:
    """The hash of version ``version`` (1: the close's results hash)."""
    return keys.results(board, season) if version == 1 else keys.amended(board, season, version)


@dataclass(frozen=True, slots=True)
class Amendment:
    """A new version of a season's results."""

    board: str
    season: str
    version: int
    changed: int


class Amender:
    """The amendments of one namespace's seasons."""

    def __init__(
        self, client: RedisClient, archives: Archives, keys: Keys, lifecycle: Lifecycle,
        checkpoint: Checkpoint = _no_checkpoint,
    ):  # fmt: skip
        self.client = client
        self.archives = archives
        self.settings = archives.settings
        self.standings = archives.standings
        self.keys = keys
        self.lifecycle = lifecycle
        self.checkpoint = checkpoint

    # --- which seasons --------------------------------------------------------------------

    def due(self, board: str, now: datetime) -> list[str]:
        """The seasons of ``board`` archived within ``rewards.amend_days`` of ``now``."""
        window = timedelta(days=self.settings.rewards.amend_days)
        if not window:
            return []  # amend_days = 0: never amend
        out = []
        for field, value in sorted(self._state(board).items()):
            if not field.startswith(STATE_SEASON) or value != SEASON_ARCHIVED:
                continue
            season = field[len(STATE_SEASON) :]
            try:
                closed_at = Manifest.load(self.archives.paths(board, season)[1]).created
            except ArchiveError:
                continue  # no files (a lost archive): nothing to amend from
            if now - closed_at <= window:
                out.append(season)
        return out

    def pending(self, board: str) -> list[str]:
        """The seasons of ``board`` whose amendment was cut off."""
        found = self.client.hscan_iter(self.keys.state(board), match=f"{STATE_AMEND}*")
        return sorted(text(f)[len(STATE_AMEND) :] for f, _ in found)

    def resume(self, board: str, now: datetime) -> list[Amendment]:
        """Finish the amendments of ``board`` cut off by a crash."""
        return [a for s in self.pending(board) if (a := self.amend(board, s, now)) is not None]

    def after_change(self, board: str, now: datetime) -> list[Amendment]:
        """What follows a change of a member's state on ``board``: the amendments cut off,
        then each season due."""
        done = self.resume(board, now)
        for season in self.due(board, now):
            # Again until nothing differs: an amendment finished here may be another call's
            # version, computed before this call's change.
            while (a := self.amend(board, season, now)) is not None:
                done.append(a)
        return done

    def _close_manifest(self, board: str, season: str) -> Manifest:
        return Manifest.load(self.archives.paths(board, season)[1])

    def tiers(self, board: str, season: str) -> list[Tier]:
        """The tiers in force at the close (its manifest's), as every version applies them:
        a later change of the board's ``rewards`` changes no result of an archived season."""
        recorded = self._close_manifest(board, season).tiers
        return closed.manifest_tiers(recorded, self.settings.boards[board])

    def latest(self, board: str, season: str) -> int:
        return latest_version(self.client, self.keys, board, season)

    def version_key(self, board: str, season: str, version: int) -> str:
        return version_key(self.keys, board, season, version)

    def paths(self, board: str, season: str, version: int) -> tuple[Path, Path]:
        return files.paths(self.settings, board, season, version)

    # --- one amendment ----------------------------------------------------------------------

    def amend(self, board: str, season: str, now: datetime) -> Amendment | None:
        """Version n+1 of ``season``'s results on ``board`` if they differ from version n
        (or finish the one cut off); None when nothing differs."""
        state = self.keys.state(board)
        latest = self.latest(board, season)
        results = self.keys.results(board, season)
        if self.client.hget(results, SUMMARY) is None:
            return None  # no results (a board restored without them): nothing to amend
        self.client.hsetnx(state, STATE_AMEND + season, str(latest + 1))
        version = int(text(self.client.hget(state, STATE_AMEND + season) or b"0"))
        name = f"amend:{board}:{season}:{version}"

        def cp(point: str) -> None:
            self.checkpoint(f"{name}/{point}")

        cp("start")
        key = self.version_key(board, season, version)
        before = self._hash(self.version_key(board, season, latest))
        if self.client.hget(key, SUMMARY) is None:
            rows = self._rows(board, season, now)
            if rows == before:
                pipe = self.client.pipeline(transaction=True)
                pipe.hdel(state, STATE_AMEND + season)
                pipe.delete(key)
                pipe.execute()
                return None
            cp("computed")
            tiers = self.tiers(board, season)
            self.store(board, season, version, rows, tiers, utc_text(now, "seconds"))
            cp("stored")
        cp("rows-written")
        after = self._hash(key)
        changed = sum(1 for m in before.keys() | after.keys() if before.get(m) != after.get(m))
        self._write_files(board, season, version, after, cp)
        self.verify(board, season, version)
        cp("verified")
        self.merge_best(board, season, version, self.tiers(board, season))
        cp("best-merged")
        kind = EventType.RESULTS_AMENDED
        data = {"season": season, "board": board, "version": version, "changed": changed}
        self.lifecycle.emit(
            kind, event_id(kind, board=board, season=season, version=version), data, now
        )
        cp("event-emitted")
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(state, STATE_AMENDED + season, str(version))
        pipe.hdel(state, STATE_AMEND + season)
        pipe.execute()
        return Amendment(board, season, version, changed)

    def _state(self, board: str) -> dict[str, str]:
        raw = self.client.hgetall(self.keys.state(board))
        return {text(k): text(v) for k, v in raw.items()}

    def _hash(self, key: str) -> dict[str, str]:
        """A version's rows, member -> its result JSON (the summary left out)."""
        out = {text(k): text(v) for k, v in self.client.hscan_iter(key, count=CHUNK)}
        out.pop(SUMMARY, None)
        return out

    def _rows(self, board: str, season: str, now: datetime) -> dict[str, str]:
        """member -> result JSON of the standings at the close (public archive and its twin)
        without the members hidden or banned now, ranked by the board's rule."""
        cfg = self.settings.boards[board]
        archive = self.keys.archive(board, season)
        token = secrets.token_hex(6)
        tmp = self.keys.tmp(board, f"amend:{season}:{token}")
        tmp_reached: str | None = None
        pipe = self.client.pipeline(transaction=True)
        pipe.zunionstore(tmp, [archive, self.keys.twin_of(archive)])
        pipe.expire(tmp, TMP_TTL)
        if ties.of(cfg).reach_set:
            reached = self.keys.reached(board, "archive", season)
            tmp_reached = self.keys.tmp(board, f"amend-reached:{season}:{token}")
            pipe.zunionstore(tmp_reached, [reached, self.keys.twin_of(reached)])
            pipe.expire(tmp_reached, TMP_TTL)
        pipe.execute()
        try:
            hidden = [text(m) for m in self.client.hkeys(self.keys.moderation(board))]
            for part in batched(hidden, CHUNK):
                self.client.zrem(tmp, *part)
            matcher = Matcher(self.tiers(board, season), int(self.client.zcard(tmp)))
            rows = self.standings.rows(board, tmp, tmp_reached, with_metadata=False)
            return {m: result_json(r, s, matcher.reward(r)) for r, m, s, _ in rows}
        finally:
            self.client.delete(tmp, *([tmp_reached] if tmp_reached else []))

    def store(
        self, board: str, season: str, version: int, rows: dict[str, str], tiers: list[Tier],
        computed_at: str,
    ) -> None:  # fmt: skip
        """The version's hash, whole: built in a scratch key, summary included, then renamed
        into place unless the version is there already (RENAMENX: of two concurrent
        amendments of one version the first complete one stands, never a mix). A restore
        (:mod:`seasons.restore_results`) writes it from the version's files the same way."""
        key = self.version_key(board, season, version)
        rewards = [json.loads(r)["reward"] for r in rows.values()]
        summary = {
            "season": season, "board": board, "provisional": False, "version": version,
            "computed_at": computed_at, "total": len(rows),
            "tiers": [
                {"tier": t.label, "reward": t.reward,
                 "count": sum(1 for r in rewards if r == t.reward)}
                for t in tiers
            ],
        }  # fmt: skip
        tmp = self.keys.tmp(board, f"amend-rows:{season}:{secrets.token_hex(6)}")
        try:
            for part in batched(list(rows.items()), CHUNK):
                self.client.hset(tmp, mapping=dict(part))
            self.client.hset(tmp, SUMMARY, json.dumps(summary, separators=(",", ":")))
            self.client.expire(tmp, TMP_TTL)
            self.client.renamenx(tmp, key)
        finally:
            self.client.delete(tmp)

    # --- files ------------------------------------------------------------------------------

    def _write_files(
        self, board: str, season: str, version: int, rows: dict[str, str], cp: Checkpoint
    ) -> None:
        raw = self.client.hget(self.version_key(board, season, version), SUMMARY)
        if raw is None:  # written at rows-written, before any file
            raise ArchiveError(f"version {version} of {board} {season} has no summary", {})
        template = Manifest(
            board=board, season=season, count=0, score_sum=0.0, sha256="0" * 64,
            created_at=json.loads(text(raw))["computed_at"],
            tiers=self._close_manifest(board, season).tiers, removed=[],
        )  # fmt: skip
        files.write_once(*self.paths(board, season, version), files.lines(rows), template, cp)

    def verify(self, board: str, season: str, version: int) -> Manifest:
        """Check version ``version``'s files against its results hash (its sha256, figures
        and every line). Raises :class:`ArchiveError`."""
        stored = self._hash(self.version_key(board, season, version))
        return files.verify(self.archives, *self.paths(board, season, version), stored)

    # --- erasure ---------------------------------------------------------------------------

    def forget(self, board: str, season: str, member: str) -> list[str]:
        """Remove ``member`` from every amended version of ``season`` (its hash, its files:
        rewritten without its line, the others' lines as they were, the manifest's figures
        updated, its date kept), its best result and its upgrade claim; returns the files
        rewritten. The one exception to write-once, as for the close's files."""
        rewritten = []
        for version in range(2, self.latest(board, season) + 1):
            key = self.keys.amended(board, season, version)
            if not self.client.hdel(key, member):
                continue
            data, manifest_path = self.paths(board, season, version)
            if not data.exists():
                continue
            files.rewrite(data, manifest_path, self._hash(key))
            rewritten.append(str(data))
        self.client.hdel(self.keys.best(board, season), member)
        self.client.hdel(self.keys.upgrades(board, season), member)
        log = claimlog.upgrades_path(self.settings, board, season)
        if claimlog.without_member(log, member):
            rewritten.append(str(log))
        return rewritten

    # --- the best of every version ------------------------------------------------------------

    def merge_best(self, board: str, season: str, version: int, tiers: list[Tier]) -> None:
        """Merge versions 1 and ``version`` into the best results (``amend_best.lua``): a
        member's entry is replaced only by a better tier (idempotent: a rerun changes
        nothing; a restore merging versions 2..n in order rebuilds what the amendments left).
        Tiers rank in the order written, the first the best; no reward last."""
        order = {t.reward: i for i, t in reversed(list(enumerate(tiers)))}
        worst = len(order) + 1
        best_key = self.keys.best(board, season)
        for v in (1, version):
            rows = self._hash(self.version_key(board, season, v))
            for part in batched(sorted(rows), CHUNK):
                args: list[str] = []
                for member in part:
                    row = json.loads(rows[member])
                    reward = row["reward"]
                    row["tier"] = worst if reward is None else order.get(reward, worst - 1)
                    row["version"] = v
                    args += [member, json.dumps(row, ensure_ascii=False, separators=(",", ":"))]
                self.archives.scripts.amend_best(keys=[best_key], args=args)
