"""``python -m bench.restore [--quick]``: what ``seasons restore`` costs on hostile files.

Each case is a crafted archive file of board ``kills``, season ``S1`` (ended 30 days ago) with
a manifest that describes it truthfully, restored by ``seasons restore FILE`` in a process of
its own (``SEASONS_CONFIG`` pointing at the bench's settings, its own redis-server). Reported:
the exit status, the seconds the process took and its peak resident size (``VmHWM`` of
``/proc/<pid>/status``, read by the process as it ends). The cases:

- one line of 1 GiB of one character (``--quick``: 64 MiB), about 1 MB of gzip;
- 5 million copies of one line (``--quick``: 200 000);
- a manifest that is a FIFO nobody writes, and one that is a link to ``/dev/zero``;
- for scale, a good file of 200 000 members (``--quick``: 20 000), restored.

Checks (exit status 1 if one fails): every hostile file is refused with exit 2 and no
traceback, the good one is restored with exit 0, and Redis holds no archive key of the
hostile files. Timings and sizes are reported, never judged: they depend on the machine.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis

from bench.common import ROOT, own_redis

NS = "bench-restore"
SEASON = "S1"
# The CLI as the console script runs it, reporting its peak resident size as it ends.
RUN_CLI = """
import sys
from seasons.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="seasons")
finally:
    with open("/proc/self/status") as f:
        sys.stderr.write("\\n" + next(x for x in f if x.startswith("VmHWM:")))
"""


@dataclass(frozen=True)
class Sizes:
    line_mib: int  # the one long line
    duplicates: int  # lines, all the same
    members: int  # the good file


FULL = Sizes(line_mib=1024, duplicates=5_000_000, members=200_000)
QUICK = Sizes(line_mib=64, duplicates=200_000, members=20_000)
TINY = Sizes(line_mib=8, duplicates=20_000, members=2_000)


@dataclass(frozen=True)
class Outcome:
    case: str
    code: int
    seconds: float
    peak_mib: float
    said: str  # the first line of the output (a message names at most 5 problems)

    def row(self) -> str:
        return f"{self.case:<44} exit {self.code}  {self.seconds:7.2f} s  {self.peak_mib:7.0f} MiB"


def settings_toml(url: str, archive: Path) -> str:
    anchor = datetime.now(UTC).date() - timedelta(days=37)  # S1: 37 to 30 days ago
    return (
        f'namespace = "{NS}"\ntimezone = "UTC"\n[redis]\nurl = "{url}"\n'
        f'[seasons]\nlength_days = 7\nanchor = "{anchor.isoformat()}"\n'
        f'[archive]\ndir = "{archive}"\n[boards.kills]\naggregate = "sum"\norder = "desc"\n'
    )


def write_gzip(data: Path, pieces: Iterable[bytes]) -> None:
    """``data`` as gzip of ``pieces``, written as they come."""
    with gzip.GzipFile(data, "wb", mtime=0) as gz:
        for piece in pieces:
            gz.write(piece)


def write_manifest(data: Path, count: int, score_sum: float) -> Path:
    digest = hashlib.sha256()
    with data.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    manifest = data.with_name(f"{SEASON}.manifest.json")
    manifest.write_text(json.dumps({
        "board": "kills", "season": SEASON, "count": count, "score_sum": score_sum,
        "sha256": digest.hexdigest(), "created_at": "2026-01-01T00:00:00Z",
    }))  # fmt: skip
    return manifest


def long_line(folder: Path, mib: int) -> Path:
    data = folder / f"{SEASON}.jsonl.gz"
    block = b"a" * (1 << 20)
    write_gzip(data, [*([block] * mib), b"\n"])
    write_manifest(data, 1, 0.0)
    return data


def duplicates(folder: Path, n: int) -> Path:
    data = folder / f"{SEASON}.jsonl.gz"
    line = b'{"rank":1,"member":"same","score":5,"metadata":{}}\n'
    write_gzip(data, (line * 10_000 for _ in range(n // 10_000)))
    write_manifest(data, n, 5.0 * n)
    return data


def special(folder: Path, kind: str) -> Path:
    data = good(folder, 10)
    manifest = data.with_name(f"{SEASON}.manifest.json")
    manifest.unlink()
    if kind == "fifo":
        os.mkfifo(manifest)
    else:
        manifest.symlink_to("/dev/zero")
    return data


def good(folder: Path, n: int) -> Path:
    data = folder / f"{SEASON}.jsonl.gz"
    scores = [float(n - i) for i in range(n)]

    lines = (
        json.dumps(
            {"rank": i + 1, "member": f"m{i:07d}", "score": score, "metadata": {"i": i}},
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for i, score in enumerate(scores)
    )
    write_gzip(data, lines)
    write_manifest(data, n, math.fsum(scores))
    return data


def restore(case: str, data: Path, env: dict[str, str], timeout: float = 600) -> Outcome:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN_CLI, "restore", str(data)], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return Outcome(case, -1, time.perf_counter() - start, math.nan, f"hung past {timeout} s")
    seconds = time.perf_counter() - start
    peak = re.search(r"VmHWM:\s+(\d+) kB", done.stderr)
    said = (done.stdout + done.stderr).strip().splitlines()
    code = done.returncode if "Traceback" not in done.stderr else -2
    return Outcome(
        case, code, seconds, int(peak.group(1)) / 1024 if peak else math.nan,
        said[0] if said else "",
    )  # fmt: skip


def run(url: str, sizes: Sizes) -> tuple[str, bool]:
    """The report and whether every check held."""
    client = redis.Redis.from_url(url)
    with tempfile.TemporaryDirectory(prefix="seasons-bench-restore-") as tmp:
        root = Path(tmp)
        config = root / "seasons.toml"
        config.write_text(settings_toml(url, root / "archive"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}
        env["SEASONS_CONFIG"] = str(config)
        cases: list[tuple[str, Callable[[Path], Path], int]] = [
            (f"one line of {sizes.line_mib} MiB", lambda f: long_line(f, sizes.line_mib), 2),
            (f"{sizes.duplicates:,} duplicate lines", lambda f: duplicates(f, sizes.duplicates), 2),
            ("manifest a FIFO", lambda f: special(f, "fifo"), 2),
            ("manifest a link to /dev/zero", lambda f: special(f, "zero"), 2),
            (f"good file of {sizes.members:,} members", lambda f: good(f, sizes.members), 0),
        ]
        out: list[str] = []
        ok = True
        for i, (case, make, wanted) in enumerate(cases):
            folder = root / f"case{i}"
            folder.mkdir()
            made = time.perf_counter()
            data = make(folder)
            size = data.stat().st_size
            made = time.perf_counter() - made
            key = f"{NS}:{{kills}}:archive:{SEASON}"
            client.delete(key)
            outcome = restore(case, data, env)
            held = client.exists(key)
            good_run = outcome.code == wanted and bool(held) == (wanted == 0)
            ok &= good_run
            out.append(
                f"{outcome.row()}  (gzip {size / 1e6:.1f} MB, made in {made:.1f} s)"
                f"{'' if good_run else '  CHECK FAILED'}\n    {outcome.said}"
            )
    client.close()
    return "\n".join(out), ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.restore", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller files: well under 30 s")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    with own_redis() as server:
        text, ok = run(server.url, sizes)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
