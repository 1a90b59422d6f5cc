"""Hidden and banned members, the read side (docs/boards.md#hidden-and-banned-members).

The members are hidden here by hand, as the moderation operation does it: their events are
written while they are visible (the real write path), then :func:`moderate` moves each of
their entries from the board's live keys to the twin keys (same score, same expiry), drops
a dense board's distinct scores no visible member has any more, and sets their field of the
board's moderation hash. Every read is compared with a plain-Python model
(tests/reference.py): every public read is the board of the visible members; every read
addressed to a hidden or banned member (its entry, around it, a lookup naming it, its
history, its climb, the standing a write answers it) is its self-view: the board of the
visible members with it alone added, ranked by the board's rule (rank = 1 + the visible
members strictly better); in open mode its entry carries ``"hidden": true``. A climb's
targets stay the visible members' places. The HTTP API (its fast path and its FastAPI routes)
answers the same JSON as the Python API.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
import redis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import Model, around_start, gap_up, percentile, ranked

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app
from seasons.jobs.registry import rollup_of
from seasons.keys import Keys

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "mr"
# Season S3 = 2035-06-11 .. 06-17 (a Monday: the week is the same days so far).
DAYS = [date(2035, 6, 11), date(2035, 6, 12), date(2035, 6, 13)]
NOW = datetime(2035, 6, 13, 22, 0, tzinfo=UTC)
SEASON = "S3"
WEEK = "2035-06-11"
AGGREGATES, ORDERS, TIES = (
    ("sum", "max"),
    ("desc", "asc"),
    ("member", "shared", "dense", "earliest"),
)
BOARDS = {
    f"{a}_{o}_{t}": {"aggregate": a, "order": o, "ties": t}
    for a in AGGREGATES
    for o in ORDERS
    for t in TIES
}
NAMES = ["ann", "bob", "Zed", "é", "a b", "ab", "a/b", "cid", "dan", "eve"]
# Few values, so that many scores are equal (the hidden member's among them).
VALUES = st.sampled_from([1, 1, 2, 2, 3, 5, -1, 0])
# Seconds into the day: few, so that reach times are equal too.
SECONDS = st.sampled_from([3600, 3600, 7200, 36000])
WINDOW_KINDS = ("day", "week", "season")
# The ranks a climb is asked to: the first, some within the board, one past its end.
CLIMB_TO = [1, 2, 4, 11]
Scores = dict[str, float]


@pytest.fixture
def settings(settings_factory: Callable[..., Settings]) -> Settings:
    return settings_factory(
        namespace=NS, boards=BOARDS, seasons={"length_days": 7, "anchor": "2035-05-28"}
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def app(settings: Settings, clock: ManualClock) -> Iterator[Seasons]:
    with Seasons(settings, clock=clock) as s:
        yield s


@pytest.fixture
def http(settings: Settings, clock: ManualClock) -> Iterator[TestClient]:
    with TestClient(
        create_app(settings, clock=clock), client=("127.0.0.1", 5000),
        base_url="http://localhost",
    ) as client:  # fmt: skip
        yield client


# --- hiding a member by hand, as the moderation operation does -----------------------------


def moderate(r: Any, keys: Keys, board: str, ties: str, member: str, state: str, mode: str) -> None:
    """Hide (or ban) ``member`` on ``board``: each live key of a window, base or reach set
    holding it gives its entry to its twin (same score, same expiry); a dense board's
    distinct set drops each score no visible member has any more; its moderation field."""
    for name in list(r.scan_iter(match=keys.board_pattern(board), count=1000)):
        key = name.decode()
        parsed = keys.parse(key)
        assert parsed is not None
        if parsed.kind not in (*WINDOW_KINDS, "month", "alltime", "base", "reached"):
            continue
        score = r.zscore(key, member)
        if score is None:
            continue
        twin = keys.twin_of(key)
        r.zrem(key, member)
        r.zadd(twin, {member: score})
        expires = r.pexpiretime(key)
        if expires > 0:
            r.pexpireat(twin, expires)
        if ties == "dense" and parsed.kind in WINDOW_KINDS and not r.zcount(key, score, score):
            r.zremrangebyscore(keys.distinct(board, parsed.kind, parsed.ident), score, score)
    record = {"state": state, "mode": mode, "reason": "test", "at": NOW.isoformat(),
              "actor": "test"}  # fmt: skip
    r.hset(keys.moderation(board), member, json.dumps(record))


# --- the model ------------------------------------------------------------------------------


def without(scores: Scores, hidden: set[str]) -> Scores:
    return {m: s for m, s in scores.items() if m not in hidden}


class Expect:
    """The model's answers for one board, window and period: ``scores`` and ``reached``
    are the whole board's (every member, as if none were hidden), ``hidden`` the members
    hidden or banned."""

    def __init__(
        self, cfg: dict[str, Any], scores: Scores, reached: Scores, hidden: set[str]
    ) -> None:
        self.order, self.ties = cfg["order"], cfg["ties"]
        self.all, self.reached, self.hidden = scores, reached, hidden
        self.visible = without(scores, hidden)

    def ranked(self, scores: Scores) -> list[tuple[int, str, float]]:
        return ranked(scores, self.order, self.ties, self.reached)

    def seen_by(self, member: str) -> Scores:
        """The board a read addressed to ``member`` ranks on: the visible members, and it."""
        if member in self.hidden and member in self.all:
            return {**self.visible, member: self.all[member]}
        return self.visible

    def rank(self, member: str) -> int | None:
        scores = self.seen_by(member)
        if member not in scores:
            return None
        return next(rank for rank, m, _ in self.ranked(scores) if m == member)

    def entry(self, member: str, flag: bool, meta: dict[str, Any]) -> dict[str, Any] | None:
        scores = self.seen_by(member)
        rank = self.rank(member)
        if rank is None:
            return None
        out = {"rank": rank, "member": member, "score": scores[member], "metadata": meta}
        if flag:
            out["hidden"] = True
        return {
            **out,
            "percentile": percentile(scores, self.order, member),
            "gap_up": gap_up(scores, self.order, member),
            "total": len(scores),
        }

    def around(self, member: str, size: int) -> tuple[int, list[tuple[int, str, float]]] | None:
        scores = self.seen_by(member)
        if member not in scores:
            return None
        rows = self.ranked(scores)
        at = next(i for i, (_, m, _) in enumerate(rows) if m == member)
        start = around_start(at, size, len(rows))
        return len(rows), rows[start : start + size]

    def lookup(self, members: list[str]) -> list[tuple[int, str, float]]:
        rows = []
        for i, m in enumerate(members):
            rank = self.rank(m)
            if rank is not None:
                rows.append((rank, i, m, self.seen_by(m)[m]))
        return [(rank, m, s) for rank, _, m, s in sorted(rows)]

    def climb(self, member: str, to: list[int], flag: bool) -> dict[str, Any] | None:
        """Its rank and score (its self-view if hidden), and the targets: the score at each
        rank of the visible members' board (the k-th distinct score on a dense board), the
        gap 0 once its rank is k or better."""
        rank = self.rank(member)
        if rank is None:
            return None
        score = self.seen_by(member)[member]
        if self.ties == "dense":
            places = sorted(set(self.visible.values()), reverse=self.order == "desc")
        else:
            places = [s for _, _, s in self.ranked(self.visible)]
        targets = []
        for k in to:
            at = places[k - 1] if k <= len(places) else None
            gap = 0 if at is None or rank <= k else abs(at - score)
            targets.append((k, at, gap))
        return {"rank": rank, "score": score, "hidden": flag, "targets": targets}


def climbed(got: Any) -> dict[str, Any] | None:
    """A climb's answer in the form of :meth:`Expect.climb`."""
    if got is None:
        return None
    targets = [(t.rank, t.score, t.gap) for t in got.targets]
    return {"rank": got.rank, "score": got.score, "hidden": got.hidden, "targets": targets}


