"""What every bench section shares: sizes, the bench's own redis-server, settings, the report.

The bench never touches a Redis it did not start: ``python -m bench`` runs its own
``redis-server`` (no persistence, free port) through the test suite's :class:`RedisServer`,
and the sections take a URL so the smoke test can point them at the test fixture instead.
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from pathlib import Path
from typing import Any

from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.config.settings import WEEKDAYS

ROOT = Path(__file__).resolve().parent.parent
BOARD = "kills"
WEEK_WEIGHTS = [1, 1, 1, 1, 1, 2, 2]
SEASON_WEIGHTS = [1, 1, 1, 2]


@dataclass(frozen=True)
class Sizes:
    """How much work each section does (the default run, ``--quick``, the smoke test)."""

    name: str
    events: int  # ingest: events per method and round
    members: int  # ingest: distinct members the events fall on
    batch: int  # ingest: events per submit_many / pipeline execute
    ingest_rounds: int  # ingest: each method runs this often, interleaved; best round counts
    board_members: int  # reads and memory: members on the day board (one event each)
    requests: int  # reads: sequential requests per kind and method, over all rounds
    read_rounds: int  # reads: requests are split into this many interleaved rounds

    def describe(self) -> str:
        return (
            f"{self.name}: ingest {self.events:,} events over {self.members:,} members in "
            f"batches of {self.batch:,} (best of {self.ingest_rounds}); reads and memory on a "
            f"board of {self.board_members:,} members, {self.requests:,} requests per kind "
            f"(best of {self.read_rounds} rounds)"
        )


FULL = Sizes("full", 100_000, 50_000, 1_000, 3, 100_000, 20_000, 20)
QUICK = Sizes("quick", 20_000, 10_000, 1_000, 1, 20_000, 3_000, 6)
TINY = Sizes("tiny", 2_000, 1_000, 500, 1, 2_000, 50, 1)


# --- the clock and the settings ---------------------------------------------------------------


@dataclass(frozen=True)
class Calendar:
    """A fixed 'now' and a calendar that gives its day weight 2 in both its week and season.

    Days are UTC. The clock stands at noon of today's UTC date so that every key's EXPIREAT
    (period end + retention) lies in Redis's real future and no run straddles midnight. The week
    starts five days before today (weekday index 5: weight 2) and the season began 22 days ago
    (week 4 of the season: weight 2), so the write-through weights are visibly not 1.
    """

    today: date

    @classmethod
    def for_today(cls) -> Calendar:
        return cls(datetime.now(UTC).date())

    @property
    def now(self) -> datetime:
        return datetime.combine(self.today, dtime(12), tzinfo=UTC)

    def clock(self) -> ManualClock:
        return ManualClock(self.now)

    def settings(self, url: str, namespace: str) -> Settings:
        return make_settings(url, namespace, self.today)


def make_settings(
    url: str, namespace: str, today: date, *, league: dict[str, Any] | None = None,
    archive: Path | None = None,
) -> Settings:  # fmt: skip
    """Settings built in code: one ``kills`` sum board, nothing read from env or ./seasons.toml;
    with ``league``, the board's ``[boards.kills.league]``, with ``archive`` its archive dir."""
    board: dict[str, Any] = {
        "aggregate": "sum",
        "order": "desc",
        "week_weights": WEEK_WEIGHTS,
        "season_weights": SEASON_WEIGHTS,
    }
    if league is not None:
        board["league"] = league
    extra: dict[str, Any] = {} if archive is None else {"archive": {"dir": str(archive)}}
    week_start = WEEKDAYS[(today.weekday() - 5) % 7]
    with tempfile.TemporaryDirectory(prefix="seasons-bench-") as tmp:
        empty = Path(tmp) / "seasons.toml"
        empty.write_text("")
        return load_settings(
            environ={},
            path=empty,
            namespace=namespace,
            timezone="UTC",
            week_start=week_start,
            redis={"url": url},
            seasons={"length_days": 28, "anchor": today - timedelta(days=22)},
            boards={BOARD: board},
            **extra,
        )


# --- the bench's own redis-server ----------------------------------------------------------------


@contextmanager
def own_redis() -> Iterator[Any]:
    """A fresh ``redis-server`` on a free port (``--save '' --appendonly no``), closed after."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from redis_server import RedisServer  # the test suite's launcher: one copy of that logic

    with RedisServer() as server:
        yield server


# --- timing ---------------------------------------------------------------------------------------


def timed(fn: Callable[[], object]) -> float:
    """Seconds ``fn`` takes, measured after a full garbage collection."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# --- Redis's time ---------------------------------------------------------------------------------


# Commands that run other commands; Redis counts those both on their own line of INFO
# commandstats and in the time of the script that ran them.
SCRIPTS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})


