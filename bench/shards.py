"""Section "shards" (only with ``--only shards``): what spreading one board over S hash tags
(``boards.<b>.shards``, seasons.shards) buys in write capacity on a Redis Cluster, and what it
costs in memory.

1. Write capacity, on a local cluster of M = 1, 2, 3 masters without replicas (joined here
   with CLUSTER ADDSLOTSRANGE / MEET: ``redis-cli --cluster create`` wants 3 masters). One
   writer (this process; its own CPU is not what is measured) sends the same stream of
   ``BATCH``-event batches (event ids, value 1, members drawn from ``MEMBERS``) to three
   boards, in slices that alternate between them (the machine's speed drifts):

   - ``flat``: unsharded, one slot, one master;
   - ``six``: ``shards = 6``, its six slots moved beforehand (CLUSTER KEYSLOT, then a slot
     migration) so that each master holds 6 / M of them, as an operator would place them;
   - ``sixteen``: ``shards = 16``, its slots left where CRC16 puts them (information).

   Per board, the busiest master's Redis time per ingested event: ``INFO commandstats``
   (the write scripts' usec and the other commands', a script's own commands counted once,
   bench.common.command_usec) and ``INFO cpu`` (used_cpu_user + used_cpu_sys) deltas. The
   issue's target: busiest(sharded) / flat <= 1.15 / M. A batch that touches several stores
   and could be refused is checked on each first (one more script call per store:
   seasons.writes.refusable); these batches cannot be (ids made by Seasons, events of today,
   no metadata), and the script calls per store per batch are counted (INFO commandstats'
   EVALSHA calls). The same events sent in batches of one store each (one call
   per batch) are timed beside them at M = 1.
   Checks: every acknowledged event is on its board once (the day keys of every store sum to
   the acknowledged count), and each ``six`` store's day key is on the master it was put on.

2. Memory, on one redis-server: ``used_memory`` growth after one event (no id) per member for
   ``Sizes.memory_members`` members, on an unsharded board and on a ``shards = 16`` board.

3. Reads (seasons.shard_reads), on one redis-server: top 10, a member's rank (entry) and the
   page around a member, and both for a member hidden on every board (its self-view), on
   boards of ``Sizes.read_members`` members with S = 1, 3, 16 (the same members and scores);
   per request, redis-server's CPU (INFO cpu), the time in commands (INFO commandstats),
   round trips and commands. Checked first: every S answers as S = 1. Then the same on
   boards with ``ties = "earliest"`` whose members share scores (about ``EARLIEST_RUN`` per
   score, reached within an hour): every read orders runs of equal scores by reach time.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any

from bench.common import ROOT, SCRIPTS, Section, command_stats, command_usec
from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.shards import shard_of, store

BATCH = 1_000
MEMBERS = 100_000
BALANCED = 6  # shards of the placed board: 6 / M per master for M = 1, 2, 3
FALLS = 16  # shards of the board left where CRC16 puts its slots
BOARDS = {"flat": 1, "six": BALANCED, "sixteen": FALLS}
SINGLE = "six_single"  # at M = 1: ``six``'s events, each batch of one store only
MEMORY_BATCH = 5_000


@dataclass(frozen=True)
class Sizes:
    batches: int  # write capacity: batches of BATCH events per board and cluster
    slices: int  # ... sent in this many slices per board, alternating between the boards
    masters: tuple[int, ...]
    memory_members: int
    read_members: int  # reads: members of each board (one event each)
    requests: int  # reads: requests per kind and board, in ``slices`` alternating slices


FULL = Sizes(120, 12, (1, 2, 3), memory_members=1_000_000, read_members=100_000, requests=2_000)
QUICK = Sizes(30, 6, (1, 2, 3), memory_members=200_000, read_members=20_000, requests=300)
TINY = Sizes(4, 2, (1, 3), memory_members=5_000, read_members=1_000, requests=20)
READ_SHARDS = (1, 3, 16)
# Members hidden on every board of the reads section, whose reads are self-views.
HIDDEN_MEMBERS = 50
# The earliest reads' boards: about this many members share each score.
EARLIEST_RUN = 100


def _tests_on_path() -> None:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def settings(
    url: str, namespace: str, boards: dict[str, int], *, cluster: bool, ties: str = "member"
) -> Settings:
    with tempfile.TemporaryDirectory(prefix="seasons-bench-") as tmp:
        empty = Path(tmp) / "seasons.toml"
        empty.write_text("")
        return load_settings(
            environ={}, path=empty, namespace=namespace, timezone="UTC",
            redis={"url": url, "cluster": cluster},
            boards={b: {"shards": s, "ties": ties} for b, s in boards.items()},
        )  # fmt: skip


def _clock() -> ManualClock:
    """Noon of today (UTC): every event on one day, whatever the run's wall time."""
    return ManualClock(datetime.combine(datetime.now(UTC).date(), dtime(12), tzinfo=UTC))


