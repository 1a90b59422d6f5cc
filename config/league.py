"""``[boards.<b>.league]``: weekly (or monthly, or per-season) cohorts of a board's members in
tiers, promoted and relegated at each period's end (docs/leagues.md).

The rules of a tier (how many move up and down) are declared here once, as
:meth:`LeagueSettings.rule_of`; :mod:`seasons.leagues` turns them into the zones that the
reads show and the close applies.
"""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction
from functools import cached_property
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from seasons.config.durations import NonNegativeDuration
from seasons.config.rewards import RankReward
from seasons.vocabulary import overlap

LEAGUE_WINDOWS = ("week", "month", "season")
TIER_RE = r"^[A-Za-z0-9_-]{1,64}$"
MAX_COHORT = 1000  # a cohort is read whole, in one round trip


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _percent(value: float | None) -> float | None:
    if value is not None and not 0 <= value <= 100:
        raise ValueError(f"{value:g} is not a percent; use a number from 0 to 100")
    return value


Percent = Annotated[float | None, AfterValidator(_percent)]


class _Movement(_Section):
    """How many of a cohort move up and down: a count, or a percent of its ranked members
    (rounded down); at most one of each pair."""

    promote: int | None = Field(default=None, ge=0, le=MAX_COHORT)
    promote_percent: Percent = None
    demote: int | None = Field(default=None, ge=0, le=MAX_COHORT)
    demote_percent: Percent = None

    @model_validator(mode="after")
    def _one_of_each(self) -> _Movement:
        for name in ("promote", "demote"):
            if getattr(self, name) is not None and getattr(self, f"{name}_percent") is not None:
                raise ValueError(f"give {name} or {name}_percent, not both")
        return self


class TierRule(_Movement):
    """``[[boards.<b>.league.tier_rules]]``: the movement of one tier, overriding the
    league's."""

    tier: str


class Movement(BaseModel):
    """The movement of one tier, resolved: a count or a percent for each way."""

    model_config = ConfigDict(frozen=True)

    promote: int | None
    promote_percent: float | None
    demote: int | None
    demote_percent: float | None

    def counts(self, ranked: int) -> tuple[int, int]:
        """How many of ``ranked`` members move up and how many down (before the limits of
        the top and lowest tier and of ``min_cohort``): a percent of ``ranked``, rounded
        down, computed exactly (20 % of 15 is 3, not 2.9999)."""

        def of(count: int | None, percent: float | None) -> int:
            if count is not None:
                return count
            assert percent is not None
            return int(Fraction(ranked) * Fraction(str(percent)) / 100)

        return of(self.promote, self.promote_percent), of(self.demote, self.demote_percent)


class LeagueSettings(_Movement):
    window: Literal["week", "month", "season"] = "week"
    tiers: tuple[Annotated[str, Field(pattern=TIER_RE)], ...] = (
        "bronze", "silver", "gold", "sapphire", "diamond",
    )  # fmt: skip
    cohort_size: int = Field(default=30, ge=1, le=MAX_COHORT)
    min_cohort: int = Field(default=10, ge=1, le=MAX_COHORT)
    idle: Literal["demote", "stay"] = "demote"
    group_by: str = Field(default="", max_length=256)
    # First events later than this before the period's end join no cohort (they still score).
    join_closes: NonNegativeDuration = timedelta(days=1)
    tier_rules: tuple[TierRule, ...] = ()
    rewards: tuple[RankReward, ...] = ()

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, tiers: tuple[str, ...]) -> tuple[str, ...]:
        if not tiers:
            raise ValueError("needs at least one tier, lowest first")
        seen = sorted({t for t in tiers if tiers.count(t) > 1})
        if seen:
            raise ValueError(f"tier names must be unique; repeated: {', '.join(seen)}")
        return tiers

    @model_validator(mode="after")
    def _consistent(self) -> LeagueSettings:
        if self.min_cohort > self.cohort_size:
            raise ValueError(
                f"min_cohort ({self.min_cohort}) is above cohort_size ({self.cohort_size}):"
                " every cohort would demote nobody"
            )
        tiers = [r.tier for r in self.tier_rules]
        for i, rule in enumerate(self.tier_rules):
            if rule.tier not in self.tiers:
                raise ValueError(
                    f"tier_rules[{i}].tier {rule.tier!r} is not one of tiers"
                    f" ({', '.join(self.tiers)})"
                )
            if tiers.count(rule.tier) > 1:
                raise ValueError(f"tier_rules name tier {rule.tier!r} more than once")
        found = overlap([r.span for r in self.rewards])
        if found is not None:
            i, j = found
            raise ValueError(
                f"rewards[{j}].ranks {self.rewards[j].ranks!r} overlaps rewards[{i}].ranks "
                f"{self.rewards[i].ranks!r}: a rank gets one reward; make the ranges disjoint"
            )
        return self

    def rule_of(self, tier: str) -> Movement:
        """The movement of ``tier``: its tier rule's values over the league's, and 5 up and
        5 down where neither says."""
        found = self._movements.get(tier)
        return found if found is not None else self._movement(tier)

    @cached_property
    def _movements(self) -> dict[str, Movement]:
        # Every read of a cohort asks: resolved once per settings object.
        return {t: self._movement(t) for t in self.tiers}

    def _movement(self, tier: str) -> Movement:
        rule = next((r for r in self.tier_rules if r.tier == tier), None)

        def pick(name: str) -> tuple[int | None, float | None]:
            for source in (rule, self):
                if source is None:
                    continue
                count, percent = getattr(source, name), getattr(source, f"{name}_percent")
                if count is not None or percent is not None:
                    return count, percent
            return 5, None

        (up, up_pct), (down, down_pct) = pick("promote"), pick("demote")
        return Movement(promote=up, promote_percent=up_pct, demote=down, demote_percent=down_pct)

    def reward_of(self, rank: int) -> str | None:
        for r in self.rewards:
            lo, hi = r.span
            if lo <= rank <= hi:
                return r.reward
        return None
