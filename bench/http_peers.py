"""``python -m bench.http_peers [--quick]``: ``seasons serve`` against a Fastify + ioredis peer.

Both servers run side by side on one machine, one process each, on the same Redis keys:
``seasons serve --port P`` started as the README documents it (settings from the TOML file
named by ``SEASONS_CONFIG``), and ``node bench/peers/fastify_peer.mjs`` (Fastify 5 + ioredis 5,
installed by npm into the git-ignored ``bench/peers/scratch/fastify``, never vendored), which
reads what Seasons wrote and answers the same JSON. Per size, the day board of the ``sum``
board ``kills`` gets N members with metadata, written by Seasons itself. Before any timing the
bench fetches the same requests from both and compares the parsed JSON (and the top 10 with a
plain-Python sort of the events; the writes with the scores a plain-Python model expects).

The load comes from ``wrk -t1 -c32`` in another process (the Debian package; installed with
apt-get when missing and we are root), a small Lua script choosing random members (and, for
``POST /v1/scores``, building 100 events with fresh event ids per request). Per request kind
the rounds alternate Seasons, peer, Seasons, peer, ... after a discarded warm-up round each;
the median round's requests/s counts, with that round's p50 and p99. Exit status 1 only if
the answers differ (or a server fails); a missed target is reported, not an error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis

from bench.common import BOARD, ROOT, SEASON_WEIGHTS, WEEK_WEIGHTS, Calendar, own_redis
from bench.peers.inprocess import DayPlan
from config import Settings, load_settings
from config.settings import WEEKDAYS
from seasons import Seasons

HERE = Path(__file__).resolve().parent
PEER = HERE / "peers" / "fastify_peer.mjs"
NODE_DIR = HERE / "peers" / "scratch" / "fastify"
NPM_PACKAGES = ["fastify@5", "ioredis@5"]
NS = "bench-httpp"
WRITE_TOKEN = "bench-http-peers-write-token"
FULL_SIZES = (100_000, 2_000_000)
QUICK_SIZES = (10_000, 100_000)
CONNECTIONS = 32
TOP = 10
AROUND = 10
EVENTS_PER_POST = 100
TARGETS = 20_000  # random members the load scripts choose from
CHECKS = 12  # random members whose answers are compared before timing
READ_TARGET = 1.2  # Seasons / peer requests/s, every read
WRITE_TARGET = 1.0  # Seasons / peer requests/s, POST /v1/scores
STARTUP_TIMEOUT = 60.0
CONTENDERS = ("Seasons", "peer")
KINDS = {
    "top": f"GET /v1/boards/{BOARD}/day (top {TOP})",
    "around": f"GET .../members/{{m}}/around?size={AROUND}",
    "entry": "GET .../members/{m}",
    "healthz": "GET /healthz",
    "post": f"POST /v1/scores ({EVENTS_PER_POST} events)",
}


# --- what is needed: wrk, node, npm ----------------------------------------------------------


def ensure_wrk() -> tuple[str | None, str]:
    """wrk's path (installing Debian's ``wrk`` as root when it is missing), or why it is not."""
    found = shutil.which("wrk")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing wrk (apt-get install -y wrk) ...", flush=True)
        for argv in (["apt-get", "install", "-y", "-q", "wrk"], ["apt-get", "update", "-q"],
                     ["apt-get", "install", "-y", "-q", "wrk"]):  # fmt: skip
            subprocess.run(argv, capture_output=True, check=False, timeout=600)
            found = shutil.which("wrk")
            if found:
                break
    if found is None:
        return None, "not run: wrk missing (apt-get install wrk)"
    done = subprocess.run([found, "--version"], capture_output=True, text=True, check=False)
    return found, (done.stdout or done.stderr).splitlines()[0].split(" Copyright")[0]


def ensure_peer() -> tuple[list[str], str]:
    """``node fastify_peer.mjs`` with fastify 5 and ioredis 5 installed by npm, or why not."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return [], "not run: node or npm is not on PATH"

    def versions() -> dict[str, str] | None:
        try:
            return {
                name: json.loads((NODE_DIR / "node_modules" / name / "package.json").read_text())[
                    "version"
                ]
                for name in ("fastify", "ioredis")
            }
        except (OSError, ValueError, KeyError):
            return None

    found = versions()
    if found is None or not all(v.startswith("5.") for v in found.values()):
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        print(f"installing {' '.join(NPM_PACKAGES)} into {NODE_DIR} ...", flush=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(NODE_DIR), "--save-exact", "--no-audit",
             "--no-fund", *NPM_PACKAGES],
            capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        found = versions()
        if done.returncode != 0 or found is None:
            tail = " | ".join(done.stderr.strip().splitlines()[-3:])
            return [], f"not run: npm install failed: {tail}"
    node_version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False
    ).stdout
    described = ", ".join(f"{k} {v}" for k, v in found.items())
    return [node, str(PEER)], f"node {node_version.strip()}, {described}"


