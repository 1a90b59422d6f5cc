"""Reward tiers and season results: a season on a ManualClock with tiers by rank and by percent
(ties across a tier's boundary on a shared-ties board), compared with the reference model's
final standings and an independent tier rule; the export's rewards; snapshots; config errors."""

from __future__ import annotations

import gzip
import json
import math
import os
from datetime import timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from worker_support import Sim, local, season_settings, today

from seasons.archives import Archives
from seasons.cli import CliState, cli
from seasons.config import ConfigError, load_settings
from seasons.errors import ArchiveError
from seasons.jobs import registry
from seasons.restore import Restorer
from seasons.standings import read_rows

# The season tests run on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

NS = "seasons"
TIERS: dict[str, list[dict[str, Any]]] = {
    # member ties: ranks are positions
    "kills": [
        {"ranks": "1", "reward": "gold"},
        {"ranks": "2-3", "reward": "silver"},
        {"top_percent": 50, "reward": "bronze"},
    ],
    # shared ties: members tied at a boundary share the rank, so the tier
    "coins": [
        {"ranks": "1-2", "reward": "gold"},
        {"top_percent": 40, "reward": "silver"},
        {"ranks": "12-14", "reward": "pity"},
    ],
}
BOARDS = {
    "kills": {"rewards": TIERS["kills"]},
    "coins": {"aggregate": "set", "ties": "shared", "rewards": TIERS["coins"]},
    "plain": {"aggregate": "max"},  # no tiers: results all the same, reward null
}
# The last values of coins: p01-p03 tie at rank 2 (the gold tier is ranks 1-2: all three get
# it); p05-p07 tie at rank 6, the last rank of the top 40% of 14 (ceil(5.6) = 6), though
# positions 7 and 8 are past it.
COINS = {"p00": 100, "p01": 90, "p02": 90, "p03": 90, "p04": 70, "p05": 60, "p06": 60,
         "p07": 60, "p08": 50, "p09": 40, "p10": 30, "p11": 20, "p12": 10, "p13": 5}  # fmt: skip


def reference_reward(tiers: list[dict[str, Any]], rank: int, total: int) -> str | None:
    """The first tier holding ``rank``: a range by its ends, a percent by
    rank <= ceil(total * p / 100) in exact fractions."""
    for tier in tiers:
        if "ranks" in tier:
            ends = [int(x) for x in tier["ranks"].split("-")]
            if ends[0] <= rank <= ends[-1]:
                return str(tier["reward"])
        elif rank <= math.ceil(Fraction(tier["top_percent"]) * total / 100):
            return str(tier["reward"])
    return None


def expected_results(sim: Sim, board: str, season: str) -> dict[str, dict[str, Any]]:
    ranked = sim.model.ranked(board, "season", season)
    tiers = TIERS.get(board, [])
    return {
        m: {"rank": rank, "score": score, "reward": reference_reward(tiers, rank, len(ranked))}
        for rank, m, score in ranked
    }