def periods() -> list[tuple[str, str]]:
    return [*(("day", d.isoformat()) for d in DAYS), ("week", WEEK), ("season", SEASON)]


def triples(entries: list[Any]) -> list[tuple[int, str, float]]:
    return [(e.rank, e.member, e.score) for e in entries]


# --- the property ---------------------------------------------------------------------------

EVENTS = st.lists(
    st.tuples(st.sampled_from(NAMES), VALUES, st.integers(0, len(DAYS) - 1), SECONDS),
    min_size=1,
    max_size=24,
)
MODERATION = st.dictionaries(
    st.sampled_from(NAMES),
    st.tuples(st.sampled_from(["hidden", "banned"]), st.sampled_from(["shadow", "open"])),
    min_size=1,
    max_size=4,
)


def write(
    app: Seasons, clock: ManualClock, model: Model, board: str, events: list[Any],
    moderation: dict[str, tuple[str, str]] | None = None, truth: Model | None = None,
) -> None:  # fmt: skip
    """The events, each day's on that day (so none is late), into Seasons and the model,
    each batch asking the standings on a window of its own (day, week, season): each event's
    is its member's self-view (``moderation``: the members hidden or banned now) on the
    board of ``truth`` (default: ``model``; a banned member's events go to a model of their
    own, its board stays ``truth``'s)."""
    truth = model if truth is None else truth
    moderation = moderation or {}
    for d, day in enumerate(DAYS):
        batch = []
        for member, value, at, seconds in events:
            if at == d:
                ts = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(seconds=seconds)
                batch.append({"board": board, "member": member, "value": value, "ts": ts})
        if not batch:
            continue
        now = datetime(day.year, day.month, day.day, 23, 0, tzinfo=UTC)
        clock.set(now)
        model.submit(batch, now)
        window = WINDOW_KINDS[d % len(WINDOW_KINDS)]
        result = app.submit_many(
            [{**e, "ts": e["ts"].isoformat()} for e in batch], standing=True,
            standing_window=window,
        )  # fmt: skip
        pid = {"day": day.isoformat(), "week": WEEK, "season": SEASON}[window]
        want = Expect(BOARDS[board], truth.board(board, window, pid),
                      truth.reach(board, window, pid), set(moderation))  # fmt: skip
        expected = []
        for i, e in enumerate(batch):
            m = e["member"]
            rank = want.rank(m)
            flag = rank is not None and moderation.get(m, ("", ""))[1] == "open"
            expected.append((i, m, pid, rank, want.seen_by(m).get(m), flag))
        assert result.standings is not None
        got = [(s.index, s.member, s.period, s.rank, s.score, s.hidden) for s in result.standings]
        assert got == expected, (board, window, moderation)
    clock.set(NOW)


