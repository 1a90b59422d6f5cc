"""The redis-py range of pyproject.toml, at both ends: the tests that meet redis-py's
internals and its retries pass with the lowest release of the range and with the highest.

Seasons leans on redis-py beyond its documented API: the table of error replies of its parser
(``redis._parsers``, :mod:`seasons.executor`), the class of a cluster pipeline
(:class:`seasons.connection.SeasonsCluster`), the timeouts a connection object of the client
would use (:class:`seasons.executor.Endpoint`); and on how its retries ride out an outage,
which changed between releases (before 7.2 a refused connection was not retried at all; with
7.2 to 7.4 the worker's outage tests fail). So the range is pinned to the releases tested here,
and widened only with this test passing (docs/development.md#redis-py).

Each end is installed from PyPI (pip, ``--no-deps``) into a folder of its own, which goes first
on ``PYTHONPATH``: it is then found before the redis-py of ``.venv``, whose other packages
(hiredis, pydantic...) and editable Seasons stay as they are. A venv would not do it alone:
``--system-site-packages`` reaches the system's packages, not ``.venv``'s, and ``.venv``
holds a redis-py already. The highest end is what pip picks in the range; when that is
``.venv``'s own redis-py, the rest of the suite is its run. Skipped when pip cannot install
(offline).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The tests that meet what the module's doc lists: the error table, the endpoint's timeouts and
# lost scripts (executor, write path), errors passing the boundary, the cluster's pipelines,
# and the worker riding out outages on redis-py's retries. The error boundary through the Python
# API and HTTP (the CLI's cases add process starts, not redis-py).
SUBSET = (
    "tests/test_executor.py",
    "tests/test_error_boundary.py::test_the_python_api",
    "tests/test_error_boundary.py::test_http",
    "tests/test_cluster.py",
    "tests/test_worker_redis_outage.py",
    "tests/test_write_retry.py::test_a_pipeline_that_lost_its_script_loads_it_and_runs_once",
)


def _range() -> tuple[str, str]:
    """The lowest release allowed and the first one excluded, from the redis requirement."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (requirement,) = [d for d in project["dependencies"] if d.startswith("redis")]
    found = re.fullmatch(r"redis\[hiredis\]>=([0-9.]+),<([0-9.]+)", requirement)
    assert found, f"the redis requirement names no range >=LOW,<HIGH: {requirement!r}"
    return found.group(1), found.group(2)


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


@pytest.mark.parametrize("end", ["lowest", "highest"])
def test_the_range_at_each_end(end: str, tmp_path: Path) -> None:
    low, high = _range()
    wanted = f"redis=={low}" if end == "lowest" else f"redis>={low},<{high}"
    target = tmp_path / "redis-py"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", "--target", target, wanted],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if pip.returncode != 0:
        pytest.skip(f"pip cannot install {wanted}: {pip.stderr.strip()[-300:]}")
    paths = [str(target), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    probe = subprocess.run(
        [sys.executable, "-c", "import redis; print(redis.__version__); print(redis.__file__)"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    version, where = probe.stdout.split()
    assert Path(where).is_relative_to(target)  # that redis-py, not .venv's
    if end == "lowest":
        assert _version(version) == _version(low)
    else:
        assert _version(low) <= _version(version) < _version(high)
        if version == importlib.metadata.version("redis"):
            return  # .venv's own: the whole suite runs on it
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-x", *SUBSET],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, f"redis-py {version}:\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
