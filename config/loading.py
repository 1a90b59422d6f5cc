"""Build :class:`Settings` from the environment and a TOML file, refusing anything unknown.

The merging is pydantic-settings' own (``Settings.settings_customise_sources``); this module
adds what the library does not do: it refuses unknown ``SEASONS_*`` variables (the library
ignores them), reads the TOML file once and says when it cannot, and turns every validation
error into a sentence that names the key as the user wrote it (``late_grace`` in the file,
``SEASONS_LATE_GRACE`` in the environment) and what the key accepts.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import UnionType
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import TomlConfigSettingsSource
from pydantic_settings.exceptions import SettingsError

from seasons.config.settings import (
    ENV_NESTED_DELIMITER,
    ENV_PREFIX,
    NAME_RE,
    NAMESPACE_RE,
    EnvironmentSource,
    Settings,
    config_path,
    given_sources,
)

__all__ = ["ConfigError", "config_path", "load_settings"]

# Environment variables with the prefix that are not settings themselves.
# SEASONS_FAULT*: the worker's crash-test hooks (jobs/state.py), read at the worker's edge.
# SEASONS_URL: the demo's HTTP address for curl (var/demo/env). SEASONS_TEST_* and
# SEASONS_SETUP_*: the binaries and steps of scripts/setup and the tests.
NOT_SETTINGS = {
    "SEASONS_CONFIG", "SEASONS_FAULT_AT", "SEASONS_FAULT", "SEASONS_FAULT_TRACE", "SEASONS_URL",
    "SEASONS_TEST_REDIS_SERVER", "SEASONS_TEST_REDIS_CLI", "SEASONS_TEST_CLUSTER",
    "SEASONS_SETUP_BROWSER", "SEASONS_SETUP_WRK", "SEASONS_DEMO_DIR",
}  # fmt: skip
# Settings whose values are never repeated in a message (a URL may hold a password).
# Keys whose values error messages never repeat (a list's index is left out: hooks.secret).
SECRETS = {
    "redis.url", "redis.password", "api.write_token", "api.admin_token", "hooks.url",
    "hooks.secret", "api.admin_tokens.token", "api.admin_tokens",
}  # fmt: skip
PATTERNS = {
    NAMESPACE_RE: "1 to 32 characters of a-z, 0-9, _ and -",
    NAME_RE: "1 to 64 characters of A-Z, a-z, 0-9, _ and -",
}
DURATION_FORMS = "ISO 8601 such as PT1H, PT30M or P30D, or a number of seconds such as 90"


class ConfigError(Exception):
    """Configuration that cannot be used; the message names every offending key."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


def load_settings(
    environ: Mapping[str, str] | None = None, path: Path | str | None = None, **overrides: Any
) -> Settings:
    """Load settings: ``overrides`` > environment > TOML file > defaults.

    ``environ`` defaults to ``os.environ``; ``path`` to ``$SEASONS_CONFIG``, else
    ``./seasons.toml`` if present. Raises :class:`ConfigError` naming every unknown key and
    bad value.
    """
    environ = dict(os.environ if environ is None else environ)
    problems, variables = _split_environment(environ)
    toml = _read_toml(Path(path) if path is not None else config_path(environ), problems)
    if toml is None:  # without the file, the other checks would report what it would fix
        raise ConfigError(problems)

    environment = EnvironmentSource(Settings, variables)
    try:
        with given_sources(environment, toml):
            settings = Settings(**overrides)
    except ValidationError as exc:
        origins = _Origins(overrides, environment(), variables, toml.toml_data)
        problems.extend(origins.explain(e) for e in exc.errors(include_url=False))
    except SettingsError as exc:  # a list or table in the environment that is not JSON
        problems.extend(_not_json(variables) or [str(exc)])
    if problems:
        raise ConfigError(problems)
    return settings


