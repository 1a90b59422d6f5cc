"""The tie rules' table (seasons.ties) against what reads it: the ranks docs/boards.md
documents, the rules the Lua knows (seasons/lua/lib/ranks.lua), and the reads that get a plan
of plain commands (seasons.reads, seasons.plans)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

import pytest

from seasons import Seasons, ties
from seasons.config import Settings
from seasons.reads import Read

ROOT = Path(__file__).resolve().parent.parent


def documented_ranks() -> dict[str, list[int]]:
    """The ``ties`` table of docs/boards.md: rule -> ranks of scores 9, 7, 7, 5."""
    text = (ROOT / "docs" / "boards.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)`[^|]*\| ([\d, ]+) \|", text, re.MULTILINE)
    return {name: [int(x) for x in ranks.split(",")] for name, ranks in rows}


def test_each_rule_ranks_as_documented() -> None:
    documented = documented_ranks()
    assert set(documented) == set(ties.SPECS)
    for name, spec in ties.SPECS.items():
        assert ties.ranks([9, 7, 7, 5], spec) == documented[name], name


def test_a_rank_follows_from_the_one_before() -> None:
    # Scores 9, 9, 8, 8, 8, 1: what each rule makes of runs after the first.
    scores = [9.0, 9.0, 8.0, 8.0, 8.0, 1.0]
    assert ties.ranks(scores, ties.SPECS["member"]) == [1, 2, 3, 4, 5, 6]
    assert ties.ranks(scores, ties.SPECS["shared"]) == [1, 1, 3, 3, 3, 6]
    assert ties.ranks(scores, ties.SPECS["dense"]) == [1, 1, 2, 2, 2, 3]
    assert ties.ranks(scores, ties.SPECS["earliest"]) == [1, 2, 3, 4, 5, 6]


def test_the_lua_knows_the_same_rules() -> None:
    lua = (ROOT / "seasons" / "lua" / "lib" / "ranks.lua").read_text(encoding="utf-8")
    names = re.search(r"^local function tie_names\(\)\n  return \{(.*)\}$", lua, re.MULTILINE)
    assert names is not None
    assert re.findall(r"'(\w+)'", names.group(1)) == list(ties.SPECS)
    # The set each rule keeps beside its boards, which the scripts take in KEYS.
    side = dict(re.findall(r"^  if ties == '(\w+)' then return '(\w+)' end$", lua, re.MULTILINE))
    for name, spec in ties.SPECS.items():
        kept = "reached" if spec.reach_set else "distinct" if spec.distinct_set else None
        assert side.get(name) == kept, name


@pytest.fixture
def app(settings_factory: Callable[..., Settings]) -> Any:
    boards = {name: {"ties": name} for name in ties.SPECS}
    with Seasons(settings_factory(boards=boards)) as app:
        yield app


def prepared(app: Seasons, board: str) -> dict[ties.Planned, Read[Any]]:
    """Each read a plan may answer, prepared on ``board`` (nothing is sent)."""
    reads = app.reads
    return {
        "page": reads.page(board, "day", "current", limit=10, offset=5),
        "top": reads.page(board, "day", "current", limit=10, offset=0),
        "around_rank": reads.around_rank(board, "day", 7, "current", size=5),
        "around_member": reads.around_member(board, "day", "m", "current", size=5),
        "entry": reads.entry(board, "day", "m", "current"),
        "climb": reads.climb(board, "day", "m", "current", to=[1, 10]),
        "lookup": reads.lookup(board, "day", ["m", "n"], "current"),
        "history": reads.history(board, "m", "day", last=3),
    }


# What plain commands can answer: a rank by position is one ZRANK, a shared rank one ZCOUNT
# (the first page's first rank is 1 either way); a dense rank away from the top needs the
# distinct set and an earliest one the reach times of a run: scripts.
PLANNED: dict[str, set[str]] = {
    "member": set(get_args(ties.Planned)),
    "shared": {"top", "entry"},
    "dense": {"top"},
    "earliest": set(),
}


@pytest.mark.parametrize("rule", list(ties.SPECS))
def test_plans_answer_the_reads_the_table_names(app: Seasons, rule: str) -> None:
    spec = ties.SPECS[rule]  # type: ignore[index]
    assert spec.planned == PLANNED[rule]
    for name, read in prepared(app, rule).items():
        assert (read.plan is not None) == (name in PLANNED[rule]), (rule, name)
        # The script takes the set the rule keeps beside each board, and no other.
        kinds = {k.split("}:", 1)[1].split(":", 1)[0] for k in read.call.keys}
        assert ("reached" in kinds) == spec.reach_set, (rule, name, kinds)
        assert ("distinct" in kinds) == spec.distinct_set, (rule, name, kinds)
