"""Section "soak" (only with ``--only soak``): writers, readers and the worker under faults.

A private ``redis-server`` (free port, ``appendonly yes``, ``appendfsync always``: every
acknowledged write is on disk before its reply), two ``seasons serve`` processes and one
``seasons worker``, all real subprocesses on 127.0.0.1. For ``seconds`` (default 180):

- writer threads POST batches of 1-8 events (unique event ids, an ``Idempotency-Key`` per
  batch) to either server; a batch answered with anything but 2xx or a 4xx refusal, or not
  answered at all, is resent unchanged (same key, same event ids) until it is;
- reader threads GET pages and around-pages of every window;
- the fault injector, every ``fault_every`` seconds, does one of: SIGKILL the worker,
  SIGSTOP/SIGCONT Redis, SIGKILL Redis and start it again from its AOF, SIGKILL a server.
  Each process is started again at once.

Days are UTC. An explicit season ``past`` is yesterday alone, ``live`` starts today, and
``late_grace`` is chosen so that yesterday closes ``close_after`` seconds into the run: the
writers send events for yesterday too until the close refuses them (422, not acknowledged),
so the worker closes the day and archives ``past`` while the faults go on. At the end the
faults stop, the worker finishes its closes, and every day, week and season board, the
archive key and the archive file must equal a plain-Python model of the acknowledged events.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.common import ROOT, Section
from seasons.config import load_settings
from seasons.config.settings import WEEKDAYS

NS = "soak"
BOARDS = {"hits": "sum", "points": "sum", "best": "max"}  # hits: every value is 1
MEMBERS = 200
PAST, LIVE = "past", "live"
FAULTS = ("worker_kill", "redis_pause", "redis_restart", "server_kill")
REFUSALS = {"late_event", "season_closed"}  # the only 4xx a writer expects (yesterday, closed)
RETRY_4XX = {408, 409, 425, 429}  # answers that say "try again", not "no"
HTTP_TIMEOUT = 5.0
MAX_ATTEMPTS = 200  # per batch; with the drain deadline this bounds every resend loop
DRAIN = 60.0  # seconds after the run for resends, once every process is back
CLOSE_WAIT = 120.0  # seconds after the run for the worker to archive ``past``
STARTUP = 5.0  # seconds from writing the settings to the first event, roughly
AOF = ("--appendonly", "yes", "--appendfsync", "always")


@dataclass(frozen=True)
class Options:
    """How long and how hard the soak runs."""

    seconds: float = 180.0
    writers: int = 4
    readers: int = 2
    servers: int = 2
    fault_every: float = 5.0
    close_after: float | None = None  # seconds into the run that yesterday closes
    seed: int = 7

    @property
    def close_at(self) -> float:
        return self.close_after if self.close_after is not None else min(60.0, self.seconds / 3)


@dataclass
class Result:
    """What a soak run measured; ``ok`` is the verdict."""

    seconds: float = 0.0
    acknowledged: int = 0  # events in batches answered 2xx
    batches: Counter[str] = field(default_factory=Counter)  # acknowledged, refused, in doubt...
    resends: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    writes: Counter[str] = field(default_factory=Counter)  # status or error code -> answers
    reads: Counter[str] = field(default_factory=Counter)
    in_doubt_applied: int = 0  # events of unanswered/refused-after-doubt batches found applied
    lost: int = 0
    doubled: int = 0
    mismatches: list[str] = field(default_factory=list)
    archives_verified: int = 0
    problems: list[str] = field(default_factory=list)
    logged: Counter[str] = field(default_factory=Counter)  # exceptions in the servers' logs
    kept: str | None = None  # the directory of logs and archives, kept after a failure or a 500

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0 and self.doubled == 0 and not self.mismatches and not self.problems
            and self.archives_verified == len(BOARDS)
        )  # fmt: skip


# --- the calendar and the settings ------------------------------------------------------------


@dataclass(frozen=True)
class Calendar:
    """Yesterday and today (UTC) at the start, and a week holding both."""

    today: date
    late_grace: float

    @classmethod
    def starting_now(cls, close_after: float) -> Calendar:
        now = datetime.now(UTC)
        midnight = datetime.combine(now.date(), datetime.min.time(), tzinfo=UTC)
        return cls(now.date(), (now - midnight).total_seconds() + STARTUP + close_after)

    @property
    def yesterday(self) -> date:
        return self.today - timedelta(days=1)

    @property
    def week_start(self) -> int:
        return (self.yesterday.weekday() - 2) % 7  # yesterday and today in one week

    def week_of(self, day: date) -> date:
        return day - timedelta(days=(day.weekday() - self.week_start) % 7)

    def season_of(self, day: date) -> str | None:
        return PAST if day == self.yesterday else LIVE if day >= self.today else None


def settings_toml(cal: Calendar, redis_url: str, archive_dir: Path) -> str:
    """The soak's settings file: short worker intervals, so closes follow kills quickly."""
    boards = "".join(f'[boards.{b}]\naggregate = "{agg}"\n' for b, agg in BOARDS.items())
    return f"""namespace = "{NS}"
timezone = "UTC"
week_start = "{WEEKDAYS[cal.week_start]}"
late_grace = {cal.late_grace:.3f}
retention = "P3D"
[redis]
url = "{redis_url}"
[[seasons.list]]
id = "{PAST}"
start = "{cal.yesterday}"
end = "{cal.yesterday}"
[[seasons.list]]
id = "{LIVE}"
start = "{cal.today}"
end = "{cal.today + timedelta(days=6)}"
[archive]
dir = "{archive_dir}"
[worker]
rollup_interval = 2
heartbeat_interval = 1
lock_ttl = 5
backoff_initial = 0.2
backoff_max = 2
{boards}"""


