"""Durations in the settings: ISO 8601 (``PT1H``, ``P30D``) or a number of seconds."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator


def _duration(value: Any) -> Any:
    """Durations are ISO 8601 (``PT1H``, ``P30D``) or a number of seconds."""
    if isinstance(value, str) and re.fullmatch(r"\d+(\.\d+)?", value.strip()):
        return float(value)
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration)]


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be a positive duration")
    return value


PositiveDuration = Annotated[Duration, AfterValidator(_positive)]


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError("must not be negative")
    return value


NonNegativeDuration = Annotated[Duration, AfterValidator(_not_negative)]
