"""Results as they stood at the close (seasons.closed): ranks of an archive file's lines with
the gaps forgets left, recomputed the same whichever tie rule, and checked against ranks
computed here from the whole standings in plain Python (the reference), before any forget."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from seasons.closed import Gap, as_closed, forgotten, manifest_gaps, manifest_tiers
from seasons.config.settings import BoardSettings


def reference_ranks(scores: list[float], ties: str) -> list[int]:
    """Ranks of scores listed best first: positions (member, earliest), competition ranks
    (shared: 1 + how many are strictly better), dense ranks (1 + how many distinct scores are
    strictly better). Scores best first means ``>`` better on a desc board; the lists here are
    desc, so strictly better is strictly greater."""
    if ties in ("member", "earliest"):
        return list(range(1, len(scores) + 1))
    if ties == "shared":
        return [1 + sum(1 for t in scores if t > s) for s in scores]
    return [1 + len({t for t in scores if t > s}) for s in scores]


@pytest.mark.parametrize("ties", ["member", "shared", "dense", "earliest"])
@pytest.mark.parametrize("seed", range(12))
def test_lines_keep_their_ranks_across_gaps(ties: str, seed: int) -> None:
    rng = random.Random(seed)
    cfg = BoardSettings(ties=ties)  # type: ignore[arg-type]
    scores = sorted((float(rng.randrange(8)) for _ in range(rng.randrange(1, 25))), reverse=True)
    members = [f"m{i}" for i in range(len(scores))]
    want = reference_ranks(scores, ties)
    gone = set(rng.sample(members, rng.randrange(len(members))))
    # Forgotten in two rounds, as two forgets would: gaps of gaps.
    first = set(list(gone)[: len(gone) // 2])
    gaps = forgotten(list(zip(members, scores, strict=True)), [], set(members) - first)
    left = [(m, s) for m, s in zip(members, scores, strict=True) if m not in first]
    gaps = forgotten(left, gaps, set(members) - gone)
    assert [g.line for g in gaps] == [i + 1 for i, m in enumerate(members) if m in gone]
    kept = [i for i, m in enumerate(members) if m not in gone]
    got = as_closed([scores[i] for i in kept], gaps, [], cfg)
    assert got.ranks == [want[i] for i in kept]
    assert got.absent == [want[i] for i, m in enumerate(members) if m in gone]
    assert got.matcher.total == len(scores)


def test_rewards_count_the_members_ranked_at_the_close() -> None:
    # Ten ranked at the close, the top 30% bronze: ranks 1-3, also with rank 1 forgotten.
    cfg = BoardSettings()
    rules = [{"ranks": "1", "reward": "gold"}, {"top_percent": 30, "reward": "bronze"}]
    tiers = manifest_tiers(rules, cfg)
    got = as_closed([9.0 - i for i in range(1, 10)], [Gap(1, 9.0)], tiers, cfg)
    assert [got.reward(i) for i in range(9)] == ["bronze", "bronze"] + [None] * 7


@pytest.mark.parametrize(
    ("removed", "says"),
    [
        ({"line": 1}, "removed"),
        ([{"line": 0, "score": 1}], "removed[0]"),
        ([{"line": True, "score": 1}], "removed[0]"),
        ([{"line": 1, "score": float("nan")}], "removed[0]"),
        ([{"line": 1, "score": 1}, {"line": 1, "score": 1}], "line 1 twice"),
    ],
)
def test_bad_gaps_are_named(removed: Any, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        manifest_gaps(removed, 5)


def test_tiers_not_recorded_are_the_configured_ones() -> None:
    cfg = BoardSettings(rewards=[{"ranks": "1-2", "reward": "gold"}])  # type: ignore[list-item]
    assert [(t.lo, t.hi, t.reward) for t in manifest_tiers(None, cfg)] == [(1, 2, "gold")]
    assert manifest_tiers([], cfg) == []
