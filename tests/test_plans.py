"""Plans (seasons.plans) when the board changes under them.

A plan answers a read with plain commands in a transaction, from a guess (a page's members,
the board's size, a member's score) that the transaction itself checks. Here the board is
changed between a plan's transactions (after one, before the next), as a concurrent write
would, and each answer must be the board's after the change: the plan learns, tries again or
leaves the read to its script, never answers what its guess assumed. Answers are compared
with plain-Python ranks of the scores written (tests/reference.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from reference import around_start, gap_up, percentile, ranked

from seasons import Seasons, plans
from seasons.config import Settings
from seasons.executor import Command
from seasons.reads import Read

BOARDS = {"kills": {}, "shared": {"ties": "shared"}, "low": {"order": "asc"}}


@dataclass
class Meddling:
    """A plan that runs ``change`` once, after its first transaction's replies are read."""

    plan: Any
    change: Callable[[], None]
    transactions: int = 0

    def commands(self) -> list[Command]:
        out: list[Command] = self.plan.commands()
        return out

    def settle(self, replies: list[Any]) -> Any:
        got = self.plan.settle(replies)
        self.transactions += 1
        if self.transactions == 1:
            self.change()
        return got


def run(app: Seasons, read: Read[Any], change: Callable[[], None]) -> tuple[Any, int]:
    """The read's JSON (None: not ranked) with ``change`` made after its first
    transaction, and how many transactions it sent."""
    assert read.plan is not None
    meddling = Meddling(read.plan, change)
    body = read.render(app.executor.run(read.call, meddling))
    return (None if body is None else json.loads(body)), meddling.transactions


@pytest.fixture
def app(settings_factory: Callable[..., Settings], backend: str) -> Any:
    if backend == "cluster":
        pytest.skip("plans run on Seasons' own connections; a cluster reads with scripts")
    with Seasons(settings_factory(boards=BOARDS)) as app:
        yield app


def scores_of(r: redis.Redis, key: str) -> dict[str, float]:
    return {m.decode(): s for m, s in r.zrange(key, 0, -1, withscores=True)}


def fill(r: redis.Redis, app: Seasons, board: str, n: int) -> tuple[str, str]:
    key = app.reads.target(board, "day", "current")[1]
    r.zadd(key, {f"m{i:03d}": (i * 7) % 23 for i in range(n)})  # many equal scores
    meta = app.keys.meta(board)
    r.hset(meta, mapping={f"m{i:03d}": json.dumps({"i": i}) for i in range(0, n, 2)})
    return key, meta


def entries_of(
    r: redis.Redis, key: str, meta: str, board: str, start: int, size: int
) -> list[dict[str, Any]]:
    cfg = BOARDS[board]
    rows = ranked(scores_of(r, key), cfg.get("order", "desc"), cfg.get("ties", "member"))
    stored = {m.decode(): v for m, v in r.hgetall(meta).items()}
    out = []
    for rank, member, score in rows[start : start + size]:
        metadata = json.loads(stored[member]) if member in stored else {}
        out.append({"rank": rank, "member": member, "score": score, "metadata": metadata})
    return out


@pytest.mark.parametrize("board", ["kills", "shared", "low"])
def test_a_page_whose_members_change_between_transactions(
    app: Seasons, r: redis.Redis, board: str
) -> None:
    """The first transaction learns the page's members; a new first member (with metadata)
    arrives before the second, which reads the metadata of the members learned: not all of
    the page's, so a third reads them."""
    key, meta = fill(r, app, board, 40)
    top = 10**6 if BOARDS[board].get("order") != "asc" else -(10**6)

    def change() -> None:
        r.zadd(key, {"newcomer": top})
        r.hset(meta, mapping={"newcomer": '{"new":true}', "m002": '{"i":"changed"}'})

    got, sent = run(app, app.reads.page(board, "day", "current", limit=5, offset=0), change)
    assert sent == 3
    assert got["total"] == 41
    assert got["entries"] == entries_of(r, key, meta, board, 0, 5)
    assert got["entries"][0] == {
        "rank": 1,
        "member": "newcomer",
        "score": top,
        "metadata": {"new": True},
    }


@pytest.mark.parametrize("board", ["kills", "low"])
def test_around_a_rank_when_the_board_grows_between_transactions(
    app: Seasons, r: redis.Redis, board: str
) -> None:
    """The last rows, whose first depends on the board's size: the first transaction learns
    the size, which changes before the second."""
    key, meta = fill(r, app, board, 30)
    low = BOARDS[board].get("order") == "asc"

    def change() -> None:  # five members more, all at the end of the board
        r.zadd(key, {f"late{i}": (10**6 if low else -(10**6)) for i in range(5)})

    got, _ = run(app, app.reads.around_rank(board, "day", 29, "current", size=6), change)
    total = 35
    assert got["total"] == total
    start = around_start(28, 6, total)
    assert got["entries"] == entries_of(r, key, meta, board, start, 6)


