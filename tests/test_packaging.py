"""The wheel installs next to anything: an sdist built from this tree's files (no link among
them: ``seasons/config`` and ``seasons/jobs`` are made by scripts/setup for static tools, never
shipped), a wheel built from that sdist, installed with ``--no-deps`` into a fresh virtual
environment, and used from an application that has modules of its own named ``config`` and
``jobs``.

The fresh environment reaches the dependencies through a ``.pth`` line naming this project's
site-packages. A path line only puts that folder on ``sys.path``; the ``.pth`` files inside it
are not run, so the editable install's finder (which would map ``seasons`` back onto this
tree) stays off, and what gets imported is the installed wheel.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "seasons", "config", "jobs")
NS = "pkgtest"

APP_CONFIG = 'NAME = "the application\'s own config"\n'
APP_JOBS = 'def describe() -> str:\n    return "the application\'s own jobs"\n'
# Runs inside the fresh environment, in the application's folder (so sys.path[0] is that
# folder, as for any script an application runs). Prints one JSON object.
APP_SCRIPT = """
import json, sys

import config
import jobs
from seasons import Seasons
import seasons, seasons.config, seasons.jobs
from seasons.config import load_settings
from seasons.jobs.worker import Worker

settings = load_settings(
    environ={}, redis={"url": sys.argv[1]}, namespace=sys.argv[2], boards={"kills": {}}
)
with Seasons(settings) as app:
    written = app.submit("kills", "ann", 3, batch_id="pkg-1")
    app.submit("kills", "bob", 5, batch_id="pkg-2")
    top = app.top("kills", "day")
