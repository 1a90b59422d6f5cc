"""No import cycles between Seasons' modules, hidden ones included: every import counts, at
the top, in a function or under ``TYPE_CHECKING`` (a cycle dodged by an import in a function
is still two modules that need each other)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Where each package's files are: config and jobs are installed as seasons.config, seasons.jobs.
PACKAGES = {
    "seasons": ROOT / "seasons",
    "seasons.config": ROOT / "config",
    "seasons.jobs": ROOT / "jobs",
}


def modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if package == "seasons" and parts[0] in ("config", "jobs"):
                continue  # a link to the top-level folder, when scripts/setup made one
            name = ".".join((package, *parts)).removesuffix(".__init__")
            out[name] = path
    return out


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``path`` imports anywhere in it. ``from seasons import
    ties`` imports seasons.ties (the package's ``__init__`` runs first in any case)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names]
            found = [s for s in subs if s in known]
            out.update(found or ([node.module] if node.module in known else []))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(sorted([v, *component]))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_module_imports_itself_back() -> None:
    known = modules()
    graph = {name: imports(path, known) - {name} for name, path in known.items()}
    assert {"seasons.archives", "seasons.results", "seasons.standings"} <= set(graph)
    assert cycles(graph) == []


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
