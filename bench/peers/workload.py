"""The events every library gets, the reads each is asked, and the answers they must give.

One size is ``n`` members, each scoring once, in a shuffled order: event k is ``(members[k],
values[k], meta[k])``, an integer value in 1..10^7 and a small member data object (the same
JSON text for everyone). With one event per member, libraries that set scores and libraries
that add them build the same board, and the board the reads run on has exactly ``n`` members.
The expected answers are worked out here in plain Python, never from Redis.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOP = 10  # top-N read
AROUND = 11  # entries of an around read: the member and 5 either side
CHECK = 20  # members whose rank and around answers are compared with the expected ones
MAX_VALUE = 10_000_000


@dataclass(frozen=True)
class Answers:
    """What a library answered for the checked reads (the expected answers have this form too)."""

    top: list[tuple[str, float, dict[str, Any]]]  # member, score, member data
    ranks: dict[str, int]  # member -> 1-based rank
    around: dict[str, list[tuple[str, int]]]  # member -> [(member, rank)] of its around read

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Answers:
        return cls(
            top=[(m, float(s), d) for m, s, d in raw["top"]],
            ranks={m: int(r) for m, r in raw["ranks"].items()},
            around={m: [(x, int(r)) for x, r in rows] for m, rows in raw["around"].items()},
        )


@dataclass(frozen=True)
class Workload:
    """The events of one size, the read targets, and the expected answers."""

    members: list[str]
    values: list[int]
    meta: list[str]  # member data of event k as compact JSON with sorted keys
    targets: list[str]  # read requests go to these members in turn
    check: list[str]  # targets whose answers are compared, at least AROUND from either end
    expected: Answers = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.members)

    def write_events(self, path: Path) -> None:
        """The events as ``member TAB value TAB metadata-json`` lines, for the other processes."""
        with path.open("w", encoding="utf-8") as out:
            for start in range(0, self.size, 100_000):
                stop = start + 100_000
                out.writelines(
                    f"{m}\t{v}\t{j}\n"
                    for m, v, j in zip(
                        self.members[start:stop],
                        self.values[start:stop],
                        self.meta[start:stop],
                        strict=True,
                    )
                )


def meta_json(i: int) -> str:
    """Member data of member number ``i``: what ``json.dumps(sort_keys=True)`` compactly gives."""
    return f'{{"clan":"clan-{i % 211}","level":{i % 80 + 1},"name":"Player {i}"}}'


def make_workload(n: int, requests: int, *, seed: int = 7) -> Workload:
    """``n`` events on ``n`` members, ``requests`` read targets and the expected answers."""
    rnd = random.Random(seed)
    ids = list(range(n))
    rnd.shuffle(ids)
    members = [f"player:{i:07d}" for i in ids]
    values = [rnd.randrange(1, MAX_VALUE + 1) for _ in range(n)]
    meta = [meta_json(i) for i in ids]
    target_ix = rnd.choices(range(n), k=requests)
    targets = [members[k] for k in target_ix]

    # Redis orders equal scores by member, and a high-to-low board reverses that order too.
    order = sorted(range(n), key=lambda k: (values[k], members[k]), reverse=True)
    wanted = {k for k in target_ix}
    rank0: dict[int, int] = {}
    for r, k in enumerate(order):
        if k in wanted:
            rank0[k] = r
    check_ix: list[int] = []
    for k in target_ix:
        if AROUND <= rank0[k] < n - AROUND and k not in check_ix:
            check_ix.append(k)
            if len(check_ix) == CHECK:
                break

    def around(r: int) -> list[tuple[str, int]]:
        start = max(0, min(r - AROUND // 2, n - AROUND))
        return [(members[k], start + j + 1) for j, k in enumerate(order[start : start + AROUND])]

    expected = Answers(
        top=[(members[k], float(values[k]), json.loads(meta[k])) for k in order[:TOP]],
        ranks={members[k]: rank0[k] + 1 for k in check_ix},
        around={members[k]: around(rank0[k]) for k in check_ix},
    )
    return Workload(members, values, meta, targets, [members[k] for k in check_ix], expected)


def differences(got: Answers, want: Answers) -> list[str]:
    """How ``got`` differs from ``want``; [] if it does not."""
    problems = []
    if [(m, s) for m, s, _ in got.top] != [(m, s) for m, s, _ in want.top]:
        problems.append("top 10 members or scores differ")
    elif [d for _, _, d in got.top] != [d for _, _, d in want.top]:
        problems.append("top 10 member data differs")
    for member, rank in want.ranks.items():
        if got.ranks.get(member) != rank:
            problems.append(f"rank of {member} is {got.ranks.get(member)}, expected {rank}")
            break
    for member, rows in want.around.items():
        if got.around.get(member) != rows:
            problems.append(f"around {member} differs")
            break
    return problems
