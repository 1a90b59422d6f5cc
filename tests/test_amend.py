"""Results amended after a late ban (seasons.amend, docs/fair-play.md): a season closed by the
worker on a ManualClock, then members banned, hidden and made visible; every answer compared
with a plain-Python model of the versions and of each member's best reward."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from worker_support import Sim, dump_db, load_db, local, season_settings, today, toml_text

from seasons import Seasons, catalog, shards
from seasons.cli import CliState, cli
from seasons.errors import ArchiveExists, ArchiveRejected, NoReward
from seasons.http.app import create_app
from seasons.manifest import Manifest, sha256_of
from seasons.restore import Restorer

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

TIERS = [{"ranks": "1", "reward": "gold"}, {"ranks": "2-3", "reward": "silver"}]
BOARDS = {"kills": {"aggregate": "max", "rewards": TIERS}}
SCORES = {"m1": 60.0, "m2": 50.0, "m3": 40.0, "m4": 30.0, "m5": 20.0, "m6": 10.0}
ORDER = {"gold": 0, "silver": 1}


def model_version(scores: dict[str, float], hidden: set[str]) -> dict[str, tuple[int, Any]]:
    """member -> (rank, reward): the standings without ``hidden``, ranks by position."""
    ranked = sorted((m for m in scores if m not in hidden), key=lambda m: -scores[m])
    out = {}
    for i, m in enumerate(ranked, start=1):
        out[m] = (i, "gold" if i == 1 else "silver" if i <= 3 else None)
    return out


def best_of(versions: list[dict[str, tuple[int, Any]]], member: str) -> Any:
    rewards = [v[member][1] for v in versions if member in v]
    given = [r for r in rewards if r is not None]
    return min(given, key=ORDER.__getitem__) if given else None


@pytest.fixture
def sim(settings_factory, r, tmp_path: Path) -> Sim:
    settings = season_settings(settings_factory, tmp_path / "archive", boards=BOARDS)
    s = Sim(settings, seed=3)
    s.clock.set(local(today(), 9))
    s.submit([{"board": "kills", "member": m, "value": v} for m, v in SCORES.items()])
    s.clock.set(local(today() + timedelta(days=8), 1.25))
    s.worker.tick(s.clock())
    assert s.app.rewards("kills", "S1").total == len(SCORES)  # type: ignore[union-attr]
    return s


def test_a_late_ban_promotes_the_others_and_voids_the_banned(sim: Sim, tmp_path: Path) -> None:
    app = sim.app
    silver = app.claim("kills", "S1", "m2")
    assert silver.reward == "silver" and not silver.upgrade
    app.moderate("m1", "banned", reason="cheating")
    v1 = model_version(SCORES, set())
    v2 = model_version(SCORES, {"m1"})
    for m in ("m2", "m3", "m4", "m5"):
        assert app.rewards("kills", "S1", m).reward == best_of([v1, v2], m)
    assert app.rewards("kills", "S1", "m2").reward == "gold"
    assert app.rewards("kills", "S1", "m4").reward == "silver"
    with pytest.raises(NoReward):
        app.claim("kills", "S1", "m1")
    with pytest.raises(NoReward):
        app.rewards("kills", "S1", "m1")
    up = app.claim("kills", "S1", "m2", claim_id="up-1")
    assert (up.reward, up.upgrade, up.already_claimed) == ("gold", True, False)
    again = app.claim("kills", "S1", "m2", claim_id="up-1")
    assert (again.reward, again.upgrade, again.already_claimed) == ("gold", True, False)
    other = app.claim("kills", "S1", "m2", claim_id="up-2")
    assert (other.reward, other.upgrade, other.already_claimed) == ("gold", True, True)
    assert app.claim("kills", "S1", "m4").reward == "silver"
    assert app.claim("kills", "S1", "m3").reward == "silver"
    # The files: version 2 written once, its manifest's sha256 the data's.
    folder = tmp_path / "archive" / "seasons" / "kills"
    data, manifest = folder / "S1.amend-2.jsonl.gz", folder / "S1.amend-2.manifest.json"
    assert Manifest.load(manifest).sha256 == sha256_of(data)
    with gzip.open(data, "rt") as f:
        lines = [json.loads(x) for x in f]
    assert {x["member"]: (x["rank"], x["reward"]) for x in lines} == v2
    assert app.amender.verify("kills", "S1", 2).count == len(v2)
    assert not (folder / "S1.amend-3.jsonl.gz").exists()


def test_a_claimed_reward_of_a_banned_member_is_kept_and_flagged(sim: Sim) -> None:
    app = sim.app
    app.claim("kills", "S1", "m1")
    app.moderate("m1", "banned", reason="cheating")
    kept = app.claim("kills", "S1", "m1")
    assert (kept.reward, kept.void, kept.already_claimed) == ("gold", True, True)
    assert app.rewards("kills", "S1", "m1").void


def test_an_unban_adds_a_version_and_nobody_loses(sim: Sim) -> None:
    app = sim.app
    app.moderate("m1", "banned", reason="cheating")
    app.moderate("m1", "visible", reason="appeal won")
    versions = [model_version(SCORES, set()), model_version(SCORES, {"m1"}),
                model_version(SCORES, set())]  # fmt: skip
    for m in SCORES:
        assert app.rewards("kills", "S1", m).reward == best_of(versions, m), m
    assert app.rewards("kills", "S1", "m4").reward == "silver"  # pushed down, kept


def test_outside_amend_days_nothing_changes(sim: Sim) -> None:
    sim.clock.set(sim.clock() + timedelta(days=15))
    sim.app.moderate("m1", "banned", reason="cheating")
    assert sim.app.rewards("kills", "S1", "m2").reward == "silver"
    assert sim.app.rewards("kills", "S1", "m1").reward == "gold"


@pytest.mark.both_backends
def test_the_acceptance_case_over_http(settings_factory, r, tmp_path: Path) -> None:
    """The same case over HTTP: reads and claims (write token) after the ban."""
    token = "amend-write-token-0123456789"
    admin = "amend-admin-token-0123456789"
    sim = closed_season(
        settings_factory, tmp_path / "archive", api={"write_token": token, "admin_token": admin}
    )
    writes = {"Authorization": f"Bearer {token}"}

    def claim(http: TestClient, member: str, key: str) -> Any:
        return http.post(
            f"/v1/seasons/S1/rewards/{member}/claim", params={"board": "kills"},
            headers={**writes, "Idempotency-Key": key},
        )  # fmt: skip

    def read(http: TestClient, member: str) -> Any:
        return http.get("/v1/seasons/S1/rewards", params={"board": "kills", "member": member})

    with TestClient(create_app(sim.settings, clock=sim.clock), base_url="http://localhost") as http:
        first = claim(http, "m2", "k-silver")
        assert (first.status_code, first.json()["reward"]) == (200, "silver"), first.text
        ban = http.put(
            "/v1/admin/members/m1/moderation", headers={"Authorization": f"Bearer {admin}"},
            json={"state": "banned", "reason": "cheating", "boards": ["kills"]},
        )  # fmt: skip
        assert ban.status_code == 200, ban.text
        v1, v2 = model_version(SCORES, set()), model_version(SCORES, {"m1"})
        for m in ("m2", "m3", "m4", "m5"):
            got = read(http, m)
            assert got.status_code == 200 and got.json()["reward"] == best_of([v1, v2], m)
        up = claim(http, "m2", "k-gold")
        body = up.json()
        assert (body["reward"], body["upgrade"], body["already_claimed"]) == ("gold", True, False)
        again = claim(http, "m2", "k-other").json()
        assert (again["reward"], again["upgrade"], again["already_claimed"]) == ("gold", True, True)
        assert claim(http, "m4", "k-4").json()["reward"] == "silver"
        assert claim(http, "m3", "k-3").json()["reward"] == "silver"
        for answer in (claim(http, "m1", "k-1"), read(http, "m1")):
            assert answer.status_code == 404, answer.text
            assert answer.json()["error"] == "no_reward", answer.text


class Crash(Exception):
    """Stops the amendment at one checkpoint, as a kill there would (in-process)."""


POINTS = ["start", "computed", "rows-written", "data-written", "manifest-written", "verified",
          "best-merged", "event-emitted"]  # fmt: skip


def outcome(sim: Sim, r: Any, folder: Path) -> tuple[Any, ...]:
    files = {p.name: p.read_bytes() for p in sorted(folder.glob("S1.amend-*"))}
    best = {k: json.loads(v) for k, v in r.hgetall("seasons:{kills}:best:S1").items()}
    for row in best.values():
        row.pop("computed_at", None)
    amended = [e for e in sim.app.lifecycle(1000).events if e.type == "results_amended"]
    return files, best, [(e.data["version"], e.data["changed"]) for e in amended]


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_each_checkpoint_resumes_to_the_same_outcome(
    settings_factory, r, tmp_path: Path, point: str
) -> None:
    runs = []
    for crash in (None, point):
        r.flushall()
        folder = tmp_path / crash_name(crash) / "archive"
        settings = season_settings(settings_factory, folder, boards=BOARDS)
        s = Sim(settings, seed=3)
        s.clock.set(local(today(), 9))
        s.submit([{"board": "kills", "member": m, "value": v} for m, v in SCORES.items()])
        s.clock.set(local(today() + timedelta(days=8), 1.25))
        s.worker.tick(s.clock())

        def fault(name: str, crash: str | None = crash) -> None:
            if crash is not None and name.endswith("/" + crash):
                raise Crash(name)

        s.app.amender.checkpoint = fault
        if crash is None:
            s.app.moderate("m1", "banned", reason="cheating")
        else:
            with pytest.raises(Crash):
                s.app.moderate("m1", "banned", reason="cheating")
            s.app.amender.checkpoint = lambda name: None
            s.worker.tick(s.clock())  # the close job finishes it
            assert s.app.resume_amendments() == []  # nothing left: no version 3
        runs.append(outcome(s, r, folder / "seasons" / "kills"))
        assert s.app.amender.verify("kills", "S1", 2).count == len(SCORES) - 1
    assert runs[0] == runs[1]
    v1, v2 = model_version(SCORES, set()), model_version(SCORES, {"m1"})
    assert runs[0][2] == [(2, sum(1 for m in SCORES if v1.get(m) != v2.get(m)))]


def crash_name(crash: str | None) -> str:
    return "clean" if crash is None else crash


def closed_season(
    settings_factory: Any, folder: Path, hide_first: tuple[str, ...] = (), **overrides: Any
) -> Sim:
    """SCORES on kills in S1 (``hide_first`` hidden before the close), S1 closed."""
    settings = season_settings(settings_factory, folder, boards=BOARDS, **overrides)
    s = Sim(settings, seed=3)
    s.clock.set(local(today(), 9))
    s.app.submit_many([{"board": "kills", "member": m, "value": v} for m, v in SCORES.items()])
    for m in hide_first:
        s.app.moderate(m, "hidden", reason="suspect")
    s.clock.set(local(today() + timedelta(days=8), 1.25))
    s.worker.tick(s.clock())
    return s


def test_an_unhide_brings_back_a_member_hidden_at_the_close(
    settings_factory, r, tmp_path: Path
) -> None:
    s = closed_season(settings_factory, tmp_path / "archive", hide_first=("m1",))
    app = s.app
    v1 = model_version(SCORES, {"m1"})
    assert app.rewards("kills", "S1", "m2").reward == "gold"  # type: ignore[union-attr]
    app.moderate("m1", "visible", reason="cleared")
    v2 = model_version(SCORES, set())
    assert v2 != v1
    for m in SCORES:
        got = app.rewards("kills", "S1", m)
        assert got.reward == best_of([v1, v2], m), m  # type: ignore[union-attr]
    assert app.rewards("kills", "S1", "m1").reward == "gold"  # type: ignore[union-attr]
    assert app.rewards("kills", "S1", "m2").reward == "gold"  # type: ignore[union-attr]
    assert app.rewards("kills", "S1", "m4").reward == "silver"  # type: ignore[union-attr]
    # The page lists the latest version, m1 with it (hidden at the close, not in the archive).
    assert page_of(app) == (2, *model_page(v2))


OPS = st.lists(
    st.tuples(st.sampled_from(["banned", "hidden", "visible", "claim"]),
              st.sampled_from(sorted(SCORES))),
    min_size=1, max_size=8,
)  # fmt: skip


@hsettings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_versions_and_best_rewards_follow_the_model(
    settings_factory, r, tmp_path: Path, ops: list[tuple[str, str]]
) -> None:
    r.flushall()
    folder = tmp_path / f"h{len(list(tmp_path.iterdir()))}"
    s = closed_season(settings_factory, folder)
    app = s.app
    hidden: set[str] = set()
    versions = [model_version(SCORES, hidden)]
    claimed: dict[str, str] = {}
    upgraded: dict[str, str] = {}
    for n, (op, m) in enumerate(ops):
        amended = len(versions) > 1
        if op != "claim":
            hidden = hidden - {m} if op == "visible" else hidden | {m}
            app.moderate(m, op, reason="model")
            if (new := model_version(SCORES, hidden)) != versions[-1]:
                versions.append(new)
            continue
        best = best_of(versions, m) if amended else versions[0][m][1]
        if (amended and m in hidden and m not in claimed) or (best is None and m not in claimed):
            with pytest.raises(NoReward):
                app.claim("kills", "S1", m, claim_id=f"c{n}")
            continue
        got = app.claim("kills", "S1", m, claim_id=f"c{n}")
        if amended and m in hidden:
            assert (got.reward, got.void, got.already_claimed) == (claimed[m], True, True)
        elif m not in claimed:
            claimed[m] = best
            assert (got.reward, got.already_claimed, got.upgrade) == (best, False, False)
        elif best == claimed[m] or best is None:
            assert (got.reward, got.already_claimed, got.upgrade) == (claimed[m], True, False)
        elif upgraded.get(m) == best:
            assert (got.reward, got.already_claimed, got.upgrade) == (best, True, True)
        else:
            upgraded[m] = best
            assert (got.reward, got.already_claimed, got.upgrade) == (best, False, True)
    assert int(r.hget("seasons:{kills}:state", "amended:S1") or 1) == len(versions)
    for m in SCORES:
        if len(versions) > 1 and m in hidden and m not in claimed:
            with pytest.raises(NoReward):
                app.rewards("kills", "S1", m)
        else:
            want = best_of(versions, m) if len(versions) > 1 else versions[0][m][1]
            assert app.rewards("kills", "S1", m).reward == want  # type: ignore[union-attr]
    for v in range(2, len(versions) + 1):
        assert app.amender.verify("kills", "S1", v).count == len(versions[v - 1])


ROOT = Path(__file__).resolve().parent.parent
DRIVER = """
import sys
from datetime import datetime
from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import load_settings
from seasons.jobs.state import fault_from_env, no_checkpoint

