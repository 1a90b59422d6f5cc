"""The limits and the member rule of the reads (:mod:`seasons.reads`), checked before any
Redis call, for every interface alike; the HTTP schema and the CLI's help name the same
bounds, and the climb's ranks as the HTTP query and the CLI give them are parsed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from seasons.errors import InvalidInput, LimitExceeded
from seasons.events import member_problem

MAX_LIMIT = 1000
MAX_SIZE = 101
MAX_LAST = 400
MAX_LOOKUP = 1000
MAX_TARGETS = 1000
MAX_TARGET_RANK = 10**9
# The ranks a climb reaches for when none are given (every interface).
DEFAULT_TO = (10, 100)
DEFAULT_TO_TEXT = ",".join(map(str, DEFAULT_TO))


def check_limit(name: str, value: int, low: int, high: int) -> None:
    """:class:`LimitExceeded` naming ``name`` unless ``value`` is an integer from ``low`` to
    ``high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise LimitExceeded(f"{name} must be an integer, got {value!r}", {name: value})
    if not low <= value <= high:
        raise LimitExceeded(f"{name} must be between {low} and {high}, got {value}", {name: value})


def check_asked_member(member: Any) -> None:
    """The member rule of writes (:func:`seasons.events.check_member`), checked before any
    Redis call: a member no write can store is refused, not looked up (nor encoded)."""
    if (problem := member_problem(member)) is not None:
        raise problem


def parse_targets(text: str) -> list[int]:
    """The ranks of a climb as the HTTP query and the CLI give them: ``"10,100"``. Raises
    :class:`InvalidInput` naming ``to`` for anything but comma-separated integers (the
    limits are :func:`check_targets`'s)."""
    parts = text.split(",")
    if not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise InvalidInput(
            f"to must be ranks separated by commas, such as 10,100; got {text!r}", {"to": text}
        )
    ranks = []
    for part in parts:
        digits = part.strip().lstrip("0") or "0"
        if len(digits) > len(str(MAX_TARGET_RANK)):
            raise LimitExceeded(
                f"to: each rank must be between 1 and {MAX_TARGET_RANK}, got {part.strip()}",
                {"to": part.strip()},
            )
        ranks.append(int(digits))
    return ranks


def check_targets(to: Any) -> list[int]:
    """The ranks a climb reaches for (:meth:`seasons.reads.Reads.climb`): 1 to
    :data:`MAX_TARGETS` integers, each from 1 to :data:`MAX_TARGET_RANK`."""
    if isinstance(to, str) or not isinstance(to, Iterable):
        raise InvalidInput(f"to must be a list of ranks, got {to!r}", {"to": to})
    ranks = list(to)
    if not 1 <= len(ranks) <= MAX_TARGETS:
        raise LimitExceeded(
            f"to takes 1 to {MAX_TARGETS} ranks, got {len(ranks)}", {"to": len(ranks)}
        )
    for rank in ranks:
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise LimitExceeded(f"to: each rank must be an integer, got {rank!r}", {"to": rank})
        if not 1 <= rank <= MAX_TARGET_RANK:
            raise LimitExceeded(
                f"to: each rank must be between 1 and {MAX_TARGET_RANK}, got {rank}", {"to": rank}
            )
    return ranks
