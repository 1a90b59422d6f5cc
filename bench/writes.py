"""``python -m bench.writes [--quick]``: Redis's time per event of the write path, against the
plain commands that answer the same write.

One ``sum`` board keeping ``day``, ``week`` and ``season`` (weights not 1), batches of 100
events on a pool of members that already have scores and metadata. Four cases: with and
without event ids, with and without metadata (the same object a member already has, as games
send it with every score). Seasons writes through ``Seasons.submit_many`` (one ``EVALSHA`` of
``write.lua`` per batch); the plain side sends what the Fastify + ioredis peer of
``bench/http_peers.py`` sends for ``POST /v1/scores``: one MULTI of ``ZADD NX`` of the event ids,
``ZINCRBY`` per window per event, one ``HSET`` of the metadata, ``EXPIREAT`` of each board, the
trim of the event ids and the batch record. Both write the same events under two namespaces,
and the boards they leave are compared score by score before any figure is believed.

Redis's time is ``INFO commandstats``' usec, a script's commands counted once, inside the
script (:func:`bench.common.command_usec`): the main thread's work, which does not scale
out. The profile splits a batch's script time by running parts of it on the same argument:
``cjson.decode`` of the argument alone, and the script in check-only mode (the argument read
and checked, the batch id looked up and every event checked, nothing written).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

from bench.common import BOARD, Calendar, Section, command_usec, own_redis
from seasons import Seasons
from seasons import windows as win
from seasons.config import Settings
from seasons.connection import make_client
from seasons.events import validate_batch
from seasons.keys import Keys
from seasons.scripts import script
from seasons.write_script import DEDUPE_WINDOW, script_args
from seasons.writes import batch_digest

NS_SEASONS = "bench-writes-seasons"
NS_PLAIN = "bench-writes-plain"
NS_FLOOR = "bench-writes-floor"
EVENTS_PER_BATCH = 100
MEMBERS = 10_000
FULL_BATCHES = 1000  # per case, and as many of the plain MULTI
QUICK_BATCHES = 150
TARGET = 1.5  # Seasons / plain usec per event, at most
CASES = {  # name -> (event ids, metadata)
    "plain events": (False, False),
    "event ids": (True, False),
    "metadata": (False, True),
    "event ids + metadata": (True, True),
}
SEPARATORS = (",", ":")  # metadata JSON as Seasons stores it: compact, sorted keys
PROFILED = 50  # batches per case whose script call is split into sections
STANDING_BATCHES = 200  # batches per tie rule written without, then with standings


def metadata(m: int) -> dict[str, Any]:
    return {"clan": f"clan-{m % 97}", "level": m % 60 + 1, "vip": m % 7 == 0}


def make_batch(rnd: random.Random, ids: bool, meta: bool) -> list[dict[str, Any]]:
    out = []
    for _ in range(EVENTS_PER_BATCH):
        m = rnd.randrange(MEMBERS)
        ev: dict[str, Any] = {
            "board": BOARD,
            "member": f"player:{m:06d}",
            "value": rnd.randint(1, 50),
        }
        if ids:
            ev["event_id"] = uuid.UUID(int=rnd.getrandbits(128)).hex
        if meta:
            ev["metadata"] = metadata(m)
        out.append(ev)
    return out


def seed(write: Callable[[list[dict[str, Any]]], object]) -> None:
    """Every member on the boards with its metadata (the steady state of a live board), in
    batches of 1000."""
    events = [
        {"board": BOARD, "member": f"player:{m:06d}", "value": 1, "metadata": metadata(m)}
        for m in range(MEMBERS)
    ]
    for i in range(0, MEMBERS, 1000):
        write(events[i : i + 1000])


class Plain:
    """The Fastify peer's write as redis-py sends it: one MULTI per batch."""

    def __init__(self, client: Any, settings: Settings, calendar: Calendar):
        keys = Keys(settings.namespace)
        cfg = settings.boards[BOARD]
        self.client = client
        self.now = int(calendar.now.timestamp())
        self.boards = []  # (key, weight, expire_at)
        for window in win.board_windows(cfg):
            period = window.period_of_day(calendar.today, settings)
            assert period is not None
            weight = window.weight(cfg, calendar.today, settings)
            self.boards.append((keys.window(BOARD, window.name, period.id), weight,
                                win.expire_at(period, settings)))  # fmt: skip
        self.events, self.meta = keys.events(BOARD), keys.meta(BOARD)
        self.batches, self.results = keys.batches(BOARD), keys.batch_results(BOARD)
        assert len(self.boards) == 3  # FLOOR writes three boards
        self.floor = client.register_script(FLOOR)

    def write(self, batch: list[dict[str, Any]]) -> None:
        tx = self.client.pipeline(transaction=True)
        ids = {ev["event_id"]: self.now for ev in batch if "event_id" in ev}
        if ids:
            tx.zadd(self.events, ids, nx=True)
        data = {}
        for ev in batch:
            for key, weight, _ in self.boards:
                tx.zincrby(key, weight * ev["value"], ev["member"])
            if "metadata" in ev:
                data[ev["member"]] = json.dumps(
                    ev["metadata"], separators=SEPARATORS, sort_keys=True
                )
        if data:
            tx.hset(self.meta, mapping=data)
        for key, _, expire_at in self.boards:
            tx.expireat(key, expire_at)
        dedupe = int(DEDUPE_WINDOW.total_seconds())
        tx.zremrangebyscore(self.events, "-inf", self.now - dedupe)
        tx.expire(self.events, dedupe)
        batch_id = uuid.uuid4().hex
        tx.zadd(self.batches, {batch_id: self.now})
        tx.hset(self.results, batch_id, f"{len(batch)} 0")
        tx.expire(self.batches, dedupe)
        tx.expire(self.results, dedupe)
        tx.execute()

    def scripted(self, batch: list[dict[str, Any]]) -> None:
        """The same commands as :meth:`write` for a batch without event ids or metadata,
        run by a minimal script (FLOOR): what Redis counts for them inside any script."""
        argv: list[Any] = [self.now, int(DEDUPE_WINDOW.total_seconds()), uuid.uuid4().hex]
        argv += [expire_at for _, _, expire_at in self.boards]
        for ev in batch:
            argv += [ev["member"], *(repr(float(w * ev["value"])) for _, w, _ in self.boards)]
        keys = [k for k, _, _ in self.boards] + [self.events, self.batches, self.results]
        self.floor(keys=keys, args=argv)


