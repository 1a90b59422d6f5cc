"""What only a Redis Cluster shows (docs/operations.md#running-on-redis-cluster), on the
session's local cluster: the cluster itself, boards spread over the masters with every key of
a board in its board's slot, and WAIT sent to the master that holds the board. Everything else
runs on both backends in the modules marked ``both_backends``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import RedisCluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import MovedError
from redis_cluster import LocalCluster
from worker_support import Sim, local, season_settings, today

from seasons import Seasons
from seasons.config import Settings, load_settings
from seasons.errors import LockLost, NotReplicated
from seasons.jobs.heartbeat import Heartbeat
from seasons.jobs.locks import locked


def board_on_each_master(cluster: LocalCluster) -> dict[int, str]:
    """master port -> a board name whose hash tag falls in that master's slots."""
    out: dict[int, str] = {}
    ranges = [(int(a), int(b), int(m[1])) for a, b, m, *_ in cluster._slots()]
    n = 0
    while len(out) < len(ranges):
        name = f"b{n}"
        slot = key_slot(name.encode())
        port = next(p for a, b, p in ranges if a <= slot <= b)
        out.setdefault(port, name)
        n += 1
    return out


@pytest.fixture
def cluster(redis_cluster: LocalCluster) -> LocalCluster:
    redis_cluster.flush()
    return redis_cluster


@pytest.fixture
def on_cluster(cluster: LocalCluster, tmp_path: Path) -> Callable[..., Settings]:
    """Settings on the session's cluster (``redis=`` merges into its [redis] table)."""
    toml = tmp_path / "empty.toml"
    toml.write_text("")

    def make(**overrides: Any) -> Settings:
        extra = overrides.pop("redis", {})
        redis_cfg = {"url": cluster.url, "cluster": True, **extra}
        return load_settings(environ={}, path=toml, redis=redis_cfg, **overrides)

    return make


def test_the_local_cluster(cluster: LocalCluster) -> None:
    masters = cluster.master_ports()
    assert len(masters) == 3 and len(cluster.nodes) == 6
    slots = sorted((int(a), int(b)) for a, b, *_ in cluster._slots())
    assert slots[0][0] == 0 and slots[-1][1] == REDIS_CLUSTER_HASH_SLOTS - 1
    assert all(b + 1 == c for (_, b), (c, _) in zip(slots, slots[1:], strict=False))
    for port in masters:
        assert len(cluster.replicas_of(port)) == 1
    client = cluster.client()
    try:
        for n in range(30):
            client.set(f"k{n}", n)
        per_node = [cluster.node_client(p).dbsize() for p in masters]
        assert sum(per_node) == client.dbsize() == 30 and min(per_node) > 0
        cluster.flush()
        assert client.dbsize() == 0
    finally:
        client.close()


def test_boards_spread_over_the_masters_and_each_stays_in_its_slot(
    cluster: LocalCluster, on_cluster: Callable[..., Settings], tmp_path: Path
) -> None:
    placed = board_on_each_master(cluster)
    boards: dict[str, Any] = {}
    for i, name in enumerate(placed.values()):
        boards[name] = (
            {"aggregate": "min", "order": "asc", "ties": "shared", "max_entries": 4}
            if i % 2 else {"week_weights": [1, 1, 1, 1, 1, 2, 2], "season_weights": [1, 2]}
        )  # fmt: skip
    settings = season_settings(on_cluster, tmp_path / "archive", boards=boards)
    sim = Sim(settings, seed=11)
    try:
        # A season played, closed and archived by the worker (multi-board batches), swept.
        for i in range(7):
            sim.play_day(today() + timedelta(days=i), hours=(0.5, 12, 20))
        sim.play_day(today() + timedelta(days=7), hours=(0.5,))
        sim.clock.set(local(today() + timedelta(days=8), 1.25))
        sim.worker.tick(sim.clock())
        sim.worker.sweeper.run(sim.clock())
        for board in boards:
            page = sim.app.top(board, "season", period="S1", limit=1000)
            want = sim.model.ranked(board, "season", "S1")
            assert [(e.rank, e.member, e.score) for e in page.entries] == want
            assert sim.model.ranked(board, "season", "S1")
        ns = settings.namespace
        for port, board in placed.items():
            node = cluster.node_client(port, decode_responses=True)
            try:
                held = set(node.scan_iter(match=f"{ns}:*", count=1000))
            finally:
                node.close()
            board_keys = {k for k in held if k.startswith(f"{ns}:{{")}
            # This master holds its board's keys, all in the board's one slot, and no other's.
            assert {k.split("{", 1)[1].split("}", 1)[0] for k in board_keys} == {board}
            assert {key_slot(k.encode()) for k in board_keys} == {key_slot(board.encode())}
            kinds = {k.split("}:", 1)[1].split(":", 1)[0] for k in board_keys}
            assert {"day", "week", "season", "archive", "meta", "state"} <= kinds
        # Worker keys have no hash tag: each lands in its own name's slot, on any master.
        worker_keys = {k for k in _all_keys(sim.app) if not k.startswith(f"{ns}:{{")}
        assert f"{ns}:job:closes" in worker_keys
    finally:
        sim.close()


def _all_keys(app: Seasons) -> set[str]:
    return set(app.client.scan_iter(match=f"{app.settings.namespace}:*", count=1000))


