"""Reward tiers and the results of a season (docs/boards.md#rewards; the results hash:
docs/contract.md#keys).

A board's tiers (``[[boards.<b>.rewards]]``) are read in the order written; the first tier
a member matches gives its reward:

- ``ranks = "1"`` or ``"2-10"``: a rank, or an inclusive range of ranks;
- ``top_percent = p`` (0 < p <= 100): every member whose rank is at most
  ``ceil(total * p / 100)``, ``total`` being the number of ranked members. Computed exactly
  (``p`` as the decimal written, no binary rounding), so ``top_percent = 10`` of 1 000
  members is ranks 1-100.

A member's rank is the one the board's reads give (its tie rule): on a ``shared`` or
``dense`` board tied members share a rank and so a tier, even across a tier's boundary;
``member`` and ``earliest`` boards rank every member apart.

The results of a season (or of a snapshot ``S@<ts>``) are written once from its archive by
:class:`Results`: member -> ``{"rank", "score", "reward"}`` for every ranked member, then the
summary under the field ``""``. The summary is written last: results are complete exactly
when it exists, and a rerun after a crash finds it and writes nothing again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from redis.typing import EncodableT

from seasons.clock import utc_text
from seasons.connection import RedisClient
from seasons.standings import CHUNK, Standings
from seasons.vocabulary import parse_ranks

if TYPE_CHECKING:
    from seasons.config.settings import BoardSettings, RewardTier
    from seasons.keys import Keys

SUMMARY = ""  # the results hash's field holding the summary

T = TypeVar("T")


# --- tiers ----------------------------------------------------------------------------------


def cutoff(total: int, percent: float) -> int:
    """The last rank within the top ``percent`` of ``total`` ranked members:
    ``ceil(total * percent / 100)``, exactly (the percent as its shortest decimal text)."""
    exact = Fraction(Decimal(repr(percent))) * total / 100
    return math.ceil(exact)


@dataclass(frozen=True, slots=True)
class Tier:
    """One tier of a board: ranks ``lo``..``hi``, or the top ``percent``."""

    reward: str
    lo: int = 0
    hi: int = 0
    percent: float | None = None

    @property
    def label(self) -> str:
        """The tier as the summary names it: ``"1"``, ``"2-10"`` or ``"top 10%"``."""
        if self.percent is not None:
            return f"top {self.percent:g}%"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"

    def last_rank(self, total: int) -> int:
        return cutoff(total, self.percent) if self.percent is not None else self.hi


def tiers_of(cfg: BoardSettings) -> list[Tier]:
    """A board's tiers, in the order written (the settings validated them)."""
    return tiers_from(cfg.rewards)


def tiers_from(rules: Sequence[RewardTier]) -> list[Tier]:
    """The tiers of validated rules (a board's, or those an archive manifest recorded)."""
    out = []
    for t in rules:
        if t.top_percent is not None:
            out.append(Tier(t.reward, percent=t.top_percent))
        else:
            lo, hi = parse_ranks(str(t.ranks))
            out.append(Tier(t.reward, lo, hi))
    return out


class Matcher:
    """Which tier each rank gets, for one number of ranked members."""

    def __init__(self, tiers: Sequence[Tier], total: int):
        self.tiers = list(tiers)
        self.total = total
        self._bounds = [(t.lo if t.percent is None else 1, t.last_rank(total)) for t in tiers]

    def tier(self, rank: int) -> int | None:
        """The index of the first tier ``rank`` falls in, or None."""
        for i, (lo, hi) in enumerate(self._bounds):
            if lo <= rank <= hi:
                return i
        return None

    def reward(self, rank: int) -> str | None:
        i = self.tier(rank)
        return None if i is None else self.tiers[i].reward


# --- results ----------------------------------------------------------------------------------


