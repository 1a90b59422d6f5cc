"""Results as they stood at a season's close, from its archive file and manifest.

The close ranks every member and grants rewards by the board's tiers (:mod:`seasons.results`).
Both must survive what comes after: a forget removes a member from the archive file but the
others keep their ranks and rewards, and a board's ``rewards`` may be configured otherwise
later. So the manifest records (docs/contract.md#archives):

- ``tiers``: the reward tiers in force at the close, as configured (``[{"ranks": "1",
  "reward": "gold"}, {"top_percent": 10, "reward": "bronze"}]``); absent in manifests
  written before it, whose tiers are then the board's configured ones;
- ``removed``: one ``{"line", "score"}`` per member forgotten since the close, ``line`` its
  line in the file as the close wrote it. The file keeps the others' lines with their ranks
  as they stood, so a forgotten member leaves a gap; the member's id is not kept.

From the file's lines in order, the gaps and the board's tie rule, :func:`as_closed` gives
each line's rank, and from the tiers and the number ranked at the close (lines + gaps) each
line's reward: restore recomputes both, never trusting a line's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from seasons import ties
from seasons.config.settings import BoardSettings, RewardTier
from seasons.results import Matcher, Tier, tiers_from


@dataclass(frozen=True, slots=True)
class Gap:
    """A member ranked at the close and forgotten since: its line then, and its score (which
    the ranks after it may depend on: shared and dense ties)."""

    line: int
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "score": self.score}


@dataclass(frozen=True, slots=True)
class AsClosed:
    """The ranks of a file's lines at the close, the ranks of its gaps, and the rewards."""

    ranks: list[int]  # of each line, in file order
    absent: list[int]  # of each gap
    matcher: Matcher  # the close's tiers, for the number ranked at the close

    def reward(self, index: int) -> str | None:
        """The reward of the line at ``index`` (from 0)."""
        return self.matcher.reward(self.ranks[index])


def tier_rules(cfg: BoardSettings) -> list[dict[str, Any]]:
    """A board's tiers as a manifest records them."""
    return [t.model_dump(exclude_none=True) for t in cfg.rewards]


def manifest_tiers(recorded: Any, cfg: BoardSettings) -> list[Tier]:
    """The tiers a manifest recorded (None: not recorded, the board's configured ones);
    raises ValueError naming what is wrong."""
    if recorded is None:
        return tiers_from(cfg.rewards)
    if not isinstance(recorded, list):
        raise ValueError(f"its tiers {recorded!r} are not a list")
    rules = []
    for i, rule in enumerate(recorded):
        try:
            rules.append(RewardTier.model_validate(rule))
        except ValidationError as exc:
            why = "; ".join(e["msg"] for e in exc.errors())
            raise ValueError(f"its tiers[{i}] {rule!r} is not a reward tier: {why}") from None
    return tiers_from(rules)


def manifest_gaps(recorded: Any, count: int) -> list[Gap]:
    """The gaps a manifest recorded (None: none), checked against its ``count`` of lines;
    raises ValueError naming what is wrong."""
    if recorded is None:
        return []
    if not isinstance(recorded, list):
        raise ValueError(f"its removed {recorded!r} is not a list")
    ranked = count + len(recorded)
    gaps: list[Gap] = []
    for i, g in enumerate(recorded):
        ok = isinstance(g, dict) and set(g) == {"line", "score"}
        line, score = (g.get("line"), g.get("score")) if ok else (None, None)
        if not (
            ok and isinstance(line, int) and not isinstance(line, bool) and 1 <= line <= ranked
            and isinstance(score, int | float) and not isinstance(score, bool)
            and math.isfinite(score)
        ):  # fmt: skip
            raise ValueError(
                f'its removed[{i}] {g!r} is not {{"line": 1-{ranked}, "score": a number}}'
            )
        gaps.append(Gap(line, float(score)))
    gaps.sort(key=lambda g: g.line)
    for a, b in zip(gaps, gaps[1:], strict=False):
        if a.line == b.line:
            raise ValueError(f"its removed names line {a.line} twice")
    return gaps


def as_closed(
    scores: Sequence[float], gaps: Sequence[Gap], tiers: Sequence[Tier], cfg: BoardSettings
) -> AsClosed:
    """The ranks and rewards at the close of lines with ``scores`` (in file order) and
    ``gaps`` (sorted by line, lines within lines + gaps). Raises ValueError when a gap's score
    is out of the board's order among the lines around it."""
    ranked = len(scores) + len(gaps)
    at = {g.line: g.score for g in gaps}
    rest = iter(scores)
    full = [at[p] if p in at else next(rest) for p in range(1, ranked + 1)]
    desc = cfg.order == "desc"
    for g in gaps:
        i = g.line - 1
        before, after = full[i - 1] if i else None, full[i + 1] if i + 1 < ranked else None
        if (before is not None and (g.score > before if desc else g.score < before)) or (
            after is not None and (g.score < after if desc else g.score > after)
        ):
            raise ValueError(
                f"its removed line {g.line} has score {g.score}, out of the board's order "
                f"({cfg.order}) between the lines around it"
            )
    full_ranks = ties.ranks(full, ties.of(cfg))
    return AsClosed(
        ranks=[r for p, r in enumerate(full_ranks, start=1) if p not in at],
        absent=[full_ranks[g.line - 1] for g in gaps],
        matcher=Matcher(tiers, ranked),
    )


def forgotten(
    old: Sequence[tuple[str, float]], old_gaps: Sequence[Gap], kept: set[str]
) -> list[Gap]:
    """The gaps after a forget: those before, and one per member of ``old`` (the file's
    (member, score) lines, in order) that is not ``kept``, at its line at the close."""
    at = {g.line for g in old_gaps}
    lines = (p for p in range(1, len(old) + len(old_gaps) + 1) if p not in at)
    gaps = list(old_gaps)
    for (member, score), line in zip(old, lines, strict=False):
        if member not in kept:
            gaps.append(Gap(line, score))
    return sorted(gaps, key=lambda g: g.line)
