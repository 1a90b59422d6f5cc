"""Helpers for the worker and archive tests: a season played on a ManualClock, fed to both
Seasons and the reference model (tests/reference.py), and database dumps.

Key TTLs are absolute (EXPIREAT on Redis's own clock), so simulated time starts at the real
local day: that only places the simulation, nothing asserts on the wall clock.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from reference import Model, Rejected

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import BatchRejected
from seasons.jobs.worker import Worker

ZONE = "Europe/Berlin"
# One worker tick at a fixed instant (argv[1]) in a subprocess, for the crash tests: with
# SEASONS_FAULT_AT=<checkpoint> it SIGKILLs itself there; SEASONS_FAULT_TRACE=1 prints every
# checkpoint passed (:func:`checkpoints`).
TICK_DRIVER = """
import sys
from datetime import datetime
from seasons.config import load_settings
from seasons.jobs.state import fault_from_env
from seasons.jobs.worker import Worker
from seasons import Seasons
from seasons.clock import ManualClock

clock = ManualClock(datetime.fromisoformat(sys.argv[1]))
worker = Worker(Seasons(load_settings(), clock=clock), fault=fault_from_env())
worker.tick(clock())
worker.shutdown()
print("TICKED", flush=True)
"""
Row = tuple[int, str, float, dict[str, Any]]  # rank, member, score, metadata
BOARDS: dict[str, Any] = {
    # sum, high first, weekend days and the second week weigh double
    "kills": {"week_weights": [1, 1, 1, 1, 1, 2, 2], "season_weights": [1, 2]},
    # fastest time: min, low first, shared ranks, only the best 6 kept
    "laps": {"aggregate": "min", "order": "asc", "ties": "shared", "max_entries": 6},
}


def today(zone: str = ZONE) -> date:
    """The real local date: where simulated seasons start (see the module docstring)."""
    return datetime.now(ZoneInfo(zone)).date()


def season_settings(
    factory: Callable[..., Settings], archive_dir: Path, **overrides: Any
) -> Settings:
    """Seasons of 7 days from today, two boards, archives under ``archive_dir``."""
    base: dict[str, Any] = {
        "timezone": ZONE,
        "boards": BOARDS,
        "seasons": {"length_days": 7, "anchor": today().isoformat()},
        "archive": {"dir": str(archive_dir)},
    }
    base.update(overrides)
    return factory(**base)


def local(day: date, hour: float, zone: str = ZONE) -> datetime:
    """An instant on a local day."""
    start = datetime(day.year, day.month, day.day, tzinfo=ZoneInfo(zone))
    return (start + timedelta(hours=hour)).astimezone(UTC)


class Sim:
    """Seasons, a worker and the reference model on one ManualClock."""

    def __init__(self, settings: Settings, seed: int = 1, start: datetime | None = None):
        self.settings = settings
        self.clock = ManualClock(start or local(today(), 0.5))
        self.app = Seasons(settings, clock=self.clock)
        self.worker = Worker(self.app)
        self.model = Model(settings)
        self.rng = random.Random(seed)
        self.ids: list[str] = []

    def close(self) -> None:
        self.app.close()

    def batch(self, n: int, *, ts: datetime | None = None) -> list[dict[str, Any]]:
        """``n`` random events at ``ts`` (default now); some repeat an earlier event_id."""
        rng = self.rng
        out = []
        for _ in range(n):
            board = rng.choice(sorted(self.settings.boards))
            ev: dict[str, Any] = {
                "board": board, "member": f"p{rng.randrange(14):02d}",
                "value": rng.randrange(1, 60), "ts": ts or self.clock(),
            }  # fmt: skip
            if rng.random() < 0.3:
                ev["metadata"] = {"level": rng.randrange(1, 9), "clan": rng.choice("abc")}
            if rng.random() < 0.3:
                if self.ids and rng.random() < 0.3:
                    ev["event_id"] = rng.choice(self.ids)  # a retry: a duplicate
                else:
                    ev["event_id"] = f"e{len(self.ids)}"
                    self.ids.append(ev["event_id"])
            out.append(ev)
        return out

    def submit(self, events: list[dict[str, Any]], *, backfill: bool = False) -> None:
        """Submit to both; they must agree on acceptance."""
        now = self.clock()
        try:
            self.model.submit([{"ts": now, **ev} for ev in events], now, backfill=backfill)
            accepted = True
        except Rejected:
            accepted = False
        try:
            self.app.submit_many(events, backfill=backfill)
            assert accepted, "Seasons accepted a batch the model rejects"
        except BatchRejected:
            assert not accepted, "Seasons rejected a batch the model accepts"

    def play_day(self, day: date, hours: tuple[float, ...] = (0.5, 9, 15, 21), n: int = 6) -> None:
        """Events at each hour of ``day`` (at 00:30 some late ones for the day before), with
        a worker tick after each batch."""
        for hour in hours:
            self.clock.set(local(day, hour))
            if hour < 1:
                self.submit(self.batch(2, ts=self.clock() - timedelta(hours=1)))
            self.submit(self.batch(n))
            self.worker.tick(self.clock())

    def expected_rows(self, board: str, season: str) -> list[Row]:
        return [
            (rank, member, score, self.model.metadata(board, member))
            for rank, member, score in self.model.ranked(board, "season", season)
        ]


FIELDS = ["rank", "member", "score", "metadata"]


def file_rows(path: Path) -> list[Row]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    for row in rows:  # a "reward" on boards with reward tiers (seasons.results)
        assert list(row) in (FIELDS, [*FIELDS, "reward"])
    return [(r["rank"], r["member"], r["score"], r["metadata"]) for r in rows]


def dump_db(client: Any) -> dict[bytes, tuple[bytes, int]]:
    """Every key with its DUMP and absolute expiry (ms, -1 none), to load again later."""
    out = {}
    for name in client.scan_iter(count=1000):
        out[name] = (client.dump(name), client.pexpiretime(name))
    return out


def load_db(client: Any, dump: dict[bytes, tuple[bytes, int]]) -> None:
    client.flushall()
    for name, (payload, expires) in dump.items():
        if expires > 0:
            client.restore(name, expires, payload, absttl=True)
        else:
            client.restore(name, 0, payload)


def toml_text(settings: Settings) -> str:
    """A TOML file giving ``settings`` (the fields these tests use), for subprocesses."""

    def value(v: Any) -> str:
        if isinstance(v, timedelta):
            return repr(v.total_seconds())
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, list | tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):  # an inline table; None leaves the key out
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items() if x is not None) + "}"
        return json.dumps(str(v))

    lines = [
        f"namespace = {value(settings.namespace)}",
        f"timezone = {value(settings.timezone)}",
        f"week_start = {value(settings.week_start)}",
        f"late_grace = {value(settings.late_grace)}",
        f"retention = {value(settings.retention)}",
        "[redis]",
        f"url = {value(settings.redis.url)}",
        "[seasons]",
        f"length_days = {settings.seasons.length_days}",
        f"anchor = {value(settings.seasons.anchor.isoformat())}",
        "[archive]",
        f"dir = {value(settings.archive.dir)}",
        "[worker]",
        *(f"{k} = {value(v)}" for k, v in settings.worker.model_dump().items()),
    ]
    for name, cfg in settings.boards.items():
        lines.append(f"[boards.{name}]")
        # A setting left unset (None: no bound, no limit) is left out, as in a file.
        lines += [f"{k} = {value(v)}" for k, v in cfg.model_dump().items() if v is not None]
    return "\n".join(lines) + "\n"


def checkpoints(output: str) -> list[str]:
    """The checkpoints a traced tick passed (``TICK_DRIVER`` with SEASONS_FAULT_TRACE=1)."""
    return [ln.split(" ", 1)[1] for ln in output.splitlines() if ln.startswith("CHECKPOINT ")]