print(json.dumps({
    "config": config.NAME,
    "config_file": config.__file__,
    "jobs": jobs.describe(),
    "jobs_file": jobs.__file__,
    "seasons": seasons.__file__,
    "seasons_config": seasons.config.__file__,
    "seasons_jobs": seasons.jobs.__file__,
    "worker": Worker.__module__,
    "applied": written.applied,
    "top": [[e.member, e.score] for e in top.entries],
    "editable_finders": [repr(f) for f in sys.meta_path if "editable" in repr(f).lower()],
    "editable_modules": [m for m in sys.modules if "editable" in m],
}))
"""


def _run(*args: str | Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=300, **kwargs
    )
    assert done.returncode == 0, f"{args}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


def _can_build_here() -> bool:
    """Whether this venv has a setuptools that can write a wheel (``bdist_wheel`` is built
    into setuptools from 70.1; before that it comes from the ``wheel`` package)."""
    if importlib.util.find_spec("wheel") is not None:
        return True
    major, minor = (int(p) for p in importlib.metadata.version("setuptools").split(".")[:2])
    return (major, minor) >= (70, 1)


def _not_links(folder: str, names: list[str]) -> set[str]:
    """What a checkout does not hold: caches, and links (scripts/setup's, git-ignored)."""
    return {n for n in names if n == "__pycache__" or n.endswith(".pyc")} | {
        n for n in names if os.path.islink(os.path.join(folder, n))
    }


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist of this working tree, built from a copy of its files (setuptools writes
    *.egg-info next to the sources, which must not land in the tree)."""
    tmp = tmp_path_factory.mktemp("sdist")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=_not_links)
        else:
            shutil.copy2(ROOT / name, src / name)
    assert not (src / "seasons" / "config").exists()
    out = tmp / "dist"
    # The build backend itself (what `python -m build --sdist` calls), without fetching.
    build = f"from setuptools import build_meta; print(build_meta.build_sdist({str(out)!r}))"
    name = _run(sys.executable, "-c", build, cwd=src).stdout.strip().splitlines()[-1]
    return out / name


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory, sdist: Path) -> Path:
    """The wheel built from the sdist alone, as a package index's user would build it."""
    out = tmp_path_factory.mktemp("wheel")
    pip: list[str | Path] = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-cache-dir",
        "-w",
        out,
    ]
    # Without build isolation nothing is fetched; where this venv cannot build a wheel
    # (setuptools < 70.1 and no `wheel` package), pip builds in an isolated environment
    # with setuptools and wheel from the configured package index.
    _run(*pip, *(["--no-build-isolation"] if _can_build_here() else []), sdist)
    (built,) = out.glob("seasons-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A new virtual environment with only the wheel installed; its python."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    pip: list[str | Path] = [sys.executable, "-m", "pip", "--python", python, "install"]
    _run(*pip, "--no-deps", "--no-index", "--no-cache-dir", wheel)
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    site_packages = Path(purelib.stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_packages / "seasons_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "config.py").write_text(APP_CONFIG)
    (app / "jobs.py").write_text(APP_JOBS)
    (app / "main.py").write_text(APP_SCRIPT)
    return app


@pytest.fixture
def clean_env() -> Iterator[dict[str, str]]:
    """The environment for the application: nothing that points Python at this tree."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SEASONS_", "PYTHON", "VIRTUAL_ENV"))
    }
    yield keep | {"PYTHONNOUSERSITE": "1"}


def test_wheel_has_one_top_level_package_with_its_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"seasons"}, tops  # no top-level config/ or jobs/
    assert not any(n.startswith(("config/", "jobs/")) for n in names)
    (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["seasons"]

    assert "seasons/config/demo.toml" in names
    assert {"seasons/config/settings.py", "seasons/jobs/worker.py"} <= names
    # Every Lua script and web file of the tree ships, wherever it sits under its folder.
    for folder in ("lua", "web"):
        base = ROOT / "seasons" / folder
        shipped = {f"seasons/{folder}/{p.relative_to(base)}" for p in base.rglob("*")}
        shipped = {n for n in shipped if (ROOT / n).is_file() and "__pycache__" not in n}
        assert shipped, folder
        assert shipped <= names, sorted(shipped - names)
    assert any(n.endswith(".lua") for n in names)
    assert "seasons/web/index.html" in names


def test_installed_wheel_works_next_to_app_config_and_jobs(
    fresh_venv: Path, app_dir: Path, clean_env: dict[str, str], redis_url: str
) -> None:
    done = _run(fresh_venv, "main.py", redis_url, NS, cwd=app_dir, env=clean_env)
    out = json.loads(done.stdout.strip().splitlines()[-1])

    # The application's own modules keep their names ...
    assert out["config"] == "the application's own config"
    assert Path(out["config_file"]) == app_dir / "config.py"
    assert out["jobs"] == "the application's own jobs"
    assert Path(out["jobs_file"]) == app_dir / "jobs.py"
    # ... and Seasons' come from the wheel in the fresh environment, not from this tree.
    venv = fresh_venv.parent.parent
    for key in ("seasons", "seasons_config", "seasons_jobs"):
        assert Path(out[key]).is_relative_to(venv), (key, out[key])
        assert not Path(out[key]).resolve().is_relative_to(ROOT), (key, out[key])
    assert out["worker"] == "seasons.jobs.worker"
    assert out["editable_finders"] == [] and out["editable_modules"] == []

    # The score went through the installed Lua scripts to the test's server and back.
    assert out["applied"] == 1
    assert out["top"] == [["bob", 5.0], ["ann", 3.0]]
    client = redis.Redis.from_url(redis_url)
    try:
        assert client.keys(f"{NS}:*"), "nothing was written to the test's redis-server"
    finally:
        client.close()


def test_sdist_holds_the_folders_as_files(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        members = tar.getmembers()
    assert not [m.name for m in members if m.issym() or m.islnk()]
    names = {m.name.split("/", 1)[1] for m in members if "/" in m.name}
    assert {"pyproject.toml", "config/settings.py", "jobs/worker.py"} <= names
    assert "seasons/lua/write.lua" in names
    assert not any(n.startswith(("seasons/config/", "seasons/jobs/")) for n in names)


def test_installed_command_runs(
    fresh_venv: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    done = _run(fresh_venv.parent / "seasons", "--help", cwd=tmp_path, env=clean_env)
    assert done.stdout.startswith("Usage: seasons"), done.stdout
    assert {"serve", "worker", "restore"} <= set(done.stdout.split())


def test_no_links_are_committed() -> None:
    """A checkout on a file system without symbolic links holds every file of the project."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    staged = _run("git", "ls-files", "--stage", cwd=ROOT).stdout.splitlines()
    assert staged, "git lists no file"
    assert [line.split("\t", 1)[1] for line in staged if line.startswith("120000 ")] == []