# --- processes --------------------------------------------------------------------------------


class Child:
    """One ``seasons`` subprocess that the injector kills and starts again."""

    def __init__(self, name: str, argv: list[str], log: Path, ready: str | None = None):
        self.name, self.argv, self.log, self.ready = name, argv, log, ready
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        if self.ready is not None:
            wait_for(lambda: _answers(str(self.ready)), 30.0, f"{self.name} to answer")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def _answers(url: str) -> bool:
    with suppress(httpx.HTTPError):
        return httpx.get(url, timeout=1.0).status_code == 200
    return False


def wait_for(ok: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > deadline:
            raise RuntimeError(f"soak: gave up waiting {seconds:.0f} s for {what}")
        time.sleep(0.1)


def seasons_argv(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", "from seasons.cli import main; main()", "--config",
            str(config), *args]  # fmt: skip


# --- writers, readers and the fault injector ------------------------------------------------------


Event = dict[str, Any]


class Run:
    """State shared by the threads of one soak run."""

    def __init__(self, opts: Options, cal: Calendar, ports: list[int]):
        self.opts, self.cal, self.ports = opts, cal, ports
        self.stop = threading.Event()  # no new batches or reads
        self.drain_deadline = float("inf")
        self.lock = threading.Lock()
        self.result = Result()
        self.acked: list[Event] = []
        self.in_doubt: list[Event] = []
        self.run_id = f"{int(time.time()):x}"

    def count(self, counter: Counter[str], key: str, n: int = 1) -> None:
        with self.lock:
            counter[key] += n

    def batch(self, rnd: random.Random, writer: int, n: int, yesterday: bool) -> list[Event]:
        now = time.time()
        start = datetime.combine(self.cal.yesterday, datetime.min.time(), tzinfo=UTC)
        events = []
        for i in range(rnd.randint(1, 8)):
            board = rnd.choice(list(BOARDS))
            m = rnd.randrange(MEMBERS)
            ts = start.timestamp() + rnd.uniform(0, 86_399) if yesterday else now - rnd.random()
            ts = round(ts, 3)
            value = 1 if board == "hits" else rnd.randint(1, 100 if board == "points" else 10**6)
            events.append({
                "board": board, "member": f"p{m:03d}", "value": value, "ts": ts,
                "event_id": f"{self.run_id}-{writer}-{n}-{i}", "metadata": {"team": m % 4},
            })  # fmt: skip
        return events

    def writer(self, w: int) -> None:
        rnd = random.Random(self.opts.seed * 1000 + w)
        clients = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=HTTP_TIMEOUT)
                   for p in self.ports]  # fmt: skip
        refused_yesterday = 0
        try:
            n = 0
            while not self.stop.is_set():
                yesterday = refused_yesterday < 3 and rnd.random() < 0.3
                events = self.batch(rnd, w, n, yesterday)
                key = f"{self.run_id}-{w}-{n}"
                n += 1
                outcome = self.send(clients, rnd, key, events)
                with self.lock:
                    self.result.batches[outcome] += 1
                    if outcome == "acknowledged":
                        self.acked += events
                        self.result.acknowledged += len(events)
                    elif outcome in ("refused after doubt", "given up"):
                        self.in_doubt += events
                if outcome.startswith("refused") and yesterday:
                    refused_yesterday += 1
                if outcome == "acknowledged" and rnd.random() < 0.05:
                    self.send(clients, rnd, key, events, attempts=1)  # a deliberate resend
                    self.count(self.result.batches, "resent on purpose")
                time.sleep(0.005)
        finally:
            for c in clients:
                c.close()

    def send(self, clients: list[httpx.Client], rnd: random.Random, key: str,
             events: list[Event], attempts: int = MAX_ATTEMPTS) -> str:  # fmt: skip
        """POST one batch until it is answered 2xx or refused; the outcome's name."""
        doubt = False
        first = rnd.randrange(len(clients))
        for attempt in range(attempts):
            if attempt:
                self.count(self.result.batches, "resends")
                if time.monotonic() > self.drain_deadline:
                    break
                time.sleep(min(0.05 * 2**attempt, 1.0))
            client = clients[(first + attempt) % len(clients)]
            try:
                resp = client.post("/v1/scores", json={"events": events},
                                   headers={"Idempotency-Key": key})  # fmt: skip
            except httpx.TransportError as exc:
                self.count(self.result.writes, f"no answer ({type(exc).__name__})")
                doubt = True
                continue
            status = resp.status_code
            self.count(self.result.writes, _label(resp))
            if 200 <= status < 300:
                return "acknowledged"
            if 400 <= status < 500 and status not in RETRY_4XX:
                codes = _refusal_codes(resp)
                if not codes <= REFUSALS:
                    with self.lock:
                        self.result.problems.append(f"unexpected refusal {status} {resp.text}")
                return "refused after doubt" if doubt else "refused"
            doubt = True  # 5xx: the batch may or may not have been applied
        return "given up"

    def reader(self, r: int) -> None:
        rnd = random.Random(self.opts.seed * 1000 + 500 + r)
        clients = [httpx.Client(base_url=f"http://127.0.0.1:{p}", timeout=HTTP_TIMEOUT)
                   for p in self.ports]  # fmt: skip
        try:
            while not self.stop.is_set():
                board, window = rnd.choice(list(BOARDS)), rnd.choice(["day", "week", "season"])
                member = f"p{rnd.randrange(MEMBERS):03d}"
                path = rnd.choice([
                    f"/v1/boards/{board}/{window}?limit=20",
                    f"/v1/boards/{board}/{window}/members/{member}/around?size=5",
                    f"/v1/boards/{board}/season?period={PAST}&limit=10",
                ])  # fmt: skip
                try:
                    resp = rnd.choice(clients).get(path)
                    self.count(self.result.reads, _label(resp))
                except httpx.TransportError as exc:
                    self.count(self.result.reads, f"no answer ({type(exc).__name__})")
                time.sleep(0.01)
        finally:
            for c in clients:
                c.close()


