"""README.md as a newcomer uses it: the "First five minutes" commands run as written against
``scripts/demo``, and every relative link of README.md and docs/*.md leads somewhere.

The demo test starts ``scripts/demo`` (its own redis-server on a free port, the worker and the
HTTP server on a free port), waits for ``var/demo/env``, runs each command of the README's sh
block in ``bash -c 'source var/demo/env && <command>'`` and its Python block with that
environment, and checks every answer against the demo's Redis read directly: the public
sorted sets are the reference for pages and ranks.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
DEMO_CONFIG = ROOT / "config" / "demo.toml"
MAX_README_LINES = 250
# scripts/demo runs scripts/setup first (quick once installed), then seeds 35 days.
DEMO_START_SECONDS = 180
COMMAND_SECONDS = 60
# Not commands to check: they start the demo or prepare the shell.
SETUP_PREFIXES = ("scripts/demo", "source ", ". ")
# Options of the seasons CLI that take no value.
FLAGS = {"--json", "--yes", "-y", "--backfill", "--with-days", "--force", "--all"}


# --- the README's blocks -----------------------------------------------------------------------


def section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next heading of level 2."""
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README.md has no '## {heading}' section"
    return match.group(1)


def fenced(text: str, language: str) -> list[str]:
    """The bodies of the fenced code blocks in ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def five_minutes() -> tuple[list[str], str]:
    """The sh commands to check (one a line) and the Python block of "First five minutes"."""
    text = section(README.read_text(encoding="utf-8"), "First five minutes")
    shells, pythons = fenced(text, "sh"), fenced(text, "python")
    assert len(shells) == 1, f"'First five minutes' needs one sh block, has {len(shells)}"
    assert len(pythons) == 1, f"'First five minutes' needs one python block, has {len(pythons)}"
    lines = [line.strip() for line in shells[0].splitlines()]
    assert shlex.split(lines[0], comments=True) == ["source", "var/demo/env"], (
        "the sh block must start with `source var/demo/env`"
    )
    commands = [
        line for line in lines
        if line and not line.startswith("#") and not line.startswith(SETUP_PREFIXES)
    ]  # fmt: skip
    return commands, pythons[0]


def test_five_minutes_block_has_what_it_promises() -> None:
    """Three CLI reads or more, three curls (a page, a member, a POST) and a Python snippet."""
    commands, python = five_minutes()
    cli = [c for c in commands if c.startswith("seasons ")]
    curls = [c for c in commands if c.startswith("curl ")]
    assert len(cli) >= 3, cli
    assert {shlex.split(c, comments=True)[1] for c in cli} >= {"top", "rank"}, cli
    assert len(curls) == 3, curls
    assert any("-X POST" in c and "/v1/scores" in c for c in curls), curls
    assert all("$SEASONS_URL" in c for c in curls), "curls must use the demo's $SEASONS_URL"
    assert "Seasons.from_settings()" in python


# --- the demo ----------------------------------------------------------------------------------


def _clean_environ() -> dict[str, str]:
    """This process's environment without any SEASONS_* variable: the demo must start its own
    Redis (never one named by the caller's environment) and read config/demo.toml."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SEASONS_")}


def _env_names(env_file: Path, port: int) -> dict[str, str] | None:
    """The variables ``var/demo/env`` exports, once it is the one of the demo on ``port``."""
    if not env_file.is_file():
        return None
    done = subprocess.run(
        ["bash", "-c", f"source {shlex.quote(str(env_file))} && env -0"],
        cwd=ROOT, env=_clean_environ(), capture_output=True, timeout=30,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    found = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return found if found.get("SEASONS_URL") == f"http://127.0.0.1:{port}" else None


def _default_sigint() -> None:
    """In the demo's process, before exec: SIGINT back to its default. A shell started with
    SIGINT ignored (as a background job of a non-interactive shell, like some CI runners start
    the suite) cannot trap it, and the demo would not stop on Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@dataclass(frozen=True)
class Demo:
    """A running demo: the reader's shell starts in ``cwd``, where ``var/demo/env`` is this
    demo's; ``names`` is the environment that file sets."""

    cwd: Path
    names: dict[str, str]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """``scripts/demo`` running on a free HTTP port, its folder (SEASONS_DEMO_DIR) in a
    directory of the test's own, so that a demo running in the checkout is left alone."""
    if sys.platform != "linux":
        pytest.skip("scripts/demo is a bash script for Linux")
    port = free_port()
    cwd = tmp_path_factory.mktemp("reader")
    env_file = cwd / "var" / "demo" / "env"
    environ = _clean_environ() | {
        "SEASONS_API__PORT": str(port),
        "SEASONS_DEMO_DIR": str(env_file.parent),
    }
    # The demo's own output, to read when it fails.
    with open(cwd / "demo.log", "w") as log:
        proc = subprocess.Popen(
            ["scripts/demo"], cwd=ROOT, env=environ, start_new_session=True,
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_default_sigint,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + DEMO_START_SECONDS
            names = None
            while names is None:
                assert proc.poll() is None, f"scripts/demo exited with {proc.returncode}"
                assert time.monotonic() < deadline, "var/demo/env did not appear for this demo"
                time.sleep(0.5)
                names = _env_names(env_file, port)
            yield Demo(cwd, names)
        finally:
            # Ctrl-C, as the README says; the demo stops Redis, the worker and the server.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the session this test started
                proc.wait()
    assert proc.returncode == 0, f"scripts/demo exited with {proc.returncode} on SIGINT"


def run_line(demo: Demo, command: str) -> subprocess.CompletedProcess[str]:
    """One README command, as a reader pastes it into a shell that sourced var/demo/env."""
    return subprocess.run(
        ["bash", "-c", f"source var/demo/env && {command}"],
        cwd=demo.cwd, env=_clean_environ(), capture_output=True, text=True, timeout=COMMAND_SECONDS,
    )  # fmt: skip


def positional_names(args: list[str]) -> list[str]:
    """The names among a command's positional arguments (not numbers, not option values)."""
    names, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = "=" not in arg and arg not in FLAGS
        elif not re.fullmatch(r"-?[\d.]+", arg):
            names.append(arg)
    return names


def board_setting(board: str, name: str, default: str) -> str:
    """A board's setting in config/demo.toml (the demo's settings)."""
    boards = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))["boards"]
    value: str = boards[board].get(name, default)
    return value


def public_key(board: str, window: str, period: str) -> str:
    """The public sorted set of a board's period, spelled from docs/contract.md#keys."""
    namespace = tomllib.loads(DEMO_CONFIG.read_text(encoding="utf-8"))["namespace"]
    return f"{namespace}:{{{board}}}:{window}:{period}"


def check_page(r: redis.Redis, page: dict[str, Any]) -> None:
    """A page's entries are the public sorted set's, in the board's order, ranks from 1."""
    entries = page["entries"]
    assert entries, f"an empty page: {page}"
    order = board_setting(page["board"], "order", "desc")
    scores = [e["score"] for e in entries]
    assert scores == sorted(scores, reverse=order == "desc"), f"not in {order} order: {scores}"
    key = public_key(page["board"], page["window"], page["period"])
    offset = entries[0]["rank"] - 1
    expected = r.zrange(key, offset, offset + len(entries) - 1, desc=order == "desc",
                        withscores=True)  # fmt: skip
    assert [(e["member"], float(e["score"])) for e in entries] == [
        (m.decode(), s) for m, s in expected
    ]
    assert page["total"] == r.zcard(key)


def check_entry(r: redis.Redis, url: str, entry: dict[str, Any], board: str, window: str) -> None:
    """A member's entry: its score and rank as Redis has them on the current period's key."""
    listed = httpx.get(f"{url}/v1/boards", timeout=COMMAND_SECONDS).json()["boards"]
    (current,) = [b["current"][window] for b in listed if b["board"] == board]
    key = public_key(board, window, current["period"])
    member = entry["member"]
    score = r.zscore(key, member)
    assert score == float(entry["score"]), (entry, score)
    desc = board_setting(board, "order", "desc") == "desc"
    if board_setting(board, "ties", "member") == "member":
        position = r.zrevrank(key, member) if desc else r.zrank(key, member)
        assert entry["rank"] == 1 + position, (entry, position)
    else:
        better = r.zcount(key, f"({score}", "+inf") if desc else r.zcount(key, "-inf", f"({score}")
        assert better < entry["rank"] <= r.zcard(key), (entry, better)


def test_first_five_minutes(demo: Demo) -> None:
    """Each command of the README's sh block answers with data, against the demo."""
    commands, _ = five_minutes()
    assert demo.names["SEASONS_REDIS__URL"].startswith("redis://127.0.0.1:")
    assert (ROOT / demo.names["SEASONS_CONFIG"]).resolve() == DEMO_CONFIG.resolve()
    r = redis.Redis.from_url(demo.names["SEASONS_REDIS__URL"])
    try:
        for command in commands:
            done = run_line(demo, command)
            assert done.returncode == 0, (
                f"{command}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
            out = done.stdout.strip()
            assert out, f"{command}: no output"
            argv = shlex.split(command, comments=True)
            if argv[0] == "seasons":
                # Every board and member named on the line appears in what it prints.
                for name in positional_names(argv[2:]):
                    assert name in out, f"{command}: {name!r} not in\n{out}"
            if argv[0] == "curl" or "--json" in argv:
                answer = json.loads(out)
                assert "error" not in answer, f"{command}: {answer}"
                if "entries" in answer:
                    check_page(r, answer)
                elif "member" in answer and "rank" in answer:
                    url = next(a for a in argv if "/v1/boards/" in a)
                    board, window = url.split("/v1/boards/", 1)[1].split("/")[:2]
                    check_entry(r, demo.names["SEASONS_URL"], answer, board, window)
                elif "applied" in answer:
                    body = json.loads(argv[argv.index("-d") + 1])
                    assert answer["applied"] + answer["duplicates"] == len(body["events"])
                else:
                    pytest.fail(f"{command}: an answer this test does not know: {answer}")
    finally:
        r.close()


def test_first_five_minutes_python(demo: Demo) -> None:
    """The README's Python block runs with the demo's environment and prints data."""
    _, python = five_minutes()
    done = subprocess.run(
        ["bash", "-c", "source var/demo/env && python -"], input=python, cwd=demo.cwd,
        env=_clean_environ(), capture_output=True, text=True, timeout=COMMAND_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert len(lines) >= 2, done.stdout


# --- links, length, license --------------------------------------------------------------------


def test_readme_is_an_entry_point() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def links(path: Path) -> list[str]:
    """The targets of Markdown links outside code (fenced blocks and `spans`)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_slug_matches_github() -> None:
    assert slug("Waiting for replicas: `redis.wait_replicas`") == (
        "waiting-for-replicas-rediswait_replicas"
    )
    assert slug("A member's entry, percentile and gap") == "a-members-entry-percentile-and-gap"
    assert slug("`python -m bench`") == "python--m-bench"


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_relative_links_lead_somewhere(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(
                f"{target}: no {dest.relative_to(ROOT) if ROOT in dest.parents else dest}"
            )
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


# How a citation of a document kept outside the repository reads.
OUTSIDE = re.compile(r"SPEC sections?|SPEC §|seed 0\d\d|\.\./shared/")


def test_code_cites_sections_that_exist() -> None:
    """Every ``docs/x.md#anchor`` or ``README.md#anchor`` a comment or docstring cites is there,
    and none cites a document outside the repository."""
    cited = re.compile(r"\b((?:docs/[\w-]+|README)\.md)(?:#([\w-]+))?")
    broken = []
    for folder in ("seasons", "jobs", "config", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*")):
            skip = path.suffix not in {".py", ".lua", ".toml", ".js"} or path == Path(__file__)
            if skip or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            broken += [f"{path.relative_to(ROOT)}: {ref}" for ref in OUTSIDE.findall(text)]
            for file, anchor in cited.findall(text):
                dest = ROOT / file
                if not dest.is_file() or (anchor and anchor not in anchors(dest)):
                    broken.append(f"{path.relative_to(ROOT)}: {file}#{anchor}")
    assert not broken, broken


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_no_documents_outside_the_repository(doc: Path) -> None:
    """The docs cite their own sections, never a specification or seed kept elsewhere."""
    text = doc.read_text(encoding="utf-8")
    found = OUTSIDE.findall(text)
    assert not found, f"{doc.name}: {found}"


def test_license_is_mit() -> None:
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == {"text": "MIT"}
