"""Composite scores: several integer parts packed into one exact score.

A sorted set orders by one number. To rank by level, then by combat power, pack both into one
integer, ``level * 10^10 + power``: the most significant part decides, the next one breaks its
ties, and so on. Redis scores are IEEE doubles, which hold every integer up to 2^53 exactly and
no more, so a layout whose largest score passes 2^53 would silently rank wrong. This module
refuses such layouts when they are built, and refuses values that do not fit when a score is.

>>> level = CompositeScore([("level", None), ("power", 10)])
>>> level.build(level=42, power=1_234_567)
420001234567
>>> level.split(420001234567.0)
{'level': 42, 'power': 1234567}

For "lower is better" inside a part (the tower board: higher floor first, then the earlier
clear), store the complement yourself: ``floor * 10^10 + (base - clear_ts)`` with ``base`` a
far-future timestamp, i.e. ``CompositeScore([("floor", None), ("time_left", 10)])``.

A board that declares its layout in config (``boards.<name>.composite``, the same parts as
``{name, digits}`` tables) has every read answer each score's parts beside it, split by
:meth:`CompositeScore.split` where the reads write their JSON (:mod:`seasons.replies`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from seasons.vocabulary import MAX_EXACT

__all__ = ["MAX_EXACT", "CompositeScore"]


class CompositeScore:
    """A layout of integer parts, most significant first, each ``(name, digits)``.

    Every part but the first needs a width in decimal digits; the first may have ``None``:
    it then takes whatever the remaining room under 2^53 allows (see :attr:`max_first`).
    Parts are non-negative integers. Raises ``ValueError`` naming the part when a layout
    could produce a score above 2^53 (it would lose precision in a double).
    """

    def __init__(self, parts: Sequence[tuple[str, int | None]]):
        if not parts:
            raise ValueError("a composite score needs at least one part")
        names: list[str] = []
        widths: list[int | None] = []
        for i, (name, digits) in enumerate(parts):
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"part name {name!r} must be a Python identifier")
            if name in names:
                raise ValueError(f"part {name!r} is named twice")
            if digits is None:
                if i != 0:
                    raise ValueError(
                        f"part {name!r}: only the first (most significant) part may have "
                        "digits=None"
                    )
            elif isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
                raise ValueError(
                    f"part {name!r}: digits must be a positive integer, got {digits!r}"
                )
            names.append(name)
            widths.append(digits)
        self._names = tuple(names)
        self._widths = tuple(widths)
        # Multiplier of each part: 10 ** (digits of every less significant part).
        scales: list[int] = []
        scale = 1
        for width in reversed(widths):
            scales.append(scale)
            scale *= 10 ** (width or 0)
        self._scales = tuple(reversed(scales))
        low_room = self._scales[0]  # 10 ** (digits below the first part)
        if low_room - 1 > MAX_EXACT:
            raise ValueError(
                f"parts {', '.join(repr(n) for n in names[1:])} after {names[0]!r} take "
                f"{len(str(low_room)) - 1} digits: scores above 2^53 would lose precision in a "
                "double (at most 15 digits always fit)"
            )
        first_width = widths[0]
        largest_first = (MAX_EXACT - (low_room - 1)) // low_room
        if first_width is None:
            self._max_first = largest_first
        else:
            self._max_first = 10**first_width - 1
            if self._max_first > largest_first:
                raise ValueError(
                    f"part {names[0]!r} with {first_width} digits makes scores up to "
                    f"{self._max_first * low_room + low_room - 1}, above 2^53 = {MAX_EXACT} "
                    "(they would lose precision in a double)"
                )

    @property
    def names(self) -> tuple[str, ...]:
        """The part names, most significant first."""
        return self._names

    @property
    def max_first(self) -> int:
        """The largest value the first part may take."""
        return self._max_first

    @property
    def max_score(self) -> int:
        """The largest score this layout can build (never above 2^53)."""
        return self._max_first * self._scales[0] + self._scales[0] - 1

    def _limit(self, i: int) -> int:
        width = self._widths[i]
        return self._max_first if i == 0 or width is None else 10**width - 1

    def build(self, values: Mapping[str, int] | None = None, /, **parts: int) -> int:
        """The score of the given parts (all of them, by name, as a mapping or keywords)."""
        given = {**(values or {}), **parts}
        unknown = sorted(set(given) - set(self._names))
        if unknown:
            raise ValueError(f"unknown part {unknown[0]!r} (parts: {', '.join(self._names)})")
        score = 0
        for i, name in enumerate(self._names):
            if name not in given:
                raise ValueError(f"part {name!r} is missing")
            value = given[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"part {name!r} must be an int, got {type(value).__name__}")
            if value < 0:
                raise ValueError(f"part {name!r} must not be negative, got {value}")
            if value > self._limit(i):
                width = self._widths[i]
                why = (
                    f"it has {width} digits (at most {self._limit(i)})"
                    if i > 0 or width is not None
                    else f"at most {self._limit(i)} keeps the score within 2^53"
                )
                raise ValueError(f"part {name!r} = {value} does not fit: {why}")
            score += value * self._scales[i]
        if score > MAX_EXACT:  # unreachable by construction; kept as the contract's guard
            raise ValueError(f"score {score} is above 2^53 and would lose precision")
        return score

    def split(self, score: int | float) -> dict[str, int]:
        """The parts of a score built by this layout (a float read back from Redis is fine)."""
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise ValueError(f"score must be a number, got {type(score).__name__}")
        if isinstance(score, float):
            if not score.is_integer():
                raise ValueError(f"score {score!r} is not an integer")
            score = int(score)
        if not 0 <= score <= self.max_score:
            raise ValueError(f"score {score} is outside 0..{self.max_score} for this layout")
        out: dict[str, int] = {}
        rest = score
        for name, scale in zip(self._names, self._scales, strict=True):
            out[name], rest = divmod(rest, scale)
        return out

    @property
    def parts(self) -> tuple[tuple[str, int | None], ...]:
        """The layout as given: ``(name, digits)`` of each part, most significant first."""
        return tuple(zip(self._names, self._widths, strict=True))

    def __repr__(self) -> str:
        parts = ", ".join(f"({n!r}, {w!r})" for n, w in zip(self._names, self._widths, strict=True))
        return f"CompositeScore([{parts}])"
