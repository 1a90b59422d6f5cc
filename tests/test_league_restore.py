"""Leagues come back after a data loss (docs/leagues.md#restore): weeks of real writes and real
closes by the worker's close job, a reward claimed, then FLUSHALL and ``seasons restore --all``:
the outcomes, the counts, the tiers and the claims are what they were, a claim made before the
loss is never paid twice, the worker's closes run again without changing anything, and the
next week's members join cohorts of the tiers the last close gave them. A league archive or
claims log changed by one byte refuses the restore (exit 2) and nothing is written."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis
from click.testing import CliRunner

from seasons import Seasons
from seasons.cli import cli
from seasons.cli.common import CliState
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import NotInLeague
from seasons.jobs.registry import closes_of
from seasons.keys import Keys

ZONE = ZoneInfo("Europe/Berlin")
BOARD = "xp"
TIERS = ["bronze", "silver", "gold"]
MONDAY = date(2027, 10, 25)  # in the future: Redis compares the keys' EXPIREATs with its clock
WEEKS = [(MONDAY + timedelta(weeks=k)).isoformat() for k in range(4)]
MEMBERS = [f"p{i:02d}" for i in range(10)]
# Who plays in weeks 0, 1 and 2 (the others of MEMBERS are idle that week), with distinct scores.
PLAYS = [MEMBERS[:8], ["p02", *MEMBERS[4:10]], ["p06", "p07", "p09", "p00", "new1", "p03"]]
# The tiers after week 1, by hand. Week 0: cohorts p00-p03 and p04-p07 (bronze), p03 and p07
# promoted. Week 1: bronze p02 p04 p05 p06 (p06 up), silver p07 alone (up: one ranked member
# is promoted, none demoted below min_cohort), bronze p08 p09 (p09 up); p03 idle: demoted.
TIERS_AFTER_1 = {"p00": "bronze", "p01": "bronze", "p02": "bronze", "p03": "bronze",
                 "p04": "bronze", "p05": "bronze", "p06": "silver", "p07": "gold",
                 "p08": "bronze", "p09": "silver"}  # fmt: skip


def at(day: date, hours: float) -> datetime:
    return datetime.combine(day, time(0), ZONE) + timedelta(hours=hours)


def week_closed(k: int) -> datetime:
    """Past the end of week ``k`` and its late grace: its close is due."""
    return at(MONDAY + timedelta(weeks=k + 1), 1.1)


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    league = {
        "window": "week", "tiers": TIERS, "cohort_size": 4, "min_cohort": 2, "promote": 1,
        "demote": 1, "rewards": [{"ranks": "1", "reward": "crown"},
                                 {"ranks": "2-3", "reward": "chest"}],
    }  # fmt: skip
    return settings_factory(
        boards={BOARD: {"aggregate": "sum", "league": league}}, timezone=str(ZONE),
        retention="P9D", late_grace="PT1H", archive={"dir": str(tmp_path / "archive")},
    )  # fmt: skip


def play(s: Seasons, clock: ManualClock, k: int) -> None:
    """Week ``k``'s events: member i of PLAYS[k] scores 10 * (i + 1) on day 2 (all different)."""
    for i, member in enumerate(PLAYS[k]):
        clock.set(at(MONDAY + timedelta(weeks=k), 30 + i))
        batch = [{"board": BOARD, "member": member, "value": 10.0 * (i + 1),
                  "ts": clock().timestamp() - 1}]  # fmt: skip
        assert s.submit_many(batch).applied == 1


def league_state(r: redis.Redis, keys: Keys) -> dict[str, Any]:
    """Everything of the league a restore brings back, as Redis holds it."""
    out: dict[str, Any] = {
        "state": {
            k: v for k, v in r.hgetall(keys.league_state(BOARD)).items()
            if not k.startswith(b"close:")  # the close's start time: not restored (unused)
        },
        "tier": r.hgetall(keys.league_tier(BOARD)),
    }  # fmt: skip
    for week in WEEKS:
        for part in ("outcome", "claims"):
            key = keys.league(BOARD, week, part)
            out[f"{week}:{part}"] = (r.hgetall(key), r.expiretime(key))
    return out


def cli_run(settings: Settings, now: datetime, *args: str) -> Any:
    return CliRunner().invoke(
        cli, list(args), obj=CliState(clock=ManualClock(now), settings=settings)
    )