@contextmanager
def stalled(cluster: LocalCluster, master_port: int) -> Iterator[None]:
    """The master's replicas stop (SIGSTOP): they acknowledge nothing until the block ends."""
    nodes = [cluster.node(p) for p in cluster.replicas_of(master_port)]
    for node in nodes:
        os.kill(node.pid or 0, signal.SIGSTOP)
    try:
        yield
    finally:
        for node in nodes:
            os.kill(node.pid or 0, signal.SIGCONT)


def test_wait_asks_the_master_of_the_board(
    cluster: LocalCluster, on_cluster: Callable[..., Settings]
) -> None:
    """With the replica of one board's master stalled, writes to that board are refused as
    not replicated (and applied once when retried with their event id), while a board on
    another master is acknowledged: WAIT went to each board's own master, on the connection
    that wrote."""
    (port_a, a), (port_b, b), *_ = board_on_each_master(cluster).items()
    settings = on_cluster(boards={a: {}, b: {}}, redis={"wait_replicas": 1, "wait_timeout_ms": 300})
    with Seasons(settings) as app:
        assert app.submit(a, "warm", 1).applied == 1  # scripts loaded, slot map known
        with stalled(cluster, port_a):
            assert app.submit(b, "bob", 2, event_id="e-b").applied == 1
            with pytest.raises(NotReplicated) as refused:
                app.submit(a, "ann", 5, event_id="e-a")
            details = refused.value.details
            assert details == {"replicas": 1, "acknowledged": 0, "batch_id": details["batch_id"]}
            with pytest.raises(NotReplicated):  # a batch on both boards: not acknowledged
                app.submit_many(
                    [{"board": a, "member": "cy", "value": 1}, {"board": b, "member": "cy",
                     "value": 1}]
                )  # fmt: skip
        # Applied on the master all the same: the retry is a duplicate, counted once.
        again = app.submit(a, "ann", 5, event_id="e-a")
        assert (again.applied, again.duplicates) == (0, 1)
        assert app.rank(a, "ann", "day").score == 5  # type: ignore[union-attr]


def test_wait_without_enough_replicas_is_not_acknowledged(
    settings_factory: Callable[..., Settings],
) -> None:
    """On the single test server (no replica at all), likewise."""
    settings = settings_factory(
        boards={"kills": {}}, redis={"wait_replicas": 1, "wait_timeout_ms": 50}
    )
    with Seasons(settings) as app:
        with pytest.raises(NotReplicated, match="only 0 of 1 replicas"):
            app.submit("kills", "ann", 1, event_id="x")
        assert app.rank("kills", "ann", "day").score == 1  # type: ignore[union-attr]
    with Seasons(settings_factory(boards={"kills": {}})) as app:  # without WAIT
        assert app.submit("kills", "ann", 1, event_id="x").duplicates == 1


def test_a_client_of_one_node_is_told_moved(cluster: LocalCluster) -> None:
    """Sanity of the setup: a plain client of the wrong node gets MOVED, the cluster client
    follows it (Seasons uses the latter whenever ``redis.cluster`` is true)."""
    masters = cluster.master_ports()
    key = "seasons:{kills}:meta"
    wrong = next(p for p in masters if p != cluster.master_of(key))
    with pytest.raises(MovedError):
        cluster.node_client(wrong).hset(key, "ann", "{}")
    client: RedisCluster = cluster.client()
    try:
        assert client.hset(key, "ann", "{}") == 1
    finally:
        client.close()


def test_job_locks_and_the_heartbeat_on_the_cluster(
    cluster: LocalCluster, on_cluster: Callable[..., Settings]
) -> None:
    """redis-py's Lock on the cluster client: redis-py registers its scripts, each touches only
    the lock's one key (no hash tag needed), and they are loaded again on a node that lost
    them. One worker holds a lock at a time; only the holder extends it (the TTL replaced) and
    releases it; a lock taken over is LockLost. The heartbeat's compare-and-delete likewise."""
    settings = on_cluster(boards={"kills": {}})
    ttl = timedelta(seconds=5)
    name = "close_day:2035-06-13"
    with Seasons(settings) as first, Seasons(settings) as second:
        key = first.keys.lock(name)
        with locked(first.client, first.keys, name, ttl) as held:
            assert held is not None
            with locked(second.client, second.keys, name, ttl) as other:
                assert other is None  # held by the first worker
            first.client.pexpire(key, 100)
            first.client.script_flush()  # on every master: the lock's scripts are gone
            held.extend()
            assert 4000 < first.client.pttl(key) <= 5000  # a full TTL again, not 100 ms more
            first.client.set(key, "another worker's token", px=5000)  # taken over
            with pytest.raises(LockLost):
                held.extend()
        assert first.client.get(key) == "another worker's token"  # left to its holder
        first.client.delete(key)
        with locked(second.client, second.keys, name, ttl) as held:
            assert held is not None and first.client.exists(key)
        assert not first.client.exists(key)  # released on the way out

        beat = Heartbeat(first.client, settings, first.keys)
        now = datetime.now(UTC)
        beat.beat(now)
        assert beat.stop() and not first.client.exists(first.keys.heartbeat())
        beat.beat(now)
        first.client.set(first.keys.heartbeat(), "another worker's beat", px=5000)
        assert not beat.stop()  # not ours any more: kept
        assert first.client.get(first.keys.heartbeat()) == "another worker's beat"