@pytest.mark.parametrize("board", ["kills", "shared", "low"])
def test_an_entry_whose_score_changes_between_transactions(
    app: Seasons, r: redis.Redis, board: str
) -> None:
    key, meta = fill(r, app, board, 30)

    def change() -> None:  # m005's score changes after the plan read it
        r.zadd(key, {"m005": 11.5})

    got, sent = run(app, app.reads.entry(board, "day", "m005", "current"), change)
    assert sent == 3  # its score, the rest with the old score (refused), the rest
    cfg = BOARDS[board]
    order, ties = cfg.get("order", "desc"), cfg.get("ties", "member")
    scores = scores_of(r, key)
    rank = next(rank for rank, m, _ in ranked(scores, order, ties) if m == "m005")
    assert got == {
        "rank": rank,
        "member": "m005",
        "score": 11.5,
        "metadata": {},
        "percentile": percentile(scores, order, "m005"),
        "gap_up": gap_up(scores, order, "m005"),
        "total": 30,
    }


def test_an_entry_of_a_member_that_leaves_between_transactions(
    app: Seasons, r: redis.Redis
) -> None:
    key, _ = fill(r, app, "kills", 10)
    got, sent = run(
        app, app.reads.entry("kills", "day", "m003", "current"), lambda: r.zrem(key, "m003")
    )
    # Its score is gone: the next transaction reads it again with its moderation field (it
    # may have been hidden), which finds none.
    assert (got, sent) == (None, 3)


@pytest.mark.parametrize("board", ["kills", "low"])
def test_around_a_member_who_moves_between_transactions(
    app: Seasons, r: redis.Redis, board: str
) -> None:
    """The first transaction reads the member's position; the member moves before the
    second, which reads it again beside the rows and sees it moved."""
    key, meta = fill(r, app, board, 40)
    low = BOARDS[board].get("order") == "asc"

    def change() -> None:  # m007 jumps to the top
        r.zadd(key, {"m007": -(10**6) if low else 10**6})

    got, sent = run(app, app.reads.around_member(board, "day", "m007", "current", size=5), change)
    assert sent >= 2
    assert got["total"] == 40
    assert got["entries"] == entries_of(r, key, meta, board, 0, 5)
    assert got["entries"][0]["member"] == "m007"


def test_a_climb_after_its_board_changed(app: Seasons, r: redis.Redis) -> None:
    """A climb is one transaction: a change after it is not in its answer; the next read
    has it."""
    key, _ = fill(r, app, "kills", 30)
    read = app.reads.climb("kills", "day", "m004", "current", to=[1, 3, 31])
    got, sent = run(app, read, lambda: r.zadd(key, {"m004": 10**6}))
    assert sent == 1
    scores = {m: s for m, s in scores_of(r, key).items() if m != "m004"}
    scores["m004"] = (4 * 7) % 23  # as it was
    rows = ranked(scores, "desc", "member")
    rank = next(rank for rank, m, _ in rows if m == "m004")
    mine = scores["m004"]
    assert got["rank"] == rank and got["score"] == mine
    assert got["targets"] == [
        {"rank": 1, "score": rows[0][2], "gap": rows[0][2] - mine if rank > 1 else 0},
        {"rank": 3, "score": rows[2][2], "gap": rows[2][2] - mine if rank > 3 else 0},
        {"rank": 31, "score": None, "gap": 0},
    ]
    again = app.run(app.reads.climb("kills", "day", "m004", "current", to=[1]))
    assert again is not None and (again.rank, again.score) == (1, 10**6)