def check_board(
    app: Seasons, model: Model, board: str, moderation: dict[str, tuple[str, str]],
    size: int,
) -> None:  # fmt: skip
    cfg = BOARDS[board]
    hidden = set(moderation)
    flagged = {m for m, (_, mode) in moderation.items() if mode == "open"}
    for window, pid in periods():
        scores = model.board(board, window, pid)
        reached = model.reach(board, window, pid)
        want = Expect(cfg, scores, reached, hidden)
        where = f"{board} {window} {pid}"
        # Public reads: the visible members alone.
        page = app.top(board, window, period=pid, limit=100)
        assert page.total == len(want.visible), where
        assert triples(page.entries) == want.ranked(want.visible), where
        assert not any(e.hidden for e in page.entries), where
        if len(want.visible) > 1:
            middle = app.around_rank(board, (len(want.visible) + 1) // 2, window, period=pid,
                                     size=3)  # fmt: skip
            rows = want.ranked(want.visible)
            mid = (len(rows) + 1) // 2 - 1
            assert triples(middle.entries) == rows[around_start(mid, 3, len(rows)) :][:3], where
        # Reads addressed to each member: the public ones for a visible member, the
        # self-view for a hidden one, None for a member not on the board.
        for member in NAMES:
            flag = member in flagged and member in scores
            meta = model.metadata(board, member)
            got = app.rank(board, member, window, period=pid)
            expected = want.entry(member, flag, meta)
            assert (got.model_dump(mode="json") if got else None) == expected, (where, member)
            if member in hidden or member == "ann":  # a visible one's: tests of climb
                climb = app.climb(board, member, window, period=pid, to=CLIMB_TO)
                assert climbed(climb) == want.climb(member, CLIMB_TO, flag), (where, member)
            if got is not None:  # its JSON: "hidden" only where it is true
                assert ('"hidden"' in got.model_dump_json()) == flag, (where, member)
            around = app.around(board, member, window, period=pid, size=size)
            expected_around = want.around(member, size)
            if expected_around is None:
                assert around is None, (where, member)
            else:
                total, rows = expected_around
                assert around is not None, (where, member)
                assert (around.total, triples(around.entries)) == (total, rows), (where, member)
                assert [e.member for e in around.entries if e.hidden] == (
                    [member] if flag else []
                ), (where, member)
        asked = [*NAMES[::-1], "nobody"]
        found = app.lookup(board, asked, window, period=pid)
        assert triples(found) == want.lookup(asked), where
        assert {e.member for e in found if e.hidden} == flagged & set(scores), where
    for member in NAMES:
        history = app.history(board, member, "day", last=len(DAYS))
        assert [p.period for p in history] == [d.isoformat() for d in DAYS]
        for point, day in zip(history, DAYS, strict=True):
            pid = day.isoformat()
            want = Expect(cfg, model.board(board, "day", pid), model.reach(board, "day", pid),
                          hidden)  # fmt: skip
            rank = want.rank(member)
            score = want.seen_by(member).get(member)
            assert (point.rank, point.score) == (rank, score), (board, member, pid)
            assert point.hidden == (member in flagged and rank is not None), (board, member, pid)


