"""Random event streams played through Seasons and the reference model side by side: the
steps hypothesis draws (the clock moving on, to just past a local midnight, batches of
events), :func:`play`, which the stream tests of the board kinds share, and
:func:`rebuild_all`, the forced rollup of every period they played."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from reference import Model, Rejected, snapshot

from seasons import Seasons
from seasons import windows as win
from seasons.clock import ManualClock
from seasons.errors import BatchRejected
from seasons.jobs.rollup import Rollup


def step_of(event: st.SearchStrategy[dict[str, Any]], batch: int) -> st.SearchStrategy[Any]:
    """One step: the clock moving on, to just past the next local midnight (yesterday still
    takes late events), or a batch of 1..``batch`` events (each with ``back``: seconds before
    now of its ts)."""
    return st.one_of(
        st.tuples(st.just("advance"), st.one_of(st.integers(10, 600), st.integers(10, 3000))),
        st.tuples(st.just("midnight"), st.integers(1, 50)),
        st.tuples(st.just("batch"), st.lists(event, min_size=1, max_size=batch)),
        st.tuples(st.just("batch"), st.lists(event, min_size=1, max_size=batch)),
    )


def play(
    s: Seasons,
    r: Any,
    model: Model,
    clock: ManualClock,
    drawn: list[Any],
    *,
    standing: str | None = None,
) -> None:
    """Each step on the clock, or as a batch through both Seasons and the model: they must
    agree on what is accepted, and a rejected batch changes nothing in Redis. ``standing``:
    each batch asks the standings on that window, which must be the model's."""
    for kind, arg in drawn:
        if kind == "advance":
            clock.advance(timedelta(minutes=arg))
            continue
        if kind == "midnight":
            tomorrow = model.cal.local_date(clock()) + timedelta(days=1)
            clock.set(model.cal.day_start(tomorrow) + timedelta(minutes=arg))
            continue
        now = clock()
        stamped = [(ev, now - timedelta(seconds=ev["back"])) for ev in arg]
        events = [
            {**{k: v for k, v in ev.items() if k != "back"}, "ts": ts.isoformat()}
            for ev, ts in stamped
        ]
        try:
            want = model.submit(
                [{**e, "ts": ts} for e, (_, ts) in zip(events, stamped, strict=True)], now
            )
        except Rejected as exc:
            before = snapshot(r)
            with pytest.raises(BatchRejected) as err:
                s.submit_many(events)
            assert {p["index"] for p in err.value.details} == {i for i, _ in exc.problems}
            assert snapshot(r) == before
            continue
        if standing is None:
            result = s.submit_many(events)
        else:
            result = s.submit_many(events, standing=True, standing_window=standing)
            got = [(x.member, x.window, x.period, x.rank, x.score) for x in result.standings or ()]
            assert got == expected_standings(model, stamped, standing)
        assert (result.applied, result.duplicates) == want


def expected_standings(
    model: Model, stamped: list[tuple[dict[str, Any], datetime]], window: str
) -> list[tuple[str, str, str | None, int | None, float | None]]:
    """(member, window, period, rank, score) of each event after its batch, as the model
    ranks the board of the event's day in ``window``: None where the member is not on it."""
    out = []
    for ev, ts in stamped:
        pid = model.cal.period_id(window, model.cal.local_date(ts))
        place: dict[str, tuple[int | None, float | None]] = {}
        if pid is not None:
            place = {m: (rank, score) for rank, m, score in model.ranked(ev["board"], window, pid)}
        rank, score = place.get(ev["member"], (None, None))
        out.append((ev["member"], window, pid, rank, score))
    return out


def rebuild_all(
    s: Seasons, model: Model, boards: Iterable[str], now: datetime, *, atomic: bool
) -> None:
    """Recompute every rolled-up period of ``boards`` the model has, as the worker's forced
    rollup does: in one script each (``atomic``) or sliced."""
    rollup = Rollup(s.client, s.scripts, s.settings, s.keys, atomic_limit=10**9 if atomic else 0)
    for board in boards:
        for window, pid in sorted(model.periods(board)):
            if window == "day":
                continue
            period = win.explicit_period(win.SPECS[window], pid, s.settings)
            outcome = rollup.period(board, period, now, force=True)
            assert outcome is not None
            assert outcome.mode == ("atomic" if atomic else "sliced")