def stored(r: Any, board: str, season: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(member -> result, summary) of a results hash."""
    found = {
        k.decode(): json.loads(v)
        for k, v in r.hgetall(f"{NS}:{{{board}}}:results:{season}").items()
    }
    return found, found.pop("")


def file_lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def season(settings_factory, r, tmp_path: Path) -> Sim:
    """S1 played on three boards, coins ending on COINS; closed on the first day of S2."""
    settings = season_settings(settings_factory, tmp_path / "archive", boards=BOARDS)
    sim = Sim(settings, seed=5)
    days = [today() + timedelta(days=i) for i in range(7)]
    for day in days:
        sim.play_day(day)
    sim.submit([{"board": "coins", "member": m, "value": v} for m, v in COINS.items()])
    sim.clock.set(local(days[-1] + timedelta(days=1), 1.25))  # past the last day's grace
    sim.worker.tick(sim.clock())
    return sim


def test_results_are_the_reference_standings_and_tiers(season: Sim, r, tmp_path: Path) -> None:
    sim = season
    coins = sim.model.ranked("coins", "season", "S1")
    assert [rank for rank, _, _ in coins][:8] == [1, 2, 2, 2, 5, 6, 6, 6]  # the ties are there
    for board in BOARDS:
        assert r.hget(f"{NS}:{{{board}}}:state", "season:S1") == b"archived"
        results, summary = stored(r, board, "S1")
        want = expected_results(sim, board, "S1")
        assert results == want, board
        assert r.ttl(f"{NS}:{{{board}}}:results:S1") == -1
        assert not r.exists(f"{NS}:{{{board}}}:claims:S1")
        tiers = TIERS.get(board, [])
        labels = [t.get("ranks") or f"top {t['top_percent']}%" for t in tiers]
        assert summary["season"] == "S1" and summary["board"] == board
        assert summary["provisional"] is False and summary["total"] == len(want)
        assert summary["computed_at"].endswith("Z")
        assert summary["tiers"] == [
            {"tier": label, "reward": t["reward"],
             "count": sum(1 for x in want.values() if x["reward"] == t["reward"])}
            for label, t in zip(labels, tiers, strict=True)
        ]  # fmt: skip
    gold = {m for m, x in stored(r, "coins", "S1")[0].items() if x["reward"] == "gold"}
    assert gold == {"p00", "p01", "p02", "p03"}
    silver = {m for m, x in stored(r, "coins", "S1")[0].items() if x["reward"] == "silver"}
    assert silver == {"p04", "p05", "p06", "p07"}


def test_the_export_carries_the_rewards_and_verifies(season: Sim, r, tmp_path: Path) -> None:
    sim = season
    app = sim.app
    archives = Archives(app.client, app.scripts, app.settings, app.keys)
    for board in BOARDS:
        path = tmp_path / "archive" / NS / board / "S1.jsonl.gz"
        lines = file_lines(path)
        results, _ = stored(r, board, "S1")
        if board in TIERS:
            assert [list(x) for x in lines] == [
                ["rank", "member", "score", "metadata", "reward"]
            ] * len(lines)
            assert {x["member"]: x["reward"] for x in lines} == {
                m: x["reward"] for m, x in results.items()
            }
        else:  # no tiers: the lines are as they always were
            assert all("reward" not in x for x in lines)
        assert [(x["rank"], x["member"], x["score"]) for x in lines] == (
            sim.model.ranked(board, "season", "S1")
        )
        assert all(results[x["member"]]["rank"] == x["rank"] for x in lines)
        archives.verify(board, "S1")
    # A reward changed in Redis: verify names the member.
    member = next(m for m, x in stored(r, "coins", "S1")[0].items() if x["reward"] == "gold")
    r.hset(
        f"{NS}:{{coins}}:results:S1", member, json.dumps({"rank": 1, "score": 1, "reward": "tin"})
    )
    with pytest.raises(ArchiveError, match=member):
        archives.verify("coins", "S1")


def test_a_rerun_keeps_results_and_restore_reads_rewarded_files(
    season: Sim, r, tmp_path: Path
) -> None:
    sim = season
    before = r.hgetall(f"{NS}:{{coins}}:results:S1")
    closes = registry.closes_of(sim.app.backend)
    # The results step again (as after a crash): nothing changes, claims are not touched.
    r.hset(f"{NS}:{{coins}}:claims:S1", "p00", '{"claimed_at":"x","reward":"gold","rank":1}')
    closes._results("coins", "S1", sim.clock() + timedelta(hours=5))
    assert r.hgetall(f"{NS}:{{coins}}:results:S1") == before
    assert r.hlen(f"{NS}:{{coins}}:claims:S1") == 1
    # Files with rewards are restored like any other.
    path = tmp_path / "archive" / NS / "coins" / "S1.jsonl.gz"
    rewards: dict[str, str | None] = {}
    assert len(read_rows(path, rewards=rewards)) == len(COINS)
    assert rewards["p03"] == "gold"
    # Redis lost the archive and its results: a restore computes them again, the same.
    r.delete(f"{NS}:{{coins}}:archive:S1", f"{NS}:{{coins}}:results:S1")
    restored = Restorer(sim.app.client, sim.app.settings, sim.app.keys).restore(path, sim.clock())
    assert restored.action == "restored" and restored.count == len(COINS)
    assert r.hgetall(f"{NS}:{{coins}}:results:S1") == before
    Archives(sim.app.client, sim.app.scripts, sim.app.settings, sim.app.keys).verify("coins", "S1")


def test_a_snapshot_has_provisional_results(season: Sim, r, tmp_path: Path) -> None:
    sim = season
    sim.submit(sim.batch(10))  # S2 is running
    out = registry.closes_of(sim.app.backend).snapshot("S2", sim.clock())
    sid = out[0].season
    assert sid.startswith("S2@")
    for board in BOARDS:
        results, summary = stored(r, board, sid)
        assert summary["provisional"] is True and summary["season"] == sid
        assert results == expected_results(sim, board, "S2")
        lines = file_lines(tmp_path / "archive" / NS / board / f"{sid}.jsonl.gz")
        assert all(("reward" in x) == (board in TIERS) for x in lines)


# --- config -----------------------------------------------------------------------------------

BAD = [
    ([{"ranks": "1-3", "reward": "a"}, {"ranks": "3-9", "reward": "b"}],
     "boards.kills.rewards: ", "rewards[1].ranks '3-9' overlaps rewards[0].ranks '1-3'"),
    ([{"ranks": "10-2", "reward": "a"}], "boards.kills.rewards[0].ranks: ", "empty range"),
    ([{"ranks": "0", "reward": "a"}], "boards.kills.rewards[0].ranks: ", "start at 1"),
    ([{"ranks": "1", "reward": "a"}, {"ranks": "x-y", "reward": "b"}],
     "boards.kills.rewards[1].ranks: ", '"2-10"'),
    ([{"top_percent": 0, "reward": "a"}], "boards.kills.rewards[0].top_percent: ", "above 0"),
    ([{"top_percent": 100.5, "reward": "a"}],
     "boards.kills.rewards[0].top_percent: ", "at most 100"),
    ([{"top_percent": 10, "reward": "a"}, {"top_percent": 5, "reward": "b"}],
     "boards.kills.rewards: ", "rewards[1].top_percent 5 never matches"),
    ([{"ranks": "1", "top_percent": 5, "reward": "a"}], "boards.kills.rewards[0]: ", "both"),
    ([{"ranks": "1", "reward": "a"}, {"reward": "b"}], "boards.kills.rewards[1]: ", "neither"),
    ([{"ranks": "1", "reward": " "}], "boards.kills.rewards[0].reward: ", "empty"),
    ([{"ranks": "1"}], "boards.kills.rewards[0].reward: ", "missing"),
]  # fmt: skip


def toml_of(tiers: list[dict[str, Any]]) -> str:
    out = ""
    for t in tiers:
        out += "[[boards.kills.rewards]]\n" + "".join(
            f"{k} = {json.dumps(v)}\n" for k, v in t.items()
        )
    return out


@pytest.mark.parametrize(("tiers", "start", "fragment"), BAD)
def test_a_bad_tier_is_named(
    tmp_path: Path, tiers: list[dict[str, Any]], start: str, fragment: str
) -> None:
    path = tmp_path / "seasons.toml"
    path.write_text(toml_of(tiers))
    with pytest.raises(ConfigError) as info:
        load_settings(environ={}, path=path)
    assert len(info.value.problems) == 1, info.value.problems
    problem = info.value.problems[0]
    assert problem.startswith(start) and fragment in problem, problem


def test_good_tiers_load(tmp_path: Path) -> None:
    path = tmp_path / "seasons.toml"
    tiers_in = [
        {"ranks": 1, "reward": "gold"}, {"ranks": " 2 - 10 ", "reward": "x"},
        {"top_percent": 12.5, "reward": "y"}, {"top_percent": 50, "reward": "z"},
    ]  # fmt: skip
    path.write_text(toml_of(tiers_in))
    tiers = load_settings(environ={}, path=path).boards["kills"].rewards
    assert [(t.ranks, t.top_percent) for t in tiers] == [
        ("1", None),
        ("2-10", None),
        (None, 12.5),
        (None, 50),
    ]


def test_the_cli_exits_2_naming_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("SEASONS_"):
            monkeypatch.delenv(name)
    path = tmp_path / "seasons.toml"
    path.write_text(toml_of([{"ranks": "5-1", "reward": "a"}]))
    result = CliRunner().invoke(cli, ["--config", str(path), "config"], obj=CliState())
    assert result.exit_code == 2, result.output
    assert "boards.kills.rewards[0].ranks" in result.stderr and "Traceback" not in result.output


def test_forgetting_a_member_removes_its_claim_only(season: Sim, r) -> None:
    before, _ = stored(r, "coins", "S1")
    gone, kept = [m for m, x in sorted(before.items()) if x["reward"] is not None][:2]
    season.app.claim("coins", "S1", gone)
    season.app.claim("coins", "S1", kept)
    season.app.forget(gone)
    assert set(r.hkeys(f"{NS}:{{coins}}:claims:S1")) == {kept.encode()}
    assert season.app.claim("coins", "S1", kept).already_claimed


def test_forgetting_a_member_removes_its_results_only(season: Sim, r, tmp_path: Path) -> None:
    sim = season
    before, summary = stored(r, "coins", "S1")
    sim.app.forget("p03")
    after, summary_after = stored(r, "coins", "S1")
    assert after == {m: x for m, x in before.items() if m != "p03"}
    assert summary_after == summary  # granted at the close
    lines = file_lines(tmp_path / "archive" / NS / "coins" / "S1.jsonl.gz")
    assert {x["member"]: x["reward"] for x in lines} == {m: x["reward"] for m, x in after.items()}
    Archives(sim.app.client, sim.app.scripts, sim.app.settings, sim.app.keys).verify("coins", "S1")