# The plain MULTI of a batch without event ids or metadata, as a script that only runs it.
FLOOR = """
for i = 7, #ARGV, 4 do
  for b = 1, 3 do redis.call('ZINCRBY', KEYS[b], ARGV[i + b], ARGV[i]) end
end
for b = 1, 3 do redis.call('EXPIREAT', KEYS[b], ARGV[3 + b]) end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[1] - ARGV[2])
redis.call('EXPIRE', KEYS[4], ARGV[2])
redis.call('ZADD', KEYS[5], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[6], ARGV[3], ((#ARGV - 6) / 4) .. ' 0')
redis.call('EXPIRE', KEYS[5], ARGV[2])
redis.call('EXPIRE', KEYS[6], ARGV[2])
"""


def snapshot(stats: Any) -> tuple[dict[str, int], float]:
    """Microseconds spent in each command so far (:func:`command_stats`), and the CPU time
    of Redis's main thread so far (user + system), in one INFO."""
    info = stats.info("commandstats", "cpu")
    usec = {
        k.removeprefix("cmdstat_"): int(v["usec"])
        for k, v in info.items()
        if k.startswith("cmdstat_")
    }
    return usec, 1e6 * (info["used_cpu_user_main_thread"] + info["used_cpu_sys_main_thread"])


def measure(stats: Any, fn: Callable[[], object]) -> tuple[float, float]:
    """Redis's time in commands while ``fn`` runs (:func:`command_usec`: a script's time
    once), and its main thread's CPU time then (which also counts reading and parsing the
    commands, but no wait for the CPU)."""
    usec, cpu = snapshot(stats)
    fn()
    usec_after, cpu_after = snapshot(stats)
    return command_usec(usec, usec_after), cpu_after - cpu