def _split_environment(environ: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """Problems for the unknown ``SEASONS_*`` variables (pydantic-settings ignores them), and
    the variables that name settings, for the environment source."""
    problems, variables = [], {}
    for name, value in environ.items():
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NOT_SETTINGS:
            continue
        keys = _env_keys(name)
        if _resolve(keys) is None:
            problems.append(f"{name}: {_unknown(keys)}")
        else:
            variables[name] = value
    return problems, variables


def _read_toml(file: Path | None, problems: list[str]) -> TomlConfigSettingsSource | None:
    """The file source, its file read once here; None (and a problem) if it cannot be read."""
    if file is not None and not file.is_file():
        problems.append(f"config file {str(file)!r} does not exist")
        return None
    try:
        return TomlConfigSettingsSource(Settings, toml_file=file)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(
            f"config file {str(file)!r} is not valid TOML: {exc} (text and durations are"
            ' quoted, as in late_grace = "PT1H"; numbers, true and false are not)'
        )
    except OSError as exc:
        problems.append(f"config file {str(file)!r} cannot be read: {exc.strerror}")
    return None


# -- the settings tree ---------------------------------------------------------------------


def _env_keys(name: str) -> list[str]:
    return name[len(ENV_PREFIX) :].lower().split(ENV_NESTED_DELIMITER)


def _resolve(keys: Sequence[str | int]) -> Any:
    """What ``keys`` lead to from the top of Settings: a model class, a ``dict[...]`` or a
    value's type; None if no such setting exists. An int is an item of a list."""
    node: Any = Settings
    for key in keys:
        if isinstance(key, str) and isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(key)
            if field is None:
                return None
            node = _optional(field.annotation)
        elif isinstance(key, str) and get_origin(node) is dict:
            node = get_args(node)[1]  # boards.<name>: validation checks the name itself
        elif isinstance(key, int) and get_origin(node) is tuple:
            node = get_args(node)[0]
        else:
            return None
    return node


def _optional(node: Any) -> Any:
    """``X | None`` is X (an optional table, such as boards.<b>.league)."""
    args = get_args(node)
    if isinstance(node, UnionType) and len(args) == 2 and type(None) in args:
        return next(a for a in args if a is not type(None))
    return node


def _unknown(keys: Sequence[str | int]) -> str:
    """Why ``keys`` is not a setting, with what the enclosing table takes instead."""
    known = len(keys) - 1
    while _resolve(keys[:known]) is None:
        known -= 1
    node = _resolve(keys[:known])
    head = _dotted(keys[:known])
    text = f"unknown setting {_dotted(keys)!r}"
    if not (isinstance(node, type) and issubclass(node, BaseModel)):
        return f"{text}; {head} is a single value, not a table"
    if not head:
        table = "the top level"
    elif isinstance(keys[known - 1], int):  # an entry of an array of tables
        table = f"each [[{_dotted(keys[: known - 1])}]] entry"
    else:
        table = f"[{head}]"
    return f"{text}; {table} takes {', '.join(node.model_fields)}"


def _is_table_or_list(node: Any) -> bool:
    if isinstance(node, type) and issubclass(node, BaseModel):
        return True
    return get_origin(node) in (dict, tuple, list)


def _dotted(loc: Sequence[str | int]) -> str:
    """A validation error's location as the key in the file: ``boards.kills.week_weights[2]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "[key]" and not part.startswith("function-"):
            out += f".{part}" if out else part
    return out


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# -- messages ------------------------------------------------------------------------------


class _Origins:
    """Which source gave the value at a location, so that a message names the key as written."""

    def __init__(
        self,
        overrides: Mapping[str, Any],
        environment: Mapping[str, Any],
        variables: Mapping[str, str],
        toml: Mapping[str, Any],
    ):
        # In precedence order: the first source holding the deepest part of a location wins.
        self.sources = (("overrides", overrides), ("env", environment), ("toml", toml))
        self.variables = {name.upper(): name for name in variables}

    def explain(self, error: ErrorDetails) -> str:
        loc = error["loc"]
        key = _dotted(loc)
        text = _sentence(error, loc, secret=_dotted([p for p in loc if isinstance(p, str)]))
        label = self._label(loc, key)
        return f"{label}: {text}" if label else text

    def _label(self, loc: Sequence[str | int], key: str) -> str:
        depths = [(_depth(data, loc), name) for name, data in self.sources]
        deepest = max(depth for depth, _ in depths)
        origin = next(name for depth, name in depths if depth == deepest) if deepest else None
        if origin == "env":
            names = [p for p in loc if isinstance(p, str) and p != "[key]"]
            for n in range(len(names), 0, -1):
                variable = self.variables.get(
                    ENV_PREFIX + ENV_NESTED_DELIMITER.join(names[:n]).upper()
                )
                if variable is not None:
                    return (
                        variable
                        if variable.upper() == ENV_PREFIX + key.upper()
                        else f"{variable} ({key})"
                    )
        return key


def _depth(data: Any, loc: Sequence[str | int]) -> int:
    """How many steps of ``loc`` exist in ``data`` (a source's nested values)."""
    depth = 0
    for part in loc:
        in_table = isinstance(data, Mapping) and part in data
        in_list = isinstance(data, list | tuple) and isinstance(part, int) and 0 <= part < len(data)
        if not (in_table or in_list):
            break
        data = data[part]
        depth += 1
    return depth


def _sentence(error: ErrorDetails, loc: Sequence[str | int], secret: str) -> str:
    """What is wrong with the value, and what the key accepts."""
    kind, ctx = error["type"], error.get("ctx", {})
    value = "the value" if secret in SECRETS else _shown(error.get("input"))
    if loc and loc[-1] == "[key]":
        value = f"the name {value}"
    if kind == "extra_forbidden":
        return _unknown([p for p in loc if p != "[key]"])
    if kind == "missing":
        return "is missing; it is required"
    if kind.startswith("time_delta"):
        return f"{value} is not a duration; use {DURATION_FORMS}"
    if kind == "literal_error":
        return f"{value} is not accepted; use {ctx['expected']}"
    if kind.startswith("bool"):
        return f"{value} is not true or false"
    if kind.startswith("int_"):
        return f"{value} is not a whole number"
    if kind.startswith("float_") or kind == "finite_number":
        return f"{value} is not a number"
    bounds = {
        "greater_than_equal": ("too small", "at least", "ge"),
        "greater_than": ("too small", "greater than", "gt"),
        "less_than_equal": ("too large", "at most", "le"),
        "less_than": ("too large", "less than", "lt"),
    }
    if kind in bounds:
        what, relation, name = bounds[kind]
        return f"{value} is {what}; it must be {relation} {ctx[name]}"
    if kind == "string_pattern_mismatch":
        pattern = ctx["pattern"]
        return f"{value} is not accepted; use {PATTERNS.get(pattern, f'text matching {pattern}')}"
    if kind == "string_type":
        return f"{value} is not text; write it in quotes"
    if kind.startswith("date"):
        return f"{value} is not a date; use YYYY-MM-DD, e.g. 2026-01-05"
    if kind in ("tuple_type", "list_type"):
        return f"{value} is not a list; use e.g. [1, 1, 2] (in the environment, as JSON)"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return (
            f"{value} is not a table of settings; use a [section] in the file, or a JSON"
            " object in the environment"
        )
    if kind in ("value_error", "assertion_error") and "error" in ctx:
        return str(ctx["error"])  # the validators of seasons.config.settings write sentences
    return error["msg"]


def _not_json(variables: Mapping[str, str]) -> list[str]:
    """The variables for lists and tables whose values are not JSON (the library's error names
    only the top-level field); values are not repeated, as a table may hold a token."""
    problems = []
    for name, value in variables.items():
        keys = _env_keys(name)
        if not _is_table_or_list(_resolve(keys)):
            continue
        try:
            json.loads(value)
        except json.JSONDecodeError as exc:
            problems.append(
                f"{name} ({'.'.join(keys)}): is not valid JSON ({exc.msg} at character"
                f" {exc.pos}); in the environment a list"
                ' is written as JSON, e.g. [1, 1, 1, 1, 1, 2, 2], and a table as {"key": value}'
            )
    return problems