def test_leagues_come_back_after_flushall(settings: Settings, r: redis.Redis) -> None:
    r.flushall()
    keys = Keys(settings.namespace)
    clock = ManualClock(at(MONDAY, 0.5))
    with Seasons(settings, clock=clock) as s:
        closes = closes_of(s.backend)
        closes.catch_up(clock())
        for k in (0, 1):
            play(s, clock, k)
            clock.set(week_closed(k))
            closes.catch_up(clock())
        w0, w1 = WEEKS[0], WEEKS[1]
        # Week 1: the top of each cohort gets the crown; p00, p01 (bronze) and p03 (silver)
        # are idle.
        outcomes = {
            m.decode(): json.loads(v)
            for m, v in r.hgetall(keys.league(BOARD, w1, "outcome")).items()
        }
        crowned = sorted(m for m, o in outcomes.items() if o["reward"] == "crown")
        assert crowned == ["p06", "p07", "p09"]
        assert outcomes["p03"]["cohort"] is None and outcomes["p03"]["zone"] == "demote"
        assert outcomes["p00"]["cohort"] is None and outcomes["p00"]["zone"] == "stay"
        paid = s.claim_league(BOARD, w1, "p09", claim_id="pay-1")
        assert (paid.already_claimed, paid.reward, paid.rank) == (False, "crown", 1)
        old = s.claim_league(BOARD, w0, "p07", claim_id="pay-0")
        assert (old.already_claimed, old.reward) == (False, "crown")
        before = league_state(r, keys)
        tiers_before = {m.decode(): t.decode() for m, t in before["tier"].items()}
        assert tiers_before == TIERS_AFTER_1

        r.flushall()
        assert r.dbsize() == 0
        restored = cli_run(settings, clock(), "restore", "--all", "--json")
        assert restored.exit_code == 0, restored.output
        report = json.loads(restored.output)
        assert [(x["period"], x["action"], x["claims"]) for x in report["leagues"]] == [
            (w0, "restored", 1), (w1, "restored", 1),
        ]  # fmt: skip
        after = league_state(r, keys)
        assert after == before  # outcomes byte for byte with their TTLs, counts, tiers, claims
        with pytest.raises(NotInLeague):  # the cohorts (join order, groups) are not in the files
            s.league(BOARD, "p09", period=w1)

        # The claim made before the loss is never paid again; its own resend still answers
        # false (the first claim's id), and a member who never claimed claims once.
        again = s.claim_league(BOARD, w1, "p09", claim_id="pay-2")
        assert (again.already_claimed, again.claimed_at) == (True, paid.claimed_at)
        resent = s.claim_league(BOARD, w1, "p09", claim_id="pay-1")
        assert (resent.already_claimed, resent.claimed_at) == (False, paid.claimed_at)
        stored = json.loads(r.hget(keys.league(BOARD, w1, "claims"), "p09"))
        assert stored["claim_id"] == "pay-1"
        fresh = s.claim_league(BOARD, w1, "p06", claim_id="new-1")
        assert (fresh.already_claimed, fresh.reward) == (False, "crown")
        assert s.claim_league(BOARD, w1, "p06", claim_id="new-2").already_claimed is True

        # Run again: the same Redis (the claim of p06 aside), nothing new.
        twice = cli_run(settings, clock(), "restore", "--all", "--json")
        assert twice.exit_code == 0, twice.output
        assert {x["action"] for x in json.loads(twice.output)["leagues"]} == {"unchanged"}
        assert r.hdel(keys.league(BOARD, w1, "claims"), "p06") == 1
        assert league_state(r, keys) == before

        # The worker's job state went with the loss: its closes run again over the days
        # still kept, and change no outcome, tier or count of a restored week.
        closes.catch_up(clock())
        assert league_state(r, keys) == before

        # The next week: members join cohorts of the tiers week 1's close gave them.
        play(s, clock, 2)
        cohorts = {
            int(c): json.loads(v)["tier"]
            for c, v in r.hgetall(keys.league(BOARD, WEEKS[2], "cohorts")).items()
        }
        joined = r.zrange(keys.league(BOARD, WEEKS[2], "joined"), 0, -1, withscores=True)
        assert len(joined) == len(PLAYS[2])
        for raw, place in joined:
            member = raw.decode()
            assert place >= 0  # joined at once: week 1 is closed
            assert cohorts[int(place) // 1024] == tiers_before.get(member, TIERS[0]), member
        assert sorted(cohorts.values()) == ["bronze", "gold", "silver"]
        clock.set(week_closed(2))
        closes.catch_up(clock())
        out2 = {m.decode(): json.loads(v)
                for m, v in r.hgetall(keys.league(BOARD, WEEKS[2], "outcome")).items()}  # fmt: skip
        assert {m: o["tier_before"] for m, o in out2.items()} == {
            m: tiers_before.get(m, TIERS[0]) for m in set(tiers_before) | set(PLAYS[2])
        }


def test_a_week_past_retention_brings_back_its_counts_and_claims_only(
    settings: Settings, r: redis.Redis
) -> None:
    r.flushall()
    keys = Keys(settings.namespace)
    clock = ManualClock(at(MONDAY, 0.5))
    with Seasons(settings, clock=clock) as s:
        closes = closes_of(s.backend)
        closes.catch_up(clock())
        play(s, clock, 0)
        clock.set(week_closed(0))
        closes.catch_up(clock())
        s.claim_league(BOARD, WEEKS[0], "p07", claim_id="pay-0")
        closed = r.hget(keys.league_state(BOARD), f"closed:{WEEKS[0]}")
        claims = r.hgetall(keys.league(BOARD, WEEKS[0], "claims"))
        tiers = r.hgetall(keys.league_tier(BOARD))
    r.flushall()
    late = week_closed(0) + timedelta(days=10)  # the week's end + 9 days of retention is past
    done = cli_run(settings, late, "restore", "--all", "--json")
    assert done.exit_code == 0, done.output
    assert [x["action"] for x in json.loads(done.output)["leagues"]] == ["expired"]
    assert r.exists(keys.league(BOARD, WEEKS[0], "outcome")) == 0
    assert r.hget(keys.league_state(BOARD), f"closed:{WEEKS[0]}") == closed
    assert r.hgetall(keys.league(BOARD, WEEKS[0], "claims")) == claims
    assert r.ttl(keys.league(BOARD, WEEKS[0], "claims")) == -1
    assert r.hgetall(keys.league_tier(BOARD)) == tiers


def _closed_week(settings: Settings, r: redis.Redis) -> tuple[Path, datetime]:
    """One closed week with a claim, then FLUSHALL: (the board's archive folder, now)."""
    r.flushall()
    clock = ManualClock(at(MONDAY, 0.5))
    with Seasons(settings, clock=clock) as s:
        closes = closes_of(s.backend)
        closes.catch_up(clock())
        play(s, clock, 0)
        clock.set(week_closed(0))
        closes.catch_up(clock())
        s.claim_league(BOARD, WEEKS[0], "p07", claim_id="pay-0")
    r.flushall()
    return Path(settings.archive.dir) / settings.namespace / BOARD, clock()


def _flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["archive_byte", "manifest_gone", "claim_reward"])
def test_a_damaged_league_file_refuses_the_restore_and_writes_nothing(
    settings: Settings, r: redis.Redis, damage: str
) -> None:
    folder, now = _closed_week(settings, r)
    data = folder / "league" / f"week-{WEEKS[0]}.jsonl.gz"
    assert data.exists() and gzip.decompress(data.read_bytes())
    if damage == "archive_byte":
        _flip_byte(data, len(data.read_bytes()) // 2)
    elif damage == "manifest_gone":
        data.with_name(f"week-{WEEKS[0]}.manifest.json").unlink()
    else:  # a claims log line claiming another reward than the member's outcome
        log = folder / f"league-{WEEKS[0]}.claims.jsonl"
        log.write_text(log.read_text().replace('"reward":"crown"', '"reward":"chest"'))
    refused = cli_run(settings, now, "restore", "--all")
    assert refused.exit_code == 2, refused.output
    assert "nothing was restored" in refused.output
    assert r.dbsize() == 0  # not a key: no outcome, no state, no audit entry, no marker


def test_other_outcomes_in_redis_are_not_overwritten_without_force(
    settings: Settings, r: redis.Redis
) -> None:
    folder, now = _closed_week(settings, r)
    keys = Keys(settings.namespace)
    outcome = keys.league(BOARD, WEEKS[0], "outcome")
    wrong = {"tier_before": "gold", "tier_after": "gold", "cohort": 1, "rank": 1, "score": 1.0,
             "zone": "stay", "reward": None}  # fmt: skip
    r.hset(outcome, "p00", json.dumps(wrong))
    refused = cli_run(settings, now, "restore", "--all")
    assert refused.exit_code == 1, refused.output
    assert r.hkeys(outcome) == [b"p00"] and r.dbsize() == 1
    forced = cli_run(settings, now, "restore", "--all", "--force", "--json")
    assert forced.exit_code == 0, forced.output
    assert [x["action"] for x in json.loads(forced.output)["leagues"]] == ["replaced"]
    assert json.loads(r.hget(outcome, "p00"))["tier_before"] == "bronze"
    assert r.hlen(outcome) == len(PLAYS[0])


def test_one_league_file_at_a_time_never_sets_older_tiers(
    settings: Settings, r: redis.Redis, tmp_path: Path
) -> None:
    r.flushall()
    keys = Keys(settings.namespace)
    clock = ManualClock(at(MONDAY, 0.5))
    with Seasons(settings, clock=clock) as s:
        closes = closes_of(s.backend)
        closes.catch_up(clock())
        for k in (0, 1):
            play(s, clock, k)
            clock.set(week_closed(k))
            closes.catch_up(clock())
        before = league_state(r, keys)
    r.flushall()
    folder = Path(settings.archive.dir) / settings.namespace / BOARD / "league"
    # The latest week first, then the older one: the tiers stay the latest's.
    for week in (WEEKS[1], WEEKS[0]):
        done = cli_run(settings, clock(), "restore", str(folder / f"week-{week}.jsonl.gz"))
        assert done.exit_code == 0, done.output
        assert f"restored xp league week {week}: " in done.output
    assert {m.decode(): t.decode() for m, t in r.hgetall(keys.league_tier(BOARD)).items()} == (
        TIERS_AFTER_1
    )
    assert league_state(r, keys) == before
    # A league file out of a board's league folder is not taken for a season's archive.
    elsewhere = tmp_path / "copy" / f"week-{WEEKS[0]}.jsonl.gz"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes((folder / f"week-{WEEKS[0]}.jsonl.gz").read_bytes())
    refused = cli_run(settings, clock(), "restore", str(elsewhere))
    assert refused.exit_code == 2, refused.output


def test_a_restore_without_loss_gives_no_tier_back_to_a_forgotten_member(
    settings: Settings, r: redis.Redis
) -> None:
    r.flushall()
    keys = Keys(settings.namespace)
    clock = ManualClock(at(MONDAY, 0.5))
    with Seasons(settings, clock=clock) as s:
        closes = closes_of(s.backend)
        closes.catch_up(clock())
        play(s, clock, 0)
        clock.set(week_closed(0))
        closes.catch_up(clock())
        s.forget("p03")
        before = league_state(r, keys)
        assert b"p03" not in before["tier"] and b"p03" not in before[f"{WEEKS[0]}:outcome"][0]
    done = cli_run(settings, clock(), "restore", "--all", "--json")
    assert done.exit_code == 0, done.output
    assert [x["action"] for x in json.loads(done.output)["leagues"]] == ["unchanged"]
    assert league_state(r, keys) == before


def test_a_forgotten_member_does_not_come_back_with_a_restore(
    settings: Settings, r: redis.Redis
) -> None:
    """Forget takes the member out of the league's files too (its archive lines, with a new
    manifest, and its claims log lines), so a restore after a loss brings back everyone's
    outcomes and claims but its own."""
    r.flushall()
    keys = Keys(settings.namespace)
    clock = ManualClock(at(MONDAY, 0.5))
    with Seasons(settings, clock=clock) as s:
        closes = closes_of(s.backend)
        closes.catch_up(clock())
        play(s, clock, 0)
        clock.set(week_closed(0))
        closes.catch_up(clock())
        w0 = WEEKS[0]
        outcomes = {m.decode(): json.loads(v)
                    for m, v in r.hgetall(keys.league(BOARD, w0, "outcome")).items()}  # fmt: skip
        crowned = sorted(m for m, o in outcomes.items() if o["reward"] == "crown")
        gone, kept = crowned[0], crowned[1]
        s.claim_league(BOARD, w0, gone, claim_id="c-gone")
        s.claim_league(BOARD, w0, kept, claim_id="c-kept")
        found = s.forget(gone)
        assert found.boards[BOARD].league
        files = found.boards[BOARD].files_rewritten
        assert any(f.endswith(f"week-{w0}.jsonl.gz") for f in files), files
        assert any(f.endswith(f"league-{w0}.claims.jsonl") for f in files), files
        assert r.hget(keys.league(BOARD, w0, "claims"), gone) is None
        before = league_state(r, keys)

        r.flushall()
        restored = cli_run(settings, clock(), "restore", "--all", "--json")
        assert restored.exit_code == 0, restored.output  # the rewritten files verify
        after = league_state(r, keys)
        # The close's counts in Redis still counted the member (numbers, no id); the restore
        # counts the file's members.
        counted = json.loads(after["state"].pop(f"closed:{w0}".encode()))
        before["state"].pop(f"closed:{w0}".encode())
        assert counted["members"] == len(outcomes) - 1
        assert after == before
        assert gone.encode() not in after[f"{w0}:outcome"][0]
        assert gone.encode() not in after[f"{w0}:claims"][0]
        assert kept.encode() in after[f"{w0}:claims"][0]
        assert gone.encode() not in after["tier"]
        want = {m: o for m, o in outcomes.items() if m != gone}
        got = {m.decode(): json.loads(v) for m, v in after[f"{w0}:outcome"][0].items()}
        assert got == want  # the others' outcomes as the close wrote them