def encoded(pid: str) -> str:
    """``pid`` with its first character percent-encoded: the fast path hands such a query
    to the FastAPI route."""
    return f"%{ord(pid[0]):02X}{pid[1:]}"


def check_http(
    app: Seasons, http: TestClient, board: str, members: list[str], size: int
) -> None:  # fmt: skip
    """The HTTP API answers the Python API's JSON for the reads addressed to ``members``,
    on its fast path and its FastAPI routes alike."""
    for window, pid in periods():
        for query in (f"period={pid}", f"period={encoded(pid)}"):
            base = f"/v1/boards/{board}/{window}"
            found = http.post(f"{base}/lookup?{query}", json={"members": members})
            got = app.lookup(board, members, window, period=pid)
            assert found.json() == [e.model_dump(mode="json") for e in got], query
            for member in members:
                path = f"{base}/members/{quote(member, safe='/')}"
                entry = app.rank(board, member, window, period=pid)
                around = app.around(board, member, window, period=pid, size=size)
                for answer, want in (
                    (http.get(f"{path}?{query}"), entry),
                    (http.get(f"{path}/around?size={size}&{query}"), around),
                ):
                    if want is None:
                        assert answer.status_code == 404, (query, member)
                        assert answer.json()["error"] == "not_ranked"
                    else:
                        assert answer.json() == want.model_dump(mode="json"), (query, member)
    for member in members:
        path = f"/v1/boards/{board}/members/{quote(member, safe='/')}/history"
        history = app.history(board, member, "day", last=len(DAYS))
        for last in (f"{len(DAYS)}", f"%3{len(DAYS)}"):
            got = http.get(f"{path}?window=day&last={last}").json()["history"]
            assert got == [p.model_dump(mode="json") for p in history], member


@hsettings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    board=st.sampled_from(sorted(BOARDS)),
    events=EVENTS,
    moderation=MODERATION,
    size=st.integers(1, 6),
)
def test_public_reads_and_self_views_match_the_model(
    app: Seasons, clock: ManualClock, settings: Settings, r: redis.Redis, http: TestClient,
    board: str, events: list[Any], moderation: dict[str, tuple[str, str]], size: int,
) -> None:  # fmt: skip
    for key in list(r.scan_iter(match=app.keys.board_pattern(board), count=1000)):
        r.delete(key)
    model = Model(settings)
    write(app, clock, model, board, events)
    for member, (state, mode) in moderation.items():
        moderate(r, app.keys, board, BOARDS[board]["ties"], member, state, mode)
    # Twice: the second reads answer from what the first ones learned (the plans' guesses).
    check_board(app, model, board, moderation, size)
    check_board(app, model, board, moderation, size)
    check_http(app, http, board, [*sorted(moderation), "ann", "nobody"], size)


