"""The results table: rows operation x size, rates per contender, ratios Seasons / contender.

Printed as a Markdown table (it reads as well in a terminal), so that docs/benchmarks.md's copy
is the printed text itself. A ratio below 1.00 (Seasons not ahead) is marked ``✗``.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.peers.inprocess import PeerResult

COLUMNS = ("Seasons", "redis-rank", "leaderboard", "pipeline")
PEERS = ("redis-rank", "leaderboard")  # the target: Seasons ahead of both on every row
OPS = (
    ("ingest", "ingest, events/s"),
    ("top", "top 10 + member data, req/s"),
    ("around", "around a member (11) + data, req/s"),
    ("rank", "rank of a member, req/s"),
)
BEHIND = "✗"

Results = Mapping[int, Mapping[str, PeerResult]]  # size -> column -> result


def human(n: int) -> str:
    """10000 -> 10k, 2000000 -> 2M."""
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n:,}"


def _rate(results: Mapping[str, PeerResult], column: str, op: str) -> float | None:
    result = results.get(column)
    return None if result is None else result.rate(op)


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None:
        return "n/a"
    x = ours / theirs
    return f"{x:.2f}" if x >= 1 else f"{x:.2f} {BEHIND}"


def table(results: Results) -> str:
    """The Markdown table, columns aligned."""
    head = ["operation", "members", *COLUMNS, *(f"Seasons / {c}" for c in COLUMNS[1:])]
    rows = [head]
    for op, label in OPS:
        for size, by_peer in results.items():
            rates = [_rate(by_peer, c, op) for c in COLUMNS]
            rows.append(
                [
                    label,
                    human(size),
                    *("n/a" if r is None else f"{r:,.0f}" for r in rates),
                    *(_ratio(rates[0], r) for r in rates[1:]),
                ]
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for i, row in enumerate(rows):
        cells = [
            cell.ljust(w) if j < 2 else cell.rjust(w)
            for j, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if i == 0:
            lines.append(
                "|"
                + "|".join("-" * (w + 1) + (":" if j >= 2 else "-") for j, w in enumerate(widths))
                + "|"
            )
    return "\n".join(lines)


def misses(results: Results) -> list[str]:
    """The rows where Seasons is not ahead of a peer, as 'op at size: behind X (ratio)'."""
    out = []
    for op, label in OPS:
        for size, by_peer in results.items():
            ours = _rate(by_peer, "Seasons", op)
            behind = [
                f"{peer} {ours / theirs:.2f}x"
                for peer in PEERS
                if ours is not None
                and (theirs := _rate(by_peer, peer, op)) is not None
                and ours < theirs
            ]
            if behind:
                out.append(f"{label.split(',')[0]} at {human(size)}: behind {', '.join(behind)}")
    return out