# --- the data and the two servers -------------------------------------------------------------


def settings_toml(calendar: Calendar, url: str, archive: Path) -> str:
    """The settings file both the bench's own Seasons and ``seasons serve`` read: one ``sum``
    board, the calendar of :class:`bench.common.Calendar` (today weighs 2 in week and season)."""
    week_start = WEEKDAYS[(calendar.today.weekday() - 5) % 7]
    anchor = calendar.today - timedelta(days=22)
    return f"""namespace = "{NS}"
timezone = "UTC"
week_start = "{week_start}"
[redis]
url = "{url}"
[seasons]
length_days = 28
anchor = "{anchor.isoformat()}"
[boards.{BOARD}]
aggregate = "sum"
order = "desc"
week_weights = {WEEK_WEIGHTS}
season_weights = {SEASON_WEIGHTS}
[archive]
dir = "{archive}"
[api]
write_token = "{WRITE_TOKEN}"
"""


def metadata(i: int, name: str) -> dict[str, Any]:
    return {"name": f"Player {name[5:]}", "clan": f"clan-{i % 211}", "level": i % 80 + 1}


def populate(s: Seasons, members: int, *, seed: int = 7, batch: int = 5_000) -> dict[str, int]:
    """One event with metadata per member on today's day board; returns member -> value."""
    rnd = random.Random(seed)
    values = {f"user:{i:07d}": rnd.randint(1, 10_000_000) for i in range(members)}
    names = list(values)
    for start in range(0, members, batch):
        s.submit_many(
            [
                {"board": BOARD, "member": m, "value": values[m], "metadata": metadata(i, m)}
                for i, m in enumerate(names[start : start + batch], start=start)
            ]
        )
    return values


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux /proc); 0.0 where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    """One contender's process, its port and log."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@contextmanager
def started(
    name: str, argv: list[str], port: int, env: dict[str, str], log: Path
) -> Iterator[Server]:
    """Start ``argv`` and wait until it answers ``/healthz``; stopped on leaving."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=log.parent, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
    server = Server(name, proc, port, log)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: {_tail(log)}")
            with suppress(OSError):
                if fetch(server.base + "/healthz")[0] == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not answer /healthz in time: {_tail(log)}")
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def _tail(log: Path) -> str:
    return " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])