# --- where a self-view stops: trimmed boards, archives, snapshots ---------------------------


def twin_put(r: Any, keys: Keys, board: str, window: str, pid: str, scores: Scores) -> None:
    """Entries of hidden members on the twin of a live key, as the writes put them there."""
    r.zadd(keys.twin_of(keys.window(board, window, pid)), scores)


def hide_field(r: Any, keys: Keys, board: str, member: str, mode: str = "shadow") -> None:
    record = {"state": "hidden", "mode": mode, "reason": "test"}
    r.hset(keys.moderation(board), member, json.dumps(record))


@pytest.mark.parametrize("hidden_score", [7, 5, 11])
def test_a_trimmed_board_has_room_for_a_self_view_only_within_its_size(
    settings_factory: Callable[..., Settings], r: redis.Redis, hidden_score: int
) -> None:
    """On a board that keeps its 3 best (max_entries), the hidden member stands on the
    week board only if it would be among those 3, the last one making room; the day board
    (never trimmed) ranks it among all. Its entry, around it, a lookup, its climb and its
    standing after a write alike."""
    settings = settings_factory(
        namespace=NS, boards={"top3": {"aggregate": "sum", "max_entries": 3}},
        seasons={"length_days": 7, "anchor": "2035-05-28"},
    )  # fmt: skip
    visible = {"ann": 10.0, "bob": 8.0, "cid": 6.0, "dan": 4.0, "eve": 2.0}
    day = DAYS[-1].isoformat()
    with Seasons(settings, clock=ManualClock(NOW)) as app:
        for member, value in visible.items():
            app.submit("top3", member, value, ts=NOW.isoformat())
        for window, pid in (("day", day), ("week", WEEK), ("season", SEASON)):
            twin_put(r, app.keys, "top3", window, pid, {"hid": hidden_score})
        hide_field(r, app.keys, "top3", "hid")
        for window, pid, cap in (("day", day, 0), ("week", WEEK, 3)):
            public = dict(visible) if cap == 0 else {"ann": 10.0, "bob": 8.0, "cid": 6.0}
            assert triples(app.top("top3", window, period=pid).entries) == ranked(
                public, "desc", "member"
            )
            seen = {**visible, "hid": float(hidden_score)}
            if cap:  # as if visible: the board keeps the 3 best of all
                seen = dict(sorted(seen.items(), key=lambda kv: -kv[1])[:cap])
            entry = app.rank("top3", "hid", window, period=pid)
            around = app.around("top3", "hid", window, period=pid, size=5)
            found = app.lookup("top3", ["hid", "cid"], window, period=pid)
            climb = app.climb("top3", "hid", window, period=pid, to=[1])
            # 0 changes no score: its standing after that write is where it stands now
            written = app.submit(
                "top3", "hid", 0, ts=NOW.isoformat(), standing=True, standing_window=window
            )
            assert written.standings is not None
            standing = written.standings[0]
            if "hid" not in seen:
                assert entry is None and around is None and climb is None, window
                assert (standing.rank, standing.score) == (None, None), window
                assert triples(found) == [(3, "cid", 6.0)]
                continue
            rows = ranked(seen, "desc", "member")
            assert entry is not None and around is not None and climb is not None
            assert (climb.rank, climb.score) == (entry.rank, entry.score), window
            assert (standing.rank, standing.score) == (entry.rank, entry.score), window
            assert entry.model_dump(mode="json") == {
                "rank": next(rank for rank, m, _ in rows if m == "hid"),
                "member": "hid",
                "score": hidden_score,
                "metadata": {},
                "percentile": percentile(seen, "desc", "hid"),
                "gap_up": gap_up(seen, "desc", "hid"),
                "total": len(seen),
            }, window
            at = next(i for i, (_, m, _) in enumerate(rows) if m == "hid")
            assert around.total == len(seen)
            start = around_start(at, 5, len(rows))
            assert triples(around.entries) == rows[start : start + 5], window


