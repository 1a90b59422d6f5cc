"""Reads of sharded boards against a plain-Python model of ranking (docs/sharding.md#reads):
random members (non-ASCII, long, with equal scores across shards), random shard counts,
orders and tie rules, every kind of read at random places. The model shares no code with
seasons/: a board is a dict, ranked by sorting (score, member bytes; or score, reach time,
member bytes)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.shard_reads import Row, positioned

NAMES = st.text(alphabet=st.sampled_from("abcXYZ09-_éü名🎮 "), min_size=1, max_size=12).filter(
    lambda m: m.strip() == m
)
CASES = st.fixed_dictionaries(
    {
        "shards": st.sampled_from([2, 3, 5, 16]),
        "order": st.sampled_from(["desc", "asc"]),
        "ties": st.sampled_from(["member", "shared", "earliest"]),
        "cap": st.sampled_from([0, 3, 20]),  # earliest boards: 0 (the settings refuse more)
        # seconds before the clock each member's event came: its reach time (earliest)
        "ago": st.lists(st.sampled_from([0, 5, 90]), min_size=60, max_size=60),
        # few values: equal scores on several shards
        "board": st.dictionaries(NAMES, st.sampled_from([0, 1, 2, 5, -3, 7.5]), min_size=1,
                                 max_size=60),
        "asks": st.lists(st.tuples(st.integers(0, 70), st.integers(1, 12)), min_size=1,
                         max_size=6),
    }
)  # fmt: skip


def ranked(
    board: dict[str, float], desc: bool, shared: bool, reached: dict[str, float] | None = None
) -> list[tuple[int, str, float]]:
    """(rank, member, score), best first: by score, then member bytes, both reversed high
    first; with ``reached`` (earliest ties) by score, then the time each member reached it,
    then member bytes ascending; shared ranks are 1 + the members of a strictly better
    score."""
    if reached is None:
        rows = sorted(board.items(), key=lambda x: (x[1], x[0].encode()), reverse=desc)
    else:
        rows = sorted(
            board.items(),
            key=lambda x: (-x[1] if desc else x[1], reached[x[0]], x[0].encode()),
        )
    out = []
    for i, (member, score) in enumerate(rows):
        better = sum(1 for _, s in rows if (s > score if desc else s < score))
        out.append((1 + better if shared else i + 1, member, score))
    return out


def entries(page: Any) -> list[tuple[int, str, float]]:
    return [(e.rank, e.member, e.score) for e in page.entries]


@pytest.mark.parametrize("backend", ["single"], indirect=True)
@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(case=CASES)
def test_sharded_reads_answer_as_the_model(settings_factory: Any, r: Any, case: Any) -> None:
    r.flushall()
    desc, shared, cap = case["order"] == "desc", case["ties"] == "shared", case["cap"]
    earliest = case["ties"] == "earliest"
    if earliest:
        cap = 0
    cfg = {"shards": case["shards"], "order": case["order"], "ties": case["ties"],
           "max_entries": cap}  # fmt: skip
    clock = ManualClock(datetime.combine(date.today(), time(12), UTC))
    with Seasons(settings_factory(boards={"b": cfg}), clock=clock) as app:
        board: dict[str, float] = case["board"]
        when = {m: clock() - timedelta(seconds=ago)
                for m, ago in zip(board, case["ago"], strict=False)}  # fmt: skip
        app.submit_many([{"board": "b", "member": m, "value": v, "ts": when[m]}
                         for m, v in board.items()])  # fmt: skip
        reached = {m: t.timestamp() for m, t in when.items()} if earliest else None
        for window, trim in (("day", 0), ("week", cap)):
            want = ranked(board, desc, shared, reached)
            if trim:
                want = want[:trim]  # the week board keeps its best `cap`
            shown = len(want)
            for offset, limit in case["asks"]:
                page = app.top("b", window, offset=offset, limit=limit)
                assert page.total == shown
                assert entries(page) == want[offset : offset + limit]
                got = app.around_rank("b", offset + 1, window, size=limit)
                start = max(0, min(offset - limit // 2, shown - limit))
                assert entries(got) == want[start : start + limit]
            on = {m: (rank, s, i) for i, (rank, m, s) in enumerate(want)}
            for member in list(board)[:8]:
                entry = app.rank("b", member, window)
                if member not in on:
                    assert entry is None
                    continue
                rank, score, i = on[member]
                assert entry is not None and (entry.rank, entry.score) == (rank, score)
                worse = sum(1 for _, _, s in want if (s < score if desc else s > score))
                assert entry.percentile == pytest.approx(100 * worse / shown)
                better = [s for _, _, s in want if (s > score if desc else s < score)]
                near = (min(better) if desc else max(better)) if better else None
                assert entry.gap_up == (None if near is None else abs(near - score))
                around = app.around("b", member, window, size=5)
                start = max(0, min(i - 5 // 2, shown - 5))
                assert around is not None and entries(around) == want[start : start + 5]
            asked = [*list(board)[:10], "nobody"]
            found = app.lookup("b", asked, window)
            assert sorted((e.rank, e.member) for e in found) == sorted(
                (on[m][0], m) for m in asked if m in on
            )


@given(
    shards=st.lists(
        st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.0, 3.5]), st.integers(0, 400)),
                 max_size=25, unique_by=lambda x: x[1]),
        min_size=1, max_size=5,
    ),
    cuts=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=5, max_size=5),
    desc=st.booleans(),
)  # fmt: skip
def test_positions_merged_from_slices_are_the_true_ones(
    shards: list[list[tuple[float, int]]], cuts: list[tuple[int, int]], desc: bool
) -> None:
    """seasons.shard_reads.positioned: from any slices of sorted shards, the entries it
    places are at their true global positions, and it places every entry whose position the
    slices determine (every shard's slice reaches it from both sides, or ends the shard)."""
    # A member is on one shard only: its first.
    home: dict[int, int] = {}
    for i, shard in enumerate(shards):
        for _, n in shard:
            home.setdefault(n, i)
    members = [
        [(s, f"m{n:03d}".encode()) for s, n in shard if home[n] == i]
        for i, shard in enumerate(shards)
    ]

    def key(x: tuple[float, bytes]) -> tuple[float, bytes]:
        return x

    everything = sorted((x for shard in members for x in shard), key=key, reverse=desc)
    truth = {m: p for p, (_, m) in enumerate(everything)}
    slices = []
    for i, shard in enumerate(members):
        ordered = sorted(shard, key=key, reverse=desc)
        lo, span = cuts[i]
        lo = min(lo, len(ordered))
        rows = [Row(s, m, repr(s).encode(), i) for s, m in ordered[lo : lo + span]]
        slices.append((lo, rows, len(ordered)))
    got = positioned(slices, desc)
    for p, row in got:
        assert truth[row.member] == p
    placed = {row.member for _, row in got}

    def before(a: Row, b: Row) -> bool:  # a comes before b in the board's order
        return (key((a.score, a.member)) > key((b.score, b.member))) == desc

    for i, (_, rows, _) in enumerate(slices):
        for row in rows:
            determined = all(
                j == i or (
                    (lo_j == 0 or (bool(rows_j) and before(rows_j[0], row)))
                    and (lo_j + len(rows_j) == size_j
                         or (bool(rows_j) and before(row, rows_j[-1])))
                )
                for j, (lo_j, rows_j, size_j) in enumerate(slices)
            )  # fmt: skip
            assert (row.member in placed) == determined, (row, slices)
