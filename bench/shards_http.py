"""Sharded boards over HTTP: requests/s of top 10, a member's entry and the page around a
member on boards of S = 1, 3 and 16 shards holding the same members and scores.

``seasons serve`` (one worker, as docs/http-api.md starts it) on one redis-server, and
``wrk -t1 -c32`` in rounds alternating between the boards
(:func:`bench.http_peers.run_wrk`: requests/s, the server's and Redis's CPU per request).
Believed only after the check: a sample of each sharded board's answers is the unsharded
board's, byte for byte.

    .venv/bin/python -m bench.shards_http [--quick]
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path

from bench import http_peers as hp
from bench.common import ROOT, Calendar, Section
from seasons import Seasons
from seasons.config import load_settings

SHARDS = {"s1": 1, "s3": 3, "s16": 16}  # board -> shards
KINDS = ("top", "entry", "around")
MEMBERS, QUICK_MEMBERS = 100_000, 10_000
ROUNDS, QUICK_ROUNDS = 3, 1  # timed rounds per board and kind, after one discarded round
SECONDS, QUICK_SECONDS = 4, 2
SAMPLE = 10


def boards_toml() -> str:
    return "".join(f"[boards.{b}]\nshards = {n}\n" for b, n in SHARDS.items())


def seed(s: Seasons, members: int) -> None:
    """One event per member on every board: the same members and scores (ties among them)."""
    rnd = random.Random(5)
    values = [rnd.randrange(members // 4) for _ in range(members)]
    for board in SHARDS:
        for start in range(0, members, 5_000):
            s.submit_many(
                [{"board": board, "member": f"m{i:06d}", "value": values[i]}
                 for i in range(start, min(members, start + 5_000))]
            )  # fmt: skip


def paths(board: str, members: int, count: int = 2000) -> dict[str, list[str]]:
    rnd = random.Random(33)  # the same requests on every board
    names = [f"m{rnd.randrange(members):06d}" for _ in range(count)]
    base = f"/v1/boards/{board}/day"
    return {
        "top": [f"{base}?limit=10"] * count,
        "entry": [f"{base}/members/{m}" for m in names],
        "around": [f"{base}/members/{m}/around?size=5" for m in names],
    }


def run(url: str, quick: bool = False, calendar: Calendar | None = None, *,
        tiny: bool = False) -> Section:  # fmt: skip
    """The section; ``tiny`` (the smoke test): 2 000 members, rounds of one second."""
    calendar = calendar or Calendar.for_today()
    members = 2_000 if tiny else QUICK_MEMBERS if quick else MEMBERS
    rounds, seconds = (QUICK_ROUNDS, QUICK_SECONDS) if quick or tiny else (ROUNDS, SECONDS)
    seconds = 1 if tiny else seconds
    section = Section(
        "Shards over HTTP: reads of a sharded board against the same board unsharded",
        f"seasons serve (one worker) on one redis-server; day boards of {members:,} members "
        f"(the same members and scores) with S = {', '.join(map(str, SHARDS.values()))}; wrk "
        f"-t1 -c{hp.CONNECTIONS}, {seconds} s per round, {rounds} timed round(s) of each board "
        "and kind alternating after a discarded one: GET top 10, a random member's entry, the "
        "5 entries around it; medians",
        "requests/s",
    )
    wrk, version = hp.ensure_wrk()
    if wrk is None:
        section.notes.append(version)
        return section
    from redis_server import free_port  # bench.common put tests/ on sys.path

    with tempfile.TemporaryDirectory(prefix="seasons-shards-http-") as name:
        tmp = Path(name)
        config = tmp / "seasons.toml"
        config.write_text(hp.settings_toml(calendar, url, tmp / "archive") + boards_toml())
        settings = load_settings(environ={}, path=config)
        with Seasons(settings, clock=calendar.clock()) as s:
            seed(s, members)
            admin = s.client
            redis_pid = int(admin.info("server")["process_id"])
            requests = {b: paths(b, members) for b in SHARDS}
            scripts = {}
            for board, kinds in requests.items():
                for kind, lines in kinds.items():
                    data = tmp / f"{board}-{kind}.txt"
                    data.write_text("\n".join(lines) + "\n")
                    scripts[board, kind] = tmp / f"{board}-{kind}.lua"
                    scripts[board, kind].write_text(
                        hp.LUA_GET % {"file": json.dumps(str(data))} + hp.LUA_COMMON
                    )
            port = free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
            argv = [str(ROOT / ".venv" / "bin" / "seasons"), "serve", "--port", str(port),
                    "--workers", "1"]  # fmt: skip
            tools = hp.Tools(wrk, [], url, redis_pid, admin, hp.Options(seconds=seconds))
            timed: dict[tuple[str, str], list[hp.Round]] = {k: [] for k in scripts}
            with hp.started("seasons serve", argv, port, {**env, "SEASONS_CONFIG": str(config)},
                            tmp / "serve.log") as server:  # fmt: skip
                checked = same_bytes(server.base, requests)
                order = list(scripts)
                for r in range(rounds + 1):
                    for key in order if r % 2 == 0 else list(reversed(order)):
                        tag = f"{key[0]}-{key[1]}{r}"
                        got = hp.run_wrk(wrk, scripts[key], server, seconds, tag, tools)
                        if r > 0:
                            timed[key].append(got)
    section.check(f"{SAMPLE} answers of each sharded board and kind are the unsharded board's "
                  "bytes", checked)  # fmt: skip
    section.check("no errors and no non-2xx answers",
                  all(x.errors == 0 for rs in timed.values() for x in rs))  # fmt: skip
    median = {k: sorted(v, key=lambda x: x.rate)[(rounds - 1) // 2] for k, v in timed.items()}
    for kind in KINDS:
        for board, n in SHARDS.items():
            m = median[board, kind]
            section.row(
                f"{kind}: S={n}", m.rate,
                f"server CPU {m.cpu_us:.0f} µs/request, Redis {m.redis_cmd_us:.0f} µs/request "
                f"(commands), p99 {m.p99_ms:.1f} ms",
            )  # fmt: skip
    section.decimals = 2
    for kind in KINDS:
        flat = median["s1", kind]
        for board, n in SHARDS.items():
            if n > 1:
                section.ratio(f"{kind}: S={n} / unsharded, requests/s",
                              median[board, kind].rate / flat.rate)  # fmt: skip
    return section


def same_bytes(base: str, requests: dict[str, dict[str, list[str]]]) -> bool:
    """The first SAMPLE answers of each kind on each sharded board are the unsharded one's."""
    ok = True
    for board in SHARDS:
        if board == "s1":
            continue
        for kind in KINDS:
            for mine, theirs in zip(requests[board][kind][:SAMPLE],
                                    requests["s1"][kind][:SAMPLE], strict=True):  # fmt: skip
                a, b = hp.fetch(base + mine), hp.fetch(base + theirs)
                ok &= a[0] == 200 and _without_board(a[1]) == _without_board(b[1])
    return ok


def _without_board(body: object) -> object:
    return {k: v for k, v in body.items() if k != "board"} if isinstance(body, dict) else body


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a command
    import argparse

    from bench.common import own_redis

    parser = argparse.ArgumentParser(prog="python -m bench.shards_http",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args(argv)
    with own_redis() as server:
        section = run(server.url, quick=opts.quick)
    print(section.render(), flush=True)
    return 0 if section.correct else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
