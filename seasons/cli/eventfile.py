"""Event files for ``seasons import``: JSON lines or CSV, parsed line by line.

JSON lines: one event object per line, exactly as ``POST /v1/scores`` takes them. CSV: a header
naming the columns ``board,member,value`` and optionally ``ts``, ``event_id`` and ``metadata`` (a
JSON object); empty ``ts``/``event_id``/``metadata`` cells mean "not given". Each event keeps the
line it starts on, so every problem can name its line.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from seasons.cli.text import plural

Format = Literal["jsonl", "csv"]
JSONL_SUFFIXES = {".jsonl", ".json", ".ndjson"}
CSV_SUFFIXES = {".csv"}
CSV_REQUIRED = ("board", "member", "value")
CSV_OPTIONAL = ("ts", "event_id", "metadata")
_INTEGER = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class Line:
    """One event of a file and the line it starts on (1-based)."""

    line: int
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a line of a file is not an event."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def detect_format(name: str, head: bytes) -> Format:
    """By extension; else JSON lines if the first non-blank character is ``{``, else CSV."""
    suffix = Path(name).suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix in CSV_SUFFIXES:
        return "csv"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "jsonl" if text.startswith(b"{") else "csv"


def read_events(
    stream: IO[bytes], fmt: Format, progress: Callable[[int], None] | None = None
) -> Iterator[Line | Problem]:
    """Every event of ``stream`` and every problem, in file order.

    ``progress`` is called with the number of bytes of each line read.
    """
    lines = _Lines(stream, progress)
    if fmt == "jsonl":
        yield from _jsonl(lines)
    else:
        yield from _csv(lines)


class _Lines:
    """Decoded lines with their 1-based numbers; undecodable lines become problems."""

    def __init__(self, stream: IO[bytes], progress: Callable[[int], None] | None):
        self.stream = stream
        self.progress = progress
        self.number = 0
        self.problems: list[Problem] = []

    def __iter__(self) -> Iterator[str]:
        for raw in self.stream:
            self.number += 1
            if self.progress is not None:
                self.progress(len(raw))
            if self.number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.problems.append(Problem(self.number, f"not valid UTF-8 ({exc.reason})"))
                yield "\n"  # keeps line numbers right; the problem is reported instead


def _drain(lines: _Lines) -> Iterator[Problem]:
    while lines.problems:
        yield lines.problems.pop(0)


def _jsonl(lines: _Lines) -> Iterator[Line | Problem]:
    for text in lines:
        yield from _drain(lines)
        if not text.strip():
            continue
        try:
            event = json.loads(text)
        except json.JSONDecodeError as exc:
            yield Problem(lines.number, f"not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(event, dict):
            yield Problem(lines.number, f"expected a JSON object, got {_json_type(event)}")
            continue
        yield Line(lines.number, event)


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _csv(lines: _Lines) -> Iterator[Line | Problem]:
    reader = csv.reader(lines, skipinitialspace=True, strict=True)
    header: list[str] | None = None
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            yield from _drain(lines)
            yield Problem(start, f"not valid CSV: {exc}")
            return  # the reader cannot resynchronise after a broken quote
        line, start = start, lines.number + 1
        yield from _drain(lines)
        if not row or all(not cell.strip() for cell in row):
            continue
        if header is None:
            header = [cell.strip().lower() for cell in row]
            problem = _check_header(header)
            if problem:
                yield Problem(line, problem)
                return
            continue
        if len(row) != len(header):
            expected = f"{plural(len(header), 'field')} ({','.join(header)})"
            yield Problem(line, f"expected {expected}, got {len(row)}")
            continue
        yield _csv_event(line, dict(zip(header, row, strict=True)))


def _check_header(header: list[str]) -> str | None:
    columns = f"columns: {','.join(CSV_REQUIRED)} and optionally {','.join(CSV_OPTIONAL)}"
    missing = [c for c in CSV_REQUIRED if c not in header]
    if missing:
        return f"the CSV header has no {', '.join(repr(c) for c in missing)} column ({columns})"
    unknown = [c for c in header if c not in CSV_REQUIRED + CSV_OPTIONAL]
    if unknown:
        return f"unknown CSV column {unknown[0]!r} ({columns})"
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        return f"CSV column {repeated[0]!r} appears twice"
    return None


def _csv_event(line: int, cells: dict[str, str]) -> Line | Problem:
    event: dict[str, Any] = {"board": cells["board"].strip(), "member": cells["member"]}
    text = cells["value"].strip()
    if not text:
        return Problem(line, "value is empty")
    number = parse_number(text)
    if number is None:
        return Problem(line, f"value {text!r} is not a number")
    event["value"] = number
    for name in ("ts", "event_id"):
        cell = cells.get(name, "").strip()
        if cell:
            event[name] = cell
    meta = cells.get("metadata", "").strip()
    if meta:
        try:
            event["metadata"] = json.loads(meta)
        except json.JSONDecodeError as exc:
            return Problem(line, f"metadata is not valid JSON: {exc.msg}")
    return Line(line, event)


def parse_number(text: str) -> int | float | None:
    """An int if ``text`` is an integer literal (exact beyond 2^53 for the range check), else
    a float, else None."""
    text = text.strip()
    if _INTEGER.fullmatch(text):
        try:
            return int(text)
        except ValueError:  # past Python's int <-> str digit limit: out of range anyway
            return float(text)
    try:
        return float(text)
    except ValueError:
        return None
