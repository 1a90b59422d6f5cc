"""The Lua scripts: ``seasons/lua/<name>.lua``, shipped in the package, each assembled once
into the one EVAL body Redis runs, and registered on each client from that body.

Code that several scripts need (trimming a board, the weighted aggregate of day boards, JSON
text) is written once, as a fragment ``seasons/lua/lib/<part>.lua``, and a script takes it with
a line ``--! include <part>``, which is replaced by the fragment here (a fragment may include
others; each is included once per script). So every script stays one self-contained body:
EVALSHA on a single server or on any cluster node needs nothing loaded beforehand.

:func:`script` is the registry both ways of running a script read: the read executor
(:mod:`seasons.executor`) sends its ``sha`` and ``source`` itself, and :class:`Scripts` hands
the same source to redis-py's ``register_script`` for everything else. Both answer Redis's
NOSCRIPT the one way of :func:`resent`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import TypeVar

from redis.commands.core import Script as RedisScript
from redis.exceptions import NoScriptError

from seasons.connection import RedisClient

INCLUDE = re.compile(r"^--! include (\S*)[ \t]*$", re.MULTILINE)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Script:
    """A script by name: the body Redis runs (fragments included) and its SHA1, which
    EVALSHA names."""

    name: str
    source: str
    sha: str


def _read(folder: Traversable) -> dict[str, str]:
    return {
        f.name.removesuffix(".lua"): f.read_text(encoding="utf-8")
        for f in folder.iterdir()
        if f.name.endswith(".lua")
    }


def assemble(name: str, text: str, fragments: dict[str, str]) -> str:
    """``text`` with each ``--! include <part>`` line replaced by ``fragments[part]`` (its own
    includes resolved); a part already included is not included again. ``name`` is the
    script's, for the error of an include that names no fragment."""
    done: set[str] = set()

    def resolve(where: str, body: str) -> str:
        def include(match: re.Match[str]) -> str:
            part = match.group(1)
            if part not in fragments:
                known = ", ".join(sorted(fragments)) or "none"
                raise LookupError(
                    f"seasons/lua/{where}.lua: '--! include {part}' names no fragment "
                    f"seasons/lua/lib/{part}.lua (there are: {known})"
                )
            if part in done:
                return f"-- (include {part}: above)"
            done.add(part)
            return resolve(f"lib/{part}", fragments[part]).rstrip("\n")

        return INCLUDE.sub(include, body)

    return resolve(name, text)


@cache
def _all() -> dict[str, Script]:
    folder = resources.files("seasons").joinpath("lua")
    fragments = _read(folder.joinpath("lib"))
    out = {}
    for name, text in sorted(_read(folder).items()):
        source = assemble(name, text, fragments)
        out[name] = Script(name, source, hashlib.sha1(source.encode()).hexdigest())
    return out


def names() -> list[str]:
    """The name of every script (``seasons/lua/<name>.lua``)."""
    return list(_all())


def script(name: str) -> Script:
    """The script ``name``; KeyError if there is none."""
    return _all()[name]


def resent(run: Callable[[], T], again: Callable[[], T]) -> T:
    """``run()``, which calls scripts by their SHA; if Redis answers NOSCRIPT, ``again()``
    once, which brings the source (EVAL, or SCRIPT LOAD then the same calls). Redis lost its
    scripts (a restart, ``SCRIPT FLUSH``, a failover to a node that never saw them) and ran
    none of the calls: sending them again cannot do anything twice (and every write carries
    its batch id besides)."""
    try:
        return run()
    except NoScriptError:
        return again()


class Scripts:
    """The scripts registered on one redis-py client (or cluster client), as attributes:
    ``scripts.write(keys=..., args=...)`` runs EVALSHA and loads the script on NOSCRIPT;
    on a pipeline (``client=pipe``) redis-py loads the pipeline's scripts before it runs,
    once: :meth:`loaded` answers a NOSCRIPT met after that."""

    def __init__(self, client: RedisClient):
        self._client = client
        self._scripts: dict[str, RedisScript] = {
            name: client.register_script(s.source) for name, s in _all().items()
        }

    def loaded(self, name: str, run: Callable[[], T]) -> T:
        """``run()``, a pipeline calling script ``name``; on NOSCRIPT the script is loaded
        and ``run()`` once more (:func:`resent`)."""

        def again() -> T:
            self._client.script_load(self._scripts[name].script)
            return run()

        return resent(run, again)

    def __getattr__(self, name: str) -> RedisScript:
        try:
            return self._scripts[name]
        except KeyError:
            raise AttributeError(name) from None
