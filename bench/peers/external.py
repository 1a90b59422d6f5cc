"""The two peers that run in processes of their own: install them on first use, run them.

Neither is vendored: ``redis-rank`` and ``ioredis`` come from the npm registry into
``bench/peers/scratch/node``, the Python ``leaderboard`` from PyPI into its own virtual
environment ``bench/peers/scratch/pyleaderboard-venv`` (its pins must not touch the project's
``.venv``). ``scratch/`` is git-ignored; delete it to reinstall. Each peer gets a plan (JSON
file: Redis URL, events file, reads) and prints one JSON object of results.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.peers.inprocess import PeerResult

HERE = Path(__file__).resolve().parent
SCRATCH = HERE / "scratch"
NODE_DIR = SCRATCH / "node"
VENV = SCRATCH / "pyleaderboard-venv"
RUN_DIR = SCRATCH / "run"  # events and plan files of the run in progress

REDIS_RANK = "2.2.3"
NPM_PACKAGES = [f"redis-rank@{REDIS_RANK}", "ioredis@5"]
# The maintained fork first (installs next to current redis-py); the original as a fallback.
PIP_CHOICES = [
    ["ninchanese-leaderboard==3.7.4", "redis", "hiredis"],
    ["leaderboard==3.7.3", "redis==2.10.6"],
]
PEER_TIMEOUT = 1800  # seconds one peer process may take at one size


@dataclass(frozen=True)
class External:
    """A peer that runs as ``argv + [plan file]``, or why it cannot run."""

    name: str
    argv: list[str]
    installed: str  # what was installed, or why nothing could be

    @property
    def available(self) -> bool:
        return bool(self.argv)


def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


def _tail(text: str, lines: int = 5) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def ensure_redis_rank() -> External:
    """``node redis_rank_bench.mjs`` with redis-rank and ioredis 5 installed by npm."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return External("redis-rank", [], "not run: node or npm is not on PATH")
    manifest = NODE_DIR / "node_modules" / "redis-rank" / "package.json"

    def version() -> str | None:
        try:
            return str(json.loads(manifest.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None

    if version() != REDIS_RANK or not (NODE_DIR / "node_modules" / "ioredis").is_dir():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        print(f"installing {' '.join(NPM_PACKAGES)} into {NODE_DIR} ...", flush=True)
        done = _run(
            [npm, "install", "--prefix", str(NODE_DIR), "--save-exact", "--no-audit",
             "--no-fund", *NPM_PACKAGES]
        )  # fmt: skip
        if done.returncode != 0 or version() != REDIS_RANK:
            return External("redis-rank", [], f"not run: npm install failed: {_tail(done.stderr)}")
    return External(
        "redis-rank", [node, str(HERE / "redis_rank_bench.mjs")], f"npm {' '.join(NPM_PACKAGES)}"
    )


def ensure_leaderboard() -> External:
    """``pyleaderboard_bench.py`` in its own venv, with the first of PIP_CHOICES that installs."""
    python = VENV / "bin" / "python"
    probe = [
        str(python), "-c",
        "from importlib import metadata\n"
        "import leaderboard.leaderboard\n"
        "for d in ('ninchanese-leaderboard', 'leaderboard'):\n"
        "    try: print(d + '==' + metadata.version(d)); break\n"
        "    except metadata.PackageNotFoundError: pass",
    ]  # fmt: skip
    script = [str(python), str(HERE / "pyleaderboard_bench.py")]
    if python.exists() and (found := _run(probe)).returncode == 0:
        return External("leaderboard", script, f"pip {found.stdout.strip()} (own venv)")
    failures: list[str] = []
    for packages in PIP_CHOICES:
        print(f"creating {VENV} with {' '.join(packages)} ...", flush=True)
        made = _run([sys.executable, "-m", "venv", "--clear", str(VENV)])
        if made.returncode != 0:
            return External("leaderboard", [], f"not run: venv failed: {_tail(made.stderr)}")
        pip = _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    *packages])  # fmt: skip
        if pip.returncode == 0 and (found := _run(probe)).returncode == 0:
            fallback = "" if packages is PIP_CHOICES[0] else f" (fallback: {failures[0]})"
            return External("leaderboard", script, f"pip {' '.join(packages)} (own venv){fallback}")
        failures.append(f"{packages[0]} failed: {_tail(pip.stderr, 2)}")
    return External("leaderboard", [], "not run: " + "; ".join(failures))


def run_external(
    peer: External, plan: dict[str, Any], tag: str
) -> tuple[PeerResult, dict[str, Any]]:
    """Run ``peer`` on ``plan``; its results and its ``info`` (extra timings)."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    plan_path = RUN_DIR / f"plan-{peer.name}-{tag}.json"
    plan_path.write_text(json.dumps(plan))
    env = {**os.environ, "TZ": "UTC"}
    try:
        done = _run([*peer.argv, str(plan_path)], env=env, timeout=PEER_TIMEOUT)
    finally:
        plan_path.unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"{peer.name} failed (exit {done.returncode}): {_tail(done.stderr)}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    return PeerResult.from_json(raw), dict(raw.get("info", {}))
