"""Results amended after a late ban (docs/fair-play.md#results-amended-after-a-late-ban).

A season's results as the close wrote them are version 1 (``keys.results``, the archive
files), never changed. When a member is hidden, banned or made visible on a board, each season
of the board archived within ``rewards.amend_days`` of its close gets a new version of its
results if they now differ from the latest: the standings at the close (the public archive and
its twin, the members hidden then) without the members hidden or banned now, ranks closed up by
the board's tie rule, the board's tiers applied again. Version ``n`` is the hash
``keys.amended(B, S, n)`` and the files ``<S>.amend-<n>.jsonl.gz`` + ``<S>.amend-<n>.manifest
.json`` (write-once, verified like the close's). Each member's effective result is the best it
had in any version (``keys.best``): no honest member loses; :mod:`seasons.rewards` reads it.

The amendment is resumable: its version is fixed by a marker in the board's state hash
(``amend:<S>`` -> n) before anything is written, every step is idempotent, and the marker
is dropped (``amended:<S>`` -> n recorded) in one transaction at the end. A run killed at any
checkpoint is finished by the next moderation call on the board or by the worker's close job
(:meth:`Amender.resume`), with the same files and results.
"""

from __future__ import annotations

import gzip
import json
import math
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

from redis.typing import EncodableT

from seasons import closed
from seasons.archives import (
    DATA_SUFFIX,
    MANIFEST_SUFFIX,
    TMP_TTL,
    Archives,
    _place,
    _place_bytes,
    _tmp_path,
    _write_synced,
)
from seasons.catalog import archive_dir
from seasons.clock import utc_text
from seasons.connection import RedisClient, text
from seasons.errors import ArchiveError, ArchiveExists
from seasons.keys import SEASON_ARCHIVED, STATE_AMEND, STATE_AMENDED, STATE_SEASON, Keys
from seasons.lifecycle import Lifecycle, event_id
from seasons.manifest import AMEND_MARK, Manifest, sha256_of
from seasons.results import SUMMARY, Matcher, batched, result_json, tiers_of
from seasons.standings import CHUNK, line
from seasons.vocabulary import EventType

Checkpoint = Callable[[str], None]