def _label(resp: httpx.Response) -> str:
    if resp.status_code < 400:
        return str(resp.status_code)
    try:
        code = resp.json().get("error", "?")
    except ValueError:
        code = "not JSON"
    return f"{resp.status_code} {code}"


def _refusal_codes(resp: httpx.Response) -> set[str]:
    try:
        body = resp.json()
    except ValueError:
        return {"not JSON"}
    details = body.get("details")
    if body.get("error") == "invalid_events" and isinstance(details, list):
        return {str(d.get("code")) for d in details}
    return {str(body.get("error"))}


class Injector:
    """One fault at a time, in shuffled rounds of every kind; each victim started again."""

    def __init__(self, run: Run, redis_server: Any, servers: list[Child], worker: Child):
        self.run, self.redis, self.servers, self.worker = run, redis_server, servers, worker
        self.rnd = random.Random(run.opts.seed)
        self.queue: list[str] = []

    def inject(self) -> str:
        if not self.queue:
            self.queue = self.rnd.sample(FAULTS, len(FAULTS))
        kind = self.queue.pop()
        if kind == "worker_kill":
            self.worker.kill()
            self.worker.start()
        elif kind == "redis_pause":
            os.kill(self.redis.pid, signal.SIGSTOP)
            try:
                time.sleep(self.rnd.uniform(0.5, 2.0))
            finally:
                os.kill(self.redis.pid, signal.SIGCONT)
        elif kind == "redis_restart":
            self.redis.kill()
            self.redis.start()  # same port, same dir: loads the AOF
        else:
            victim = self.rnd.choice(self.servers)
            victim.kill()
            victim.start()
        self.run.count(self.run.result.faults, kind)
        return kind

    def restore(self) -> None:
        """Every process running again, after the last fault."""
        if not self.redis.running:
            self.redis.start()
        for child in (*self.servers, self.worker):
            if not child.alive:
                child.start()


