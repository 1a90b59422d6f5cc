"""``python -m bench.http_peers [--quick]``: ``seasons serve`` against a Fastify + ioredis peer.

Both servers run side by side on one machine, one process each, on the same Redis keys:
``seasons serve --port P`` started as docs/http-api.md documents it (settings from the TOML file
named by ``SEASONS_CONFIG``), and ``node bench/peers/fastify_peer.mjs`` (Fastify 5 + ioredis 5,
installed by npm into the git-ignored ``bench/peers/scratch/fastify``, never vendored), which
reads what Seasons wrote and answers the same JSON. Per size, the day board of the ``sum``
board ``kills`` gets N members with metadata, and twelve of the thirteen days before it a
board of some of them (for the history), all written by Seasons itself.

Every read is measured: a page (the top 10), around a member, around a rank, a member's entry,
a lookup of 20 members (a friends board, two of them absent) and a member's 14-day history;
and ``/healthz`` and ``POST /v1/scores`` (100 events). Before any timing the bench sends the
same requests of every kind to both and compares the parsed JSON (numbers as numbers), and
checks Seasons against plain Python: the top 10, ranks, around a rank, a lookup and histories
against a sort of the events, the writes against the scores a plain-Python model expects.

The load comes from ``wrk -t1 -c32`` in another process (the Debian package; installed with
apt-get when missing and we are root), a small Lua script choosing random members or ranks
per request (and, for ``POST /v1/scores``, building 100 events with fresh event ids per
request). Per request kind the rounds alternate Seasons, peer, Seasons, peer, ... after a
discarded warm-up round each; the median round's requests/s counts, with that round's p50 and
p99 and what each request cost: Redis's time in commands (``INFO commandstats``, see
:func:`command_usec`) and the CPU time of the server process and of redis-server (Linux
``/proc``), per request wrk counted. Exit status 1 only if the answers differ (or a server
fails); a missed target is reported, not an error.
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
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis

from bench.common import (
    BOARD,
    ROOT,
    SEASON_WEIGHTS,
    WEEK_WEIGHTS,
    Calendar,
    command_stats,
    command_usec,
    own_redis,
)
from bench.peers.inprocess import DayPlan
from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.config.settings import WEEKDAYS
from seasons.keys import Keys

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
LOOKUP = 20  # members per lookup ...
LOOKUP_ABSENT = 2  # ... of which this many are on no board
HISTORY = 14  # days of a history
PAST_DAYS = 13  # days before today with a board, but for EMPTY_DAY
EMPTY_DAY = 4  # days before today: no board at all (nobody played)
PAST_POOL = 30_000  # members (besides the load's targets) that may play on a past day
TARGETS = 20_000  # random members the load scripts choose from
CHECKS = 12  # random members whose answers are compared before timing
# Seasons / peer requests/s: every read and POST /v1/scores; /healthz (no Redis) at least even.
RATIO_TARGET = 1.2
RATIO_TARGETS = {"healthz": 1.0}
STARTUP_TIMEOUT = 60.0
CONTENDERS = ("Seasons", "peer")
# Beside them on /healthz only: the floor of the Python HTTP stack (bench/peers/floor_asgi.py).
FLOOR = "floor"
KINDS = {
    "top": f"GET /v1/boards/{BOARD}/day (top {TOP})",
    "around": f"GET .../members/{{m}}/around?size={AROUND}",
    "around_rank": f"GET .../ranks/{{r}}/around?size={AROUND}",
    "entry": "GET .../members/{m}",
    "lookup": f"POST .../lookup ({LOOKUP} members)",
    "history": f"GET /v1/boards/{BOARD}/members/{{m}}/history?last={HISTORY}",
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


Days = dict[str, dict[str, int]]  # day id (YYYY-MM-DD) -> member -> its score that day


def populate_past(
    s: Seasons, clock: ManualClock, today: date, pool: list[str], *, seed: int = 9,
    batch: int = 5_000,
) -> Days:  # fmt: skip
    """The boards of the days before ``today``, for the history: on each of the
    :data:`PAST_DAYS` days but :data:`EMPTY_DAY`, one event for each of a random half of
    ``pool``, written by Seasons with its clock at noon of that day."""
    rnd = random.Random(seed)
    days: Days = {}
    back_then = clock()
    try:
        for back in range(1, PAST_DAYS + 1):
            if back == EMPTY_DAY:
                continue
            day = today - timedelta(days=back)
            scores = {m: rnd.randint(1, 10_000_000) for m in pool if rnd.random() < 0.5}
            clock.set(datetime.combine(day, dtime(12), tzinfo=UTC))
            events = [{"board": BOARD, "member": m, "value": v} for m, v in scores.items()]
            for start in range(0, len(events), batch):
                s.submit_many(events[start : start + batch])
            days[day.isoformat()] = scores
    finally:
        clock.set(back_then)
    return days


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process and its children so far (Linux /proc): with
    ``--serve-arg=--workers`` the work is done in uvicorn's worker processes. 0.0 where
    unavailable."""
    if pid is None:
        return 0.0
    total, todo = 0.0, [pid]
    while todo:
        one = todo.pop()
        with suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{one}/task").iterdir():
                todo += [int(x) for x in (task / "children").read_text().split()]
    return total


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