def _no_checkpoint(name: str) -> None:
    return None


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
            if (a := self.amend(board, season, now)) is not None:
                done.append(a)
        return done

    def latest(self, board: str, season: str) -> int:
        raw = self.client.hget(self.keys.state(board), STATE_AMENDED + season)
        return 1 if raw is None else int(text(raw))

    def version_key(self, board: str, season: str, version: int) -> str:
        if version == 1:
            return self.keys.results(board, season)
        return self.keys.amended(board, season, version)

    def paths(self, board: str, season: str, version: int) -> tuple[Path, Path]:
        folder = archive_dir(self.settings, board)
        stem = f"{season}{AMEND_MARK}{version}"
        return folder / f"{stem}{DATA_SUFFIX}", folder / f"{stem}{MANIFEST_SUFFIX}"

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
            self._store(board, season, version, key, rows, now)
        cp("rows-written")
        after = self._hash(key)
        changed = sum(1 for m in before.keys() | after.keys() if before.get(m) != after.get(m))
        self._write_files(board, season, version, after, cp)
        self.verify(board, season, version)
        cp("verified")
        self._merge_best(board, season, version)
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
        if cfg.ties == "earliest":
            reached = self.keys.reached(board, "archive", season)
            tmp_reached = self.keys.tmp(board, f"amend-reached:{season}:{token}")
            pipe.zunionstore(tmp_reached, [reached, self.keys.twin_of(reached)])
            pipe.expire(tmp_reached, TMP_TTL)
        pipe.execute()
        try:
            hidden = [text(m) for m in self.client.hkeys(self.keys.moderation(board))]
            for part in batched(hidden, CHUNK):
                self.client.zrem(tmp, *part)
            matcher = Matcher(tiers_of(cfg), int(self.client.zcard(tmp)))
            rows = self.standings.rows(board, tmp, tmp_reached, with_metadata=False)
            return {m: result_json(r, s, matcher.reward(r)) for r, m, s, _ in rows}
        finally:
            self.client.delete(tmp, *([tmp_reached] if tmp_reached else []))

    def _store(
        self, board: str, season: str, version: int, key: str, rows: dict[str, str],
        now: datetime,
    ) -> None:  # fmt: skip
        """The version's hash, its summary last (a rerun finds it complete, or starts over)."""
        self.client.delete(key)
        for part in batched(list(rows.items()), CHUNK):
            self.client.hset(key, mapping=dict(part))
        cfg = self.settings.boards[board]
        tiers = tiers_of(cfg)
        rewards = [json.loads(r)["reward"] for r in rows.values()]
        summary = {
            "season": season, "board": board, "provisional": False, "version": version,
            "computed_at": utc_text(now, "seconds"), "total": len(rows),
            "tiers": [
                {"tier": t.label, "reward": t.reward,
                 "count": sum(1 for r in rewards if r == t.reward)}
                for t in tiers
            ],
        }  # fmt: skip
        self.client.hsetnx(key, SUMMARY, json.dumps(summary, separators=(",", ":")))

    # --- files ------------------------------------------------------------------------------

    def _lines(self, rows: dict[str, str]) -> Iterator[tuple[str, float]]:
        """The file's lines in rank order (equal ranks by member bytes) with their scores;
        no metadata (the close's file has it), so a rerun writes the same bytes."""
        parsed = [(json.loads(v), m) for m, v in rows.items()]
        parsed.sort(key=lambda x: (x[0]["rank"], x[1].encode("utf-8", "surrogatepass")))
        for r, member in parsed:
            yield line(r["rank"], member, r["score"], {}, r["reward"]), float(r["score"])

    def _write_files(
        self, board: str, season: str, version: int, rows: dict[str, str], cp: Checkpoint
    ) -> None:
        """``<S>.amend-<n>.jsonl.gz`` then its manifest, write-once: a file already there is
        kept when it holds the same bytes, else :class:`ArchiveExists`."""
        data, manifest_path = self.paths(board, season, version)
        data.parent.mkdir(parents=True, exist_ok=True)
        ordered = list(self._lines(rows))
        lines = [t for t, _ in ordered]

        def write(f: IO[bytes]) -> None:
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as gz:
                for text_line in lines:
                    gz.write(text_line.encode())

        tmp = _tmp_path(data)
        try:
            _write_synced(tmp, write)
            digest = sha256_of(tmp)
            if data.exists():
                if sha256_of(data) != digest:
                    raise ArchiveExists(
                        f"amendment file {data} already exists with other content: "
                        "amendments are write-once; nothing was written",
                        {"file": str(data), "would_write": digest},
                    )
            else:
                _place(tmp, data)
        finally:
            tmp.unlink(missing_ok=True)
        cp("data-written")
        raw = self.client.hget(self.version_key(board, season, version), SUMMARY)
        if raw is None:  # written at rows-written, before any file
            raise ArchiveError(f"version {version} of {board} {season} has no summary", {})
        summary = json.loads(text(raw))
        manifest = Manifest(
            board=board, season=season, count=len(lines),
            score_sum=math.fsum(s for _, s in ordered), sha256=digest,
            created_at=summary["computed_at"],
            tiers=closed.tier_rules(self.settings.boards[board]), removed=[],
        )  # fmt: skip
        if manifest_path.exists():
            found = Manifest.load(manifest_path)
            if found != manifest:
                raise ArchiveExists(
                    f"amendment manifest {manifest_path} already exists with other content: "
                    "amendments are write-once; nothing was written",
                    {"file": str(manifest_path)},
                )
        else:
            _place_bytes(manifest_path, manifest.to_json().encode())
        cp("manifest-written")

    def verify(self, board: str, season: str, version: int) -> Manifest:
        """Check version ``version``'s files: sha256 and figures as its manifest says, and
        every line as the version's results hold it. Raises :class:`ArchiveError`."""
        data, manifest_path = self.paths(board, season, version)
        manifest = Manifest.load(manifest_path)
        rewards: dict[str, str | None] = {}
        rows = self.archives._checked_rows(data, manifest, rewards)
        stored = self._hash(self.version_key(board, season, version))
        in_file = {m: result_json(r, s, rewards.get(m)) for r, m, s, _ in rows}
        if in_file != stored:
            raise ArchiveError(
                f"{data} differs from version {version} of the results of {board} {season}",
                {"file": str(data)},
            )
        return manifest

    # --- the best of every version ------------------------------------------------------------

    def _merge_best(self, board: str, season: str, version: int) -> None:
        """Merge versions 1 and ``version`` into the best results: a member's entry is
        replaced only by a better reward (idempotent, so a rerun changes nothing)."""
        order = {t.reward: i for i, t in reversed(list(enumerate(tiers_of(
            self.settings.boards[board]))))}  # fmt: skip
        worst = len(order) + 1
        best_key = self.keys.best(board, season)

        def rank_of(row: dict[str, Any]) -> int:
            reward = row["reward"]
            return worst if reward is None else order.get(reward, worst - 1)

        for v in (1, version):
            rows = self._hash(self.version_key(board, season, v))
            for part in batched(sorted(rows), CHUNK):
                current = self.client.hmget(best_key, part)
                mapping: dict[EncodableT, EncodableT] = {}
                for member, raw in zip(part, current, strict=True):
                    row = json.loads(rows[member])
                    if raw is not None and rank_of(json.loads(text(raw))) <= rank_of(row):
                        continue
                    row["version"] = v
                    mapping[member] = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
                if mapping:
                    self.client.hset(best_key, mapping=mapping)