# --- the model and the comparison ---------------------------------------------------------------


Boards = dict[str, dict[str, float]]  # key -> member -> score


def expected_boards(events: list[Event], cal: Calendar) -> Boards:
    """Every day, week and season board that ``events`` make, computed in plain Python
    (weights 1: a week or season is the aggregate of its events)."""
    out: Boards = {}
    for ev in events:
        day = datetime.fromtimestamp(ev["ts"], UTC).date()
        board, member, value = ev["board"], ev["member"], float(ev["value"])
        keys = [f"day:{day}", f"week:{cal.week_of(day)}"]
        season = cal.season_of(day)
        if season is not None:
            keys.append(f"season:{season}")
        for k in keys:
            scores = out.setdefault(f"{NS}:{{{board}}}:{k}", {})
            old = scores.get(member)
            if old is None:
                scores[member] = value
            elif BOARDS[board] == "sum":
                scores[member] = old + value
            else:
                scores[member] = max(old, value)
    return out


def differences(expected: Boards, actual: Boards) -> list[str]:
    """One line per key whose members or scores differ."""
    lines = []
    for key in sorted(set(expected) | set(actual)):
        want, got = expected.get(key, {}), actual.get(key, {})
        if want != got:
            wrong = sorted(m for m in set(want) | set(got) if want.get(m) != got.get(m))
            lines.append(
                f"{key}: {len(wrong)} members differ, e.g. {wrong[0]} expected "
                f"{want.get(wrong[0])} got {got.get(wrong[0])}"
            )
    return lines


def lost_and_doubled(expected: Boards, actual: Boards) -> tuple[int, int]:
    """Events lost and doubled, counted on the ``hits`` day boards (every value is 1, so a
    member's score there is its number of applied events)."""
    lost = doubled = 0
    for key in set(expected) | set(actual):
        if key.startswith(f"{NS}:{{hits}}:day:"):
            want, got = expected.get(key, {}), actual.get(key, {})
            for m in set(want) | set(got):
                diff = round(got.get(m, 0.0) - want.get(m, 0.0))
                lost, doubled = lost + max(0, -diff), doubled + max(0, diff)
    return lost, doubled


