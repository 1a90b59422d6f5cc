"""Build :class:`Settings` from the environment and a TOML file, refusing anything unknown."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    TomlConfigSettingsSource,
)
from pydantic_settings.exceptions import SettingsError

from seasons.config.settings import Settings

ENV_PREFIX = "SEASONS_"
# Environment variables with the prefix that are not settings themselves.
# SEASONS_FAULT*: the worker's crash-test hooks (jobs/state.py), read at the worker's edge.
NOT_SETTINGS = {"SEASONS_CONFIG", "SEASONS_FAULT_AT", "SEASONS_FAULT", "SEASONS_FAULT_TRACE"}


class ConfigError(Exception):
    """Configuration that cannot be used; the message names every offending key."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid configuration:\n" + "\n".join(f"  - {p}" for p in problems))


def config_path(environ: Mapping[str, str]) -> Path | None:
    """The TOML file: ``SEASONS_CONFIG`` if set, else ``./seasons.toml`` if present."""
    named = environ.get("SEASONS_CONFIG")
    if named:
        return Path(named)
    default = Path("seasons.toml")
    return default if default.is_file() else None


def _unknown_env_keys(environ: Mapping[str, str]) -> list[str]:
    """pydantic-settings ignores unknown prefixed variables; we refuse them."""
    problems = []
    for name in environ:
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in NOT_SETTINGS:
            continue
        path = upper[len(ENV_PREFIX) :].lower().split("__")
        if not _path_known(Settings, path):
            problems.append(f"{name}: unknown setting {'.'.join(path)!r}")
    return problems


def _path_known(model: type[BaseModel], path: list[str]) -> bool:
    head, rest = path[0], path[1:]
    field = model.model_fields.get(head)
    if field is None:
        return False
    if not rest:
        return True
    annotation = field.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _path_known(annotation, rest)
    if head == "boards":  # dict[name, BoardSettings]: boards__<name>[__<field>]
        from seasons.config.settings import BoardSettings

        return len(rest) == 1 or _path_known(BoardSettings, rest[1:])
    return False


def _format(err: ValidationError) -> list[str]:
    out = []
    for e in err.errors():
        where = ".".join(str(p) for p in e["loc"] if p not in ("function-after",)) or "settings"
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown setting"
        out.append(f"{where}: {msg}")
    return out


class Environment(EnvSettingsSource):
    """The environment source, reading a given mapping instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]):
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k.lower(): v for k, v in self._environ.items()}


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, merging nested tables key by key."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def load_settings(
    environ: Mapping[str, str] | None = None, path: Path | str | None = None, **overrides: Any
) -> Settings:
    """Load settings: ``overrides`` > environment > TOML file > defaults.

    Raises :class:`ConfigError` naming every unknown key and bad value.
    """
    environ = dict(os.environ if environ is None else environ)
    toml = Path(path) if path is not None else config_path(environ)
    problems = _unknown_env_keys(environ)
    if toml is not None:
        if not toml.is_file():
            problems.append(f"config file {str(toml)!r} does not exist")
            toml = None
        else:
            try:
                tomllib.loads(toml.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                problems.append(f"config file {str(toml)!r} is not valid TOML: {exc}")
                toml = None
    if problems:
        raise ConfigError(problems)

    try:
        env_values = Environment(Settings, environ)()
        toml_values = TomlConfigSettingsSource(Settings, toml_file=toml)() if toml else {}
        return Settings.model_validate(_merge(_merge(toml_values, env_values), overrides))
    except ValidationError as exc:
        raise ConfigError(_format(exc)) from None
    except SettingsError as exc:  # e.g. a nested env value that is not valid JSON
        raise ConfigError([str(exc).replace('source "Environment"', "the environment")]) from None
