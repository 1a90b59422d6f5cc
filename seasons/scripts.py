"""Lua scripts: ``.lua`` files shipped in the package, registered once per client."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from redis.commands.core import Script


@cache
def sources() -> dict[str, str]:
    """Every ``seasons/lua/<name>.lua`` by name."""
    folder = resources.files("seasons").joinpath("lua")
    return {
        f.name.removesuffix(".lua"): f.read_text()
        for f in folder.iterdir()
        if f.name.endswith(".lua")
    }


class Scripts:
    """The registered scripts of one Redis client, as attributes (``scripts.write(...)``)."""

    def __init__(self, client: Any):
        self._scripts: dict[str, Script] = {
            name: client.register_script(text) for name, text in sources().items()
        }

    def __getattr__(self, name: str) -> Script:
        try:
            return self._scripts[name]
        except KeyError:
            raise AttributeError(name) from None