def command_stats(client: Any) -> dict[str, int]:
    """Microseconds spent in each command so far (``INFO commandstats``)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["usec"]) for name, row in stats.items()}


def command_usec(before: dict[str, int], after: dict[str, int]) -> int:
    """Redis's time in commands between two :func:`command_stats`, each command counted once.

    Redis counts a command that EXEC or a script ran both on its own line and in the time of
    the EXEC or the script. So EXEC is left out (the commands it ran count themselves: all but
    its own bookkeeping, which favours the peer a little), and where scripts ran, only they
    count and what no script can call (MULTI, SCRIPT ...): Seasons sends its data commands
    inside scripts only. INFO is left out: it is the bench's own (and the health checks')."""
    delta = {name: usec - before.get(name, 0) for name, usec in after.items()}
    scripted = any(delta.get(name, 0) > 0 for name in SCRIPTS)

    def counted(name: str) -> bool:
        if name in ("exec", "info"):
            return False
        return not scripted or name in SCRIPTS or name == "multi" or name.startswith("script|")

    return sum(usec for name, usec in delta.items() if counted(name))


@dataclass
class Paired:
    """What :func:`paired` measured per side and slice: Redis's time in commands (µs) and
    wall time (s)."""

    usec: dict[str, list[float]]
    seconds: dict[str, list[float]]

    def total(self, side: str, *, wall: bool = False) -> float:
        return sum((self.seconds if wall else self.usec)[side])

    def ratio(self, side: str, other: str, *, wall: bool = False) -> float:
        """``side``'s time over ``other``'s, wall or Redis's: the median of the slices'
        ratios, which a slice disturbed by something else on the machine cannot move."""
        times = self.seconds if wall else self.usec
        ratios = [a / b for a, b in zip(times[side], times[other], strict=True) if b > 0]
        return statistics.median(ratios) if ratios else float("nan")


def paired(
    client: Any, sides: dict[str, Callable[[int], object]], steps: int, chunks: int = 20
) -> Paired:
    """Runs ``sides[name](i)`` for i in ``range(steps)`` for every side, in ``chunks`` slices
    that alternate between the sides (and which side goes first), measuring Redis's time in
    commands (:func:`command_usec`; all sides on the Redis of ``client``) and wall time per
    side and slice. Whole rounds of one side in turn let the machine's drift (a neighbour,
    the CPU's clock, a growing key) fall on one side only; slices of both sides side by side
    see the same machine."""
    usec: dict[str, list[float]] = {name: [] for name in sides}
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    chunks = max(1, min(chunks, steps))
    bounds = [steps * k // chunks for k in range(chunks + 1)]
    for k in range(chunks):
        for name in names if k % 2 == 0 else names[::-1]:
            step = sides[name]
            before = command_stats(client)
            started = time.perf_counter()
            for i in range(bounds[k], bounds[k + 1]):
                step(i)
            seconds[name].append(time.perf_counter() - started)
            usec[name].append(command_usec(before, command_stats(client)))
    return Paired(usec, seconds)


# --- the report -----------------------------------------------------------------------------------


@dataclass
class Section:
    """One section of the report: measured rows, checks, and the ratio against its target."""

    title: str
    what: str
    unit: str
    rows: list[tuple[str, float, str]] = field(default_factory=list)  # label, value, note
    decimals: int | None = None  # of the values in rows; None: 0 from 100 up, else 2
    checks: list[tuple[str, bool]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # label, x, op, goal; op "" marks a ratio shown for information, with no target
    ratios: list[tuple[str, float, str, float]] = field(default_factory=list)

    def row(self, label: str, value: float, note: str = "") -> None:
        self.rows.append((label, value, note))

    def check(self, label: str, ok: bool) -> None:
        self.checks.append((label, ok))

    def ratio(self, label: str, value: float, op: str = "", target: float = 0.0) -> None:
        self.ratios.append((label, value, op, target))

    @property
    def correct(self) -> bool:
        return all(ok for _, ok in self.checks)

    @property
    def passed(self) -> bool:
        met = all(_meets(x, op, goal) for _, x, op, goal in self.ratios)
        return met and self.correct

    def render(self) -> str:
        out = [self.title, "  " + self.what]
        width = max([len(r[0]) for r in self.rows] + [len(r[0]) for r in self.ratios] + [20])
        out.append(f"  {'':{width}}  {self.unit:>14}")
        for label, value, note in self.rows:
            places = self.decimals if self.decimals is not None else (0 if value >= 100 else 2)
            shown = f"{value:,.{places}f}"
            out.append(f"  {label:{width}}  {shown:>14}" + (f"  {note}" if note else ""))
        for label, ok in self.checks:
            out.append(f"  check: {label}: {'OK' if ok else 'FAILED'}")
        for label, x, op, goal in self.ratios:
            if not op:
                out.append(f"  {label:{width}}  {x:>13.2f}x  (information)")
                continue
            verdict = "PASS" if _meets(x, op, goal) and self.correct else "MISS"
            out.append(f"  {label:{width}}  {x:>13.2f}x  target {op} {goal:.2f}x  {verdict}")
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)


def _meets(x: float, op: str, goal: float) -> bool:
    if not op:
        return True
    return x >= goal if op == ">=" else x <= goal