app = Seasons(load_settings(), clock=ManualClock(datetime.fromisoformat(sys.argv[1])))
app.amender.checkpoint = fault_from_env() or no_checkpoint
app.moderate("m1", "banned", reason="cheating")
print("BANNED", flush=True)
"""


def test_sigkill_at_every_checkpoint_of_the_amendment(settings_factory, r, tmp_path: Path) -> None:
    """A process banning m1 SIGKILLs itself at each checkpoint of the amendment that follows;
    the next moderation call finishes it: the same files, versions, best results and one
    event, as the run without a fault."""
    s = closed_season(settings_factory, tmp_path / "archive")
    folder = tmp_path / "archive" / "seasons" / "kills"
    at = s.clock()
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(s.settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    before = dump_db(r)
    closed_files = sorted(p.name for p in folder.iterdir())

    def run(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", DRIVER, at.isoformat()], cwd=ROOT, env={**env, **extra},
            text=True, capture_output=True, timeout=60,
        )  # fmt: skip

    def state() -> tuple[Any, ...]:
        files = {p.name: p.read_bytes() for p in sorted(folder.glob("S1.amend-*"))}
        hashes = {
            k: r.hgetall(k)
            for k in (b"seasons:{kills}:best:S1", b"seasons:{kills}:amended:S1:2",
                      b"seasons:{kills}:results:S1")
        }  # fmt: skip
        fields = {k: v for k, v in r.hgetall("seasons:{kills}:state").items() if b"amend" in k}
        events = [e.data for e in s.app.lifecycle(1000).events if e.type == "results_amended"]
        return files, hashes, fields, events

    clean = run({"SEASONS_FAULT_TRACE": "1"})
    assert clean.returncode == 0, clean.stderr
    points = [
        ln.split(" ", 1)[1] for ln in clean.stdout.splitlines() if ln.startswith("CHECKPOINT")
    ]
    assert len(points) >= 8 and all(p.startswith("amend:kills:S1:2/") for p in points[:-1])
    # The amendment is run again until nothing differs: version 3 is started, then dropped.
    assert points[-1] == "amend:kills:S1:3/start"
    expected = state()
    v2 = model_version(SCORES, {"m1"})
    assert expected[3] == [{"season": "S1", "board": "kills", "version": 2,
                            "changed": sum(1 for m in SCORES if v2.get(m) != (
                                model_version(SCORES, set()).get(m)))}]  # fmt: skip
    for point in points:
        load_db(r, before)
        for p in folder.iterdir():
            if p.name not in closed_files:
                p.unlink()
        killed = run({"SEASONS_FAULT_AT": point})
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        # The next moderation call on the board finishes it (m1 is banned already: "same").
        s.app.moderate("m1", "banned", reason="again")
        assert state() == expected, point
        assert s.app.amender.verify("kills", "S1", 2).count == len(v2)


FOLLOW_UP_DRIVER = """
import sys
from datetime import datetime
from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import load_settings
from seasons.jobs.state import fault_from_env, no_checkpoint