def stores_of(board: str, shards: int) -> list[str]:
    return [board] if shards == 1 else [store(board, i) for i in range(shards)]


# --- a cluster of any number of masters ------------------------------------------------------


@contextmanager
def masters_only(masters: int) -> Iterator[Any]:
    """A local Redis Cluster of ``masters`` masters and no replicas (tests/redis_cluster.py's
    :class:`LocalCluster`, its nodes joined by hand: redis-cli wants at least 3 masters and
    the test launcher waits for replicas)."""
    _tests_on_path()
    from redis_cluster import HOST, LocalCluster, RedisServer, _node_args, free_cluster_ports

    class Masters(LocalCluster):
        def _start(self) -> None:
            for attempt in range(3):
                try:
                    for port in free_cluster_ports(self.masters):
                        self.nodes.append(RedisServer(port=port, args=_node_args()))
                    break
                except RuntimeError:
                    for n in self.nodes:
                        n.close()
                    self.nodes = []
                    if attempt == 2:
                        raise
            share = 16384 // self.masters
            for i, n in enumerate(self.nodes):
                c = self.node_client(n.port)
                try:
                    c.execute_command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
                    last = 16383 if i == self.masters - 1 else (i + 1) * share - 1
                    c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
                    if i:
                        c.execute_command("CLUSTER", "MEET", HOST, self.nodes[0].port)
                finally:
                    c.close()
            self.wait_ready()

    with Masters(masters=masters, replicas=0) as cluster:
        yield cluster


def place(cluster: Any, keys: list[str]) -> dict[str, int]:
    """Move the slot of ``keys[i]`` to master ``i mod M`` (CLUSTER KEYSLOT, then
    :meth:`LocalCluster.migrate_slot` where it is elsewhere): each master then holds an equal
    share. Returns key -> port."""
    ports = cluster.master_ports()
    out = {}
    for i, key in enumerate(keys):
        want = ports[i % len(ports)]
        if cluster.master_of(key) != want:
            slot = cluster._any_running(
                lambda c, k=key: int(c.execute_command("CLUSTER", "KEYSLOT", k))
            )
            cluster.migrate_slot(slot, want)
        out[key] = want
    return out


# --- measuring the masters -------------------------------------------------------------------


@dataclass
class Spent:
    """What one board cost each master: µs in commands (command_usec), µs in scripts, CPU s."""

    usec: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    scripts: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    cpu: dict[int, float] = field(default_factory=lambda: defaultdict(float))
    # per slice: the busiest master's command µs (for the slice-by-slice ratios)
    slices: list[float] = field(default_factory=list)
    events: int = 0
    calls: int = 0  # write script calls (EVALSHA) on every master
    batches: int = 0
    # port -> command -> µs: what ran inside the scripts (Seasons sends nothing else)
    commands: dict[int, dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float))
    )

    def inner(self, port: int) -> dict[str, float]:
        """The commands the scripts ran on ``port`` (µs), most expensive first."""
        rows = {
            n: u for n, u in self.commands[port].items()
            if n not in SCRIPTS and n not in ("info", "exec", "multi") and u > 0
            and not n.startswith(("cluster", "script", "config", "slowlog", "migrate"))
        }  # fmt: skip
        return dict(sorted(rows.items(), key=lambda r: -r[1]))

    def busiest(self, what: str = "usec") -> tuple[int, float]:
        table = getattr(self, what)
        port = max(table, key=lambda p: table[p])
        return port, table[port]