def median_per_event(batches: list[tuple[float, float]]) -> tuple[float, float]:
    return (
        statistics.median(u for u, _ in batches) / EVENTS_PER_BATCH,
        statistics.median(c for _, c in batches) / EVENTS_PER_BATCH,
    )


def run(url: str, batches: int, calendar: Calendar | None = None) -> Section:
    """The section: ``batches`` batches per case on each side, and the profile."""
    calendar = calendar or Calendar.for_today()
    settings = {ns: calendar.settings(url, ns) for ns in (NS_SEASONS, NS_PLAIN)}
    s = Seasons(settings[NS_SEASONS], clock=calendar.clock())
    client = make_client(settings[NS_PLAIN].redis)
    stats = make_client(settings[NS_PLAIN].redis)
    plain = Plain(client, settings[NS_PLAIN], calendar)
    n_batches = batches
    per_event: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
    profile: dict[str, list[float]] = {}
    samples: dict[str, list[list[dict[str, Any]]]] = {}
    # The plain MULTI's commands run by a minimal script, on boards of their own.
    floored = Plain(client, calendar.settings(url, NS_FLOOR), calendar)
    floor: list[tuple[float, float]] = []
    try:
        seed(s.submit_many)
        seed(plain.write)
        seed(floored.write)
        for name, (ids, meta) in CASES.items():
            rnd = random.Random(name)
            ours: list[tuple[float, float]] = []
            theirs: list[tuple[float, float]] = []
            # Batch by batch, alternating, and the median batch of each side counts: other
            # work on the machine only ever adds time (a command preempted midway counts
            # the wait, and one script call of a batch is likelier to be than a command).
            for _ in range(n_batches):
                batch = make_batch(rnd, ids, meta)
                ours.append(measure(stats, partial(s.submit_many, batch)))
                theirs.append(measure(stats, partial(plain.write, batch)))
                if not (ids or meta):
                    floor.append(measure(stats, partial(floored.scripted, batch)))
            per_event[name] = (median_per_event(ours), median_per_event(theirs))
            samples[name] = [make_batch(rnd, ids, meta) for _ in range(min(PROFILED, batches))]
        mirror = Plain(client, settings[NS_SEASONS], calendar)  # the keys of Seasons' side
        same = all(
            client.zrange(a, 0, -1, withscores=True) == client.zrange(b, 0, -1, withscores=True)
            for (a, _, _), (b, _, _) in zip(mirror.boards, plain.boards, strict=True)
        ) and client.hgetall(mirror.meta) == client.hgetall(plain.meta)
        # The profile and the standings write on Seasons' side only: after the comparison.
        for name, sample in samples.items():
            profile[name] = profile_case(s, sample, calendar.now)
        rnd = random.Random("standings")
        work = [make_batch(rnd, False, False) for _ in range(min(STANDING_BATCHES, batches))]
        standings = standing_cost(url, calendar, stats, work)
    finally:
        s.close()
        client.close()
        stats.close()

    section = Section(
        "Writes: Redis's time per event",
        f"board {BOARD!r} (sum; day, week, season), {MEMBERS:,} members with metadata, "
        f"{n_batches} batches of {EVENTS_PER_BATCH} events per case, each alternating with the "
        "plain MULTI's, the median batch of each; INFO commandstats usec, a script's commands "
        "counted once",
        "usec / event",
    )
    for name, (us, them) in per_event.items():
        section.row(f"{name}: Seasons (write.lua)", us[0], f"main thread CPU {us[1]:.2f}")
        section.row(f"{name}: plain MULTI", them[0], f"main thread CPU {them[1]:.2f}")
    floor_usec, floor_cpu = median_per_event(floor)
    section.row("plain events: the plain MULTI's commands in a script", floor_usec,
                f"main thread CPU {floor_cpu:.2f}")  # fmt: skip
    for name, (us, them) in per_event.items():
        section.ratio(f"{name}: Seasons / plain", us[0] / them[0], "<=", TARGET)
        section.ratio(f"{name}: Seasons / plain, main thread CPU", us[1] / them[1])
    them = per_event["plain events"][1]
    section.ratio("plain events: the same commands in a script / plain", floor_usec / them[0])
    section.ratio("plain events: the same, main thread CPU", floor_cpu / them[1])
    for ties, (without, with_) in standings.items():
        section.row(f"plain events, ties {ties}: Seasons", without)
        section.row(f"plain events, ties {ties}: Seasons with standings", with_)
    for name, usecs in profile.items():
        for (what, _), usec in zip(SECTIONS, usecs, strict=True):
            section.row(f"{name}: {what}", usec / EVENTS_PER_BATCH, "profile")
    section.check("Seasons' boards and metadata equal the plain MULTI's", same)
    return section


