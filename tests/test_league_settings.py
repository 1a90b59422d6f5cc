"""[boards.<b>.league] (config/league.py): every mistake is refused at start, naming the key,
with exit status 2 on the CLI; the movement of each tier resolves as docs/leagues.md says."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from seasons.cli import CliState, cli
from seasons.config import ConfigError, load_settings
from seasons.config.league import LeagueSettings
from seasons.leagues import quota

CASES = [
    ("tiers = []", "boards.xp.league.tiers: ", "at least one tier"),
    ('tiers = ["a", "a"]', "boards.xp.league.tiers: ", "repeated: a"),
    ('tiers = ["a b"]', "boards.xp.league.tiers[0]: ", "A-Z"),
    ("promote = 3\npromote_percent = 20", "boards.xp.league: ", "promote or promote_percent"),
    ("demote = 3\ndemote_percent = 20", "boards.xp.league: ", "demote or demote_percent"),
    ("promote_percent = 120", "boards.xp.league.promote_percent: ", "not a percent"),
    ("promote = -1", "boards.xp.league.promote: ", "at least 0"),
    ("min_cohort = 40", "boards.xp.league: ", "min_cohort (40) is above cohort_size (30)"),
    ("cohort_size = 0", "boards.xp.league.cohort_size: ", "at least 1"),
    ("cohort_size = 5000", "boards.xp.league.cohort_size: ", "at most 1000"),
    ('window = "day"', "boards.xp.league.window: ", "'week', 'month' or 'season'"),
    ('idle = "drop"', "boards.xp.league.idle: ", "'demote' or 'stay'"),
    ('join_closes = "-P1D"', "boards.xp.league.join_closes: ", "not be negative"),
    ('join_closes = "soon"', "boards.xp.league.join_closes: ", "ISO 8601"),
    ("promte = 3", "boards.xp.league.promte: ", "[boards.xp.league] takes promote"),
]


def _problems(tmp_path: Path, toml: str) -> list[str]:
    path = tmp_path / "seasons.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, path=path)
    return info.value.problems


@pytest.mark.parametrize(("body", "start", "fragment"), CASES)
def test_a_mistake_names_the_key(tmp_path: Path, body: str, start: str, fragment: str) -> None:
    (problem,) = _problems(tmp_path, f"[boards.xp.league]\n{body}\n")
    assert problem.startswith(start), problem
    assert fragment in problem, problem
    assert "Input should" not in problem and "Value error" not in problem


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('[boards.xp]\nwindows = ["day", "season"]\n[boards.xp.league]\n', "add it to windows"),
        ('[boards.xp]\nwindows = ["day", "season"]\n[boards.xp.league]\nwindow = "month"\n',
         "'month' is not a window the board keeps"),
        ("[boards.xp]\nmax_entries = 100\n[boards.xp.league]\n", "set max_entries = 0"),
        ('[[boards.xp.league.tier_rules]]\ntier = "platinum"\npromote = 0\n',
         "tier_rules[0].tier 'platinum' is not one of tiers"),
        ('[[boards.xp.league.tier_rules]]\ntier = "gold"\n[[boards.xp.league.tier_rules]]\n'
         'tier = "gold"\n', "more than once"),
        ('[[boards.xp.league.rewards]]\nranks = "1-3"\nreward = "chest"\n'
         '[[boards.xp.league.rewards]]\nranks = "3"\nreward = "x"\n', "overlaps"),
        ('[[boards.xp.league.rewards]]\nranks = "1"\nreward = " "\n', "is empty"),
    ],
)  # fmt: skip
def test_combinations_are_refused(tmp_path: Path, toml: str, fragment: str) -> None:
    (problem,) = _problems(tmp_path, toml)
    assert problem.startswith("boards.xp"), problem
    assert fragment in problem, problem


def test_the_cli_exits_2_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("SEASONS_"):
            monkeypatch.delenv(name)
    path = tmp_path / "seasons.toml"
    path.write_text("[boards.xp.league]\ncohort_size = 0\n")
    result = CliRunner().invoke(cli, ["--config", str(path), "config"], obj=CliState())
    assert result.exit_code == 2, result.output
    assert "boards.xp.league.cohort_size" in result.stderr
    assert "Traceback" not in result.output


def test_movement_resolves_tier_rule_then_league_then_five() -> None:
    league = LeagueSettings(
        tiers=("a", "b", "c"),
        promote_percent=20,
        tier_rules=({"tier": "c", "demote": 7}, {"tier": "b", "promote": 2}),  # type: ignore[arg-type]
    )
    assert league.rule_of("a").counts(15) == (3, 5)  # 20 % of 15; demote: the default 5
    assert league.rule_of("b").counts(15) == (2, 5)
    assert league.rule_of("c").counts(15) == (3, 7)


@given(
    ranked=st.integers(0, 1000),
    percent=st.one_of(st.integers(0, 100), st.sampled_from([12.5, 33.3, 0.1, 99.9, 20.0])),
)
def test_a_percent_is_of_the_ranked_members_rounded_down_exactly(
    ranked: int, percent: float
) -> None:
    league = LeagueSettings(tiers=("a", "b", "c"), promote_percent=percent, demote_percent=percent)
    # The reference: the decimal percent as written, as an exact fraction.
    want = int(Fraction(ranked) * Fraction(str(percent)) / 100)
    assert league.rule_of("b").counts(ranked) == (want, want)


def test_quota_limits() -> None:
    league = LeagueSettings(tiers=("low", "mid", "top"), promote=5, demote=5, min_cohort=10)
    assert quota(league, "mid", 30) == (5, 5)
    assert quota(league, "top", 30) == (0, 5)  # nothing above the top tier
    assert quota(league, "low", 30) == (5, 0)  # nothing below the lowest
    assert quota(league, "mid", 9) == (5, 0)  # below min_cohort: nobody demoted
    assert quota(league, "mid", 3) == (3, 0)  # never more than are ranked