def test_the_pages_remembered_are_bounded(
    app: Seasons, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages of 1000 members at many offsets: what the plans remember stays within its bound
    (made small here), and every page read is still the board's."""
    monkeypatch.setattr(plans, "MEMBERS_REMEMBERED", 2500)
    key, meta = fill(r, app, "kills", 1200)
    for offset in range(0, 200, 20):
        for _ in range(2):  # the second read of a page answers from its guess
            page = app.run(app.reads.page("kills", "day", "current", limit=1000, offset=offset))
            want = entries_of(r, key, meta, "kills", offset, 1000)
            assert [e.model_dump(exclude_none=True) for e in page.entries] == want
        remembered = app.reads._guesses.pages
        assert 0 < sum(map(len, remembered.values())) <= 2500


def counted(app: Seasons, read: Read[Any]) -> tuple[Any, int]:
    """The read's JSON and how many transactions it sent (nothing changed between them)."""
    return run(app, read, lambda: None)


def want_entry(r: redis.Redis, key: str, meta: str, board: str, member: str) -> dict[str, Any]:
    cfg = BOARDS[board]
    order, ties = cfg.get("order", "desc"), cfg.get("ties", "member")
    scores = scores_of(r, key)
    rank = next(rank for rank, m, _ in ranked(scores, order, ties) if m == member)
    stored = r.hget(meta, member)
    return {
        "rank": rank,
        "member": member,
        "score": scores[member],
        "metadata": json.loads(stored) if stored is not None else {},
        "percentile": percentile(scores, order, member),
        "gap_up": gap_up(scores, order, member),
        "total": len(scores),
    }


@pytest.mark.parametrize("board", ["kills", "shared", "low"])
def test_an_entry_read_again_is_one_transaction_and_follows_its_score(
    app: Seasons, r: redis.Redis, board: str
) -> None:
    """The second read of a member's entry guesses its score from the first: one
    transaction. Once its score changes, the guess is refused and the entry is the new one."""
    key, meta = fill(r, app, board, 30)
    first, sent = counted(app, app.reads.entry(board, "day", "m006", "current"))
    assert (first, sent) == (want_entry(r, key, meta, board, "m006"), 2)
    again, sent = counted(app, app.reads.entry(board, "day", "m006", "current"))
    assert (again, sent) == (first, 1)
    r.zadd(key, {"m006": 21.5, "m007": 30})
    moved, sent = counted(app, app.reads.entry(board, "day", "m006", "current"))
    assert (moved, sent) == (want_entry(r, key, meta, board, "m006"), 2)
    assert moved["score"] == 21.5
    r.zrem(key, "m006")
    # Its score gone, the entry is read again with its moderation field (it may be hidden),
    # and from then on with it, in one transaction.
    assert counted(app, app.reads.entry(board, "day", "m006", "current")) == (None, 2)
    assert "m006" not in [m for _, m in app.reads._guesses.scores]
    assert counted(app, app.reads.entry(board, "day", "m006", "current")) == (None, 1)


@pytest.mark.parametrize("board", ["kills", "low"])
def test_around_a_member_read_again_is_one_transaction_and_follows_it(
    app: Seasons, r: redis.Redis, board: str
) -> None:
    """The second read around a member guesses its position (and its page's members) from
    the first: one transaction. After it moves, the page is the one around its new place."""
    key, meta = fill(r, app, board, 40)
    low = BOARDS[board].get("order") == "asc"

    def position(member: str) -> int:
        rows = ranked(scores_of(r, key), "asc" if low else "desc", "member")
        return next(i for i, (_, m, _) in enumerate(rows) if m == member)

    def want(member: str) -> list[dict[str, Any]]:
        return entries_of(r, key, meta, board, around_start(position(member), 5, 40), 5)

    first, sent = counted(app, app.reads.around_member(board, "day", "m012", "current", size=5))
    assert first["entries"] == want("m012") and sent >= 2
    again, sent = counted(app, app.reads.around_member(board, "day", "m012", "current", size=5))
    assert (again, sent) == (first, 1)
    r.zadd(key, {"m012": -(10**6) if low else 10**6})  # to the top
    moved, _ = counted(app, app.reads.around_member(board, "day", "m012", "current", size=5))
    assert moved["entries"] == want("m012")
    assert moved["entries"][0]["member"] == "m012"


def test_the_members_remembered_are_bounded(
    app: Seasons, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries and pages around many members: each table of guesses stays within its bound
    (made small here), and every answer is still the board's."""
    monkeypatch.setattr(plans, "REMEMBERED", 16)
    key, meta = fill(r, app, "kills", 60)
    for i in range(60):
        member = f"m{i:03d}"
        got = app.run(app.reads.entry("kills", "day", member, "current"))
        assert got is not None
        assert got.model_dump() == want_entry(r, key, meta, "kills", member)
        app.run(app.reads.around_member("kills", "day", member, "current", size=3))
        guesses = app.reads._guesses
        assert 0 < len(guesses.scores) <= 16 and 0 < len(guesses.positions) <= 16


def test_league_cohorts_remembered_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each cohort read remembers its members and each member's cohort: past REMEMBERED
    members both tables start again, and what they hold is what was read last."""
    monkeypatch.setattr(plans, "REMEMBERED", 100)
    guesses = plans.Guesses()
    for cohort in range(1, 40):
        members = [f"c{cohort}-m{i}".encode() for i in range(30)]
        guesses.remember_cohort("joined", cohort, members)
        assert sum(len(ms) for ms in guesses.cohorts.values()) <= 100
        assert len(guesses.cohort_of) <= 100
        assert guesses.cohorts[("joined", cohort)] == tuple(members)
        assert all(guesses.cohort_of[("joined", m.decode())] == cohort for m in members)
    guesses.forget_cohort("joined", 39)
    assert ("joined", 39) not in guesses.cohorts