def standing_cost(
    url: str, calendar: Calendar, stats: Any, batches: list[list[dict[str, Any]]]
) -> dict[str, tuple[float, float]]:
    """Per tie rule, on a board of its own seeded like the others: Redis's time per event
    of the same batches written without and with their standings (on the season board),
    alternating batch by batch, the median of each. The standings cost the difference."""
    out = {}
    for ties in ("member", "shared", "dense", "earliest"):
        base = calendar.settings(url, f"bench-writes-{ties}")
        cfg = base.boards[BOARD].model_copy(update={"ties": ties})
        with Seasons(base.model_copy(update={"boards": {BOARD: cfg}}), clock=calendar.clock()) as s:
            seed(s.submit_many)
            without, with_ = [], []
            for batch in batches:
                without.append(measure(stats, partial(s.submit_many, batch)))
                with_.append(measure(stats, partial(s.submit_many, batch, standing=True)))
        out[ties] = (median_per_event(without)[0], median_per_event(with_)[0])
    return out


# Where the profile splits a call of write.lua: each section ends where its text begins.
SECTIONS = (
    ("the script's own definitions", "local ok, batch = pcall(parse_batch)"),
    ("parse: decode the batch, check it, read the events", "-- Pass 1: check everything"),
    ("batch id, days' state", "-- The event ids and the members' stored"),
    ("read event ids and metadata (ZMSCORE, HMGET)", "-- What pass 1 found"),
    ("check each event (duplicates, metadata merge)", "-- Pass 2: apply ("),
    ("apply each event (ZINCRBY per board)", "chunked(new_ids"),
    ("write event ids and metadata (ZADD, HSET)", "local applied = writer.settle()"),
    ("trims, EXPIREATs, the batch record", "return answer(applied, duplicates, held_list, banned)"),
)
CLOCK = "__t[#__t + 1] = redis.call('TIME')\n"


def profile_case(s: Seasons, batches: list[list[dict[str, Any]]], now: Any) -> list[float]:
    """Microseconds of each of SECTIONS in a call of write.lua, the smallest over
    ``batches``: a copy of the script reads Redis's clock (TIME) where each section ends."""
    source = script("write").source
    marked = (
        "local __t = {}\n"
        + CLOCK
        + source.replace("return answer(applied, duplicates, held_list, banned)", "")
    )
    for _, text in SECTIONS[:-1]:
        if text not in marked:
            raise LookupError(f"bench.writes: write.lua no longer has {text!r}")
        marked = marked.replace(text, CLOCK + text, 1)
    marked += CLOCK + "return __t\n"
    timed = s.client.register_script(marked)
    best = [float("inf")] * len(SECTIONS)
    for batch in batches:
        valid = validate_batch(batch, s.settings, now)
        k, a = script_args(BOARD, valid, s.settings, s.keys, now, batch_id=uuid.uuid4().hex,
                           digest=batch_digest(valid))  # fmt: skip
        clock = [int(sec) * 1_000_000 + int(us) for sec, us in timed(keys=k, args=a)]
        for i in range(len(SECTIONS)):
            best[i] = min(best[i], clock[i + 1] - clock[i])
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.writes", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_BATCHES} batches per case")
    opts = parser.parse_args(argv)
    with own_redis() as server:
        section = run(server.url, QUICK_BATCHES if opts.quick else FULL_BATCHES)
    print(section.render())
    return 0 if section.correct else 1


if __name__ == "__main__":
    sys.exit(main())