def applied_of(client: Any, events: list[Event]) -> list[Event]:
    """Those of ``events`` whose event id the board's idempotency record holds: applied,
    though never acknowledged (an answer lost to a fault, then a refusal or no answer)."""
    found = []
    for board in BOARDS:
        mine = [ev for ev in events if ev["board"] == board]
        if mine:
            scores = client.zmscore(f"{NS}:{{{board}}}:events", [ev["event_id"] for ev in mine])
            found += [ev for ev, s in zip(mine, scores, strict=True) if s is not None]
    return found


def read_boards(client: Any, keys: set[str]) -> Boards:
    return {k: {m: float(s) for m, s in client.zrange(k, 0, -1, withscores=True)} for k in keys}


def check_archives(client: Any, config: Path, expected: Boards, result: Result) -> None:
    """Per board: ``past`` archived; its archive key, its file (read here, with gzip) and
    Seasons' own verification agree with the model."""
    from seasons import Seasons
    from seasons.archives import Archives
    from seasons.errors import SeasonsError

    settings = load_settings(environ={}, path=config)
    with Seasons(settings) as app:
        archives = Archives(app.client, app.scripts, app.settings, app.keys)
        for board in BOARDS:
            want = expected.get(f"{NS}:{{{board}}}:season:{PAST}", {})
            data = settings.archive.dir / NS / board / f"{PAST}.jsonl.gz"
            try:
                archives.verify(board, PAST, app.keys.season(board, PAST))
            except (SeasonsError, OSError) as exc:
                result.problems.append(f"{board}: archive {PAST} does not verify: {exc}")
                continue
            with gzip.open(data, "rt", encoding="utf-8") as f:
                rows = [json.loads(line) for line in f]
            in_file = {r["member"]: float(r["score"]) for r in rows}
            # Redis's order on a desc board: by score, equal scores by member, both reversed.
            ranked = sorted(want.items(), key=lambda kv: (kv[1], kv[0].encode()), reverse=True)
            key = f"{NS}:{{{board}}}:archive:{PAST}"
            problems = [
                what for what, bad in (
                    ("file scores", in_file != want),
                    ("file order", [r["member"] for r in rows] != [m for m, _ in ranked]),
                    ("file ranks", [r["rank"] for r in rows] != list(range(1, len(rows) + 1))),
                    ("metadata", any(r["metadata"] != {"team": int(r["member"][1:]) % 4}
                                     for r in rows)),
                    ("archive key", read_boards(client, {key})[key] != want),
                ) if bad
            ]  # fmt: skip
            if problems:
                result.problems.append(f"{board}: archive {PAST} differs: {', '.join(problems)}")
            else:
                result.archives_verified += 1


# --- the run ------------------------------------------------------------------------------------


@contextmanager
def _aof_redis() -> Iterator[Any]:
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from redis_server import RedisServer, free_port

    with RedisServer(port=free_port(), args=AOF) as server:  # fixed port across restarts
        yield server