def test_an_archived_season_and_a_snapshot_are_the_public_board_alone(
    app: Seasons, r: redis.Redis
) -> None:
    """Once a season's archive exists, its reads are the archive's: no self-view there
    (the twin of its live key is not read); a snapshot likewise. The live season still
    answers one."""
    board = "sum_desc_member"
    keys = app.keys
    public = {"ann": 5.0, "bob": 3.0}
    for season in ("S2", SEASON):
        r.zadd(keys.window(board, "season", season), public)
        twin_put(r, keys, board, "season", season, {"hid": 4.0})
    r.zadd(keys.archive(board, "S2"), public)
    snapshot = f"{SEASON}@20350613T080000Z"
    r.zadd(keys.archive(board, snapshot), public)
    hide_field(r, keys, board, "hid", "open")
    for _ in range(2):  # the plans' first reads and those from their guesses
        live = app.rank(board, "hid", "season")
        assert live is not None and (live.rank, live.hidden, live.total) == (2, True, 3)
        for period in ("S2", snapshot):
            assert app.rank(board, "hid", "season", period=period) is None, period
            assert app.around(board, "hid", "season", period=period) is None, period
            assert app.lookup(board, ["hid", "bob"], "season", period=period)[0].rank == 2
            assert len(app.lookup(board, ["hid", "bob"], "season", period=period)) == 1
    history = app.history(board, "hid", "season", last=2)
    assert [(p.period, p.rank, p.hidden) for p in history] == [
        ("S2", None, False),
        (SEASON, 2, True),
    ]


# --- what a visible member's read costs: no moderation read ----------------------------------


def _sent(r: redis.Redis, read: Callable[[str], Any], member: str) -> list[str]:
    """Every command Redis ran while ``read(member)`` ran: the scripts' own commands, not
    the script calls, which name the moderation hash among their KEYS."""
    marker = "end-of-read-marker"
    with r.monitor() as monitor:
        read(member)
        r.echo(marker)
        seen: list[str] = []
        while True:
            command = monitor.next_command()["command"]
            if marker in command:
                return seen
            if not command.upper().startswith("EVAL"):
                seen.append(command)


@pytest.mark.parametrize("ties", TIES)
def test_the_moderation_hash_is_read_only_for_a_member_missing_from_the_board(
    app: Seasons, r: redis.Redis, ties: str
) -> None:
    """Reads of a visible member (plans and scripts, from a first read and from guesses)
    never touch the moderation hash, a history that finds it in one period of several
    included, nor does its standing after a write; a member missing from the board reads
    its field; a hidden one is answered by the script."""
    board = f"sum_desc_{ties}"
    for member, value in (("ann", 5), ("bob", 3), ("cid", 3)):
        app.submit(board, member, value, ts=NOW.isoformat())
    moderate(r, app.keys, board, ties, "bob", "hidden", "shadow")
    moderation = app.keys.moderation(board)
    reads: dict[str, Callable[[str], Any]] = {
        "entry": lambda m: app.rank(board, m, "day"),
        "around": lambda m: app.around(board, m, "day", size=3),
        "lookup": lambda m: app.lookup(board, [m, "ann"], "day"),
        "history": lambda m: app.history(board, m, "day", last=1),
        # found today, missed the days before: visible (moderation empties every live key)
        "history of days it missed": lambda m: app.history(board, m, "day", last=3),
        "climb": lambda m: app.climb(board, m, "day", to=[1, 2]),
    }
    for name, read in reads.items():
        for _ in range(2):
            assert not [c for c in _sent(r, read, "cid") if moderation in c], name
        missing = _sent(r, read, "nobody")
        assert any(moderation in c for c in missing), name
        hidden = _sent(r, read, "bob")
        assert any(c.startswith("ZSCORE") and "hidden:day" in c for c in hidden), name
    # A write's standing: a visible member's reads no more of the moderation hash than the
    # write does without it (the batch's fields, read before anything is written); a hidden
    # member's reads its field once more, having missed it on the board.
    app.submit(board, "bob", 0, ts=NOW.isoformat())  # from now on sent with the twin keys
    for member, more in (("cid", 0), ("bob", 1)):
        read = {
            standing: [
                c for c in _sent(r, lambda m, standing=standing: app.submit(
                    board, m, 0, ts=NOW.isoformat(), standing=standing,
                    standing_window="day" if standing else None,
                ), member) if moderation in c
            ]
            for standing in (False, True)
        }  # fmt: skip
        assert len(read[True]) == len(read[False]) + more, member
    entry = app.rank(board, "bob", "day")
    assert entry is not None and (entry.rank, entry.total) == (
        {"member": 3, "shared": 2, "dense": 2, "earliest": 2}[ties],
        3,
    )


