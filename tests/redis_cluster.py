"""A real local Redis Cluster for the tests: 3 masters with 1 replica each, on 127.0.0.1.

Six ``redis-server --cluster-enabled yes`` processes (each a :class:`RedisServer` with its own
directory and ``nodes.conf``), joined by ``redis-cli --cluster create ... --cluster-replicas 1``;
ready once every node reports ``cluster_state:ok`` and agrees on the slot map. A small
``cluster-node-timeout`` makes a killed master's replica take over within a few seconds.

Each node also needs its cluster bus port (``port + 10000``) free, and both must stay below
the kernel's ephemeral range so that no client socket takes them meanwhile: ports are drawn
from :data:`PORTS`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import random
import shutil
import socket
import subprocess
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis_server import HOST, RedisServer, find_redis_server

ENV_CLI = "SEASONS_TEST_REDIS_CLI"
BUS_OFFSET = 10000
PORTS = range(12000, 22000)  # bus ports 22000..31999: below the ephemeral range (32768+)
NODE_TIMEOUT_MS = 1000
READY_TIMEOUT = 30.0
MANUAL_FAILOVER_RETRY = 6.0  # Redis abandons a manual failover after 5 s (CLUSTER_MF_TIMEOUT)

_live: weakref.WeakSet[LocalCluster] = weakref.WeakSet()


class ClusterClient(RedisCluster):
    """redis-py's cluster client, with what the tests expect of "the database": DBSIZE counts
    the keys of every master (redis-py asks one node), as FLUSHALL and SCAN already do."""

    def dbsize(self, **kwargs: Any) -> int:
        kwargs.setdefault("target_nodes", RedisCluster.PRIMARIES)
        return int(super().dbsize(**kwargs))


def find_redis_cli() -> str:
    """Path of a ``redis-cli`` binary: ``$SEASONS_TEST_REDIS_CLI``, else the one beside the
    redis-server the tests use (Debian's redis-tools), else on PATH."""
    named = os.environ.get(ENV_CLI)
    if named:
        return named
    server = Path(find_redis_server())
    beside = server.with_name("redis-cli")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    on_path = shutil.which("redis-cli")
    if on_path:
        return on_path
    raise RuntimeError(
        f"no redis-cli found beside {server} or on PATH: set ${ENV_CLI} or run scripts/setup "
        "(it installs redis-tools)"
    )


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def free_cluster_ports(n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` ports that are free with their bus ports (``port + 10000``)."""
    rng = rng or random.Random()
    out: list[int] = []
    while len(out) < n:
        port = rng.choice(PORTS)
        if port in out or port + BUS_OFFSET in out:
            continue
        if _port_free(port) and _port_free(port + BUS_OFFSET):
            out.append(port)
    return out


class LocalCluster:
    """A running local cluster. Use as a context manager or call :meth:`close`.

    ``nodes`` are the six servers (masters first, as ``redis-cli`` was given them: it makes
    the first three masters); :meth:`kill_master_of` SIGKILLs the master serving a key.
    """

    def __init__(self, masters: int = 3, replicas: int = 1):
        self.masters = masters
        self.replicas = replicas
        self.nodes: list[RedisServer] = []
        self._admin: ClusterClient | None = None
        _live.add(self)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # --- addresses and clients ----------------------------------------------------------

    @property
    def url(self) -> str:
        """A startup node's URL: the cluster client discovers the others from it."""
        return self.nodes[0].url

    def client(self, **kwargs: Any) -> ClusterClient:
        """A new cluster client; the caller closes it."""
        startup = [ClusterNode(HOST, n.port) for n in self.nodes if n.running]
        return ClusterClient(startup_nodes=startup, **kwargs)

    def flush(self) -> None:
        """FLUSHALL on every master."""
        if self._admin is None:
            self._admin = self.client()
        self._admin.flushall()

    def node_client(self, port: int, **kwargs: Any) -> redis.Redis:
        return redis.Redis(host=HOST, port=port, socket_timeout=2, **kwargs)

    def node(self, port: int) -> RedisServer:
        return next(n for n in self.nodes if n.port == port)

    def master_ports(self) -> list[int]:
        """Ports of the nodes that currently serve slots, as a running node sees it."""
        out = []
        for slot_range in self._slots():
            out.append(int(slot_range[2][1]))
        return sorted(set(out))

    def master_of(self, key: str) -> int:
        """Port of the master serving ``key``'s slot."""
        slot = self._any_running(lambda c: int(c.execute_command("CLUSTER", "KEYSLOT", key)))
        for start, end, master, *_ in self._slots():
            if int(start) <= slot <= int(end):
                return int(master[1])
        raise RuntimeError(f"no master serves slot {slot}")

    def kill_master_of(self, key: str) -> int:
        """SIGKILL the master serving ``key``; returns its port."""
        port = self.master_of(key)
        self.node(port).kill()
        return port

    def replicas_of(self, master_port: int) -> list[int]:
        """Ports of the replicas the master reports online."""
        c = self.node_client(master_port, decode_responses=True)
        try:
            info = c.info("replication")
        finally:
            c.close()
        return sorted(
            int(v["port"]) for k, v in info.items()
            if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
        )  # fmt: skip

    def manual_failover(self, replica_port: int, timeout: float = READY_TIMEOUT) -> None:
        """CLUSTER FAILOVER on a replica (a graceful switch: no write is lost), and wait until
        it serves its slots and every node agrees."""
        c = self.node_client(replica_port, decode_responses=True)
        try:
            deadline = time.monotonic() + timeout
            retry_at = 0.0
            while c.info("replication")["role"] != "master":
                now = time.monotonic()
                if now > deadline:
                    raise RuntimeError(f"node {replica_port} did not take over in time")
                if now >= retry_at:
                    # Redis abandons a manual failover that does not finish within its own
                    # limit (the master did not pause in time, or the votes came too late, as
                    # on a busy machine) without a word; asking again is safe.
                    c.execute_command("CLUSTER", "FAILOVER")
                    retry_at = now + MANUAL_FAILOVER_RETRY
                time.sleep(0.05)
        finally:
            c.close()
        self.wait_ready(timeout)

    def migrate_slot(self, slot: int, to_port: int, *, pause: float = 0.0) -> int:
        """Move a slot to another master as ``redis-cli --cluster reshard`` does: IMPORTING /
        MIGRATING, then MIGRATE its keys one at a time (``pause`` seconds apart, so that
        clients meet the slot half moved: ASK and TRYAGAIN), then SETSLOT NODE everywhere.
        Returns the number of keys moved."""
        from_port = next(int(m[1]) for a, b, m, *_ in self._slots() if int(a) <= slot <= int(b))
        src = self.node_client(from_port, decode_responses=True)
        dst = self.node_client(to_port, decode_responses=True)
        moved = 0
        try:
            src_id, dst_id = (
                src.execute_command("CLUSTER", "MYID"),
                dst.execute_command("CLUSTER", "MYID"),
            )
            dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            while keys := src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1):
                src.execute_command("MIGRATE", HOST, to_port, "", 0, 5000, "KEYS", *keys)
                moved += len(keys)
                time.sleep(pause)
            others = [p for p in self.master_ports() if p not in (to_port, from_port)]
            for port in [to_port, from_port, *others]:
                c = self.node_client(port)
                try:
                    c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                finally:
                    c.close()
        finally:
            src.close()
            dst.close()
        self.wait_ready()
        return moved

    def restart(self, port: int, timeout: float = READY_TIMEOUT) -> None:
        """Start a killed node again (same port and nodes.conf, empty data): it rejoins as a
        replica of whoever took over its slots. Waits until the cluster is whole again."""
        self.node(port).start()
        self.wait_ready(timeout)
        self._wait_replicas_synced(timeout)

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until every running node says ``cluster_state:ok`` and all agree on the masters."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                views = set()
                for n in self.nodes:
                    if not n.running:
                        continue
                    c = self.node_client(n.port, decode_responses=True)
                    try:
                        info = c.cluster("info")
                        if info.get("cluster_state") != "ok":
                            raise RuntimeError(f"node {n.port}: {info.get('cluster_state')}")
                        slots = c.execute_command("CLUSTER", "SLOTS")
                        views.add(tuple(sorted((s[0], s[1], s[2][1]) for s in slots)))
                    finally:
                        c.close()
                if len(views) == 1:
                    return
                last = f"nodes disagree on the slot map: {views}"
            except (redis.RedisError, RuntimeError) as exc:
                last = str(exc)
            time.sleep(0.1)
        raise RuntimeError(f"cluster not ready within {timeout:.0f}s: {last}")

    def close(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None
        for n in self.nodes:
            n.close()
        self.nodes = []
        _live.discard(self)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalCluster({[n.port for n in self.nodes]})"

    # --- internals ------------------------------------------------------------------------

    def _slots(self) -> list[Any]:
        return list(self._any_running(lambda c: c.execute_command("CLUSTER", "SLOTS")))

    def _any_running(self, call: Any) -> Any:
        error: Exception | None = None
        for n in self.nodes:
            if not n.running:
                continue
            c = self.node_client(n.port, decode_responses=True)
            try:
                return call(c)
            except redis.RedisError as exc:
                error = exc
            finally:
                c.close()
        raise RuntimeError(f"no cluster node answers: {error}")

    def _start(self) -> None:
        cli = find_redis_cli()
        count = self.masters * (1 + self.replicas)
        for attempt in range(3):
            ports = free_cluster_ports(count)
            try:
                for port in ports:
                    self.nodes.append(RedisServer(port=port, args=_node_args()))
                break
            except RuntimeError:
                for n in self.nodes:
                    n.close()
                self.nodes = []
                if attempt == 2:
                    raise
        create = [
            cli, "--cluster", "create", *(f"{HOST}:{n.port}" for n in self.nodes),
            "--cluster-replicas", str(self.replicas), "--cluster-yes",
        ]  # fmt: skip
        done = subprocess.run(
            create, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout}{done.stderr}")
        self.wait_ready()
        self._wait_replicas_synced()

    def _wait_replicas_synced(self, timeout: float = READY_TIMEOUT) -> None:
        """Until every running replica is online at its master, and every master has one
        (WAIT then has someone to wait for); at once for a cluster made without replicas."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            counts = []
            for port in self.master_ports():
                c = self.node_client(port, decode_responses=True)
                try:
                    info = c.info("replication")
                    online = sum(
                        1 for k, v in info.items()
                        if k.startswith("slave") and isinstance(v, dict)
                        and v.get("state") == "online"
                    )  # fmt: skip
                    counts.append(online)
                finally:
                    c.close()
            replicas = sum(1 for n in self.nodes if n.running) - self.masters
            every = min(counts, default=0) > 0 or self.replicas == 0
            if len(counts) == self.masters and sum(counts) == replicas and every:
                return
            time.sleep(0.05)
        raise RuntimeError("cluster replicas did not come online in time")


def _node_args() -> list[str]:
    return [
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",  # inside the node's own directory
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        # A replica's first sync would otherwise wait 5 s for other replicas to join it.
        "--repl-diskless-sync-delay", "0",
    ]  # fmt: skip


@atexit.register
def _close_all() -> None:
    for cluster in list(_live):
        with contextlib.suppress(Exception):
            cluster.close()
