"""Wording of the CLI's plain-text output that several commands share."""

from __future__ import annotations

# After a hidden member's own entry in open mode (docs/boards.md#hidden-and-banned-members):
# its row of a read, its climb, its standing after a write.
HIDDEN = "(hidden)"

# Nouns whose plural is not the singular + "s".
_IRREGULAR = {"entry": "entries", "batch": "batches", "day": "days"}


def plural(count: int, noun: str) -> str:
    """``count`` with ``noun`` in the number it takes: ``1 event``, ``0 events``,
    ``2 entries``."""
    return f"{count} {noun if count == 1 else _IRREGULAR.get(noun, noun + 's')}"
