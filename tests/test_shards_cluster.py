"""A sharded board on a real local Redis Cluster under faults (docs/sharding.md):

- the master of one of its shards (each has two replicas) is SIGKILLed while batches are
  written (``redis.wait_replicas
  = 1``): a batch refused meanwhile, possibly applied on some shards already, is sent again with
  its batch id until it is acknowledged; at the end every event is on the board exactly once;
- one shard's slot moves to another master key by key while batches are written: the same;
- a shard's master is down and has no replica: reads of the board answer 503
  ``backend_unavailable``, never a page without that shard's members.

Every event is a new member with value 1 and an event id, so the board itself says which
events it holds and how often.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot
from redis_cluster import LocalCluster, find_redis_cli

from seasons import Seasons, calendar, shards
from seasons.config import Settings, load_settings
from seasons.errors import BackendUnavailable
from seasons.http.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

BOARD = "kills"
SHARDS = 6
BATCH = 30
TIME_LIMIT = 40.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    try:
        find_redis_cli()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with LocalCluster(masters=3, replicas=2) as c:
        yield c


def settings(url: str, tmp_path: Path, namespace: str, **redis: Any) -> Settings:
    toml = tmp_path / "empty.toml"
    toml.write_text("")
    return load_settings(
        environ={}, path=toml, namespace=namespace, boards={BOARD: {"shards": SHARDS}},
        redis={"url": url, "cluster": True, **redis},
    )  # fmt: skip


def day_keys(app: Seasons) -> list[str]:
    day = calendar.local_day(app.clock(), app.settings.zone)
    return [app.keys.day(store, day) for store in shards.stores(BOARD, app.settings.boards[BOARD])]


class Writer:
    """Batches of new members, each sent again with its batch id until acknowledged."""

    def __init__(self, app: Seasons):
        self.app, self.acked, self.refused, self.n = app, [], {}, 0  # type: ignore[var-annotated]

    def batch(self, deadline: float) -> None:
        members = [f"m{i:06d}" for i in range(self.n, self.n + BATCH)]
        self.n += BATCH
        events = [{"board": BOARD, "member": m, "value": 1, "event_id": m} for m in members]
        batch_id = f"batch-{self.n}"
        while True:
            assert time.monotonic() < deadline, f"writes did not resume: {self.refused}"
            try:
                result = self.app.submit_many(events, batch_id=batch_id)
            except BackendUnavailable as exc:
                cause = type(exc.__cause__ or exc).__name__
                self.refused[cause] = self.refused.get(cause, 0) + 1
                time.sleep(0.02)
                continue
            # A resend answers what each shard applied the first time: the whole batch.
            assert result.applied + result.duplicates == BATCH
            self.acked.extend(members)
            return


def board_members(app: Seasons) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in day_keys(app):
        for member, score in app.client.zrange(key, 0, -1, withscores=True):
            name = member.decode() if isinstance(member, bytes) else member
            assert name not in out  # a member is on one shard only
            out[name] = score
    return out


def test_a_shards_master_killed_during_ingest_loses_and_doubles_nothing(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    config = settings(cluster.url, tmp_path, "kill", wait_replicas=1, wait_timeout_ms=300)
    with Seasons(config) as app:
        writer = Writer(app)
        deadline = time.monotonic() + TIME_LIMIT
        while len(writer.acked) < 900:
            writer.batch(deadline)
        victim = cluster.master_of(day_keys(app)[0])
        cluster.node(victim).kill()
        while len(writer.acked) < 1_800:
            writer.batch(deadline)
        assert cluster.master_of(day_keys(app)[0]) != victim  # a replica took over
        held = board_members(app)
        page = app.top(BOARD, "day", limit=5)
    cluster.restart(victim)
    assert set(held) == set(writer.acked) and set(held.values()) == {1.0}
    assert page.total == len(writer.acked)
    print(f"\nsharded failover, WAIT 1: {len(writer.acked)} acknowledged, refused meanwhile: "
          f"{writer.refused}")  # fmt: skip


def test_a_shards_slot_moving_during_ingest_loses_and_doubles_nothing(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    with Seasons(settings(cluster.url, tmp_path, "move")) as app:
        writer = Writer(app)
        stop = threading.Event()
        failed: list[BaseException] = []

        def write() -> None:
            try:
                while not stop.is_set():
                    writer.batch(time.monotonic() + TIME_LIMIT)
            except BaseException as exc:  # the test fails with it below
                failed.append(exc)

        thread = threading.Thread(target=write)
        thread.start()
        try:
            deadline = time.monotonic() + TIME_LIMIT
            while len(writer.acked) < 600:
                assert time.monotonic() < deadline and thread.is_alive(), failed
                time.sleep(0.01)
            key = day_keys(app)[1]
            source = cluster.master_of(key)
            target = next(p for p in cluster.master_ports() if p != source)
            moved = cluster.migrate_slot(key_slot(key.encode()), target, pause=0.02)
            after = len(writer.acked)
            while len(writer.acked) < after + 600:
                assert time.monotonic() < deadline and thread.is_alive(), failed
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join(timeout=60)
        assert not failed
        assert cluster.master_of(key) == target and moved >= 3
        held = board_members(app)
    assert set(held) == set(writer.acked) and set(held.values()) == {1.0}


def test_reads_of_a_board_whose_shard_is_down_answer_503(tmp_path: Path) -> None:
    try:
        find_redis_cli()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with LocalCluster(masters=3, replicas=0) as bare:
        config = settings(bare.url, tmp_path, "down")
        with Seasons(config) as app:
            events = [{"board": BOARD, "member": f"p{i}", "value": i} for i in range(60)]
            app.submit_many(events)
            http = TestClient(create_app(config), client=("127.0.0.1", 4000))
            with http:
                assert http.get(f"/v1/boards/{BOARD}/day").json()["total"] == 60
                bare.kill_master_of(day_keys(app)[2])
                base = f"/v1/boards/{BOARD}/day"
                for got in (
                    *(http.get(base + path) for path in (
                        "", "?offset=20&limit=5", "/members/p7", "/members/p7/around",
                        "/ranks/3/around", "/members/p7/climb?to=1",
                    )),
                    http.post(f"{base}/lookup", json={"members": ["p1", "p2"]}),
                ):  # fmt: skip
                    assert got.status_code == 503, (got.url, got.text)
                    assert got.json()["error"] == "backend_unavailable"
            with pytest.raises(BackendUnavailable):
                app.top(BOARD, "day")