def fetch(url: str, body: bytes | None = None, token: str | None = None) -> tuple[int, Any]:
    """One request; its status and parsed JSON body."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


# --- the checks before timing -----------------------------------------------------------------


def post_body(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"events": events}).encode()


def check_answers(
    servers: dict[str, Server], values: dict[str, int], plan: DayPlan, client: Any
) -> list[str]:
    """Where the two servers' answers differ from each other or from plain Python; []: nowhere."""
    problems: list[str] = []
    rnd = random.Random(11)
    names = list(values)
    index = {m: i for i, m in enumerate(names)}
    # Plain Python: highest value first, equal values by member descending (Redis's REV order).
    order = sorted(names, key=lambda m: (values[m], m), reverse=True)
    top = [
        {"rank": r, "member": m, "score": values[m], "metadata": metadata(index[m], m)}
        for r, m in enumerate(order[:TOP], start=1)
    ]
    sample = rnd.sample(names, min(CHECKS, len(names))) + [order[0], order[-1], order[1]]
    requests = [f"/v1/boards/{BOARD}/day?limit={TOP}", "/healthz"]
    for m in sample:
        path = f"/v1/boards/{BOARD}/day/members/{quote(m, safe='')}"
        requests += [path, path + f"/around?size={AROUND}"]
    for m in ("nobody:here", "user:x"):  # not on the board: 404 not_ranked from both
        requests.append(f"/v1/boards/{BOARD}/day/members/{quote(m, safe='')}")
    for path in requests:
        got = {name: fetch(server.base + path) for name, server in servers.items()}
        seasons, peer = got["Seasons"], got["peer"]
        if seasons[0] != peer[0]:
            problems.append(f"GET {path}: status {seasons[0]} (Seasons) vs {peer[0]} (peer)")
        elif seasons[0] != 200:
            if (seasons[1] or {}).get("error") != (peer[1] or {}).get("error"):
                problems.append(f"GET {path}: error {seasons[1]} vs {peer[1]}")
        elif seasons[1] != peer[1]:
            problems.append(f"GET {path}: {_short(seasons[1])} (Seasons) vs {_short(peer[1])}")
    status, page = fetch(servers["Seasons"].base + requests[0])
    if status != 200 or page.get("entries") != top or page.get("total") != len(values):
        problems.append(f"top {TOP} differs from a plain-Python sort of the events")
    for m in sample[:3]:
        status, entry = fetch(
            servers["Seasons"].base + f"/v1/boards/{BOARD}/day/members/{quote(m, safe='')}"
        )
        if status != 200 or entry.get("rank") != order.index(m) + 1:
            problems.append(f"rank of {m}: {entry} vs {order.index(m) + 1} (plain Python)")
    # Writes: the same events (fresh ids) through each; the board deltas a model expects.
    keys = (plan.day_key, plan.week_key, plan.season_key)
    weights = (1.0, plan.week_weight, plan.season_weight)
    for name, server in servers.items():
        members = rnd.sample(names, min(EVENTS_PER_POST, len(names)))
        events: list[dict[str, Any]] = [
            {"board": BOARD, "member": m, "value": 1 + i % 7, "event_id": f"check-{name}-{i}",
             "metadata": metadata(index[m], m)}
            for i, m in enumerate(members)
        ]  # fmt: skip
        before = [client.zmscore(k, members) for k in keys]
        status, answer = fetch(server.base + "/v1/scores", post_body(events), WRITE_TOKEN)
        after = [client.zmscore(k, members) for k in keys]
        ok = status == 200 and isinstance(answer, dict) and set(answer) == {
            "applied", "duplicates", "batch_id"
        } and (answer["applied"], answer["duplicates"]) == (len(events), 0)  # fmt: skip
        if not ok:
            problems.append(f"POST /v1/scores to {name}: {status} {_short(answer)}")
        for key, weight, b, a in zip(keys, weights, before, after, strict=True):
            want = [(x or 0) + e["value"] * weight for x, e in zip(b, events, strict=True)]
            if a != want:
                problems.append(f"POST /v1/scores to {name}: {key} scores are not the model's")
    return problems


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) < 200 else text[:200] + "..."


# --- the load: wrk and its scripts ------------------------------------------------------------

LUA_COMMON = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%.0f,"duration_us":%.0f,"p50_us":%.0f,"p99_us":%.0f,'
    .. '"status":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,"timeout":%.0f}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect, e.read, e.write, e.timeout))
