"""Leagues over HTTP: a member's cohort against a page of the same size, as apps ask for them.

``seasons serve`` (one worker, as docs/http-api.md starts it) on a league board of
``members`` members (:func:`bench.leagues.seed_reads`, the board the Python figure reads), and
``wrk -t1 -c32`` in rounds alternating between ``GET /v1/leagues/<board>/members/<m>`` of a
random member and ``GET /v1/boards/<board>/week?limit=30&offset=<o>`` at a random offset
(:func:`bench.http_peers.run_wrk`: requests/s, the server's and Redis's CPU per request).
Believed only after the check: a sample of answers of each equals the Python API's.

    .venv/bin/python -m bench.league_http [--quick]
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import http_peers as hp
from bench.common import BOARD, ROOT, Calendar, Section
from bench.league_close import LEAGUE
from bench.leagues import READ_TARGET, SIZE, LeagueSizes, pool, seed_reads
from seasons import Seasons
from seasons.config import load_settings

KINDS = ("cohort", "page")
ROUNDS, QUICK_ROUNDS = 3, 1  # timed rounds per kind, after one discarded round of each
SECONDS, QUICK_SECONDS = 5, 2
SAMPLE = 10  # answers of each kind checked against the Python API


def league_toml() -> str:
    """The board's league table, as bench.league_close.LEAGUE gives it."""
    lines = [f"[boards.{BOARD}.league]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in LEAGUE.items()]
    return "\n".join(lines) + "\n"


def paths(sizes: LeagueSizes, count: int = 2000) -> dict[str, list[str]]:
    """Each kind's requests: random members' cohorts, pages at random offsets."""
    rnd = random.Random(21)
    names = pool(sizes.members)
    return {
        "cohort": [f"/v1/leagues/{BOARD}/members/{rnd.choice(names)}" for _ in range(count)],
        "page": [f"/v1/boards/{BOARD}/week?limit={SIZE}&offset="
                 f"{rnd.randrange(0, sizes.members - SIZE + 1)}" for _ in range(count)],
    }  # fmt: skip


def run_http(url: str, sizes: LeagueSizes, calendar: Calendar | None = None,
             quick: bool = False) -> Section:  # fmt: skip
    calendar = calendar or Calendar.for_today()
    rounds, seconds = (QUICK_ROUNDS, QUICK_SECONDS) if quick else (ROUNDS, SECONDS)
    section = Section(
        "Leagues over HTTP: a cohort read against a page read",
        f"seasons serve (one worker) on a league board of {sizes.members:,} members (cohorts "
        f"of {SIZE}); wrk -t1 -c{hp.CONNECTIONS}, {seconds} s per round, {rounds} timed "
        "round(s) of each kind alternating after a discarded one: GET /v1/leagues/<board>/"
        f"members/<m> of a random member against GET /v1/boards/<board>/week?limit={SIZE} at "
        "a random offset; medians",
        "requests/s",
    )
    wrk, version = hp.ensure_wrk()
    if wrk is None:
        section.notes.append(version)
        return section
    from redis_server import free_port  # bench.common put tests/ on sys.path

    with tempfile.TemporaryDirectory(prefix="seasons-league-http-") as name:
        tmp = Path(name)
        config = tmp / "seasons.toml"
        config.write_text(hp.settings_toml(calendar, url, tmp / "archive") + league_toml())
        settings = load_settings(environ={}, path=config)
        with Seasons(settings, clock=calendar.clock()) as s:
            seed_reads(s, sizes)
            admin = s.client
            redis_pid = int(admin.info("server")["process_id"])
            requests = paths(sizes)
            scripts = {}
            for kind, lines in requests.items():
                data = tmp / f"{kind}.txt"
                data.write_text("\n".join(lines) + "\n")
                scripts[kind] = tmp / f"{kind}.lua"
                scripts[kind].write_text(
                    hp.LUA_GET % {"file": json.dumps(str(data))} + hp.LUA_COMMON
                )
            port = free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
            argv = [str(ROOT / ".venv" / "bin" / "seasons"), "serve", "--port", str(port),
                    "--workers", "1"]  # fmt: skip
            tools = hp.Tools(wrk, [], url, redis_pid, admin, hp.Options(seconds=seconds))
            timed: dict[str, list[hp.Round]] = {kind: [] for kind in KINDS}
            with hp.started("seasons serve", argv, port, {**env, "SEASONS_CONFIG": str(config)},
                            tmp / "serve.log") as server:  # fmt: skip
                checked = check_answers(s, server.base, requests)
                for r in range(rounds + 1):
                    for kind in KINDS if r % 2 == 0 else tuple(reversed(KINDS)):
                        got = hp.run_wrk(wrk, scripts[kind], server, seconds, f"{kind}{r}", tools)
                        if r > 0:
                            timed[kind].append(got)
    section.check(f"{SAMPLE} answers of each kind equal the Python API's", checked)
    median = {kind: sorted(timed[kind], key=lambda x: x.rate)[(rounds - 1) // 2] for kind in KINDS}
    section.check("no errors and no non-2xx answers",
                  all(x.errors == 0 for rs in timed.values() for x in rs))  # fmt: skip
    for kind in KINDS:
        section.row(f"{kind} read", median[kind].rate)
    for kind in KINDS:
        m = median[kind]
        section.row(f"{kind} read: Redis time", m.redis_cmd_us, "µs/request (commands)")
        section.row(f"{kind} read: server CPU", m.cpu_us, "µs/request")
        section.row(f"{kind} read: p99", m.p99_ms, "ms")
    section.decimals = 1
    section.ratio("cohort / page, requests/s", median["cohort"].rate / median["page"].rate,
                  ">=", READ_TARGET)  # fmt: skip
    redis_us = {kind: median[kind].redis_cmd_us for kind in KINDS}
    section.ratio("cohort / page, Redis time per request",
                  redis_us["cohort"] / max(1e-9, redis_us["page"]))  # fmt: skip
    return section


def check_answers(s: Seasons, base: str, requests: dict[str, list[str]]) -> bool:
    """The first SAMPLE answers of each kind are the Python API's, as JSON."""
    ok = True
    for path in requests["cohort"][:SAMPLE]:
        status, body = hp.fetch(base + path)
        member = path.rsplit("/", 1)[1]
        ok &= status == 200 and body == _json(s.league(BOARD, member))
    for path in requests["page"][:SAMPLE]:
        status, body = hp.fetch(base + path)
        offset = int(path.rsplit("=", 1)[1])
        ok &= status == 200 and body == _json(s.top(BOARD, "week", limit=SIZE, offset=offset))
    return ok


def _json(model: Any) -> Any:
    return json.loads(model.model_dump_json())


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a command
    import argparse

    from bench.common import own_redis
    from bench.leagues import FULL, QUICK

    parser = argparse.ArgumentParser(prog="python -m bench.league_http",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args(argv)
    with own_redis() as server:
        section = run_http(server.url, QUICK if opts.quick else FULL, quick=opts.quick)
    print(section.render(), flush=True)
    return 0 if section.correct else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