def soak(opts: Options) -> Result:
    """Run the soak and check it; see the module docstring."""
    cal = Calendar.starting_now(opts.close_at)
    tmp = Path(tempfile.mkdtemp(prefix="seasons-soak-"))
    children: list[Child] = []
    with _aof_redis() as server:
        from redis_server import free_port  # _aof_redis put tests/ on sys.path

        config = tmp / "soak.toml"
        config.write_text(settings_toml(cal, server.url, tmp / "archive"))
        ports = [free_port() for _ in range(opts.servers)]
        run = Run(opts, cal, ports)
        result = run.result
        threads: list[threading.Thread] = []
        try:
            servers = [
                Child(f"server {i}", seasons_argv(config, "serve", "--port", str(p),
                      "--log-level", "warning"), tmp / f"serve-{i}.log",
                      ready=f"http://127.0.0.1:{p}/healthz")
                for i, p in enumerate(ports)
            ]  # fmt: skip
            worker = Child("worker", seasons_argv(config, "worker", "--log-level", "WARNING"),
                           tmp / "worker.log")  # fmt: skip
            children = [*servers, worker]
            for child in children:
                child.start()
            injector = Injector(run, server, servers, worker)
            threads = [threading.Thread(target=run.writer, args=(w,), daemon=True)
                       for w in range(opts.writers)]  # fmt: skip
            threads += [threading.Thread(target=run.reader, args=(r,), daemon=True)
                        for r in range(opts.readers)]  # fmt: skip
            began = time.monotonic()
            for t in threads:
                t.start()
            end = began + opts.seconds
            next_fault = began + opts.fault_every
            while time.monotonic() < end:
                time.sleep(max(0.0, min(next_fault, end) - time.monotonic()))
                if time.monotonic() >= next_fault and time.monotonic() < end - 1.0:
                    injector.inject()
                    # On a fixed grid, so that a slow restart does not thin the faults out.
                    next_fault = max(next_fault + opts.fault_every, time.monotonic() + 0.5)
            run.stop.set()
            injector.restore()
            run.drain_deadline = time.monotonic() + DRAIN
            for t in threads:
                t.join(timeout=DRAIN + 2 * HTTP_TIMEOUT)
            result.seconds = time.monotonic() - began
            client = server.client(decode_responses=True)
            try:
                _finish(run, client, config, tmp)
            finally:
                client.close()
        finally:
            run.stop.set()
            run.drain_deadline = 0.0
            if server.running and server.pid is not None:
                with suppress(ProcessLookupError):
                    os.kill(server.pid, signal.SIGCONT)
            for child in children:
                child.stop()
            result.logged = logged_errors(tmp)
            if result.ok and not _count(result.writes, "500") + _count(result.reads, "500"):
                _rmtree(tmp)
            else:
                result.kept = str(tmp)
    return result


def _finish(run: Run, client: Any, config: Path, tmp: Path) -> None:
    """Wait for the closes, then compare everything with the model."""
    result, cal = run.result, run.cal

    def archived() -> bool:
        return all(client.hget(f"{NS}:{{{b}}}:state", f"season:{PAST}") == "archived"
                   for b in BOARDS)  # fmt: skip

    if not run.acked:
        result.problems.append(f"no batch was acknowledged; writers' answers: {result.writes}")
    try:
        wait_for(archived, CLOSE_WAIT, f"season {PAST} to be archived on every board")
    except RuntimeError as exc:
        result.problems.append(str(exc))
    applied = applied_of(client, run.in_doubt)
    result.in_doubt_applied = len(applied)
    expected = expected_boards(run.acked + applied, cal)
    keys = set(expected)
    for b in BOARDS:
        for day in (cal.yesterday, cal.today):
            keys |= {f"{NS}:{{{b}}}:day:{day}", f"{NS}:{{{b}}}:week:{cal.week_of(day)}"}
        keys |= {f"{NS}:{{{b}}}:season:{PAST}", f"{NS}:{{{b}}}:season:{LIVE}"}
        for window in ("day", "week", "season"):  # and any key the model knows nothing of
            keys |= set(client.scan_iter(match=f"{NS}:{{{b}}}:{window}:*", count=1000))
    actual = read_boards(client, keys)
    result.mismatches = differences(expected, actual)
    result.lost, result.doubled = lost_and_doubled(expected, actual)
    check_archives(client, config, expected, result)
    # An archived season reads like any season over HTTP too.
    try:
        page = httpx.get(f"http://127.0.0.1:{run.ports[0]}/v1/boards/hits/season",
                         params={"period": PAST, "limit": 1000}, timeout=HTTP_TIMEOUT)  # fmt: skip
        entries = page.json().get("entries", []) if page.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        entries = None
    over_http = None if entries is None else {e["member"]: float(e["score"]) for e in entries}
    if over_http != expected.get(f"{NS}:{{hits}}:season:{PAST}", {}):
        result.problems.append(f"GET hits season {PAST} over HTTP differs from the model")