end
"""

LUA_GET = """
local paths = {}
for line in io.lines(%(file)s) do paths[#paths + 1] = line end
local n = #paths
request = function()
  return wrk.format("GET", paths[math.random(n)])
end
"""

# 100 events per request: random members with their metadata, event ids unique per contender,
# round and request (the tag comes from wrk's arguments), so no event is ever a duplicate.
LUA_POST = """
local members, metas = {}, {}
for line in io.lines(%(file)s) do
  local tab = line:find("\\t", 1, true)
  members[#members + 1] = line:sub(1, tab - 1)
  metas[#metas + 1] = line:sub(tab + 1)
end
local n = #members
local tag, count = "t", 0
local headers = {["Content-Type"] = "application/json",
                 ["Authorization"] = "Bearer %(token)s"}
init = function(args) tag = args[1] or tag end
request = function()
  count = count + 1
  local parts = {}
  for j = 1, %(events)d do
    local k = math.random(n)
    parts[j] = '{"board":"%(board)s","member":"' .. members[k] .. '","value":'
      .. math.random(1, 100) .. ',"event_id":"' .. tag .. '-' .. count .. '-' .. j
      .. '","metadata":' .. metas[k] .. '}'
  end
  local body = '{"events":[' .. table.concat(parts, ",") .. ']}'
  return wrk.format("POST", "/v1/scores", headers, body)
end
"""


@dataclass(frozen=True)
class Round:
    """One wrk run against one server."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int  # non-2xx answers, socket errors and timeouts
    cpu_us: float  # the server's CPU per request
    redis_cpu_us: float  # redis-server's CPU per request

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def write_scripts(tmp: Path, targets: list[str], values: dict[str, int]) -> dict[str, Path]:
    """One wrk Lua script per request kind, with its list of random members."""
    index = {m: i for i, m in enumerate(values)}
    files = {
        "top": [f"/v1/boards/{BOARD}/day?limit={TOP}"],
        "around": [
            f"/v1/boards/{BOARD}/day/members/{quote(m, safe='')}/around?size={AROUND}"
            for m in targets
        ],  # fmt: skip
        "entry": [f"/v1/boards/{BOARD}/day/members/{quote(m, safe='')}" for m in targets],
        "healthz": ["/healthz"],
    }
    scripts: dict[str, Path] = {}
    for kind, lines in files.items():
        data = tmp / f"{kind}.txt"
        data.write_text("\n".join(lines) + "\n")
        scripts[kind] = tmp / f"{kind}.lua"
        scripts[kind].write_text(LUA_GET % {"file": json.dumps(str(data))} + LUA_COMMON)
    data = tmp / "post.txt"
    data.write_text("".join(f"{m}\t{json.dumps(metadata(index[m], m))}\n" for m in targets))
    scripts["post"] = tmp / "post.lua"
    scripts["post"].write_text(
        LUA_POST % {"file": json.dumps(str(data)), "token": WRITE_TOKEN, "board": BOARD,
                    "events": EVENTS_PER_POST} + LUA_COMMON
    )  # fmt: skip
    return scripts


def run_wrk(
    wrk: str, script: Path, server: Server, seconds: int, tag: str, redis_pid: int | None
) -> Round:
    """``wrk -t1 -c32 -d<seconds>s --latency`` with ``script``; the parsed summary."""
    argv = [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", "--timeout", "10s",
            "-s", str(script), server.base + "/", "--", tag]  # fmt: skip
    cpu, redis_cpu = cpu_seconds(server.proc.pid), cpu_seconds(redis_pid)
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=seconds + 60)
    cpu, redis_cpu = cpu_seconds(server.proc.pid) - cpu, cpu_seconds(redis_pid) - redis_cpu
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    raw = json.loads(line.removeprefix("WRKJSON "))
    errors = sum(int(raw[k]) for k in ("status", "connect", "read", "write", "timeout"))
    requests = int(raw["requests"])
    per = 1e6 / max(1, requests)
    return Round(requests, raw["duration_us"] / 1e6, raw["p50_us"] / 1000, raw["p99_us"] / 1000,
                 errors, cpu * per, redis_cpu * per)  # fmt: skip


# --- the run -------------------------------------------------------------------------------------


@dataclass
class Options:
    sizes: tuple[int, ...] = FULL_SIZES
    seconds: int = 5  # per timed round
    warmup: int = 2  # the discarded round per kind and contender; 0: none
    rounds: int = 3
    kinds: tuple[str, ...] = tuple(KINDS)
    serve_args: tuple[str, ...] = ()  # appended to `seasons serve --port P` (information)


@dataclass
class Row:
    """The timed rounds of one request kind at one size."""

    size: int
    kind: str
    rounds: dict[str, list[Round]] = field(default_factory=lambda: {c: [] for c in CONTENDERS})

    def median(self, contender: str) -> Round:
        ordered = sorted(self.rounds[contender], key=lambda r: r.rate)
        return ordered[(len(ordered) - 1) // 2]

    @property
    def ratio(self) -> float:
        peer = self.median("peer").rate
        return self.median("Seasons").rate / peer if peer else 0.0

    @property
    def target(self) -> float:
        return WRITE_TARGET if self.kind == "post" else READ_TARGET

    @property
    def met(self) -> bool:
        if self.ratio < self.target:
            return False
        return self.kind == "post" or self.median("Seasons").p99_ms <= self.median("peer").p99_ms


@dataclass
class Result:
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_run: str = ""
    versions: str = ""


@dataclass(frozen=True)
class Tools:
    """What every size runs with: wrk, the peer's argv, the bench's Redis and the options."""

    wrk: str
    peer_argv: list[str]
    redis_url: str
    redis_pid: int | None
    opts: Options


def run(opts: Options) -> Result:
    """Every size: populate, start both servers, check their answers, then time each kind."""
    result = Result()
    wrk, wrk_version = ensure_wrk()
    peer_argv, peer_version = ensure_peer()
    if wrk is None or not peer_argv:
        result.not_run = wrk_version if wrk is None else peer_version
        return result
    with own_redis() as redis_server:
        admin = redis_server.client()
        version = admin.info("server")["redis_version"]
        result.versions = f"redis-server {version}; {wrk_version}; {peer_version}"
        tools = Tools(wrk, peer_argv, redis_server.url, redis_server.pid, opts)
        try:
            for size in opts.sizes:
                admin.flushall()
                with tempfile.TemporaryDirectory(prefix="seasons-httpp-") as name:
                    run_size(size, Path(name), tools, result)
        finally:
            admin.close()
    return result


def peer_config(plan: DayPlan, url: str, port: int, period: str) -> dict[str, Any]:
    """What the Fastify peer is told: the keys, weights and expiry Seasons uses today."""
    board = f"{NS}:{{{BOARD}}}"
    return {
        "node_dir": str(NODE_DIR), "redis_url": url, "port": port, "board": BOARD,
        "period": period, "write_token": WRITE_TOKEN, "week_weight": plan.week_weight,
        "season_weight": plan.season_weight,
        "keys": {"day": plan.day_key, "week": plan.week_key, "season": plan.season_key,
                 "meta": plan.meta_key, "events": f"{board}:events",
                 "batches": f"{board}:batches", "batch_results": f"{board}:batch_results"},
        "expire_at": dict(zip(("day", "week", "season"), plan.expire, strict=True)),
    }  # fmt: skip


def run_size(size: int, tmp: Path, tools: Tools, result: Result) -> None:
    """One size: its board, both servers, the check, then the interleaved rounds."""
    from redis_server import free_port  # own_redis put tests/ on sys.path

    opts = tools.opts
    calendar = Calendar.for_today()
    config = tmp / "seasons.toml"
    config.write_text(settings_toml(calendar, tools.redis_url, tmp / "archive"))
    settings: Settings = load_settings(environ={}, path=config)
    began = time.monotonic()
    s = Seasons(settings, clock=calendar.clock())
    try:
        values = populate(s, size)
        period = s.top(BOARD, "day", limit=1).period
    finally:
        s.close()
    print(f"  {size:>9,} members written by Seasons in {time.monotonic() - began:.0f} s",
          flush=True)  # fmt: skip
    plan = DayPlan.of(settings, calendar.now)
    ports = {"Seasons": free_port(), "peer": free_port()}
    (tmp / "peer.json").write_text(
        json.dumps(peer_config(plan, tools.redis_url, ports["peer"], period))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    # As the README documents it: the console script, a port, settings from SEASONS_CONFIG.
    seasons_argv = [str(ROOT / ".venv" / "bin" / "seasons"), "serve", "--port",
                    str(ports["Seasons"]), *opts.serve_args]  # fmt: skip
    rnd = random.Random(13)
    names = list(values)
    targets = [rnd.choice(names) for _ in range(min(TARGETS, 2 * size))]
    scripts = write_scripts(tmp, targets, values)
    with (
        started("seasons serve", seasons_argv, ports["Seasons"],
                {**env, "SEASONS_CONFIG": str(config)}, tmp / "serve.log") as seasons,
        started("fastify peer", [*tools.peer_argv, str(tmp / "peer.json")], ports["peer"],
                {**env, "TZ": "UTC"}, tmp / "peer.log") as peer,
    ):  # fmt: skip
        servers = {"Seasons": seasons, "peer": peer}
        client = redis.Redis.from_url(tools.redis_url, decode_responses=True)
        try:
            problems = check_answers(servers, values, plan, client)
        finally:
            client.close()
        result.problems += [f"at {size:,}: {p}" for p in problems]
        print(f"  {size:>9,} answers {'equal' if not problems else 'DIFFER: ' + problems[0]}",
              flush=True)  # fmt: skip
        if problems:
            return
        for kind in opts.kinds:
            row = Row(size, kind)

            def once(name: str, seconds: int, tag: str, kind: str = kind) -> Round:
                return run_wrk(tools.wrk, scripts[kind], servers[name], seconds,
                               f"{name}-{tag}-{size}", tools.redis_pid)  # fmt: skip

            for name in CONTENDERS if opts.warmup else ():
                once(name, opts.warmup, "warm")
            for i in range(opts.rounds):
                for name in CONTENDERS:
                    timed = once(name, opts.seconds, str(i))
                    row.rounds[name].append(timed)
                    if timed.errors:
                        result.problems.append(
                            f"at {size:,}: {kind} on {name}: {timed.errors} failed requests"
                        )
            result.rows.append(row)
            s_med, p_med = row.median("Seasons"), row.median("peer")
            print(f"  {size:>9,} {kind:<8} Seasons {s_med.rate:>8,.0f}/s  peer "
                  f"{p_med.rate:>8,.0f}/s  ratio {row.ratio:.2f}", flush=True)  # fmt: skip


# --- the report ----------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    """One Markdown table: each request kind and size, both contenders, ratio and verdict.
    CPU is microseconds per request of the server process + of redis-server."""
    out = [
        "| members | request | Seasons req/s | p50 ms | p99 ms | CPU us | peer req/s | "
        "p50 ms | p99 ms | CPU us | Seasons/peer | target |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        s, p = row.median("Seasons"), row.median("peer")
        rule = f">= {row.target:.1f}x" + ("" if row.kind == "post" else ", p99 <= peer's")
        out.append(
            f"| {row.size:,} | {KINDS[row.kind]} | {s.rate:,.0f} | {s.p50_ms:.2f} | "
            f"{s.p99_ms:.2f} | {s.cpu_us:.0f}+{s.redis_cpu_us:.0f} | {p.rate:,.0f} | "
            f"{p.p50_ms:.2f} | {p.p99_ms:.2f} | {p.cpu_us:.0f}+{p.redis_cpu_us:.0f} | "
            f"{row.ratio:.2f} | {rule}: {'met' if row.met else 'MISSED'} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.http_peers", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}, 2 s rounds")
    parser.add_argument("--sizes", help="comma-separated member counts instead of the defaults")
    parser.add_argument("--seconds", type=int, help="seconds per timed round (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per contender")
    parser.add_argument("--warmup", type=int, help="seconds of the discarded round (0: none)")
    parser.add_argument("--only", choices=list(KINDS), action="append", help="request kinds")
    parser.add_argument(
        "--serve-arg", action="append", default=[],
        help="information: an argument appended to `seasons serve --port P` (repeatable)",
    )  # fmt: skip
    ns = parser.parse_args(argv)
    opts = Options(
        sizes=tuple(int(x) for x in ns.sizes.split(",")) if ns.sizes
        else QUICK_SIZES if ns.quick else FULL_SIZES,
        seconds=ns.seconds or (2 if ns.quick else 5),
        warmup=ns.warmup if ns.warmup is not None else (1 if ns.quick else 2),
        rounds=ns.rounds,
        kinds=tuple(ns.only or KINDS),
        serve_args=tuple(ns.serve_arg),
    )  # fmt: skip
    started_at = time.monotonic()
    print(
        f"seasons serve vs Fastify + ioredis -- wrk -t1 -c{CONNECTIONS}, {opts.rounds} rounds of "
        f"{opts.seconds} s per request kind and contender, interleaved, after a {opts.warmup} s "
        f"warm-up each; median round counts; Python {platform.python_version()}; "
        f"{os.cpu_count()} CPUs, load average {_load()}",
        flush=True,
    )
    result = run(opts)
    if result.not_run:
        print(result.not_run)
        return 0
    print(f"versions: {result.versions}")
    print("\n" + table(result.rows))
    for p in result.problems:
        print(f"check FAILED: {p}")
    missed = [r for r in result.rows if not r.met]
    print(f"\nanswers {'equal' if not result.problems else 'DIFFER'}; targets met on "
          f"{len(result.rows) - len(missed)} of {len(result.rows)} rows; "
          f"{time.monotonic() - started_at:.0f} s; load average {_load()}")  # fmt: skip
    return 1 if result.problems else 0


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