# --- every interface, on both backends ------------------------------------------------------


@pytest.mark.both_backends
def test_every_interface_answers_the_self_view_on_both_backends(
    settings_factory: Callable[..., Settings], backend: str, r: Any, tmp_path: Any
) -> None:
    """The Python API, the HTTP API and the CLI answer a hidden member's own reads (its
    climb and the standing a write answers it included) alike, on a single server (plans,
    own connections) and on a Redis Cluster (the scripts, through redis-py's cluster
    client), for every tie rule: as the model ranks it, flagged in open mode."""
    from click.testing import CliRunner

    from seasons.cli import CliState, cli

    boards = {f"b_{t}": {"aggregate": "sum", "order": "desc", "ties": t} for t in TIES}
    settings = settings_factory(
        namespace=NS, boards=boards, seasons={"length_days": 7, "anchor": "2035-05-28"}
    )
    toml = tmp_path / "cli.toml"
    toml.write_text(
        f'namespace = "{NS}"\n[seasons]\nlength_days = 7\nanchor = "2035-05-28"\n'
        + "".join(f'[boards.{b}]\naggregate = "sum"\nties = "{cfg["ties"]}"\n'
                  for b, cfg in boards.items())
    )  # fmt: skip
    env = {
        "SEASONS_REDIS__URL": settings.redis.url,
        "SEASONS_REDIS__CLUSTER": "true" if backend == "cluster" else "false",
        "SEASONS_CONFIG": str(toml),
    }
    events = {"ann": 5, "bob": 3, "cid": 3, "dan": 1, "hid": 3, "sha": 4}
    day = DAYS[-1].isoformat()
    clock = ManualClock(NOW)
    with Seasons(settings, clock=clock) as app, TestClient(
        create_app(settings, clock=clock), client=("127.0.0.1", 5000),
        base_url="http://localhost",
    ) as http:  # fmt: skip
        for board, cfg in boards.items():
            for i, (member, value) in enumerate(events.items()):
                ts = NOW - timedelta(hours=len(events) - i)  # reached in this order
                app.submit(board, member, value, ts=ts.isoformat())
            moderate(r, app.keys, board, cfg["ties"], "hid", "hidden", "open")
            moderate(r, app.keys, board, cfg["ties"], "sha", "banned", "shadow")
            scores = {m: float(v) for m, v in events.items()}
            reached = {m: (NOW - timedelta(hours=len(events) - i)).timestamp()
                       for i, m in enumerate(events)}  # fmt: skip
            want = Expect(cfg, scores, reached, {"hid", "sha"})
            for member, flag in (("hid", True), ("sha", False), ("ann", False)):
                entry = app.rank(board, member, "day")
                assert entry is not None
                assert entry.model_dump(mode="json") == want.entry(member, flag, {}), board
                around = app.around(board, member, "day", size=3)
                expected = want.around(member, 3)
                assert around is not None and expected is not None
                assert (around.total, triples(around.entries)) == expected, (board, member)
                path = f"/v1/boards/{board}/day/members/{member}"
                assert http.get(path).json() == entry.model_dump(mode="json")
                assert http.get(f"{path}/around?size=3").json() == around.model_dump(mode="json")
                cli_run = CliRunner().invoke(
                    cli, ["rank", board, member, "--window", "day", "--json"], env=env,
                    obj=CliState(clock=ManualClock(NOW)),
                )  # fmt: skip
                assert cli_run.exit_code == 0, cli_run.output
                assert json.loads(cli_run.stdout) == entry.model_dump(mode="json")
                table = CliRunner().invoke(
                    cli, ["rank", board, member, "--window", "day"], env=env,
                    obj=CliState(clock=ManualClock(NOW)),
                )  # fmt: skip
                assert ("(hidden)" in table.stdout) == flag, (board, member)
                climb = app.climb(board, member, "day", to=[1, 3])
                assert climbed(climb) == want.climb(member, [1, 3], flag), (board, member)
                assert climb is not None
                assert http.get(f"{path}/climb?to=1,3").json() == climb.model_dump(mode="json")
                cli_run = CliRunner().invoke(
                    cli, ["climb", board, member, "--window", "day", "--to", "1,3", "--json"],
                    env=env, obj=CliState(clock=ManualClock(NOW)),
                )  # fmt: skip
                assert cli_run.exit_code == 0, cli_run.output
                assert json.loads(cli_run.stdout) == climb.model_dump(mode="json")
            # Standings after a write: each member's self-view (value 0 changes no score,
            # and a banned member's is applied nowhere). The HTTP app resends the batch
            # without the twin keys first (it has not met this board's hidden members):
            # the resend reads the standings again, with them.
            batch = [{"board": board, "member": m, "value": 0, "ts": NOW.isoformat()}
                     for m in ("hid", "sha", "ann")]  # fmt: skip
            result = app.submit_many(
                batch, batch_id=f"standing-{board}", standing=True, standing_window="day"
            )
            assert result.standings is not None
            assert [(s.member, s.rank, s.score, s.hidden) for s in result.standings] == [
                (m, want.rank(m), scores[m], m == "hid") for m in ("hid", "sha", "ann")
            ], board
            assert result.banned == 1
            resent = http.post(
                "/v1/scores?return=standing&window=day", json={"events": batch},
                headers={"Idempotency-Key": f"standing-{board}"},
            )  # fmt: skip
            assert resent.json() == result.model_dump(mode="json"), board
            asked = ["sha", "hid", "dan", "nobody"]
            found = app.lookup(board, asked, "day")
            assert triples(found) == want.lookup(asked), board
            assert [e.member for e in found if e.hidden] == ["hid"]
            lookup = http.post(f"/v1/boards/{board}/day/lookup", json={"members": asked})
            assert lookup.json() == [e.model_dump(mode="json") for e in found]
            history = app.history(board, "hid", "day", last=2)
            assert [(p.period, p.rank, p.hidden) for p in history][-1] == (
                day,
                want.rank("hid"),
                True,
            )
            got = http.get(f"/v1/boards/{board}/members/hid/history?window=day&last=2").json()
            assert got["history"] == [p.model_dump(mode="json") for p in history]
            # The public board: the visible members alone.
            assert triples(app.top(board, "day").entries) == want.ranked(want.visible)


