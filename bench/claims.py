"""``python -m bench.claims [--quick] [--aof]``: reward claims per second over HTTP.

``seasons serve --port P`` is started as docs/http-api.md documents it (the console script,
settings from ``SEASONS_CONFIG``: one board, a write token) on the bench's own redis-server
(``--aof``: with ``appendonly yes``, ``appendfsync everysec``), on 127.0.0.1 only. The results
of an ended season (``S1``) are written straight into Redis in the close's format
(docs/contract.md), every member with a reward, since this measures the claims, not the close.

Two kinds, each timed in rounds bounded in time (``--seconds``) and in count (the members):

- first claims: each request claims the next member not yet claimed (the claim script writes,
  then the claim is appended to the season's claims log and fsynced before the answer);
- repeated claims: random members claimed already (it answers the stored claim).

The load is ``wrk -t1 -c16`` where wrk is installed, else an httpx client with 16 concurrent
connections in this process. Checks: every answer is a 200, the claims hash holds one claim per
first-claim request and the claims log one line per claim, and a claim over HTTP equals the
Python API's answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from bench.common import ROOT, Calendar
from bench.http_peers import LUA_COMMON, cpu_seconds, fetch, started
from seasons import Seasons, claimlog
from seasons.config import load_settings

NS = "bench-claims"
BOARD = "kills"
SEASON = "S1"
WRITE_TOKEN = "bench-claims-token"
CONNECTIONS = 16


@dataclass(frozen=True)
class Sizes:
    members: int  # members with a reward: the first claims of all rounds must stay under it
    seconds: float  # per timed round
    rounds: int  # per kind; the best round counts


FULL = Sizes(members=200_000, seconds=5, rounds=3)
QUICK = Sizes(members=50_000, seconds=2, rounds=1)


def settings_toml(calendar: Calendar, url: str, archive: Path) -> str:
    """One board; seasons of 28 days, the first (S1) ended weeks before today; the claims log
    under ``archive``."""
    first = calendar.today - timedelta(days=70)
    return f"""namespace = "{NS}"
