"""Rewards of a season and exactly-once claims, against a real redis-server.

The results hash is the season close's (docs/contract.md); here a fixture writes it, with the
archive it is computed from, from a reference standings list and reward tiers computed in
plain Python (:func:`reference`), so these tests need no close. Claims are checked through
the Python API, over HTTP (a real uvicorn server, concurrent clients) and through the CLI,
and across a SIGKILL of an AOF-persisted redis-server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from http_support import SETTINGS, START, WRITE_TOKEN, serving
from redis_server import RedisServer
from worker_support import toml_text

from seasons import Seasons, claimlog
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import (
    NoResult,
    NoReward,
    NotReplicated,
    ProvisionalRewards,
    RewardsNotReady,
    UnknownBoard,
)
from seasons.http.app import create_app
from seasons.keys import Keys
from seasons.models import Claim, MemberReward, RewardsPage

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SEASON = "S2"  # ended before START (S3 runs then)
SNAPSHOT = "S3@20350613T110000Z"
WRITES = {"Authorization": f"Bearer {WRITE_TOKEN}"}
# (first rank, last rank, reward): the first tier whose ranks hold a member's rank wins.
TIERS = [(1, 1, "gold"), (2, 3, "silver"), (4, 10, "bronze"), (2, 20, "badge")]
CLAIMERS = 16


def standings(n: int = 40) -> list[tuple[str, float]]:
    """Members and scores, with ties (also across the tiers' boundaries: ranks 3 and 10)."""
    scores = [100 - i for i in range(n)]
    scores[2] = scores[3] = 97.5  # shared rank 3: both silver
    scores[9] = scores[10] = 90  # shared rank 10: both bronze
    return [(f"p{i:02d}", float(s)) for i, s in enumerate(scores)]


def reference(rows: list[tuple[str, float]]) -> dict[str, dict[str, Any]]:
    """member -> {"rank", "score", "reward"}: competition ranks (equal scores share the best
    rank), best score first; the first tier holding the rank."""
    ordered = sorted(rows, key=lambda r: -r[1])
    out: dict[str, dict[str, Any]] = {}
    for i, (member, score) in enumerate(ordered):
        rank = 1 + sum(1 for _, s in ordered[:i] if s > score)
        reward = next((w for lo, hi, w in TIERS if lo <= rank <= hi), None)
        out[member] = {"rank": rank, "score": score, "reward": reward}
    return out


def tier_counts(ref: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    counts = {w: 0 for _, _, w in TIERS}
    for r in ref.values():
        if r["reward"] is not None:
            counts[r["reward"]] += 1
    return [{"tier": f"{lo}-{hi}", "reward": w, "count": counts[w]} for lo, hi, w in TIERS]


def publish(
    client: Any, keys: Keys, board: str, season: str, rows: list[tuple[str, float]],
    *, provisional: bool = False,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Write the archive and the results of ``season`` as the close does; the reference."""
    ref = reference(rows)
    client.zadd(keys.archive(board, season), dict(rows))
    summary = {
        "season": season, "board": board, "provisional": provisional,
        "computed_at": "2035-06-11T00:05:00+00:00", "total": len(ref), "tiers": tier_counts(ref),
    }  # fmt: skip
    fields = {m: json.dumps(r) for m, r in ref.items()}
    client.hset(keys.results(board, season), mapping={**fields, "": json.dumps(summary)})
    return ref


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        **SETTINGS, archive={"dir": str(tmp_path / "archive")}, api={"write_token": WRITE_TOKEN}
    )


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as s:
        yield s


@pytest.fixture
def ref(app: Seasons) -> dict[str, dict[str, Any]]:
    return publish(app.client, app.keys, "kills", SEASON, standings())


@pytest.fixture
def http(settings: Settings, clock: ManualClock) -> Iterator[TestClient]:
    with TestClient(create_app(settings, clock=clock), base_url="http://localhost") as tc:
        yield tc


def claim_path(member: str, season: str = SEASON, board: str = "kills") -> str:
    return f"/v1/seasons/{season}/rewards/{member}/claim?board={board}"


# --- the Python API ---------------------------------------------------------------------------


@pytest.mark.both_backends
def test_results_and_claims_equal_the_reference(
    app: Seasons, ref: dict[str, dict[str, Any]], clock: ManualClock
) -> None:
    seen: list[MemberReward] = []
    for offset in range(0, 45, 7):
        page = app.rewards("kills", SEASON, offset=offset, limit=7)
        assert isinstance(page, RewardsPage)
        assert page.total == len(ref)
        seen += page.entries
    assert sorted(e.member for e in seen) == sorted(ref)
    assert [e.rank for e in seen] == sorted(e.rank for e in seen)  # rank order
    for e in seen:
        assert (e.rank, e.score, e.reward) == tuple(ref[e.member].values())
        assert (e.claimed, e.claimed_at, e.provisional) == (False, None, False)
    assert [p.rank for p in seen if p.reward == "silver"] == [2, 3, 3]  # the tie at rank 3

    # Claims: first and again, with the clock moved on in between.
    rewarded = [m for m, r in ref.items() if r["reward"] is not None]
    first = {m: app.claim("kills", SEASON, m) for m in rewarded[:5]}
    clock.advance(timedelta(minutes=1))
    for m, c in first.items():
        again = app.claim("kills", SEASON, m)
        assert c.already_claimed is False and again.already_claimed is True
        assert again.model_dump(exclude={"already_claimed"}) == c.model_dump(
            exclude={"already_claimed"}
        )
        assert (c.reward, c.rank) == (ref[m]["reward"], ref[m]["rank"])
        assert c.claimed_at == START.isoformat(timespec="microseconds").replace("+00:00", "Z")
        mine = app.rewards("kills", SEASON, m)
        assert isinstance(mine, MemberReward)
        assert (mine.claimed, mine.claimed_at) == (True, c.claimed_at)

    # The summary: each tier's members and claims, counted independently.
    summary = app.rewards("kills", SEASON, limit=1)
    assert isinstance(summary, RewardsPage)
    claimed_by_reward = {w: sum(1 for c in first.values() if c.reward == w) for _, _, w in TIERS}
    assert [t.model_dump() for t in summary.summary.tiers] == [
        {**t, "claimed": claimed_by_reward[t["reward"]]} for t in tier_counts(ref)
    ]
    assert summary.summary.claimed == len(first)
    assert summary.summary.granted == sum(1 for r in ref.values() if r["reward"])


def test_errors_change_nothing(app: Seasons, ref: dict[str, dict[str, Any]]) -> None:
    unrewarded = next(m for m, r in ref.items() if r["reward"] is None)
    publish(app.client, app.keys, "kills", SNAPSHOT, standings(), provisional=True)
    cases: list[tuple[Callable[[], Any], type[Exception], str]] = [
        (lambda: app.claim("kills", SEASON, unrewarded), NoReward, "no_reward"),
        (lambda: app.claim("kills", SEASON, "ghost"), NoReward, "no_reward"),
        (lambda: app.rewards("kills", SEASON, "ghost"), NoResult, "no_result"),
        (lambda: app.claim("kills", "S1", "p00"), RewardsNotReady, "rewards_not_ready"),
        (lambda: app.rewards("laps", SEASON), RewardsNotReady, "rewards_not_ready"),
        (lambda: app.claim("kills", SNAPSHOT, "p00"), ProvisionalRewards, "provisional"),
        (lambda: app.claim("nope", SEASON, "p00"), UnknownBoard, "unknown_board"),
    ]
    for call, error, code in cases:
        with pytest.raises(error) as caught:
            call()
        assert caught.value.code == code  # type: ignore[attr-defined]
    for board, season in (("kills", SEASON), ("kills", SNAPSHOT), ("kills", "S1")):
        assert app.client.exists(app.keys.claims(board, season)) == 0
    # The snapshot's results read as provisional.
    snap = app.rewards("kills", SNAPSHOT, "p00")
    assert isinstance(snap, MemberReward) and snap.provisional is True


def test_concurrent_claims_python_api(app: Seasons, ref: dict[str, dict[str, Any]]) -> None:
    barrier = threading.Barrier(CLAIMERS)

    def claim(_: int) -> Claim:
        barrier.wait()
        return app.claim("kills", SEASON, "p01")

    with ThreadPoolExecutor(CLAIMERS) as pool:
        claims = list(pool.map(claim, range(CLAIMERS)))
    assert sum(not c.already_claimed for c in claims) == 1
    assert len({(c.claimed_at, c.reward, c.rank) for c in claims}) == 1
    assert app.client.hlen(app.keys.claims("kills", SEASON)) == 1


# --- HTTP -------------------------------------------------------------------------------------


def test_concurrent_claims_over_http(
    settings: Settings, clock: ManualClock, app: Seasons, ref: dict[str, dict[str, Any]]
) -> None:
    barrier = threading.Barrier(CLAIMERS)
    with serving(create_app(settings, clock=clock)) as base:

        def claim(_: int) -> dict[str, Any]:
            with httpx.Client(base_url=base, headers=WRITES, timeout=10) as c:
                barrier.wait()
                response = c.post(claim_path("p02"))
                assert response.status_code == 200, response.text
                body: dict[str, Any] = response.json()
                return body

        with ThreadPoolExecutor(CLAIMERS) as pool:
            bodies = list(pool.map(claim, range(CLAIMERS)))
    assert sum(not b["already_claimed"] for b in bodies) == 1
    assert len({b["claimed_at"] for b in bodies}) == 1
    first = next(b for b in bodies if not b["already_claimed"])
    assert first == {
        "season": SEASON, "board": "kills", "member": "p02", "rank": 3, "score": 97.5,
        "reward": "silver", "claimed_at": first["claimed_at"], "already_claimed": False,
        "upgrade": False, "void": False,
    }  # fmt: skip


def test_http_equals_python_api(
    http: TestClient, app: Seasons, ref: dict[str, dict[str, Any]]
) -> None:
    first = http.post(claim_path("p00"), headers=WRITES)
    assert first.status_code == 200 and first.json()["already_claimed"] is False
    again = http.post(claim_path("p00"), headers=WRITES)
    assert again.content == app.claim("kills", SEASON, "p00").model_dump_json().encode()
    for query in ("&member=p00", "&member=p30", "&offset=3&limit=4", ""):
        got = http.get(f"/v1/seasons/{SEASON}/rewards?board=kills{query}")
        member = query.split("=")[1] if "member" in query else None
        offset, limit = (3, 4) if "offset" in query else (0, 100)
        want = app.rewards("kills", SEASON, member, offset=offset, limit=limit)
        assert got.status_code == 200 and got.content == want.model_dump_json().encode()


def test_http_errors(
    http: TestClient, settings_factory: Callable[..., Settings], clock: ManualClock,
    app: Seasons, ref: dict[str, dict[str, Any]],
) -> None:  # fmt: skip
    unrewarded = next(m for m, r in ref.items() if r["reward"] is None)
    publish(app.client, app.keys, "kills", SNAPSHOT, standings(), provisional=True)
    cases = [
        (claim_path(unrewarded), 404, "no_reward"),
        (claim_path("ghost"), 404, "no_reward"),
        (claim_path("p00", board="nope"), 404, "unknown_board"),
        (claim_path("p00", season="S1"), 409, "rewards_not_ready"),
        (claim_path("p00", season=SNAPSHOT), 409, "provisional"),
        (claim_path("p00", season="X9"), 422, "bad_period"),
        (claim_path("p00", season="S3@2035"), 422, "bad_period"),
        (f"/v1/seasons/{SEASON}/rewards/p00/claim", 422, "invalid_input"),  # no board
        (f"/v1/seasons/{SEASON}/rewards/p00/claim?board=kills&x=1", 422, "unknown_parameter"),
    ]
    for path, status, code in cases:
        got = http.post(path, headers=WRITES)
        assert (got.status_code, got.json()["error"]) == (status, code), path
    reads = [
        (f"/v1/seasons/{SEASON}/rewards?board=kills&member=ghost", 404, "no_result"),
        ("/v1/seasons/S1/rewards?board=kills", 409, "rewards_not_ready"),
        (f"/v1/seasons/{SEASON}/rewards?board=nope", 404, "unknown_board"),
        (f"/v1/seasons/{SEASON}/rewards?board=kills&limit=0", 422, "limit_exceeded"),
        (f"/v1/seasons/{SEASON}/rewards?board=kills&limit=1001", 422, "limit_exceeded"),
    ]
    for path, status, code in reads:
        got = http.get(path)
        assert (got.status_code, got.json()["error"]) == (status, code), path
    # Tokens: none, or a wrong one (401); a remote client with no token configured (403).
    for headers in ({}, {"Authorization": f"Bearer {WRITE_TOKEN}x"}):
        got = http.post(claim_path("p00"), headers=headers)
        assert (got.status_code, got.json()["error"]) == (401, "unauthorized")
    open_settings = settings_factory(**SETTINGS)
    with TestClient(
        create_app(open_settings, clock=clock), client=("10.1.2.3", 5000),
        base_url="http://seasons.example",
    ) as remote:  # fmt: skip
        got = remote.post(claim_path("p00"))
        assert (got.status_code, got.json()["error"]) == (403, "forbidden")
    assert app.client.exists(app.keys.claims("kills", SEASON)) == 0


# --- CLI --------------------------------------------------------------------------------------


def test_cli_exit_statuses_and_json(
    http: TestClient, settings: Settings, clock: ManualClock, ref: dict[str, dict[str, Any]]
) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), obj=CliState(clock=clock, settings=settings))

    first = run("claim", "kills", "p05", "--season", SEASON, "--id", "cli-1")
    assert first.exit_code == 0 and "claimed now" in first.output
    resent = run("claim", "kills", "p05", "--season", SEASON, "--id", "cli-1")
    assert resent.exit_code == 0 and "claimed now" in resent.output
    again = run("claim", "kills", "p05", "--season", SEASON)
    assert again.exit_code == 0 and "already claimed" in again.output
    as_json = run("claim", "kills", "p05", "--season", SEASON, "--json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.output) == http.post(claim_path("p05"), headers=WRITES).json()
    for args, path in (
        (["--member", "p05"], "&member=p05"),
        (["--limit", "5", "--offset", "2"], "&limit=5&offset=2"),
    ):
        got = run("rewards", "kills", "--season", SEASON, "--json", *args)
        assert got.exit_code == 0
        want = http.get(f"/v1/seasons/{SEASON}/rewards?board=kills{path}").json()
        assert json.loads(got.output) == want
    table = run("rewards", "kills", "--season", SEASON, "--limit", "3")
    assert table.exit_code == 0 and "silver" in table.output and "p05" not in table.output
    unrewarded = next(m for m, r in ref.items() if r["reward"] is None)
    for args, status in (
        (["claim", "kills", unrewarded, "--season", SEASON], 3),  # no_reward: not found
        (["claim", "kills", "p00", "--season", "S1"], 1),  # not ready: a conflict
        (["claim", "nope", "p00", "--season", SEASON], 2),  # unknown board: bad input
        (["claim", "kills", "p00", "--season", "X9"], 2),
        (["rewards", "kills", "--season", SEASON, "--member", "ghost"], 3),
    ):
        got = run(*args)
        assert got.exit_code == status, (args, got.output)


# --- durability -------------------------------------------------------------------------------


def test_claims_survive_a_redis_restart_from_aof(
    settings_factory: Callable[..., Settings], clock: ManualClock, tmp_path: Path
) -> None:
    with RedisServer(args=["--appendonly", "yes", "--appendfsync", "always"]) as server:
        settings = settings_factory(
            **SETTINGS, redis={"url": server.url, "cluster": False},
            archive={"dir": str(tmp_path / "archive")},
        )  # fmt: skip
        with Seasons(settings, clock=clock) as s:
            publish(s.client, s.keys, "kills", SEASON, standings())
            first = s.claim("kills", SEASON, "p00")
            assert first.already_claimed is False
            server.kill()  # SIGKILL: only what the AOF holds comes back
            server.start()
            clock.advance(timedelta(hours=1))
            again = s.claim("kills", SEASON, "p00")
        assert again.already_claimed is True
        assert (again.claimed_at, again.reward) == (first.claimed_at, first.reward)


# --- resends and replicas ---------------------------------------------------------------------


def test_a_resent_claim_is_told_it_is_its_own(
    app: Seasons, http: TestClient, ref: dict[str, dict[str, Any]], clock: ManualClock
) -> None:
    first = app.claim("kills", SEASON, "p03", claim_id="pay-7")
    clock.advance(timedelta(seconds=5))
    resent = app.claim("kills", SEASON, "p03", claim_id="pay-7")
    other = app.claim("kills", SEASON, "p03", claim_id="pay-8")
    assert (first.already_claimed, resent.already_claimed, other.already_claimed) == (
        False, False, True,
    )  # fmt: skip
    assert first.claimed_at == resent.claimed_at == other.claimed_at
    # Over HTTP the claim's id is the Idempotency-Key header.
    for key, already in (("pay-7", False), ("pay-9", True)):
        got = http.post(claim_path("p03"), headers={**WRITES, "Idempotency-Key": key})
        assert got.status_code == 200 and got.json()["already_claimed"] is already
    bad = http.post(claim_path("p04"), headers={**WRITES, "Idempotency-Key": "x" * 129})
    assert (bad.status_code, bad.json()["error"]) == (422, "invalid_batch_id")
    assert app.client.hexists(app.keys.claims("kills", SEASON), "p04") == 0


def test_claims_wait_for_replicas_like_writes(
    settings_factory: Callable[..., Settings], clock: ManualClock, app: Seasons,
    ref: dict[str, dict[str, Any]],
) -> None:  # fmt: skip
    # The test server has no replica: WAIT for one times out, the claim is not acknowledged.
    waiting = settings_factory(**SETTINGS, redis={"wait_replicas": 1, "wait_timeout_ms": 20})
    with Seasons(waiting, clock=clock) as s, pytest.raises(NotReplicated) as caught:
        s.claim("kills", SEASON, "p00", claim_id="pay-1")
    assert caught.value.details["claim_id"] == "pay-1"
    # It was recorded on the master: claimed again with its id, it is this claim's.
    again = app.claim("kills", SEASON, "p00", claim_id="pay-1")
    assert again.already_claimed is False
    assert app.claim("kills", SEASON, "p00").already_claimed is True


def test_the_sweep_keeps_claims_without_ttl(app: Seasons, ref: dict[str, dict[str, Any]]) -> None:
    from seasons.jobs import registry

    app.claim("kills", SEASON, "p00")
    claims = app.keys.claims("kills", SEASON)
    swept = registry.sweeper_of(app.backend).run(START)
    assert claims not in swept.unknown
    assert app.client.ttl(claims) == -1


def test_a_member_with_a_slash_claims_over_http(
    http: TestClient, app: Seasons, ref: dict[str, dict[str, Any]]
) -> None:
    key = app.keys.results("kills", SEASON)
    app.client.hset(key, "team/ann", json.dumps({"rank": 1, "score": 100, "reward": "gold"}))
    got = http.post(claim_path("team%2Fann"), headers=WRITES)
    assert got.status_code == 200, got.text
    assert (got.json()["member"], got.json()["reward"]) == ("team/ann", "gold")
    assert app.claim("kills", SEASON, "team/ann").already_claimed is True


# --- the claims log: claims outlive Redis (docs/boards.md#rewards) ----------------------------


def claims_log(settings: Settings, season: str = SEASON) -> Path:
    return settings.archive.dir / "seasons" / "kills" / f"{season}.claims.jsonl"


def log_lines(settings: Settings) -> list[dict[str, Any]]:
    return [json.loads(line) for line in claims_log(settings).read_text().splitlines()]


def test_a_claim_is_logged_and_fsynced_before_it_is_answered(
    app: Seasons, settings: Settings, http: TestClient, ref: dict[str, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    log = claims_log(settings)
    synced: list[tuple[int, int]] = []  # (device, inode) of each fsync, file or directory
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    first = app.claim("kills", SEASON, "p02", claim_id="pay-1")
    assert first.already_claimed is False
    # Answered only after the line was written and fsynced, and the new file's folder too.
    inode = (log.stat().st_dev, log.stat().st_ino)
    folder = (log.parent.stat().st_dev, log.parent.stat().st_ino)
    assert inode in synced and folder in synced
    want = {
        "board": "kills", "season": SEASON, "member": "p02", "reward": ref["p02"]["reward"],
        "rank": ref["p02"]["rank"], "claim_id": "pay-1", "claimed_at": first.claimed_at,
    }  # fmt: skip
    assert log_lines(settings) == [want]
    # A resend with its id answers false again, so it is logged again; another id answers
    # true and logs nothing.
    synced.clear()
    assert app.claim("kills", SEASON, "p02", claim_id="pay-1").already_claimed is False
    assert synced == [inode]  # the file, once: the folder is synced when the file is created
    assert app.claim("kills", SEASON, "p02", claim_id="pay-2").already_claimed is True
    assert log_lines(settings) == [want, want]
    got = http.post(claim_path("p00"), headers={**WRITES, "Idempotency-Key": "http-1"})
    assert got.status_code == 200 and got.json()["already_claimed"] is False
    assert log_lines(settings)[-1] == {
        **want, "member": "p00", "reward": "gold", "rank": 1, "claim_id": "http-1",
        "claimed_at": got.json()["claimed_at"],
    }  # fmt: skip
    # A forget takes the member's lines out of the log (and its claim out of Redis).
    forgotten = app.forget("p02")
    assert str(claims_log(settings)) in forgotten.boards["kills"].files_rewritten
    assert [line["member"] for line in log_lines(settings)] == ["p00"]


CLAIMER = """
import json, sys
from pathlib import Path
from seasons import Seasons
from seasons.config import load_settings

name, members, go = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
answers = []
with Seasons(load_settings()) as s:
    while not go.exists():
        pass
    for m in members:
        for _ in range(3):  # the first claim, then two resends with its id
            c = s.claim("kills", "S2", m, claim_id=f"{name}-{m}")
            answers.append([m, f"{name}-{m}", c.already_claimed])
print(json.dumps(answers))
"""


def test_claims_from_two_processes_append_whole_lines(
    app: Seasons, settings: Settings, ref: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    rewarded = sorted(m for m, r in ref.items() if r["reward"] is not None)
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, name, json.dumps(order), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name, order in (("a", rewarded), ("b", rewarded[::-1]))
    ]
    go.touch()
    answers = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        answers += json.loads(out)
    won = [(m, cid) for m, cid, already in answers if not already]
    # One winner per reward; every answer false is one whole line of the log, no other line.
    assert sorted({m for m, _ in won}) == rewarded
    assert len({m for m, _ in won}) == len(set(won))
    lines = log_lines(settings)
    assert sorted((line["member"], line["claim_id"]) for line in lines) == sorted(won)
    stored = app.client.hgetall(app.keys.claims("kills", SEASON))
    for line in lines:
        claim = json.loads(stored[line["member"]])
        assert (claim["claim_id"], claim["claimed_at"]) == (line["claim_id"], line["claimed_at"])
        assert (line["rank"], line["reward"]) == (ref[line["member"]]["rank"],
                                                  ref[line["member"]]["reward"])  # fmt: skip


def test_an_unwritable_claims_log_is_a_503_and_a_resend_logs_it(
    app: Seasons, settings: Settings, http: TestClient, ref: dict[str, dict[str, Any]]
) -> None:
    log = claims_log(settings)
    log.parent.mkdir(parents=True)
    log.symlink_to("/dev/full")  # every write fails as on a full disk (ENOSPC)
    key = {**WRITES, "Idempotency-Key": "pay-full"}
    got = http.post(claim_path("p01"), headers=key)
    assert got.status_code == 503, got.text
    body = got.json()
    assert body["error"] == "claims_log_unavailable"
    assert str(log) in body["message"] and "No space left on device" in body["message"]
    assert "same claim id 'pay-full'" in body["message"]
    assert body["details"] == {"file": str(log), "claim_id": "pay-full"}
    # The claim stands in Redis: another claim is told it was claimed (nothing to log).
    assert http.post(claim_path("p01"), headers=WRITES).json()["already_claimed"] is True
    stored = json.loads(app.client.hget(app.keys.claims("kills", SEASON), "p01"))
    assert stored["claim_id"] == "pay-full"
    # The CLI says the same, exit status 1 (the claims log is not the user's input).
    run = CliRunner().invoke(
        cli, ["claim", "kills", "p01", "--season", SEASON, "--id", "pay-full"],
        obj=CliState(clock=ManualClock(START), settings=settings),
    )  # fmt: skip
    assert run.exit_code == 1 and "claims log" in run.output
    log.unlink()  # space again
    resent = http.post(claim_path("p01"), headers=key)
    assert resent.status_code == 200 and resent.json()["already_claimed"] is False
    assert [(line["member"], line["claim_id"]) for line in log_lines(settings)] == [
        ("p01", "pay-full")
    ]


def test_a_forget_rewriting_the_log_loses_no_concurrent_claim(tmp_path: Path) -> None:
    # Appends from another process while the log is rewritten again and again without one
    # member: each append lands in the file that stays (the rewrite's lock, then the
    # appender's check that its file was not replaced), none in a file renamed over.
    log = tmp_path / "kills" / "S2.claims.jsonl"
    gone = claimlog.LoggedClaim("kills", "S2", "gone", "gold", 1, "c", "t")
    go = tmp_path / "go"
    appender = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(log), str(go)], stdout=subprocess.PIPE, text=True
    )
    go.touch()
    rewrites = 0
    while appender.poll() is None:
        claimlog.append(log, gone)
        rewrites += claimlog.without_member(log, "gone")
    out, _ = appender.communicate(timeout=60)
    assert appender.returncode == 0 and int(out) == APPENDS
    lines = log.read_bytes().splitlines()
    assert sorted(claimlog.parse(line + b"\n").member for line in lines) == sorted(
        f"m{i:04d}" for i in range(APPENDS)
    )
    assert rewrites >= 2


APPENDS = 300
APPENDER = f"""
import sys
from pathlib import Path
from seasons import claimlog

log, go = Path(sys.argv[1]), Path(sys.argv[2])
while not go.exists():
    pass
for i in range({APPENDS}):
    claimlog.append(log, claimlog.LoggedClaim("kills", "S2", f"m{{i:04d}}", "gold", 1, "c", "t"))
print({APPENDS})
"""


def test_a_line_cut_short_is_dropped_by_the_next_claim(
    app: Seasons, settings: Settings, ref: dict[str, dict[str, Any]]
) -> None:
    # Power lost during an append, before its fsync: a last line without its newline, whose
    # claim was never answered. The next claim starts on a line of its own, without it.
    first = app.claim("kills", SEASON, "p00", claim_id="pay-0")
    log = claims_log(settings)
    whole = log.read_bytes()
    with log.open("ab") as f:
        f.write(b'{"board":"kills","season":"S2","member":"p0')
    second = app.claim("kills", SEASON, "p01", claim_id="pay-1")
    assert log.read_bytes().startswith(whole)
    assert [(c["member"], c["claimed_at"]) for c in log_lines(settings)] == [
        ("p00", first.claimed_at), ("p01", second.claimed_at)
    ]  # fmt: skip