app = Seasons(load_settings(), clock=ManualClock(datetime.fromisoformat(sys.argv[1])))
app._moderator.checkpoint = fault_from_env() or no_checkpoint
app.moderate("m1", "banned", reason="cheating", actor="ops", request_id="req-1")
print("BANNED", flush=True)
"""
TWO_BOARDS = {**BOARDS, "speed": {"aggregate": "max", "rewards": TIERS}}


def home_of(app: Seasons, board: str, member: str) -> str:
    """The board, or on a sharded board the member's store (seasons.shards)."""
    return shards.member_store(board, app.settings.boards[board], member)


@pytest.mark.parametrize("shards", [1, 3])
def test_sigkill_between_the_change_and_its_follow_ups(
    settings_factory, r, tmp_path: Path, shards: int
) -> None:
    """A process banning m1 on two boards SIGKILLs itself at each step after a board's script
    (the board changed, its follow-ups recorded as pending) up to the end of the follow-ups.
    A minute later the next moderation call or the worker's close job finishes them: one
    audit entry naming the boards that changed, each board's event once, the amendment as a
    run without a fault, no pending record. A recovery racing the end of a call appends
    nothing twice. On sharded boards the record and the pending follow-ups are in m1's
    store, and the board's copy of the record (read by claims) is the store's once the
    follow-ups are done."""
    boards = {b: {**cfg, "shards": shards} for b, cfg in TWO_BOARDS.items()}
    settings = season_settings(settings_factory, tmp_path / "archive", boards=boards)
    s = Sim(settings, seed=3)
    s.clock.set(local(today(), 9))
    s.app.submit_many([{"board": b, "member": m, "value": v}
                       for b in TWO_BOARDS for m, v in SCORES.items()])  # fmt: skip
    # Where m1's record and pending follow-ups are: its board, or its store of a sharded one.
    home = {b: home_of(s.app, b, "m1") for b in TWO_BOARDS}
    s.clock.set(local(today() + timedelta(days=8), 1.25))
    s.worker.tick(s.clock())
    root = tmp_path / "archive" / "seasons"
    at = s.clock()
    config = tmp_path / "seasons.toml"
    config.write_text(toml_text(s.settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    env["SEASONS_CONFIG"] = str(config)
    before = dump_db(r)
    closed_files = sorted(p for p in root.rglob("*") if p.is_file())
    pending = [s.app.keys.moderation_pending(home[b]) for b in TWO_BOARDS]

    def driver(extra: dict[str, str], **kw: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", FOLLOW_UP_DRIVER, at.isoformat()], cwd=ROOT,
            env={**env, **extra}, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip

    def reset() -> None:
        load_db(r, before)
        for p in root.rglob("*"):
            if p.is_file() and p not in closed_files:
                p.unlink()

    def outcome() -> tuple[Any, ...]:
        """The ban's audit entries, the events, the amended results; no pending record, and
        each board's copy of the record its store's."""
        assert not any(r.exists(k) for k in pending)
        for b in TWO_BOARDS:
            assert r.hget(s.app.keys.moderation(b), "m1") == r.hget(
                s.app.keys.moderation(home[b]), "m1"
            )
        audit = [(e.action, e.boards, e.before, e.after, e.actor, e.reason, e.request_id)
                 for e in s.app.audit(member="m1", limit=50).entries]  # fmt: skip
        events = sorted((e.type, json.dumps(e.data, sort_keys=True))
                        for e in s.app.lifecycle(1000).events
                        if e.type in ("member_banned", "results_amended"))  # fmt: skip
        amended = {}
        for k in sorted(r.scan_iter("*amended:S1:*")):
            rows = r.hgetall(k)
            summary = json.loads(rows.pop(b""))
            summary.pop("computed_at")  # the recovery's time
            amended[k] = (rows, summary)
        return audit, events, amended

    def entry(boards: list[str]) -> tuple[Any, ...]:
        return ("ban", boards, {b: {"state": "visible", "mode": None, "reason": None}
                                for b in boards},
                {b: {"state": "banned", "mode": "shadow", "reason": "cheating"} for b in boards},
                "ops", "cheating", "req-1")  # fmt: skip

    clean = driver({"SEASONS_FAULT_TRACE": "1"})
    out, err = clean.communicate(timeout=60)
    assert clean.returncode == 0, err
    points = [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("CHECKPOINT")]
    assert points == ["moderate:kills/applied", "moderate:speed/applied", "moderate:kills/event",
                      "moderate:speed/event", "moderate/audit:ban", "moderate:kills/amended",
                      "moderate:speed/amended"]  # fmt: skip
    expected = outcome()  # the normal path leaves no pending record
    assert expected[0] == [entry(["kills", "speed"])]
    assert [t for t, _ in expected[1]] == ["member_banned"] * 2 + ["results_amended"] * 2
    later = at + timedelta(minutes=1)
    for i, point in enumerate(points):
        reset()
        killed = driver({"SEASONS_FAULT_AT": point})
        killed.communicate(timeout=60)
        assert killed.returncode == -signal.SIGKILL, point
        changed = [b for b in TWO_BOARDS if r.hget(s.app.keys.moderation(home[b]), "m1")]
        assert changed == (["kills"] if point == points[0] else ["kills", "speed"]), point
        assert all(r.hlen(s.app.keys.moderation_pending(home[b])) == 1 for b in changed)
        s.clock.set(later - timedelta(seconds=1))  # too young: its call may be running
        assert s.app._moderator.recover(s.clock()) == 0
        s.clock.set(later)
        if i % 2:
            s.worker.tick(s.clock())
        else:  # the next call on the board; m1 is banned there already: "same"
            s.app.moderate("m1", "banned", boards=["kills"], reason="cheating")
        audit, events, amended = outcome()
        assert audit == [entry(changed)], point
        want = [e for e in expected[1] if any(f'"board": "{b}"' in e[1] for b in changed)]
        assert events == want, point
        assert amended == {k: v for k, v in expected[2].items()
                           if any(f"{{{b}}}".encode() in k for b in changed)}, point  # fmt: skip

    # A recovery racing a call that did every follow-up but has not deleted its records yet.
    reset()
    paused = driver({"SEASONS_FAULT_AT": points[-1], "SEASONS_FAULT": "pause"})
    assert paused.stdout is not None and paused.stdin is not None
    assert paused.stdout.readline().strip() == f"PAUSED {points[-1]}"
    assert s.app._moderator.recover(later) == 2
    paused.stdin.write("\n")
    paused.stdin.flush()
    out, err = paused.communicate(timeout=60)
    assert paused.returncode == 0, err
    assert outcome() == expected


def test_forgetting_a_member_removes_it_from_every_version(sim: Sim, r, tmp_path: Path) -> None:
    app = sim.app
    app.claim("kills", "S1", "m3")
    app.moderate("m1", "banned", reason="cheating")
    app.claim("kills", "S1", "m3", claim_id="up")  # silver still: no upgrade
    app.claim("kills", "S1", "m2")  # gold now
    folder = tmp_path / "archive" / "seasons" / "kills"
    data = folder / "S1.amend-2.jsonl.gz"
    forgotten = app.forget("m2")
    assert str(data) in forgotten.boards["kills"].files_rewritten
    with gzip.open(data, "rt") as f:
        members = [json.loads(x)["member"] for x in f]
    v2 = model_version(SCORES, {"m1"})
    assert members == [m for m in sorted(v2, key=lambda m: v2[m][0]) if m != "m2"]
    assert app.amender.verify("kills", "S1", 2).count == len(v2) - 1
    assert r.hget("seasons:{kills}:best:S1", "m2") is None
    assert r.hget("seasons:{kills}:amended:S1:2", "m2") is None
    assert app.rewards("kills", "S1", "m3").reward == "silver"  # type: ignore[union-attr]


def test_versions_apply_the_tiers_of_the_close(sim: Sim, settings_factory, tmp_path: Path) -> None:
    """A change of the board's tiers after the close changes no version: the manifest's."""
    wider = season_settings(
        settings_factory, tmp_path / "archive",
        boards={"kills": {"aggregate": "max", "rewards": [{"ranks": "1-3", "reward": "gold"}]}},
    )  # fmt: skip
    later = Seasons(wider, clock=sim.clock)
    try:
        later.moderate("m1", "banned", reason="cheating")
        v1, v2 = model_version(SCORES, set()), model_version(SCORES, {"m1"})
        for m in SCORES:
            if m == "m1":
                continue
            got = later.rewards("kills", "S1", m)
            assert got.reward == best_of([v1, v2], m), m  # type: ignore[union-attr]
    finally:
        later.close()


def test_concurrent_bans_on_one_board_end_in_a_version_with_both(sim: Sim) -> None:
    """Two moderation calls amending the same season at once: whichever version each
    finishes, the latest leaves out both members, and best rewards follow the versions."""
    apps = [Seasons(sim.settings, clock=sim.clock) for _ in range(2)]
    barrier = threading.Barrier(2)

    def ban(i: int) -> None:
        barrier.wait()
        apps[i].moderate(("m1", "m2")[i], "banned", reason="ring")

    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(ban, range(2)))
        app = sim.app
        latest = app.amender.latest("kills", "S1")
        stored = app.amender._hash(app.amender.version_key("kills", "S1", latest))
        final = model_version(SCORES, {"m1", "m2"})
        assert {m: (json.loads(v)["rank"], json.loads(v)["reward"]) for m, v in stored.items()} == (
            final
        )
        for v in range(2, latest + 1):
            app.amender.verify("kills", "S1", v)
        assert app.rewards("kills", "S1", "m3").reward == "gold"  # type: ignore[union-attr]
        assert app.rewards("kills", "S1", "m5").reward == "silver"  # type: ignore[union-attr]
    finally:
        for a in apps:
            a.close()


def test_the_cli_answers_the_effective_view(sim: Sim) -> None:
    """`seasons claim` and `seasons rewards` after a ban: the upgrade, the void claim, and
    exit status 3 for the banned member's unclaimed reward."""
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli, list(args), obj=CliState(clock=sim.clock, settings=sim.settings))

    assert run("claim", "kills", "m2", "--season", "S1").exit_code == 0
    assert run("claim", "kills", "m1", "--season", "S1").exit_code == 0
    assert run("ban", "m1", "--reason", "cheating").exit_code == 0
    up = run("claim", "kills", "m2", "--season", "S1", "--json")
    assert json.loads(up.output)["upgrade"] is True and json.loads(up.output)["reward"] == "gold"
    kept = run("claim", "kills", "m1", "--season", "S1")
    assert kept.exit_code == 0 and "void" in kept.output
    assert run("unhide", "m1", "--reason", "appeal").exit_code == 0
    assert run("hide", "m3", "--reason", "suspect").exit_code == 0
    assert run("claim", "kills", "m3", "--season", "S1").exit_code == 3
    read = run("rewards", "kills", "--season", "S1", "--member", "m4", "--json")
    assert json.loads(read.output)["reward"] == "silver"


def test_amendment_files_are_write_once_and_no_archives(sim: Sim, r, tmp_path: Path) -> None:
    app = sim.app
    app.moderate("m1", "banned", reason="cheating")
    folder = tmp_path / "archive" / "seasons" / "kills"
    data = folder / "S1.amend-2.jsonl.gz"
    written = data.read_bytes()
    # Redis forgets version 2 while its file stays: another version 2 is refused, not written.
    r.hdel("seasons:{kills}:state", "amended:S1")
    r.delete("seasons:{kills}:amended:S1:2")
    with pytest.raises(ArchiveExists):
        app.moderate("m2", "banned", reason="cheating")
    assert data.read_bytes() == written
    # Restore leaves them out (--all) and refuses one by name; listings show the season once.
    restorer = Restorer(app.client, app.settings, app.keys)
    assert data not in restorer.files()[0]
    with pytest.raises(ArchiveRejected):
        restorer.check(data, sim.clock())
    assert set(catalog._archives(app.settings, "kills")) == {"S1"}


TIED = {"a": 50.0, "b": 40.0, "c": 40.0, "d": 30.0, "e": 30.0, "f": 20.0}


def model_ranks(scores: dict[str, float], hidden: set[str], rule: str) -> dict[str, int]:
    """Ranks of the members not hidden, best first, by the tie rule (equal reach times:
    member order, as every event came in one batch; ``member``: Redis's order of a
    descending board, member bytes reversed)."""
    ranked = sorted((m for m in scores if m not in hidden), key=lambda m: (-scores[m], m))
    if rule == "member":
        ranked = sorted(ranked, key=lambda m: (scores[m], m), reverse=True)
    out: dict[str, int] = {}
    for i, m in enumerate(ranked):
        better = {scores[x] for x in ranked[:i] if scores[x] > scores[m]}
        if rule == "shared":
            out[m] = 1 + sum(1 for x in ranked if scores[x] > scores[m])
        elif rule == "dense":
            out[m] = 1 + len(better)
        else:
            out[m] = i + 1
    return out


@pytest.mark.parametrize("rule", ["shared", "dense", "earliest", "member"])
def test_ranks_close_up_by_the_tie_rule(settings_factory, r, tmp_path: Path, rule: str) -> None:
    boards = {"kills": {"aggregate": "max", "ties": rule, "rewards": TIERS}}
    settings = season_settings(settings_factory, tmp_path / "archive", boards=boards)
    s = Sim(settings, seed=3)
    try:
        s.clock.set(local(today(), 9))
        s.app.submit_many([{"board": "kills", "member": m, "value": v} for m, v in TIED.items()])
        s.clock.set(local(today() + timedelta(days=8), 1.25))
        s.worker.tick(s.clock())
        s.app.moderate("b", "banned", reason="cheating")
        stored = s.app.amender._hash(s.app.amender.version_key("kills", "S1", 2))
        assert {m: json.loads(v)["rank"] for m, v in stored.items()} == model_ranks(
            TIED, {"b"}, rule
        )
    finally:
        s.close()


def model_page(version: dict[str, tuple[int, Any]]) -> tuple[list[tuple[str, int, Any]], Any]:
    """A version's page (member, rank, reward) in rank order, and its tiers' counts."""
    entries = sorted(((m, rank, reward) for m, (rank, reward) in version.items()),
                     key=lambda e: (e[1], e[0]))  # fmt: skip
    counts = [sum(1 for _, _, w in entries if w == t) for t in ORDER]
    return entries, counts


def page_of(app: Seasons) -> tuple[int, list[tuple[str, int, Any]], Any]:
    page = app.rewards("kills", "S1", limit=1000)
    assert page.version == page.summary.version  # type: ignore[union-attr]
    entries = [(e.member, e.rank, e.reward) for e in page.entries]  # type: ignore[union-attr]
    return page.version, entries, [t.count for t in page.summary.tiers]  # type: ignore[union-attr]


def amended_state(r: Any) -> dict[str, Any]:
    """Every key of the amended results and the claims of kills S1, as Redis holds them."""
    keys = sorted(k for k in r.scan_iter("seasons:{kills}:*S1*") if b":archive" not in k)
    state = {k: r.hgetall(k) for k in keys if r.type(k) == b"hash"}
    return {**state, "marker": r.hget("seasons:{kills}:state", "amended:S1")}


def test_restore_all_brings_back_every_version_the_best_and_the_claims(
    sim: Sim, r, tmp_path: Path
) -> None:
    """Ban rank 1 (version 2), hide rank 5 (3), unhide it (4); claims and an upgrade; then
    Redis lost and `restore --all`: the versions, best results, marker and claims as they
    were, by a model of the versions; a version's file tampered with, or missing, is refused
    with nothing written."""
    app = sim.app
    runner = CliRunner()

    def restore() -> Any:
        state = CliState(clock=sim.clock, settings=sim.settings)
        return runner.invoke(cli, ["restore", "--all"], obj=state)

    versions = [model_version(SCORES, h) for h in (set(), {"m1"}, {"m1", "m5"}, {"m1"})]
    assert page_of(app) == (1, *model_page(versions[0]))
    assert app.claim("kills", "S1", "m2", claim_id="c-2").reward == "silver"
    app.moderate("m1", "banned", reason="cheating")
    assert page_of(app) == (2, *model_page(versions[1]))
    assert app.claim("kills", "S1", "m2", claim_id="up-2").upgrade
    assert app.claim("kills", "S1", "m4", claim_id="c-4").reward == "silver"
    app.moderate("m5", "hidden", reason="suspect")
    app.moderate("m5", "visible", reason="cleared")
    assert page_of(app) == (4, *model_page(versions[3]))
    before = amended_state(r)
    assert before["marker"] == b"4"
    for n, v in enumerate(versions[1:], start=2):
        stored = before[f"seasons:{{kills}}:amended:S1:{n}".encode()]
        assert {m.decode(): (json.loads(x)["rank"], json.loads(x)["reward"])
                for m, x in stored.items() if m} == v  # fmt: skip
    rows = before[b"seasons:{kills}:best:S1"].items()
    best = {m.decode(): json.loads(x)["reward"] for m, x in rows}
    assert best == {m: best_of(versions, m) for m in SCORES}

    r.flushall()
    done = restore()
    assert done.exit_code == 0, done.output
    assert amended_state(r) == before
    assert restore().exit_code == 0  # twice is once
    assert amended_state(r) == before
    assert page_of(app) == (4, *model_page(versions[3]))
    # The upgrade was claimed once: a new id is told so, the recording id again false.
    other = app.claim("kills", "S1", "m2", claim_id="up-9")
    assert (other.reward, other.upgrade, other.already_claimed) == ("gold", True, True)
    again = app.claim("kills", "S1", "m2", claim_id="up-2")
    assert (again.reward, again.upgrade, again.already_claimed) == ("gold", True, False)
    assert app.claim("kills", "S1", "m4").already_claimed
    assert app.claim("kills", "S1", "m3").reward == best_of(versions, "m3")
    # The ban is not in the files: applied again, it amends nothing and voids m1's reward.
    app.moderate("m1", "banned", reason="cheating")
    assert r.hget("seasons:{kills}:state", "amended:S1") == b"4"
    with pytest.raises(NoReward):
        app.claim("kills", "S1", "m1")

    folder = tmp_path / "archive" / "seasons" / "kills"
    data = folder / "S1.amend-3.jsonl.gz"
    good = data.read_bytes()
    with gzip.open(data, "rt") as f:
        lines = [json.loads(x) for x in f]
    lines[0]["reward"] = "silver"  # rank 1's gold made silver
    forged = gzip.compress("".join(json.dumps(x) + "\n" for x in lines).encode(), mtime=0)
    for tamper, says in (
        (lambda: data.write_bytes(forged), "does not match its manifest"),
        (data.unlink, "without a gap"),
    ):
        r.flushall()
        tamper()
        result = restore()
        assert result.exit_code == 2 and says in " ".join(result.output.split()), result.output
        assert r.dbsize() == 0
        data.write_bytes(good)