timezone = "UTC"
[redis]
url = "{url}"
[archive]
dir = "{archive}"
[seasons]
length_days = 28
anchor = "{first.isoformat()}"
[boards.{BOARD}]
aggregate = "sum"
[api]
write_token = "{WRITE_TOKEN}"
"""


def member(i: int) -> str:
    return f"user:{i:07d}"


def publish(s: Seasons, members: int, *, batch: int = 10_000) -> None:
    """The season's results as the close writes them: member i at rank i + 1, every one with a
    reward (three tiers)."""
    results = s.keys.results(BOARD, SEASON)
    s.client.delete(results, s.keys.claims(BOARD, SEASON))
    tiers = [(1, 10, "gold"), (11, 1_000, "silver"), (1_001, members, "bronze")]
    for start in range(0, members, batch):
        fields = {}
        for i in range(start, min(members, start + batch)):
            reward = next(w for lo, hi, w in tiers if lo <= i + 1 <= hi)
            fields[member(i)] = json.dumps({"rank": i + 1, "score": members - i, "reward": reward})
        s.client.hset(results, mapping=fields)
    summary = {
        "season": SEASON, "board": BOARD, "provisional": False,
        "computed_at": "2026-01-01T00:00:00+00:00", "total": members,
        "tiers": [{"tier": f"{lo}-{hi}", "reward": w, "count": min(hi, members) - lo + 1}
                  for lo, hi, w in tiers],
    }  # fmt: skip
    s.client.hset(results, "", json.dumps(summary))


def claim_path(m: str) -> str:
    return f"/v1/seasons/{SEASON}/rewards/{m}/claim?board={BOARD}"


# --- the load: wrk where installed, else httpx ------------------------------------------------

# Members one a line; `first` walks them in order from the line after the claimed ones (each
# request a member not yet claimed), `again` picks random ones among the claimed. wrk calls
# request() once on its first thread before sending anything (to check the request), so the
# walk starts one line back.
LUA_CLAIM = """
local members = {}
for line in io.lines(%(file)s) do members[#members + 1] = line end
local mode, next_one, claimed = "again", 0, 1
local headers = {["Authorization"] = "Bearer %(token)s"}
init = function(args)
  mode, next_one, claimed = args[1], tonumber(args[2]) - 1, tonumber(args[3])
end
request = function()
  local m
  if mode == "first" then
    next_one = next_one + 1
    m = members[math.max(next_one, 1)]
  else
    m = members[math.random(claimed)]
  end
  return wrk.format("POST", "/v1/seasons/%(season)s/rewards/" .. m .. "/claim?board=%(board)s",
                    headers)
end
"""


@dataclass(frozen=True)
class Round:
    requests: int
    seconds: float
    errors: int
    p50_ms: float
    p99_ms: float

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def wrk_round(
    wrk: str, tmp: Path, base: str, names: Path, mode: str, start: int, claimed: int,
    seconds: float,
) -> Round:  # fmt: skip
    script = tmp / f"claim-{mode}.lua"
    script.write_text(
        LUA_COMMON + LUA_CLAIM % {"file": json.dumps(str(names)), "token": WRITE_TOKEN,
                                  "season": SEASON, "board": BOARD}
    )  # fmt: skip
    argv = [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{max(1, round(seconds))}s", "--latency",
            "--timeout", "10s", "-s", str(script), base + "/",
            "--", mode, str(start), str(claimed)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=seconds + 60)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    raw = json.loads(line.removeprefix("WRKJSON "))
    errors = sum(int(raw[k]) for k in ("status", "connect", "read", "write", "timeout"))
    return Round(int(raw["requests"]), raw["duration_us"] / 1e6, errors,
                 raw["p50_us"] / 1000, raw["p99_us"] / 1000)  # fmt: skip


def httpx_round(
    base: str, mode: str, start: int, claimed: int, seconds: float, limit: int
) -> Round:
    """The same load without wrk: CONNECTIONS concurrent httpx requests, until ``seconds`` have
    passed or ``limit`` requests were sent."""
    import httpx

    rnd = random.Random(start)
    picks = (
        iter(range(start, start + limit))
        if mode == "first"
        else (rnd.randrange(claimed) for _ in range(limit))
    )
    latencies: list[float] = []
    errors = 0

    async def worker(client: httpx.AsyncClient, deadline: float) -> None:
        nonlocal errors
        for i in picks:
            if time.monotonic() > deadline:
                return
            began = time.perf_counter()
            response = await client.post(claim_path(member(i)))
            latencies.append(time.perf_counter() - began)
            errors += response.status_code != 200

    async def load() -> float:
        limits = httpx.Limits(max_connections=CONNECTIONS)
        headers = {"Authorization": f"Bearer {WRITE_TOKEN}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits) as client:
            began = time.monotonic()
            deadline = began + seconds
            await asyncio.gather(*(worker(client, deadline) for _ in range(CONNECTIONS)))
            return time.monotonic() - began

    elapsed = asyncio.run(load())
    latencies.sort()
    n = len(latencies)
    return Round(n, elapsed, errors, latencies[n // 2] * 1000 if n else 0.0,
                 latencies[min(n - 1, int(n * 0.99))] * 1000 if n else 0.0)  # fmt: skip


# --- the run ----------------------------------------------------------------------------------


def run(url: str, sizes: Sizes) -> tuple[str, bool]:
    """The report's text, and whether every check passed."""
    calendar = Calendar.for_today()
    problems: list[str] = []
    wrk = shutil.which("wrk")
    with tempfile.TemporaryDirectory(prefix="seasons-bench-claims-") as tmp_name:
        tmp = Path(tmp_name)
        config = tmp / "seasons.toml"
        config.write_text(settings_toml(calendar, url, tmp / "archive"))
        settings = load_settings(environ={}, path=config)
        names = tmp / "members.txt"
        names.write_text("".join(member(i) + "\n" for i in range(sizes.members)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
        argv = [str(ROOT / ".venv" / "bin" / "seasons"), "serve", "--port", str(_free_port())]
        with Seasons(settings) as s, started("seasons serve", argv, int(argv[-1]),
                                              {**env, "SEASONS_CONFIG": str(config)},
                                              tmp / "serve.log") as server:  # fmt: skip
            publish(s, sizes.members)
            claimed = 0
            best: dict[str, Round] = {}
            cpu: dict[str, float] = {"first": 0.0, "again": 0.0}
            counted: dict[str, int] = {"first": 0, "again": 0}
            for i in range(sizes.rounds + 1):  # the first round warms up, uncounted
                for mode in ("first", "again"):
                    before = cpu_seconds(server.proc.pid)
                    if wrk:
                        got = wrk_round(wrk, tmp, server.base, names, mode, claimed,
                                        max(claimed, 1), sizes.seconds)  # fmt: skip
                    else:
                        limit = sizes.members - claimed if mode == "first" else sizes.members
                        got = httpx_round(server.base, mode, claimed, max(claimed, 1),
                                          sizes.seconds, limit)  # fmt: skip
                    _settle(s)
                    if mode == "first":
                        stored = s.client.hlen(s.keys.claims(BOARD, SEASON))
                        # Requests in flight when the load stopped (or cut off by it) may
                        # still have claimed.
                        slack = 2 * CONNECTIONS
                        if not got.requests <= stored - claimed <= got.requests + slack:
                            problems.append(f"{got.requests} first claims, {stored - claimed} "
                                            "claims stored")  # fmt: skip
                        # The claimed ones are the first `stored` members, in order.
                        edge = s.client.hmget(
                            s.keys.claims(BOARD, SEASON),
                            [member(0), member(stored - 1), member(stored)],
                        )
                        if None in edge[:2] or edge[2] is not None:
                            problems.append(f"the first {stored} members are not the claimed")
                        claimed = stored
                        if claimed + CONNECTIONS >= sizes.members:
                            problems.append("ran out of members: use more, or fewer seconds")
                    if got.errors:
                        problems.append(f"{got.errors} {mode} claims failed")
                    if i == 0:
                        continue
                    cpu[mode] += cpu_seconds(server.proc.pid) - before
                    counted[mode] += got.requests
                    if mode not in best or got.rate > best[mode].rate:
                        best[mode] = got
            status, body = fetch(server.base + claim_path(member(0)), b"", WRITE_TOKEN)
            expected = s.claim(BOARD, SEASON, member(0)).model_dump(mode="json")
            if status != 200 or body != expected:
                problems.append(f"a claim over HTTP ({status}) differs from Seasons.claim")
            # Every first claim was answered after its line was appended: one line each.
            log = claimlog.log_path(settings, BOARD, SEASON)
            logged = sum(1 for _ in log.open("rb")) if log.exists() else 0
            if logged != claimed:
                problems.append(f"{claimed} claims stored, {logged} in the claims log")
    load = f"wrk -t1 -c{CONNECTIONS}" if wrk else f"httpx, {CONNECTIONS} connections"
    lines = [
        "Claims over HTTP",
        f"  seasons serve (1 process) on 127.0.0.1; load: {load}; {sizes.members:,} members "
        f"with a reward; {sizes.rounds} round(s) of {sizes.seconds:g} s per kind after a "
        "warm-up, best round counts",
        f"  {'':28}  {'claims/s':>10}",
    ]
    labels = {"first": "POST claim, first (writes)", "again": "POST claim, already claimed"}
    for mode, label in labels.items():
        r = best[mode]
        per = cpu[mode] / max(1, counted[mode]) * 1e6
        lines.append(f"  {label:28}  {r.rate:>10,.0f}  p50 {r.p50_ms:.2f} ms, "
                     f"p99 {r.p99_ms:.2f} ms; server CPU {per:.0f} us/claim")  # fmt: skip
    ok = not problems
    lines.append(
        "  check: one claim stored per first claim, every answer 200, HTTP equals the Python "
        f"API: {'OK' if ok else 'FAILED -- ' + '; '.join(problems)}"
    )
    return "\n".join(lines), ok


def _settle(s: Seasons, quiet: float = 0.2) -> None:
    """Wait until the claims stop changing: when the load stops, the server still answers
    the requests it had taken."""
    key = s.keys.claims(BOARD, SEASON)
    last = s.client.hlen(key)
    while True:
        time.sleep(quiet)
        now = s.client.hlen(key)
        if now == last:
            return
        last = now


@contextmanager
def redis_server(args: list[str]) -> Iterator[str]:
    """The bench's own redis-server (the test suite's launcher: free port, its own directory),
    with ``args``; its URL."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from redis_server import RedisServer

    with RedisServer(args=args) as server:
        yield server.url


def _free_port() -> int:
    from redis_server import free_port  # redis_server() put tests/ on sys.path

    return free_port()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.claims", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer members, shorter rounds")
    parser.add_argument("--aof", action="store_true", help="Redis with appendonly (everysec)")
    parser.add_argument("--seconds", type=float, default=None, help="per timed round")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.seconds is not None:
        sizes = Sizes(sizes.members, args.seconds, sizes.rounds)
    extra = ["--appendonly", "yes", "--appendfsync", "everysec"] if args.aof else []
    with redis_server(extra) as url:
        text, ok = run(url, sizes)
    print(text + ("\n  note: Redis with appendonly yes, appendfsync everysec" if args.aof else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