# --- the requests ------------------------------------------------------------------------------

DAY_BOARD = f"/v1/boards/{BOARD}/day"
TOP_PATH = f"{DAY_BOARD}?limit={TOP}"
LOOKUP_PATH = f"{DAY_BOARD}/lookup"


def entry_path(member: str) -> str:
    return f"{DAY_BOARD}/members/{quote(member, safe='')}"


def around_path(member: str) -> str:
    return entry_path(member) + f"/around?size={AROUND}"


def rank_path(rank: int) -> str:
    return f"{DAY_BOARD}/ranks/{rank}/around?size={AROUND}"


def history_path(member: str) -> str:
    return f"/v1/boards/{BOARD}/members/{quote(member, safe='')}/history?window=day&last={HISTORY}"


def post_body(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"events": events}).encode()


def lookup_body(members: list[str]) -> bytes:
    return json.dumps({"members": members}).encode()


# --- the checks before timing -----------------------------------------------------------------


def check_answers(
    servers: dict[str, Server], days: Days, today: date, targets: list[str], plan: DayPlan,
    client: Any,
) -> list[str]:  # fmt: skip
    """Where the two servers' answers differ from each other or from plain Python; []: nowhere.
    ``days``: the scores written per day, today's included."""
    problems: list[str] = []
    rnd = random.Random(11)
    values = days[today.isoformat()]
    names = list(values)
    index = {m: i for i, m in enumerate(names)}
    # Plain Python: highest value first, equal values by member descending (Redis's REV order).
    order = sorted(names, key=lambda m: (values[m], m), reverse=True)
    total = len(order)

    def entry(position: int) -> dict[str, Any]:
        """The entry at a 0-based position of today's board, as plain Python has it."""
        m = order[position]
        return {"rank": position + 1, "member": m, "score": values[m],
                "metadata": metadata(index[m], m)}  # fmt: skip

    sample = rnd.sample(names, min(CHECKS, len(names))) + [order[0], order[-1], order[1]]
    absent = ["nobody:here", "user:x"]  # on no board: 404 not_ranked, null, left out
    ranks = sorted(
        {1, 2, AROUND // 2 + 1, total // 2, total - AROUND // 2, total, total + 3}
        | {rnd.randint(1, total) for _ in range(CHECKS)}
    )
    lookups = [
        rnd.sample(names, min(LOOKUP - LOOKUP_ABSENT, total)) + absent,
        [order[3 % total], order[0], order[3 % total], sample[0]],  # a repeat; best not first
        absent,
        [],
    ]
    # Members that played on past days (the load's targets) and some that may not have.
    historied = list(dict.fromkeys(targets[: CHECKS // 2] + sample[:3] + absent[:1]))
    requests: list[tuple[str, bytes | None]] = [(TOP_PATH, None), ("/healthz", None)]
    for m in sample + absent:
        requests += [(entry_path(m), None), (around_path(m), None)]
    requests += [(rank_path(r), None) for r in [*ranks, 0]]  # 0: 422 limit_exceeded
    requests += [(LOOKUP_PATH, lookup_body(members)) for members in lookups]
    requests += [(history_path(m), None) for m in historied]
    for path, body in requests:
        label = f"{'GET' if body is None else 'POST'} {path}"
        got = {name: fetch(server.base + path, body) for name, server in servers.items()}
        seasons, peer = got["Seasons"], got["peer"]
        if seasons[0] != peer[0]:
            problems.append(f"{label}: status {seasons[0]} (Seasons) vs {peer[0]} (peer)")
        elif seasons[0] != 200:
            if (seasons[1] or {}).get("error") != (peer[1] or {}).get("error"):
                problems.append(f"{label}: error {seasons[1]} vs {peer[1]}")
        elif seasons[1] != peer[1]:  # parsed JSON: 3 == 3.0
            problems.append(f"{label}: {_short(seasons[1])} (Seasons) vs {_short(peer[1])}")

    def ask(path: str, body: bytes | None = None) -> Any:
        status, answer = fetch(servers["Seasons"].base + path, body)
        return answer if status == 200 else {"status": status, "answer": answer}

    page = ask(TOP_PATH)
    if (
        page.get("entries") != [entry(i) for i in range(min(TOP, total))]
        or page.get("total") != total
    ):
        problems.append(f"top {TOP} differs from a plain-Python sort of the events")
    position = {m: order.index(m) for m in dict.fromkeys(sample[:3] + lookups[0] + historied)
                if m in values}  # fmt: skip
    for m in sample[:3]:
        got = ask(entry_path(m))
        if got.get("rank") != position[m] + 1:
            problems.append(f"rank of {m}: {_short(got)} vs {position[m] + 1} (plain Python)")
    # Around a rank: centred on it, shifted at either end so that it holds AROUND entries.
    for r in (ranks[0], ranks[len(ranks) // 2], ranks[-1]):
        start = max(0, min(r - 1 - AROUND // 2, total - AROUND))
        want = [entry(i) for i in range(start, min(total, start + AROUND))]
        got = ask(rank_path(r))
        if got.get("entries") != want or got.get("total") != total:
            problems.append(f"around rank {r}: {_short(got)} is not plain Python's")
    # A lookup: the ranked ones among the members, best first.
    want_lookup = [entry(i) for i in sorted({position[m] for m in lookups[0] if m in values})]
    if ask(LOOKUP_PATH, lookup_body(lookups[0])) != want_lookup:
        problems.append("lookup differs from plain Python's ranked ones, best first")
    # History: the last HISTORY days, oldest first; rank and score null where not on the board.
    past_ranks = {
        day: {m: i + 1 for i, m in enumerate(sorted(scores, key=lambda m: (scores[m], m),
                                                     reverse=True))}
        for day, scores in days.items() if day != today.isoformat()
    }  # fmt: skip
    for m in historied:
        want_days = []
        for back in range(HISTORY - 1, -1, -1):
            day = (today - timedelta(days=back)).isoformat()
            scores = days.get(day, {})
            rank = position[m] + 1 if back == 0 and m in values else past_ranks.get(day, {}).get(m)
            want_days.append({"period": day, "rank": rank, "score": scores.get(m)})
        want_history = {"board": BOARD, "window": "day", "member": m, "history": want_days}
        got = ask(history_path(m))
        if got != want_history:
            problems.append(f"history of {m}: {_short(got)} is not plain Python's")
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
            want_scores = [(x or 0) + e["value"] * weight for x, e in zip(b, events, strict=True)]
            if a != want_scores:
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

# LOOKUP members per request: random ones of the board and LOOKUP_ABSENT on no board. Member
# ids here are plain ("user:0001234"): nothing to escape in the JSON.
LUA_LOOKUP = """
local members = {}
for line in io.lines(%(file)s) do members[#members + 1] = line end
local n = #members
local headers = {["Content-Type"] = "application/json"}
request = function()
  local parts = {}
  for j = 1, %(present)d do parts[j] = '"' .. members[math.random(n)] .. '"' end
  for j = %(present)d + 1, %(lookup)d do
    parts[j] = '"absent:' .. math.random(1000000000) .. '"'
  end
  local body = '{"members":[' .. table.concat(parts, ",") .. ']}'
  return wrk.format("POST", "%(path)s", headers, body)
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
    redis_cmd_us: float  # Redis's time in commands per request (command_usec)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def write_scripts(tmp: Path, targets: list[str], values: dict[str, int]) -> dict[str, Path]:
    """One wrk Lua script per request kind, with its list of random members (or ranks)."""
    index = {m: i for i, m in enumerate(values)}
    rnd = random.Random(17)
    files = {
        "top": [TOP_PATH],
        "around": [around_path(m) for m in targets],
        "around_rank": [rank_path(rnd.randint(1, len(values))) for _ in targets],
        "entry": [entry_path(m) for m in targets],
        "history": [history_path(m) for m in targets],
        "healthz": ["/healthz"],
    }
    scripts: dict[str, Path] = {}
    for kind, lines in files.items():
        data = tmp / f"{kind}.txt"
        data.write_text("\n".join(lines) + "\n")
        scripts[kind] = tmp / f"{kind}.lua"
        scripts[kind].write_text(LUA_GET % {"file": json.dumps(str(data))} + LUA_COMMON)
    data = tmp / "lookup.txt"
    data.write_text("".join(f"{m}\n" for m in targets))
    scripts["lookup"] = tmp / "lookup.lua"
    scripts["lookup"].write_text(
        LUA_LOOKUP % {"file": json.dumps(str(data)), "present": LOOKUP - LOOKUP_ABSENT,
                      "lookup": LOOKUP, "path": LOOKUP_PATH} + LUA_COMMON
    )  # fmt: skip
    data = tmp / "post.txt"
    data.write_text("".join(f"{m}\t{json.dumps(metadata(index[m], m))}\n" for m in targets))
    scripts["post"] = tmp / "post.lua"
    scripts["post"].write_text(
        LUA_POST % {"file": json.dumps(str(data)), "token": WRITE_TOKEN, "board": BOARD,
                    "events": EVENTS_PER_POST} + LUA_COMMON
    )  # fmt: skip
    return scripts


def settle(client: Any, *, quiet: float = 0.2, timeout: float = 10.0) -> None:
    """Wait until Redis has run no command (but INFO) for ``quiet`` seconds, or ``timeout``
    has passed: when wrk stops, a server is still working through the requests it had taken
    (a POST of 100 events takes milliseconds), and that work must not fall into the next
    round, the other contender's."""
    deadline = time.monotonic() + timeout
    last = command_stats(client)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = command_stats(client)
        if command_usec(last, now) == 0:
            return
        last = now


def run_wrk(wrk: str, script: Path, server: Server, seconds: int, tag: str, tools: Tools) -> Round:
    """``wrk -t1 -c32 -d<seconds>s --latency`` with ``script``; the parsed summary."""
    argv = [wrk, "-t1", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", "--timeout", "10s",
            "-s", str(script), server.base + "/", "--", tag]  # fmt: skip
    commands = command_stats(tools.stats)
    cpu, redis_cpu = cpu_seconds(server.proc.pid), cpu_seconds(tools.redis_pid)
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=seconds + 60)
    cpu, redis_cpu = cpu_seconds(server.proc.pid) - cpu, cpu_seconds(tools.redis_pid) - redis_cpu
    usec = command_usec(commands, command_stats(tools.stats))
    settle(tools.stats)
    line = next((x for x in done.stdout.splitlines() if x.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    raw = json.loads(line.removeprefix("WRKJSON "))
    errors = sum(int(raw[k]) for k in ("status", "connect", "read", "write", "timeout"))
    requests = int(raw["requests"])
    per = 1e6 / max(1, requests)
    return Round(requests, raw["duration_us"] / 1e6, raw["p50_us"] / 1000, raw["p99_us"] / 1000,
                 errors, cpu * per, redis_cpu * per, usec / max(1, requests))  # fmt: skip


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
    rounds: dict[str, list[Round]] = field(
        default_factory=lambda: {c: [] for c in (*CONTENDERS, FLOOR)}
    )

    def median(self, contender: str) -> Round:
        ordered = sorted(self.rounds[contender], key=lambda r: r.rate)
        return ordered[(len(ordered) - 1) // 2]

    @property
    def ratio(self) -> float:
        peer = self.median("peer").rate
        return self.median("Seasons").rate / peer if peer else 0.0

    @property
    def target(self) -> float:
        return RATIO_TARGETS.get(self.kind, RATIO_TARGET)

    @property
    def met(self) -> bool:
        return (
            self.ratio >= self.target
            and self.median("Seasons").p99_ms <= self.median("peer").p99_ms
        )


@dataclass
class Result:
    rows: list[Row] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_run: str = ""
    versions: str = ""


@dataclass(frozen=True)
class Tools:
    """What every size runs with: wrk, the peer's argv, the bench's Redis (and a client of it
    for INFO) and the options."""

    wrk: str
    peer_argv: list[str]
    redis_url: str
    redis_pid: int | None
    stats: Any
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
        tools = Tools(wrk, peer_argv, redis_server.url, redis_server.pid, admin, opts)
        try:
            for size in opts.sizes:
                admin.flushall()
                with tempfile.TemporaryDirectory(prefix="seasons-httpp-") as name:
                    run_size(size, Path(name), tools, result)
        finally:
            admin.close()
    return result


def peer_config(
    plan: DayPlan, settings: Settings, url: str, port: int, period: str
) -> dict[str, Any]:
    """What the Fastify peer is told: the keys, weights and expiry Seasons uses today, and
    how a day's key is named and in which zone days are counted (for the history)."""
    keys = Keys(settings.namespace)
    return {
        "node_dir": str(NODE_DIR), "redis_url": url, "port": port, "board": BOARD,
        "period": period, "write_token": WRITE_TOKEN, "week_weight": plan.week_weight,
        "season_weight": plan.season_weight, "zone": settings.zone.key,
        "day_prefix": keys.window(BOARD, "day", ""),
        "keys": {"day": plan.day_key, "week": plan.week_key, "season": plan.season_key,
                 "meta": plan.meta_key, "events": keys.events(BOARD),
                 "batches": keys.batches(BOARD), "batch_results": keys.batch_results(BOARD)},
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
    clock = calendar.clock()
    s = Seasons(settings, clock=clock)
    rnd = random.Random(13)
    try:
        values = populate(s, size)
        names = list(values)
        targets = [rnd.choice(names) for _ in range(min(TARGETS, 2 * size))]
        # Who played on past days: the load's targets and some others, half of them each day.
        pool = list(dict.fromkeys(targets + rnd.sample(names, min(size, PAST_POOL))))
        days = populate_past(s, clock, calendar.today, pool)
        period = s.top(BOARD, "day", limit=1).period
    finally:
        s.close()
    days[calendar.today.isoformat()] = values
    print(f"  {size:>9,} members (and {sum(map(len, days.values())) - size:,} events on past "
          f"days) written by Seasons in {time.monotonic() - began:.0f} s", flush=True)  # fmt: skip
    plan = DayPlan.of(settings, calendar.now)
    ports = {"Seasons": free_port(), "peer": free_port()}
    (tmp / "peer.json").write_text(
        json.dumps(peer_config(plan, settings, tools.redis_url, ports["peer"], period))
    )
    ports[FLOOR] = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
    # As docs/http-api.md documents it: the console script, a port, settings from SEASONS_CONFIG.
    seasons_argv = [str(ROOT / ".venv" / "bin" / "seasons"), "serve", "--port",
                    str(ports["Seasons"]), *opts.serve_args]  # fmt: skip
    floor_argv = [sys.executable, "-m", "uvicorn", "bench.peers.floor_asgi:app", "--port",
                  str(ports[FLOOR]), "--http", "httptools", "--loop", "uvloop",
                  "--no-access-log", "--no-server-header", "--log-level", "warning"]  # fmt: skip
    scripts = write_scripts(tmp, targets, values)
    with (
        started("seasons serve", seasons_argv, ports["Seasons"],
                {**env, "SEASONS_CONFIG": str(config)}, tmp / "serve.log") as seasons,
        started("fastify peer", [*tools.peer_argv, str(tmp / "peer.json")], ports["peer"],
                {**env, "TZ": "UTC"}, tmp / "peer.log") as peer,
        started("floor", floor_argv, ports[FLOOR], {**env, "PYTHONPATH": str(ROOT)},
                tmp / "floor.log") as floor,
    ):  # fmt: skip
        servers = {"Seasons": seasons, "peer": peer, FLOOR: floor}
        client = redis.Redis.from_url(tools.redis_url, decode_responses=True)
        try:
            compared = {name: servers[name] for name in CONTENDERS}
            problems = check_answers(compared, days, calendar.today, targets, plan, client)
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
                               f"{name}-{tag}-{size}", tools)  # fmt: skip

            contenders = (*CONTENDERS, FLOOR) if kind == "healthz" else CONTENDERS
            for name in contenders if opts.warmup else ():
                once(name, opts.warmup, "warm")
            for i in range(opts.rounds):
                for name in contenders:
                    timed = once(name, opts.seconds, str(i))
                    row.rounds[name].append(timed)
                    if timed.errors:
                        result.problems.append(
                            f"at {size:,}: {kind} on {name}: {timed.errors} failed requests"
                        )
            result.rows.append(row)
            s_med, p_med = row.median("Seasons"), row.median("peer")
            print(f"  {size:>9,} {kind:<11} Seasons {s_med.rate:>8,.0f}/s "
                  f"({s_med.redis_cmd_us:,.0f} redis µs/req)  peer {p_med.rate:>8,.0f}/s "
                  f"({p_med.redis_cmd_us:,.0f} redis µs/req)  ratio {row.ratio:.2f}",
                  flush=True)  # fmt: skip


# --- the report ----------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    """One Markdown table: each request kind and size, both contenders, ratio and verdict.
    Per request: redis µs is Redis's time in commands (:func:`command_usec`); CPU µs is the
    CPU time of the server process + of redis-server (commands, network and the rest)."""
    half = "req/s | redis µs/req | p50 ms | p99 ms | CPU µs/req"
    out = [
        f"| members | request | Seasons {half} | peer {half} | Seasons/peer | target |",
        "|---:|---|" + "---:|" * 11 + "---|",
    ]
    for row in rows:
        cells = []
        for r in (row.median("Seasons"), row.median("peer")):
            cells.append(f"{r.rate:,.0f} | {r.redis_cmd_us:,.1f} | {r.p50_ms:.2f} | "
                         f"{r.p99_ms:.2f} | {r.cpu_us:.0f}+{r.redis_cpu_us:.0f}")  # fmt: skip
        rule = f">= {row.target:.1f}x, p99 <= peer's"
        out.append(
            f"| {row.size:,} | {KINDS[row.kind]} | {cells[0]} | {cells[1]} | "
            f"{row.ratio:.2f} | {rule}: {'met' if row.met else 'MISSED'} |"
        )
    for row in rows:
        if row.rounds[FLOOR]:
            f, s = row.median(FLOOR), row.median("Seasons")
            out.append(
                f"\n/healthz at {row.size:,}: the Python HTTP stack's floor (a one-route ASGI app "
                f"under uvicorn + httptools + uvloop, bench/peers/floor_asgi.py) {f.rate:,.0f} "
                f"req/s, CPU {f.cpu_us:.0f} µs/req: Seasons at {s.rate / f.rate:.2f}x of it, "
                f"the peer at {row.median('peer').rate / f.rate:.2f}x"
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
