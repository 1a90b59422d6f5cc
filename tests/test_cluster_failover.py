"""Failover on a real local Redis Cluster (3 masters, 2 replicas each, cluster-node-timeout
1 s), with the Seasons app (and its one client) kept running throughout:

- a graceful switch (CLUSTER FAILOVER): the next writes and reads follow MOVED, no error;
- the replicas of a board's master stall, then the master is SIGKILLed while a loop writes:
  the cluster promotes a replica and writes resume on their own. With ``redis.wait_replicas
  = 1`` no acknowledged event is lost (writes are refused while the replicas do not
  acknowledge); without it the loss is measured and printed (``-s`` shows it), not asserted.

Every event is a new member with value 1 and an event id, so the board itself says which
events survived.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot
from redis_cluster import LocalCluster, find_redis_cli

from seasons import Seasons, calendar
from seasons.config import Settings, load_settings
from seasons.errors import BackendUnavailable
from seasons.http.app import create_app

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

BOARD = "kills"
BATCH = 50  # events per write
BEFORE = 5_000  # events acknowledged before the replicas stall
STALL = 0.5  # seconds the replicas stall before the master is killed
AFTER = 5_000  # events acknowledged after the failover
TIME_LIMIT = 25.0  # seconds for one kill-and-recover run


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    try:
        find_redis_cli()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with LocalCluster(masters=3, replicas=2) as c:
        yield c


def settings(cluster: LocalCluster, tmp_path: Path, namespace: str, **redis: Any) -> Settings:
    toml = tmp_path / "empty.toml"
    toml.write_text("")
    return load_settings(
        environ={}, path=toml, namespace=namespace, boards={BOARD: {}},
        redis={"url": cluster.url, "cluster": True, **redis},
    )  # fmt: skip


def day_key(app: Seasons) -> str:
    return app.keys.day(BOARD, calendar.local_day(app.clock(), app.settings.zone))


def test_graceful_failover_is_followed_without_errors(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    plain = Seasons(settings(cluster, tmp_path, "graceful"))
    waiting = Seasons(
        settings(cluster, tmp_path, "graceful", wait_replicas=1, wait_timeout_ms=2000)
    )
    # The HTTP app, with its own asyncio cluster client for the hot reads; loopback may write.
    http = TestClient(
        create_app(plain.settings), client=("127.0.0.1", 4000), base_url="http://localhost"
    )
    http.__enter__()
    try:
        key = day_key(plain)
        for app, member in ((plain, "a"), (waiting, "b")):  # both clients learn the slot map
            assert app.submit(BOARD, member, 1).applied == 1
        assert http.get(f"/v1/boards/{BOARD}/day").json()["total"] == 2
        old = cluster.master_of(key)
        cluster.manual_failover(cluster.replicas_of(old)[0])
        assert cluster.master_of(key) != old
        # The clients' slot maps are stale now: the old master answers MOVED.
        for app, member in ((plain, "c"), (waiting, "d")):
            assert app.submit(BOARD, member, 1).applied == 1
        page = plain.top(BOARD, "day", limit=10)
        assert sorted(e.member for e in page.entries) == ["a", "b", "c", "d"]
        got = http.get(f"/v1/boards/{BOARD}/day")
        assert got.status_code == 200 and got.json() == page.model_dump(mode="json")
        sent = http.post(
            "/v1/scores", json={"events": [{"board": BOARD, "member": "e", "value": 1}]}
        )
        assert {k: v for k, v in sent.json().items() if k != "batch_id"} == {
            "applied": 1,
            "duplicates": 0,
        }
    finally:
        http.__exit__(None, None, None)
        plain.close()
        waiting.close()


@dataclass
class Outcome:
    acknowledged: int  # events whose write was acknowledged (applied)
    lost: int  # acknowledged, but not on the board after the failover
    acknowledged_while_stalled: int
    refused: dict[str, int]  # failed writes by the cause of their BackendUnavailable
    seconds_unavailable: float  # from the kill to the next acknowledged write


def kill_and_recover(cluster: LocalCluster, app: Seasons) -> Outcome:
    """Write batches of new members; then the replicas of the board's master stall (SIGSTOP:
    a slow network, a busy replica) while writes go on, the master is SIGKILLed and the
    replicas resume; go on until AFTER more events were acknowledged. Then compare the
    acknowledged events with what the board holds, and bring the killed node back."""
    key = day_key(app)
    master = cluster.master_of(key)
    acked: list[str] = []
    refused: dict[str, int] = {}
    n = 0

    def write() -> None:
        nonlocal n
        members = [f"m{i:06d}" for i in range(n, n + BATCH)]
        n += BATCH
        events = [
            {"board": BOARD, "member": m, "value": 1, "event_id": m, "ts": datetime.now(UTC)}
            for m in members
        ]
        try:
            result = app.submit_many(events)
        except BackendUnavailable as exc:
            name = type(exc).__name__ if exc.__cause__ is None else type(exc.__cause__).__name__
            refused[name] = refused.get(name, 0) + 1
            time.sleep(0.01)
            return
        assert result.applied == BATCH  # new members, new ids: all or an exception
        acked.extend(members)

    deadline = time.monotonic() + TIME_LIMIT
    killed_at = back_at = 0.0
    while len(acked) < BEFORE:
        write()
    stalled = [cluster.node(p) for p in cluster.replicas_of(master)]
    for node in stalled:
        os.kill(node.pid or 0, signal.SIGSTOP)
    try:
        before = len(acked)
        stall_end = time.monotonic() + STALL
        while time.monotonic() < stall_end:
            write()
        cluster.node(master).kill()
        killed_at = time.monotonic()
    finally:
        for node in stalled:
            os.kill(node.pid or 0, signal.SIGCONT)
    while_stalled = len(acked) - before
    while len(acked) < before + while_stalled + AFTER:
        assert time.monotonic() < deadline, f"writes did not resume: {refused}"
        first = len(acked)
        write()
        if len(acked) > first and first == before + while_stalled:
            back_at = time.monotonic()
    assert cluster.master_of(key) != master  # a replica took over
    present = {m for m, _ in app.client.zrange(key, 0, -1, withscores=True)}
    cluster.restart(master)  # it rejoins as a replica: whole again for the next run
    return Outcome(
        acknowledged=len(acked),
        lost=len(set(acked) - present),
        acknowledged_while_stalled=while_stalled,
        refused=refused,
        seconds_unavailable=round(back_at - killed_at, 2),
    )


def test_kill_the_master_with_wait_loses_no_acknowledged_event(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    config = settings(cluster, tmp_path, "kill-wait", wait_replicas=1, wait_timeout_ms=200)
    with Seasons(config) as app:
        outcome = kill_and_recover(cluster, app)
    print(f"\nfailover with WAIT 1: {outcome}")
    assert outcome.lost == 0
    assert outcome.acknowledged_while_stalled == 0  # refused: NotReplicated
    assert outcome.refused.get("NotReplicated", 0) > 0


def test_kill_the_master_without_wait_measures_the_loss(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    with Seasons(settings(cluster, tmp_path, "kill-nowait")) as app:
        outcome = kill_and_recover(cluster, app)
    print(f"\nfailover without WAIT: {outcome}")
    assert outcome.acknowledged_while_stalled > 0


@pytest.mark.parametrize("wait", [0, 1])
def test_resharding_a_board_while_writing(cluster: LocalCluster, tmp_path: Path, wait: int) -> None:
    """The board's slot moves to another master, key by key, while a thread writes: writes
    meet ASK and TRYAGAIN (some are refused meanwhile), none is lost or counted twice, and
    they go on at the new master."""
    config = settings(cluster, tmp_path, f"reshard{wait}", wait_replicas=wait)
    with Seasons(config) as app:
        key = day_key(app)
        source = cluster.master_of(key)
        target = next(p for p in cluster.master_ports() if p != source)
        acked: list[str] = []
        refused: dict[str, int] = {}
        stop = threading.Event()

        def write_until_stopped() -> None:
            n = 0
            while not stop.is_set():
                members = [f"m{i:06d}" for i in range(n, n + 10)]
                n += 10
                events = [{"board": BOARD, "member": m, "value": 1, "event_id": m} for m in members]
                try:
                    assert app.submit_many(events).applied == len(members)
                    acked.extend(members)
                except BackendUnavailable as exc:
                    cause = type(exc.__cause__ or exc).__name__
                    refused[cause] = refused.get(cause, 0) + 1

        thread = threading.Thread(target=write_until_stopped)
        thread.start()
        try:
            deadline = time.monotonic() + TIME_LIMIT
            while len(acked) < 500:
                assert time.monotonic() < deadline and thread.is_alive()
                time.sleep(0.01)
            moved = cluster.migrate_slot(key_slot(key.encode()), target, pause=0.02)
            after = len(acked)
            while len(acked) < after + 500:
                assert time.monotonic() < deadline and thread.is_alive(), refused
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join(timeout=30)
        assert cluster.master_of(key) == target and moved >= 4
        board = dict(app.client.zrange(key, 0, -1, withscores=True))
    print(f"\nresharding, WAIT {wait}: {len(acked)} acknowledged, {moved} keys moved, "
          f"refused meanwhile: {refused}")  # fmt: skip
    assert set(acked) <= set(board)  # nothing acknowledged is lost
    assert set(board.values()) == {1.0}  # nothing counted twice