@hsettings(
    deadline=None,
    max_examples=30,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    board=st.sampled_from(sorted(BOARDS)),
    events=EVENTS,
    moderation=MODERATION,
    later=EVENTS,
    size=st.integers(1, 6),
)
def test_moderation_writes_rollups_and_unhide_end_to_end(
    app: Seasons, clock: ManualClock, settings: Settings, r: redis.Redis,
    board: str, events: list[Any], moderation: dict[str, tuple[str, str]], later: list[Any],
    size: int,
) -> None:  # fmt: skip
    """The whole path, against the model of every member's events: members hidden or banned
    by Seasons.moderate, more events written (a hidden member's kept aside, a banned one's
    applied nowhere; each one's standing after its batch its self-view), the rollup job
    recomputing the rolled-up boards and their twins; every public read is the visible
    members', every self-view its definition; made visible again, each member has
    everything it earned, as if it had never been hidden."""
    for key in list(r.scan_iter(match=app.keys.board_pattern(board), count=1000)):
        r.delete(key)
    model = Model(settings)
    write(app, clock, model, board, events)
    for member, (state, mode) in moderation.items():
        app.moderate(member, state, mode=mode, boards=[board], reason="end to end")
    banned = {m for m, (state, _) in moderation.items() if state == "banned"}
    write(app, clock, model, board, [e for e in later if e[0] not in banned], moderation)
    ignored = Model(settings)  # a banned member's events: acknowledged, applied nowhere
    write(app, clock, ignored, board, [e for e in later if e[0] in banned], moderation, model)
    rollup_of(app.backend).run(clock())
    check_board(app, model, board, moderation, size)
    for member in moderation:
        app.moderate(member, "visible", boards=[board], reason="appeal")
    check_board(app, model, board, {}, size)