def result_json(rank: int, score: float, reward: str | None) -> str:
    """One member's field of the results hash."""
    row = {"rank": rank, "score": score, "reward": reward}
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def batched(rows: Iterable[T], n: int) -> Iterator[list[T]]:
    it = iter(rows)
    while part := list(islice(it, n)):
        yield part


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class Results:
    """The results hashes of one namespace: written from archives, read back by members."""

    def __init__(self, client: RedisClient, standings: Standings, keys: Keys):
        self.client = client
        self.standings = standings
        self.keys = keys

    def summary(self, board: str, archive_id: str) -> dict[str, Any] | None:
        """The summary of complete results, or None (not computed, or cut off by a crash)."""
        raw = self.client.hget(self.keys.results(board, archive_id), SUMMARY)
        return None if raw is None else dict(json.loads(_text(raw)))

    def rewards(self, board: str, archive_id: str, members: Sequence[str]) -> list[str | None]:
        """The reward of each of ``members`` (at most :data:`CHUNK` of them: one HMGET);
        raises KeyError naming a member the results do not hold."""
        found = self.client.hmget(self.keys.results(board, archive_id), list(members))
        out: list[str | None] = []
        for member, raw in zip(members, found, strict=True):
            if raw is None:
                raise KeyError(member)
            out.append(json.loads(_text(raw))["reward"])
        return out

    def write(
        self,
        board: str,
        archive_id: str,
        now: datetime,
        *,
        provisional: bool = False,
        checkpoint: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Compute and store the results of ``archive:<archive_id>`` (read in rank order by
        :meth:`seasons.standings.Standings.rows`, ranks by the board's tie rule, tiers of
        the board's settings); returns the summary. See :meth:`store`."""
        if (done := self.summary(board, archive_id)) is not None:
            return done
        cfg = self.standings.settings.boards[board]
        archive = self.keys.archive(board, archive_id)
        matcher = Matcher(tiers_of(cfg), int(self.client.zcard(archive)))
        rows = self.standings.rows(board, archive, with_metadata=False)
        ranked = ((rank, member, score) for rank, member, score, _ in rows)
        return self.store(
            board, archive_id, ranked, matcher, now, provisional=provisional,
            checkpoint=checkpoint,
        )  # fmt: skip

    def store(
        self,
        board: str,
        archive_id: str,
        ranked: Iterable[tuple[int, str, float]],
        matcher: Matcher,
        now: datetime,
        *,
        provisional: bool = False,
        absent: Iterable[int] = (),
        checkpoint: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Store the results of (rank, member, score) rows, rewards by ``matcher`` (its
        ``total`` is the summary's); ``absent``: the ranks of members ranked at the close
        but forgotten since, counted in the tiers' counts, as the close counted them
        (:mod:`seasons.restore_results` reproduces results as they stood). Returns the summary.

        Idempotent: complete results (their summary exists) are kept as they are; otherwise
        every member's field is written again (the archive is write-once, so with the same
        values), one HSET of :data:`CHUNK` fields at a time, and the summary last. The claims
        hash is never touched.
        """
        if (done := self.summary(board, archive_id)) is not None:
            return done
        results = self.keys.results(board, archive_id)
        counts = [0] * len(matcher.tiers)
        for rank in absent:
            if (i := matcher.tier(rank)) is not None:
                counts[i] += 1
        for part in batched(ranked, CHUNK):
            mapping: dict[EncodableT, EncodableT] = {}
            for rank, member, score in part:
                i = matcher.tier(rank)
                if i is not None:
                    counts[i] += 1
                reward = None if i is None else matcher.tiers[i].reward
                mapping[member] = result_json(rank, score, reward)
            self.client.hset(results, mapping=mapping)
        if checkpoint is not None:
            checkpoint("rows-written")
        summary = {
            "season": archive_id, "board": board, "provisional": provisional,
            "computed_at": utc_text(now, "seconds"), "total": matcher.total,
            "tiers": [
                {"tier": t.label, "reward": t.reward, "count": n}
                for t, n in zip(matcher.tiers, counts, strict=True)
            ],
        }  # fmt: skip
        # HSETNX: of two writers (which the close's lock rules out) the first summary stands.
        self.client.hsetnx(results, SUMMARY, json.dumps(summary, separators=(",", ":")))
        return self.summary(board, archive_id) or summary