def logged_errors(tmp: Path) -> Counter[str]:
    """The exception lines that end tracebacks in the servers' and the worker's logs."""
    found: Counter[str] = Counter()
    for log in sorted(tmp.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("Traceback"):
                end = next((j for j in range(i + 1, len(lines)) if not lines[j].startswith(" ")),
                           None)  # fmt: skip
                if end is not None:
                    found[f"{log.stem}: {lines[end][:160]}"] += 1
    return found


def _count(counts: Counter[str], prefix: str) -> int:
    return sum(v for k, v in counts.items() if k.startswith(prefix))


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# --- the report -----------------------------------------------------------------------------------


def section(opts: Options, result: Result) -> Section:
    """The soak as a bench report section."""
    sec = Section(
        "Soak: writes and reads under faults",
        f"{opts.writers} writer and {opts.readers} reader threads over HTTP to {opts.servers} "
        f"`seasons serve`, 1 `seasons worker`, redis-server with appendfsync always; a fault "
        f"every {opts.fault_every:g} s; yesterday closes {opts.close_at:g} s in",
        "count",
        decimals=0,
    )
    b = result.batches
    sec.row("duration, s", result.seconds)
    sec.row("events acknowledged", result.acknowledged)
    sec.row("batches acknowledged", b["acknowledged"], f"{b['resends']} resends")
    sec.row("batches refused (yesterday closed)", b["refused"] + b["refused after doubt"],
            f"{b['refused after doubt']} after an unanswered try")  # fmt: skip
    sec.row("batches given up", b["given up"])
    sec.row("in doubt, found applied (events)", result.in_doubt_applied)
    sec.row("batches resent on purpose", b["resent on purpose"])
    sec.row("faults injected", sum(result.faults.values()),
            ", ".join(f"{k} {v}" for k, v in sorted(result.faults.items())))  # fmt: skip
    for what, counts in (("writes", result.writes), ("reads", result.reads)):
        n503 = {k: v for k, v in counts.items() if k.startswith("503")}
        sec.row(f"{what}: requests", sum(counts.values()),
                f"{_count(counts, 'no answer')} unanswered")  # fmt: skip
        sec.row(f"{what}: 500 answered", _count(counts, "500"), "target 0")
        sec.row(f"{what}: 503 answered", sum(n503.values()),
                ", ".join(f"{k} {v}" for k, v in sorted(n503.items())))  # fmt: skip
    sec.row("events lost", result.lost, "target 0")
    sec.row("events doubled", result.doubled, "target 0")
    sec.row("archives verified", result.archives_verified, f"of {len(BOARDS)}")
    for what, counts in (("writes", result.writes), ("reads", result.reads)):
        sec.notes.append(f"{what}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for line, n in sorted(result.logged.items()):
        sec.notes.append(f"logged {n}x: {line}")
    if result.kept:
        sec.notes.append(f"logs and archives kept in {result.kept}")
    sec.check("no event lost or doubled", result.lost == 0 and result.doubled == 0)
    sec.check(
        "every board equals the model of acknowledged events"
        + (f" -- {'; '.join(result.mismatches[:5])}" if result.mismatches else ""),
        not result.mismatches,
    )
    sec.check(f"every archive of {PAST} verifies", result.archives_verified == len(BOARDS))
    for p in result.problems:
        sec.check(p, False)
    return sec


def run(opts: Options | None = None) -> Section:
    """Run the soak; its report section."""
    opts = opts or Options()
    return section(opts, soak(opts))


if __name__ == "__main__":  # python -m bench.soak [--seconds N]
    seconds = float(sys.argv[sys.argv.index("--seconds") + 1]) if "--seconds" in sys.argv else 180
    out = run(Options(seconds=seconds))
    print(out.render())
    sys.exit(0 if out.correct else 1)
