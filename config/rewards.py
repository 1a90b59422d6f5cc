"""Rewards by rank, declared once: a board's season reward tiers (``[[boards.<b>.rewards]]``,
seasons.results) and a league's cohort rewards (``[[boards.<b>.league.rewards]]``)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from seasons.vocabulary import parse_ranks

MAX_REWARD_BYTES = 256  # a reward tier's name


class RewardTier(BaseModel):
    """One reward tier of a board (seasons.results): ``ranks`` (a rank or an inclusive range,
    ``"1"``, ``"2-10"``) or ``top_percent`` (0 < p <= 100), and the ``reward`` it grants."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ranks: str | None = None
    top_percent: float | None = None
    reward: str

    @field_validator("ranks", mode="before")
    @classmethod
    def _ranks_text(cls, value: Any) -> Any:
        # ranks = 1 in TOML is a number; it means the same as "1".
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, value: str | None) -> str | None:
        if value is None:
            return None
        lo, hi = parse_ranks(value)
        return str(lo) if lo == hi else f"{lo}-{hi}"

    @field_validator("top_percent")
    @classmethod
    def _percent(cls, value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and 0 < value <= 100):
            raise ValueError(f"{value:g} is not a percent; use a number above 0, at most 100")
        return value

    @field_validator("reward")
    @classmethod
    def _reward(cls, value: str) -> str:
        if not value.strip():
            raise ValueError('is empty; name the reward the tier grants, e.g. "gold"')
        if len(value.encode("utf-8", "surrogatepass")) > MAX_REWARD_BYTES:
            # It goes into every claim and claims-log line (seasons.claimlog: lines < 4 KiB).
            raise ValueError(f"is longer than {MAX_REWARD_BYTES} bytes of UTF-8")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> RewardTier:
        if (self.ranks is None) == (self.top_percent is None):
            raise ValueError(
                'a tier takes exactly one of ranks (e.g. "2-10") and top_percent (e.g. 10)'
                + ("; it has both" if self.ranks is not None else "; it has neither")
            )
        return self


class RankReward(RewardTier):
    """A reward by rank alone (``ranks``, no ``top_percent``): a league's cohort rewards,
    ``[[boards.<b>.league.rewards]]``."""

    @model_validator(mode="after")
    def _ranks_only(self) -> RankReward:
        if self.ranks is None:
            raise ValueError('a cohort reward takes ranks (e.g. "1-3"), not top_percent')
        return self

    @property
    def span(self) -> tuple[int, int]:
        assert self.ranks is not None
        return parse_ranks(self.ranks)
