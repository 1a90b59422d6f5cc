"""Lua scripts: ``.lua`` files shipped in the package, registered once per client."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from redis.commands.core import Script

NAMES = ("write", "read_range", "read_points")


@cache
def source(name: str) -> str:
    return resources.files("seasons").joinpath("lua", f"{name}.lua").read_text()


class Scripts:
    """The registered scripts of one Redis client, as attributes (``scripts.write(...)``)."""

    def __init__(self, client: Any):
        self._scripts: dict[str, Script] = {n: client.register_script(source(n)) for n in NAMES}

    def __getattr__(self, name: str) -> Script:
        try:
            return self._scripts[name]
        except KeyError:
            raise AttributeError(name) from None