def _snapshot(nodes: dict[int, Any]) -> dict[int, tuple[dict[str, int], float, int]]:
    """Per master: command µs, CPU seconds, EVALSHA calls."""
    out = {}
    for port, c in nodes.items():
        stats = command_stats(c)
        cpu = c.info("cpu")
        calls = int(c.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
        out[port] = (stats, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), calls)
    return out


def _script_usec(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(after.get(n, 0) - before.get(n, 0) for n in SCRIPTS)


def stream(batches: int, seed: int) -> list[list[tuple[str, str]]]:
    """``batches`` batches of (member, event id): the one stream every board is sent."""
    rnd = random.Random(seed)
    return [
        [(f"p{rnd.randrange(MEMBERS):06d}", f"e{k}-{i}") for i in range(BATCH)]
        for k in range(batches)
    ]


def single_store(batches: list[list[tuple[str, str]]], shards: int) -> list[list[tuple[str, str]]]:
    """The same events regrouped into batches of BATCH events of one shard each."""
    by_shard: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for batch in batches:
        for m, e in batch:
            by_shard[shard_of(m, shards)].append((m, e))
    out = []
    for events in by_shard.values():
        out += [events[i : i + BATCH] for i in range(0, len(events), BATCH)]
    random.Random(0).shuffle(out)
    return out


def _slices(n: int, k: int) -> list[range]:
    k = max(1, min(k, n))
    bounds = [n * i // k for i in range(k + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(k)]


@dataclass
class Capacity:
    masters: int
    spent: dict[str, Spent]
    placed: dict[str, dict[int, int]]  # board -> port -> shards on it
    passes: dict[str, float]  # board -> script calls per store a batch touches
    checks: list[tuple[str, bool]]


def capacity(masters: int, sizes: Sizes) -> Capacity:
    namespace = f"bench-shards-{masters}"
    with masters_only(masters) as cluster:
        app = Seasons(settings(cluster.url, namespace, {**BOARDS, SINGLE: BALANCED},
                               cluster=True), clock=_clock())  # fmt: skip
        today = app.clock().date()
        ports = cluster.master_ports()
        nodes = {p: cluster.node_client(p, decode_responses=True) for p in ports}
        raw = {p: cluster.node_client(p) for p in ports}
        try:
            six = [app.keys.day(s, today) for s in stores_of("six", BALANCED)]
            where = place(cluster, six)
            placed: dict[str, dict[int, int]] = {}
            for board, shards in BOARDS.items():
                count: dict[int, int] = defaultdict(int)
                for s in stores_of(board, shards):
                    count[cluster.master_of(app.keys.day(s, today))] += 1
                placed[board] = dict(count)
            batches = stream(sizes.batches, seed=masters)
            plans: dict[str, list[list[tuple[str, str]]]] = {b: batches for b in BOARDS}
            if masters == 1:
                plans[SINGLE] = single_store(batches, BALANCED)
            acked = dict.fromkeys(plans, 0)
            for board in plans:  # warm-up: connections, slot map, the script on every master
                warm = [{"board": board, "member": f"w{i}", "value": 1} for i in range(200)]
                acked[board] += app.submit_many(warm).applied
            spent = {b: Spent() for b in plans}
            names = list(plans)
            for k in range(sizes.slices):
                order = names[k % len(names) :] + names[: k % len(names)]
                for board in order:
                    todo = [plans[board][i] for i in _slices(len(plans[board]), sizes.slices)[k]]
                    gc.collect()
                    before = _snapshot(nodes)
                    for pairs in todo:
                        got = app.submit_many(
                            [{"board": board, "member": m, "value": 1, "event_id": e}
                             for m, e in pairs]
                        )  # fmt: skip
                        acked[board] += got.applied
                        spent[board].events += got.applied
                        spent[board].batches += 1
                    after = _snapshot(nodes)
                    worst = 0.0
                    for p in ports:
                        (s0, c0, n0), (s1, c1, n1) = before[p], after[p]
                        spent[board].calls += n1 - n0
                        used = command_usec(s0, s1)
                        spent[board].usec[p] += used
                        spent[board].scripts[p] += _script_usec(s0, s1)
                        spent[board].cpu[p] += c1 - c0
                        worst = max(worst, used)
                        for name, usec in s1.items():
                            spent[board].commands[p][name] += usec - s0.get(name, 0)
                    spent[board].slices.append(worst)
            share = {}
            for board in ("six", "sixteen"):
                stores = stores_of(board, BOARDS[board])
                got_calls = spent[board]
                share[board] = got_calls.calls / (got_calls.batches * len(stores))
            checks = []
            for board in plans:
                held = 0.0
                for s in stores_of(board, BOARDS.get(board, BALANCED)):
                    key = app.keys.day(s, today)
                    held += sum(v for _, v in app.client.zrange(key, 0, -1, withscores=True))
                label = (
                    f"M={masters} {board}: the day keys of its stores sum to its "
                    f"{acked[board]:,} acknowledged events"
                )
                checks.append((label, held == acked[board]))
            on_place = all(bool(raw[p].exists(k)) for k, p in where.items())
            checks.append((f"M={masters}: each six store's day key on the master it was put on",
                           on_place))  # fmt: skip
        finally:
            for c in [*nodes.values(), *raw.values()]:
                c.close()
            app.close()
    return Capacity(masters, spent, placed, share, checks)


def capacity_section(sizes: Sizes) -> Section:
    section = Section(
        "Shards: write capacity on a cluster",
        f"local Redis Cluster of M masters (no replicas); one writer, submit_many batches of "
        f"{BATCH:,} events (event ids, value 1, members of {MEMBERS:,}), {sizes.batches} "
        f"batches per board in {sizes.slices} alternating slices; the busiest master's Redis "
        f"time per ingested event: INFO commandstats (scripts + other commands) and INFO cpu "
        f"(user + sys); board six's 6 slots moved first so each master holds 6/M of them (what "
        f"an operator does: CLUSTER KEYSLOT, then a reshard of those slots), board sixteen's "
        f"16 left where CRC16 puts them",
        "µs / event",
        decimals=2,
    )
    for m in sizes.masters:
        got = capacity(m, sizes)
        flat = got.spent["flat"]
        _, flat_usec = flat.busiest()
        _, flat_cpu = flat.busiest("cpu")
        base = flat_usec / flat.events
        base_cpu = flat_cpu * 1e6 / flat.events
        for board in got.spent:
            sp = got.spent[board]
            port, usec = sp.busiest()
            _, cpu = sp.busiest("cpu")
            scripts = sp.scripts[port]
            per_master = ", ".join(f"{sp.usec[p] / sp.events:.1f}" for p in sorted(sp.usec))
            note = (
                f"CPU {cpu * 1e6 / sp.events:.2f} µs/event; scripts "
                f"{scripts / max(usec, 1):.0%} of it; per master {per_master}"
            )
            inner = sp.inner(port)
            lua = scripts - sum(inner.values())
            top = ", ".join(f"{n} {u / sp.events:.1f}" for n, u in list(inner.items())[:4])
            note += f"; Lua's own {lua / sp.events:.1f}, commands in it: {top}"
            if board in got.placed:
                note += "; shards per master " + "/".join(
                    str(got.placed[board].get(p, 0)) for p in sorted(sp.usec)
                )
            if board in got.passes:
                note += f"; {got.passes[board]:.2f} script calls per store a batch touches"
            label = {"flat": "unsharded", "six": "S=6 placed", "sixteen": "S=16 as CRC16 puts",
                     SINGLE: "S=6, one-store batches"}[board]  # fmt: skip
            section.row(f"M={m} {label}", usec / sp.events, note)
        six = got.spent["six"]
        goal = 1.15 / m
        section.ratio(f"M={m} S=6 / unsharded, busiest commandstats",
                      six.busiest()[1] / six.events / base, "<=", goal)  # fmt: skip
        section.ratio(f"M={m} S=6 / unsharded, busiest CPU",
                      six.busiest("cpu")[1] * 1e6 / six.events / base_cpu, "<=", goal)  # fmt: skip
        slices = [a / b for a, b in zip(six.slices, flat.slices, strict=True) if b > 0]
        if slices:
            section.ratio(f"M={m} S=6 / unsharded, median of slices (commandstats)",
                          statistics.median(slices))  # fmt: skip
        sixteen = got.spent["sixteen"]
        section.ratio(f"M={m} S=16 / unsharded, busiest commandstats",
                      sixteen.busiest()[1] / sixteen.events / base)  # fmt: skip
        section.ratio(f"M={m} S=16 / unsharded, busiest CPU",
                      sixteen.busiest("cpu")[1] * 1e6 / sixteen.events / base_cpu)  # fmt: skip
        if SINGLE in got.spent:
            one = got.spent[SINGLE]
            for what, unit in (("usec", "commandstats"), ("cpu", "CPU")):
                mixed = six.busiest(what)[1] / six.events / (one.busiest(what)[1] / one.events)
                section.ratio(f"M={m} S=6 mixed / one-store batches, {unit}", mixed)
        for label, ok in got.checks:
            section.check(label, ok)
    section.notes.append(
        "a sharded batch costs each master its share of the events plus one script call per "
        "store it touches (two when it could be refused and is checked first: a caller's batch "
        "id, metadata, a past day; these batches have none)"
    )
    section.notes.append(
        "commandstats counts wall time inside commands, including time the redis-server thread "
        "waited for a core: on a busy 2-core machine the unsharded board's long calls (1,000 "
        "events each) are preempted more, so its µs run above its CPU; the CPU ratios are the "
        "sounder ones there"
    )
    return section


# --- memory ----------------------------------------------------------------------------------


def _settle(client: Any) -> None:
    """Finish every sorted set's incremental rehash (bench.memory.settle) before used_memory."""
    from bench.memory import settle

    for key in client.scan_iter(count=1000, _type="zset"):
        settle(client, key)


def memory_section(url: str, sizes: Sizes) -> Section:
    import redis

    n = sizes.memory_members
    admin = redis.Redis.from_url(url, socket_timeout=600)  # FLUSHALL of 1M members: seconds
    measured: dict[int, int] = {}
    checks = []
    try:
        for shards in (1, FALLS):
            admin.flushall()
            gc.collect()
            time.sleep(0.2)
            before = int(admin.info("memory")["used_memory"])
            board = "mem"
            app = Seasons(settings(url, "bench-shard-mem", {board: shards}, cluster=False),
                          clock=_clock())  # fmt: skip
            try:
                for start in range(0, n, MEMORY_BATCH):
                    app.submit_many(
                        [{"board": board, "member": f"m{i:07d}", "value": 1 + i % 1000}
                         for i in range(start, min(n, start + MEMORY_BATCH))]
                    )  # fmt: skip
                today = app.clock().date()
                held = sum(admin.zcard(app.keys.day(s, today)) for s in stores_of(board, shards))
                checks.append((f"S={shards}: {held:,} members on the day keys of {n:,}", held == n))
            finally:
                app.close()
            _settle(admin)
            measured[shards] = int(admin.info("memory")["used_memory"]) - before
        admin.flushall()
    finally:
        admin.close()
    section = Section(
        "Shards: memory",
        f"used_memory growth on one redis-server after one event (no event id) per member for "
        f"{n:,} members, day + week + season keys, every sorted set's rehash finished",
        "bytes/member",
        decimals=1,
    )
    section.row("unsharded", measured[1] / n)
    section.row(f"S={FALLS}", measured[FALLS] / n,
                f"{measured[FALLS] - measured[1]:+,} bytes in all")  # fmt: skip
    section.ratio(f"S={FALLS} / unsharded", measured[FALLS] / measured[1])
    for label, ok in checks:
        section.check(label, ok)
    return section


# --- reads -----------------------------------------------------------------------------------


@contextmanager
def round_trips() -> Iterator[list[int]]:
    """Counts the round trips sent while ``counter[0]`` is set (``counter[1]``): each batch
    of commands Seasons' own connections send at once (seasons.executor), and each packed
    send of redis-py (a command, or a pipeline)."""
    from redis.connection import AbstractConnection

    from seasons import executor

    counter = [0, 0]
    sent = AbstractConnection.send_packed_command
    roundtrip = executor._Socket._roundtrip

    def counted_send(self: Any, command: Any, check_health: bool = True) -> None:
        counter[1] += counter[0]
        sent(self, command, check_health)

    def counted_roundtrip(self: Any, commands: Any) -> Any:
        counter[1] += counter[0]
        return roundtrip(self, commands)

    AbstractConnection.send_packed_command = counted_send  # type: ignore[method-assign]
    executor._Socket._roundtrip = counted_roundtrip  # type: ignore[method-assign]
    try:
        yield counter
    finally:
        AbstractConnection.send_packed_command = sent  # type: ignore[method-assign]
        executor._Socket._roundtrip = roundtrip  # type: ignore[method-assign]


def _cpu(client: Any) -> float:
    """redis-server's CPU seconds so far (INFO cpu: user + sys, getrusage's µs)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _answer(got: Any) -> Any:
    """A read's answer without the board's name (each S is its own board)."""
    if got is None:
        return None
    dumped = got.model_dump()
    dumped.pop("board", None)
    return dumped


def reads_section(url: str, sizes: Sizes, *, ties: str = "member") -> Section:
    """What reads cost at each S. ``ties = "earliest"``: scores of a game with few distinct
    ones (about EARLIEST_RUN members share each), reached over an hour, so that every read
    orders runs of equal scores over the shards by their reach times."""
    import redis

    n = sizes.read_members
    admin = redis.Redis.from_url(url, socket_timeout=600)
    admin.flushall()
    boards = {f"r{s}": s for s in READ_SHARDS}
    clock = _clock()
    app = Seasons(settings(url, "bench-shard-reads", boards, cluster=False, ties=ties), clock=clock)
    rnd = random.Random(7)
    earliest = ties == "earliest"
    top = max(1, n // EARLIEST_RUN) if earliest else 10**6
    scores = [rnd.randint(1, top) for _ in range(n)]
    reached = [clock() - timedelta(seconds=rnd.randrange(3_600) if earliest else 0)
               for _ in range(n)]  # fmt: skip
    members = [f"m{i:06d}" for i in range(n)]
    try:
        for board in boards:
            for start in range(0, n, MEMORY_BATCH):
                app.submit_many(
                    [{"board": board, "member": members[i], "value": scores[i],
                      "ts": reached[i]}
                     for i in range(start, min(n, start + MEMORY_BATCH))]
                )  # fmt: skip
        # Members hidden on every board: their reads answer self-views (docs/fair-play.md).
        hidden = members[:: max(1, n // HIDDEN_MEMBERS)][:HIDDEN_MEMBERS]
        for m in hidden:
            app.moderate(m, "hidden", reason="bench: self-views")
        visible = sorted(set(members) - set(hidden))

        def entry(b: str, m: str) -> Any:
            return app.rank(b, m, "day")

        def around(b: str, m: str) -> Any:
            return app.around(b, m, "day", size=5)

        kinds: dict[str, tuple[Callable[[str, str], Any], list[str]]] = {
            "top 10": (lambda b, m: app.top(b, "day", limit=10), visible),
            "rank (entry)": (entry, visible),
            "around a member (size 5)": (around, visible),
            "a hidden member's rank (self-view)": (entry, hidden),
            "around a hidden member (self-view)": (around, hidden),
        }
        shape = (
            f'ties = "earliest", about {EARLIEST_RUN} members per distinct score, reached '
            "within an hour"
            if earliest
            else "scores from 1 to 10^6"
        )
        section = Section(
            "Shards: reads" + (", earliest ties" if earliest else ""),
            f"one redis-server; boards of {n:,} members (one event each, the same on every "
            f"board; {shape}) with S = {', '.join(map(str, READ_SHARDS))}; "
            f"{sizes.requests:,} requests per kind and board through the Python API, in "
            f"{sizes.slices} alternating slices; "
            f"redis-server CPU (INFO cpu) and Redis time in commands (INFO commandstats) per "
            f"request, round trips (batches of commands sent at once) and commands per request",
            "µs / request",
            decimals=1,
        )
        same = True
        for kind, (read, pool) in kinds.items():
            asked = [rnd.choice(pool) for _ in range(sizes.requests)]
            for m in asked[:20]:  # every S answers what the unsharded board does
                first = _answer(read("r1", m))
                same = same and all(_answer(read(b, m)) == first for b in boards)
            for b in boards:  # warm up: scripts loaded, guesses made
                for m in asked[:50]:
                    read(b, m)
            got: dict[str, list[float]] = {b: [0.0] * 5 for b in boards}
            with round_trips() as counter:
                for k, part in enumerate(_slices(len(asked), sizes.slices)):
                    order = list(boards)[k % len(boards) :] + list(boards)[: k % len(boards)]
                    for b in order:
                        gc.collect()
                        cmds0 = int(admin.info("stats")["total_commands_processed"])
                        stats0, cpu0 = command_stats(admin), _cpu(admin)
                        counter[0], counter[1] = 1, 0
                        for i in part:
                            read(b, asked[i])
                        counter[0] = 0
                        cpu1, stats1 = _cpu(admin), command_stats(admin)
                        cmds1 = int(admin.info("stats")["total_commands_processed"])
                        delta = {c: u - stats0.get(c, 0) for c, u in stats1.items()}
                        data = sum(
                            u for c, u in delta.items() if c not in SCRIPTS and c not in (
                                "info", "exec")
                        )  # fmt: skip
                        row = got[b]
                        row[0] += cpu1 - cpu0
                        row[1] += data
                        row[2] += sum(delta.get(c, 0) for c in SCRIPTS)
                        row[3] += counter[1]
                        row[4] += cmds1 - cmds0 - 4  # the four INFO between the counts
            base = got["r1"][0]
            for b, (cpu, data, scripts, trips, cmds) in got.items():
                r = sizes.requests
                note = (
                    f"commands {data / r:.1f} µs (+ scripts {scripts / r:.1f} µs, whose "
                    f"commands are in that); {trips / r:.1f} round trips, {cmds / r:.1f} "
                    f"commands per request"
                )
                section.row(f"{kind}: S={boards[b]}", cpu * 1e6 / r, note)
                if b != "r1":
                    section.ratio(f"{kind}: S={boards[b]} / S=1, redis-server CPU",
                                  cpu / base if base else float("nan"))  # fmt: skip
        section.check("every S answers each read as the unsharded board does (20 each)", same)
    finally:
        app.close()
        admin.flushall()
        admin.close()
    section.notes.append(
        "CPU is the process's (it counts reading and answering each round trip, which commandstats "
        "does not); commandstats leaves out EXEC and INFO and counts a script's commands on their "
        "own lines"
    )
    return section


def dense_section(url: str, sizes: Sizes) -> Section:
    """Why ``ties = "dense"`` is refused on a sharded board (docs/sharding.md): what an exact
    dense rank costs Redis merged over shards, against one ZCOUNT on an unsharded board's
    distinct set. The shards' keys are built by hand here (the settings refuse the
    combination): each shard's distinct set holds its own distinct scores, and two shards
    may hold the same score, so a member's dense rank is the size of the union of every
    shard's distinct scores better than its own, which only reading them all gives."""
    import redis

    n, shards_count = sizes.read_members, FALLS
    admin = redis.Redis.from_url(url, socket_timeout=600)
    admin.flushall()
    rnd = random.Random(11)
    # About ten members per score: a distinct score per ten members.
    scores = {f"m{i:06d}": float(rnd.randrange(n // 10)) for i in range(n)}
    flat = "bench-dense:{flat}:distinct"
    stores = [f"bench-dense:{{d#{i}}}:distinct" for i in range(shards_count)]
    section = Section(
        "Shards: an exact dense rank merged over shards",
        f"one redis-server; {n:,} members, about ten per score ({n // 10:,} distinct "
        f"scores); an unsharded board's distinct set against {shards_count} shards' (each "
        "its own distinct scores); Redis time (INFO commandstats) per dense rank of a member "
        "at the rank shown, and the scores each read takes",
        "µs / rank",
        decimals=1,
    )
    try:
        pipe = admin.pipeline(transaction=False)
        for member, score in scores.items():
            text = repr(score)
            pipe.zadd(flat, {text: score})
            pipe.zadd(stores[shard_of(member, shards_count)], {text: score})
        pipe.execute()
        ordered = sorted(set(scores.values()), reverse=True)
        for target in (10, len(ordered) // 100, len(ordered) // 2):
            s = ordered[target]
            lo = f"({s!r}"
            before = command_stats(admin)
            for _ in range(20):
                want = 1 + int(admin.zcount(flat, lo, "+inf"))
            middle = command_stats(admin)
            for _ in range(20):
                union: set[bytes] = set()
                read = 0
                for key in stores:
                    found = admin.zrangebyscore(key, lo, "+inf")
                    union.update(found)
                    read += len(found)
                got = 1 + len(union)
            after = command_stats(admin)
            one = command_usec(before, middle) / 20
            merged = command_usec(middle, after) / 20
            section.check(f"dense rank {want:,}: the merged union answers it", got == want)
            section.row(f"dense rank {want:,}: unsharded (one ZCOUNT)", one)
            section.row(f"dense rank {want:,}: {shards_count} shards merged", merged,
                        f"{read:,} scores read, {merged / max(one, 1e-9):,.0f}x")  # fmt: skip
    finally:
        admin.flushall()
        admin.close()
    section.notes.append(
        "the merged read grows with the rank (every better distinct score of every shard), "
        "the unsharded one does not: refused at start rather than served at that cost"
    )
    return section


def run(url: str, sizes: Sizes = FULL, *, progress: Callable[[Section], None] | None = None
        ) -> list[Section]:  # fmt: skip
    """The five sections; capacity starts clusters of its own, the others use ``url``."""
    out = []
    makers: list[Callable[[], Section]] = [
        lambda: capacity_section(sizes),
        lambda: memory_section(url, sizes),
        lambda: reads_section(url, sizes),
        lambda: reads_section(url, sizes, ties="earliest"),
        lambda: dense_section(url, sizes),
    ]
    for make in makers:
        out.append(make())
        if progress is not None:
            progress(out[-1])
    return out


if __name__ == "__main__":
    from bench.common import own_redis

    with own_redis() as server:
        for s in run(server.url, QUICK if "--quick" in sys.argv else FULL):
            print("\n" + s.render(), flush=True)
