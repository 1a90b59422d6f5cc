"""The jobs keep hidden and banned members' twin keys consistent (docs/moderation: twin keys).

A hidden or banned member's entries live on the twin of each board key
(``<ns>:{<board>}:hidden:<kind>:<id>``), never on the public key. The twin state is built here
by hand, as the moderation operation leaves it: events are written for every member, then
the moderated members' entries are moved to the twin keys with the same scores and expiry
times (:func:`moderate`). Each job is then run and compared with a plain-Python model of the
events: a rolled-up twin is the weighted union of the twin days, as the public board is of
the public days; the alltime base folds the twin days into the twin base; an archive holds
the visible members only (its file byte for byte that of a board where the moderated
members never existed) and the twin archive the others; a clear clears twins too; forget
removes a member from twins and from the moderation hash; the sweep gives twins their
public key's TTL and keeps a hidden member's metadata.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from reference import names, zset

from seasons import Seasons, calendar
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.jobs import registry
from seasons.jobs.rollup import Rollup, fold_day

pytestmark = pytest.mark.both_backends

NS = "mj"
# Far ahead (Redis expires keys by its own clock). Seasons of 28 days from 2099-01-05: S2 is
# 02-02 .. 03-01 (ended), S3 is 03-02 .. 03-29 (running).
NOW = datetime(2099, 3, 11, 15, tzinfo=UTC)
FIRST = date(2099, 2, 22)
TODAY = date(2099, 3, 11)
DAYS = [FIRST + timedelta(days=i) for i in range((TODAY - FIRST).days + 1)]
ANCHOR = date(2099, 1, 5)
RETENTION = timedelta(days=60)
WEEK_WEIGHTS = [1, 1, 1, 1, 1, 2, 2]
BOARDS: dict[str, dict[str, Any]] = {
    "kills": {"windows": ["day", "week", "month", "season", "alltime"],
              "week_weights": WEEK_WEIGHTS},
    # Latest value wins; the public board keeps its best 2, a twin is never trimmed.
    "laps": {"aggregate": "set", "max_entries": 2, "windows": ["day", "week", "season"]},
    # Equal scores rank first-reached first: reach sets beside the boards, and their twins.
    "first": {"ties": "earliest", "windows": ["day", "week", "season"]},
    # Dense ranks: a distinct set beside each public board, of public scores only (no twin).
    "dense": {"ties": "dense", "windows": ["day", "week", "season"]},
}  # fmt: skip
MEMBERS = [f"p{i}" for i in range(6)]
MODERATED = {"p1": "hidden", "p4": "banned"}
VISIBLE = [m for m in MEMBERS if m not in MODERATED]
TWINNED_KINDS = ("day", "week", "month", "season", "alltime", "base", "reached")


# --- the model ----------------------------------------------------------------------------


def event_of(board: str, n: int, i: int) -> tuple[float, datetime] | None:
    """Member ``MEMBERS[i]``'s one event on day ``DAYS[n]`` of ``board``: (value, ts)."""
    if (n + i) % 4 == 0:
        return None
    day = DAYS[n]
    ts = datetime(day.year, day.month, day.day, 1 + i, tzinfo=UTC)
    value = i * 1000 + n if board == "laps" else 1 + (n * 7 + i * 3) % 11
    return float(value), ts


def events(members: list[str]) -> list[dict[str, Any]]:
    out = []
    for board in BOARDS:
        for n in range(len(DAYS)):
            for i, member in enumerate(MEMBERS):
                found = event_of(board, n, i)
                if member in members and found is not None:
                    value, ts = found
                    meta = {"name": member.upper()}
                    out.append({"board": board, "member": member, "value": value,
                                "ts": ts.isoformat(), "metadata": meta})  # fmt: skip
    return out


def season_of(day: date) -> tuple[str, date, date]:
    n = (day - ANCHOR).days // 28
    first = ANCHOR + timedelta(days=28 * n)
    return f"S{n + 1}", first, first + timedelta(days=27)


def period_of(window: str, day: date) -> str:
    if window == "day":
        return day.isoformat()
    if window == "week":
        return (day - timedelta(days=day.weekday())).isoformat()
    if window == "month":
        return day.isoformat()[:7]
    if window == "season":
        return season_of(day)[0]
    return "all"


def weight(board: str, window: str, day: date) -> float:
    if window == "week" and "week_weights" in BOARDS[board]:
        return float(WEEK_WEIGHTS[day.weekday()])
    return 1.0


def board_of(
    board: str, window: str, pid: str, members: list[str], days: list[date] = DAYS
) -> dict[str, float]:
    """The formula of ``window`` ``pid`` of ``board`` over ``days``, for ``members`` only."""
    out: dict[str, float] = {}
    for n, day in enumerate(DAYS):
        if day not in days or period_of(window, day) != pid:
            continue
        for i, member in enumerate(MEMBERS):
            found = event_of(board, n, i)
            if member not in members or found is None:
                continue
            x = weight(board, window, day) * found[0]
            if BOARDS[board].get("aggregate") == "set":
                out[member] = x  # days in order: the latest wins
            else:
                out[member] = out.get(member, 0.0) + x
    return out


def reach_of(board: str, window: str, pid: str, members: list[str]) -> dict[str, float]:
    """A sum board's reach: the latest reach (event time) of the days that have the member."""
    out: dict[str, float] = {}
    for n, day in enumerate(DAYS):
        if period_of(window, day) != pid:
            continue
        for i, member in enumerate(MEMBERS):
            found = event_of(board, n, i)
            if member in members and found is not None:
                out[member] = max(out.get(member, 0.0), found[1].timestamp())
    return out


def expire_at(window: str, pid: str) -> int:
    """A live key's EXPIREAT: the end of its period's last day (UTC) + retention."""
    if window == "day":
        last = date.fromisoformat(pid)
    elif window == "week":
        last = date.fromisoformat(pid) + timedelta(days=6)
    elif window == "month":
        first = date.fromisoformat(pid + "-01")
        last = (first.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
    else:  # a season, S<n>
        last = ANCHOR + timedelta(days=28 * int(pid[1:]) - 1)
    end = datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)
    return int((end + RETENTION).timestamp())


def periods(board: str) -> set[tuple[str, str]]:
    return {(w, period_of(w, d)) for w in BOARDS[board]["windows"] for d in DAYS}


def top(scores: dict[str, float], n: int) -> dict[str, float]:
    """The best ``n`` (no ties among the laps' values: each member's are its own)."""
    return dict(sorted(scores.items(), key=lambda kv: -kv[1])[:n])


def public(board: str, kind: str, ident: str) -> str:
    return f"{NS}:{{{board}}}:{kind}:{ident}"


def twin(board: str, kind: str, ident: str) -> str:
    return f"{NS}:{{{board}}}:hidden:{kind}:{ident}"


# --- fixtures and helpers -------------------------------------------------------------------


def make_settings(
    factory: Callable[..., Settings], tmp_path: Path, namespace: str = NS
) -> Settings:
    return factory(
        namespace=namespace, timezone="UTC", seasons={"length_days": 28, "anchor": str(ANCHOR)},
        boards=BOARDS, archive={"dir": str(tmp_path / "archive")}, retention="P60D",
        worker={"lock_ttl": 5.0},
    )  # fmt: skip


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return make_settings(settings_factory, tmp_path)


@pytest.fixture
def app(settings: Settings) -> Iterator[Seasons]:
    with Seasons(settings, clock=ManualClock(NOW)) as facade:
        yield facade


@pytest.fixture
def moderated(app: Seasons, r: redis.Redis) -> Seasons:
    """Every member's events written, then the moderated members' entries moved to twins."""
    app.submit_many(events(MEMBERS), backfill=True)
    for board in BOARDS:
        for member, state in MODERATED.items():
            moderate(r, board, member, state)
    # The moderation script rebuilds a trimmed board from its days: members trimmed away
    # before may belong now.
    for window, pid in periods("laps"):
        if window != "day":
            name = public("laps", window, pid)
            at = r.expiretime(name)
            r.delete(name)
            r.zadd(name, top(board_of("laps", window, pid, VISIBLE), 2))
            r.expireat(name, at)
    return app


def moderate(r: redis.Redis, board: str, member: str, state: str) -> None:
    """What the moderation script does to a visible member (without its trims): each of the
    board's keys holding member entries that has ``member`` loses it to its twin, same
    score, same expiry time; its state goes into the moderation hash."""
    for key in names(r, f"{NS}:\\{{{board}\\}}:*"):
        kind = key.split("}:", 1)[1].split(":", 1)[0]
        if kind not in TWINNED_KINDS:
            continue
        score = r.zscore(key, member)
        if score is None:
            continue
        at = r.pexpiretime(key)
        other = key.replace("}:", "}:hidden:", 1)
        r.zrem(key, member)
        r.zadd(other, {member: score})
        if at > 0:
            r.pexpireat(other, at)
    record = {"state": state, "mode": "shadow", "reason": "test", "at": NOW.isoformat(),
              "actor": "tests"}  # fmt: skip
    r.hset(f"{NS}:{{{board}}}:moderation", member, json.dumps(record))


def spoil(r: redis.Redis) -> None:
    """Rolled-up boards and twins out of step with their days (what the rollup repairs)."""
    for board in BOARDS:
        for window, pid in periods(board):
            if window == "day":
                continue
            r.zadd(twin(board, window, pid), {"p1": 12345.0, "p3": 7.0})
            r.zadd(public(board, window, pid), {"p1": 999.0})
        r.delete(twin(board, "week", "2099-03-02"))


def assert_rolled_up(r: redis.Redis, board: str) -> None:
    """Every rolled-up board and its twin equal the model, the public one trimmed."""
    hidden = list(MODERATED)
    for window, pid in periods(board):
        if window in ("day", "alltime"):
            continue
        want = board_of(board, window, pid, VISIBLE)
        if board == "laps":
            want = top(want, 2)
        assert zset(r, public(board, window, pid)) == want, (board, window, pid)
        assert zset(r, twin(board, window, pid)) == board_of(board, window, pid, hidden), (
            board, window, pid,
        )  # fmt: skip
        assert r.expiretime(twin(board, window, pid)) == expire_at(window, pid)
        if board == "dense":
            distinct = set(zset(r, public(board, "distinct", f"{window}:{pid}")).values())
            assert distinct == set(want.values()), (window, pid)
            assert not r.exists(twin(board, "distinct", f"{window}:{pid}"))
        if board == "first":
            got = zset(r, twin(board, "reached", f"{window}:{pid}"))
            assert got == reach_of(board, window, pid, hidden), (window, pid)
            assert zset(r, public(board, "reached", f"{window}:{pid}")) == reach_of(
                board, window, pid, VISIBLE
            )


# --- rollup and rebuild -------------------------------------------------------------------------


def test_the_fixture_leaves_the_moderated_members_on_twins_only(
    moderated: Seasons, r: redis.Redis
) -> None:
    for board in BOARDS:
        for window, pid in periods(board):
            if window == "alltime":
                continue
            on_public = set(zset(r, public(board, window, pid)))
            assert not on_public & set(MODERATED), (board, window, pid)
        assert zset(r, twin(board, "day", "2099-03-02")) == board_of(
            board, "day", "2099-03-02", list(MODERATED)
        )


def test_rebuild_recomputes_each_twin_from_the_twin_days(
    moderated: Seasons, r: redis.Redis
) -> None:
    spoil(r)
    rollup = registry.rollup_of(moderated.backend)
    for board in BOARDS:
        for window, pid in sorted(periods(board)):
            if window != "day":
                rollup.rebuild(NOW, board=board, window=window, period=pid)
    for board in BOARDS:
        assert_rolled_up(r, board)
    # alltime: the base is empty (no day folded), so the board is the union of the days.
    for members, name in ((VISIBLE, public), (list(MODERATED), twin)):
        want = board_of("kills", "alltime", "all", members)
        assert zset(r, name("kills", "alltime", "all")) == want
        assert r.expiretime(name("kills", "alltime", "all")) == -1


def test_the_scheduled_rollup_repairs_twins_of_open_periods(
    moderated: Seasons, r: redis.Redis
) -> None:
    spoil(r)
    registry.rollup_of(moderated.backend).run(NOW)
    hidden = list(MODERATED)
    for board in BOARDS:
        for window in ("week", "season"):
            pid = period_of(window, TODAY)
            assert zset(r, twin(board, window, pid)) == board_of(board, window, pid, hidden)


def test_sliced_repairs_of_twins_agree_with_the_model(
    moderated: Seasons, r: redis.Redis, settings: Settings
) -> None:
    """Twins larger than one atomic call are repaired in slices, untrimmed all the same."""
    spoil(r)
    b = moderated.backend
    Rollup(b.client, b.scripts, settings, b.keys, atomic_limit=1).rebuild(NOW, period="current")
    hidden = list(MODERATED)
    for board in BOARDS:
        for window in ("week", "season"):
            pid = period_of(window, TODAY)
            assert zset(r, twin(board, window, pid)) == board_of(board, window, pid, hidden)


def test_a_board_without_moderated_members_gets_no_twin_key(app: Seasons, r: redis.Redis) -> None:
    app.submit_many(events(MEMBERS), backfill=True)
    rollup = registry.rollup_of(app.backend)
    rollup.rebuild(NOW, period="current")
    rollup.run(NOW)
    closes = registry.closes_of(app.backend)
    for day in DAYS[:3]:
        closes.close_day(day, NOW)
    assert closes.close_season(calendar.season_by_id("S2", app.settings), NOW)
    assert r.exists(public("kills", "archive", "S2"))
    assert not names(r, f"{NS}:*hidden*")


# --- the alltime base ----------------------------------------------------------------------------


def test_day_closes_fold_twin_days_into_the_twin_base(moderated: Seasons, r: redis.Redis) -> None:
    closes = registry.closes_of(moderated.backend)
    folded = DAYS[:10]
    for day in folded:
        assert closes.close_day(day, NOW)
    hidden = list(MODERATED)
    assert zset(r, twin("kills", "base", "alltime")) == board_of(
        "kills", "alltime", "all", hidden, folded
    )
    assert zset(r, public("kills", "base", "alltime")) == board_of(
        "kills", "alltime", "all", VISIBLE, folded
    )
    assert r.expiretime(twin("kills", "base", "alltime")) == -1
    # The board: the base and the days after it, the twin alike.
    registry.rollup_of(moderated.backend).rebuild(NOW, window="alltime")
    assert zset(r, twin("kills", "alltime", "all")) == board_of("kills", "alltime", "all", hidden)
    assert zset(r, public("kills", "alltime", "all")) == board_of(
        "kills", "alltime", "all", VISIBLE
    )
    # A day folded again changes nothing (one fold per day, twins included).
    b = moderated.backend
    assert not fold_day(b.client, b.scripts, b.keys, b.settings, "kills", "alltime", folded[-1])
    assert zset(r, twin("kills", "base", "alltime")) == board_of(
        "kills", "alltime", "all", hidden, folded
    )


# --- closes and snapshots ------------------------------------------------------------------------


def test_a_season_archive_excludes_moderated_members_and_its_twin_holds_them(
    moderated: Seasons, r: redis.Redis, settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    closes = registry.closes_of(moderated.backend)

    s2 = calendar.season_by_id("S2", moderated.settings)
    assert closes.close_season(s2, NOW)
    hidden = list(MODERATED)
    for board in BOARDS:
        want = board_of(board, "season", "S2", VISIBLE)
        if board == "laps":
            want = top(want, 2)
        assert zset(r, public(board, "archive", "S2")) == want
        assert zset(r, twin(board, "archive", "S2")) == board_of(board, "season", "S2", hidden)
        assert r.expiretime(twin(board, "archive", "S2")) == -1
    assert zset(r, twin("first", "reached", "archive:S2")) == reach_of(
        "first", "season", "S2", hidden
    )
    distinct = set(zset(r, public("dense", "distinct", "archive:S2")).values())
    assert distinct == set(board_of("dense", "season", "S2", VISIBLE).values())
    assert not r.exists(twin("dense", "distinct", "archive:S2"))
    # The files: byte for byte those of a namespace where the moderated members never were.
    other = make_settings(settings_factory, tmp_path, namespace="mj2")
    with Seasons(other, clock=ManualClock(NOW)) as plain:
        plain.submit_many(events(VISIBLE), backfill=True)
        assert registry.closes_of(plain.backend).close_season(s2, NOW)
        for board in BOARDS:
            ours = registry.archives_of(moderated.backend).paths(board, "S2")
            theirs = registry.archives_of(plain.backend).paths(board, "S2")
            assert ours[0].read_bytes() == theirs[0].read_bytes(), board
            assert ours[1].read_bytes() == theirs[1].read_bytes(), board
            assert not names(r, "mj2:*hidden*")


def test_a_snapshot_archives_the_twin_beside_the_public_board(
    moderated: Seasons, r: redis.Redis
) -> None:
    # A snapshot copies the live boards as they stand: on a trimmed board a member trimmed
    # away before it was hidden is on no twin rollup until a rollup recomputes the twins
    # from the twin days (the worker's next pass).
    registry.rollup_of(moderated.backend).run(NOW)
    found = registry.closes_of(moderated.backend).snapshot("S3", NOW)
    sid = found[0].season
    assert sid.startswith("S3@")
    hidden = list(MODERATED)
    for board in BOARDS:
        want = board_of(board, "season", "S3", VISIBLE)
        if board == "laps":
            want = top(want, 2)
        assert zset(r, public(board, "archive", sid)) == want
        assert zset(r, twin(board, "archive", sid)) == board_of(board, "season", "S3", hidden)
        # The live twin stays: the season runs on.
        assert zset(r, twin(board, "season", "S3")) == board_of(board, "season", "S3", hidden)


# --- clear ----------------------------------------------------------------------------------------


def test_clearing_a_day_clears_its_twin_and_recomputes_the_twins_holding_it(
    moderated: Seasons, r: redis.Redis
) -> None:
    day = date(2099, 3, 3)
    result = moderated.clear("kills", "day", day.isoformat())
    assert not r.exists(twin("kills", "day", day.isoformat()))
    assert twin("kills", "day", day.isoformat()) in result.deleted
    kept = [d for d in DAYS if d != day]
    hidden = list(MODERATED)
    for window in ("week", "month", "season", "alltime"):
        pid = period_of(window, day)
        assert zset(r, twin("kills", window, pid)) == board_of("kills", window, pid, hidden, kept)
        assert zset(r, public("kills", window, pid)) == board_of(
            "kills", window, pid, VISIBLE, kept
        )
    # The reach sets' twins go with their days on a board with earliest ties.
    moderated.clear("first", "day", day.isoformat())
    assert not r.exists(twin("first", "reached", f"day:{day}"))


def test_clearing_a_week_with_its_days_deletes_every_twin_of_it(
    moderated: Seasons, r: redis.Redis
) -> None:
    week = "2099-02-23"  # 02-23 .. 03-01: every day of it up to now
    moderated.clear("first", "week", week, with_days=True)
    gone = [d for d in DAYS if period_of("week", d) == week]
    for d in gone:
        assert not r.exists(twin("first", "day", d.isoformat()))
        assert not r.exists(twin("first", "reached", f"day:{d}"))
    assert not r.exists(twin("first", "week", week))
    assert not r.exists(twin("first", "reached", f"week:{week}"))
    kept = [d for d in DAYS if d not in gone]
    assert zset(r, twin("first", "season", "S2")) == board_of(
        "first", "season", "S2", list(MODERATED), kept
    )


# --- forget ---------------------------------------------------------------------------------------


def test_forget_removes_a_member_from_twins_and_the_moderation_hash(
    moderated: Seasons, r: redis.Redis
) -> None:
    closes = registry.closes_of(moderated.backend)
    assert closes.close_season(calendar.season_by_id("S2", moderated.settings), NOW)
    assert r.zscore(twin("kills", "archive", "S2"), "p1") is not None
    found = moderated.forget("p1", reason="asked")
    for board in BOARDS:
        for key in names(r, f"{NS}:\\{{{board}\\}}:hidden:*"):
            assert r.zscore(key, "p1") is None, key
        assert not r.hexists(f"{NS}:{{{board}}}:moderation", "p1")
        assert r.hexists(f"{NS}:{{{board}}}:moderation", "p4")
        assert found.boards[board].moderation
        assert twin(board, "day", "2099-03-02") in found.boards[board].keys
        assert not r.hexists(f"{NS}:{{{board}}}:meta", "p1")
    assert twin("kills", "archive", "S2") in found.boards["kills"].keys
    # The other moderated member is untouched.
    assert zset(r, twin("kills", "archive", "S2")) == board_of("kills", "season", "S2", ["p4"])
    # A visible member has no moderation state to remove.
    assert not moderated.forget("p0").boards["kills"].moderation


# --- sweep ----------------------------------------------------------------------------------------


def test_the_sweep_gives_twins_their_public_ttl_and_keeps_hidden_members_metadata(
    moderated: Seasons, r: redis.Redis
) -> None:
    closes = registry.closes_of(moderated.backend)
    assert closes.close_day(DAYS[0], NOW)  # a twin base
    assert closes.close_season(calendar.season_by_id("S2", moderated.settings), NOW)
    twins = names(r, f"{NS}:*:hidden:*")
    assert twins
    for key in twins:
        r.persist(key)
    # p2 leaves every key (as after a clear): its metadata goes, the moderated members' stays.
    for board in BOARDS:
        for key in names(r, f"{NS}:\\{{{board}\\}}:*"):
            if key.split("}:", 1)[1].split(":", 1)[0] in TWINNED_KINDS + ("archive",):
                r.zrem(key, "p2")
    result = registry.sweeper_of(moderated.backend).run(NOW)
    assert result.unknown == []
    for key in twins:
        kind, _, ident = key.split("}:hidden:", 1)[1].partition(":")
        if kind in ("base", "archive") or ident in ("all", "archive:S2"):
            assert r.expiretime(key) == -1, key
            continue
        if kind == "reached":
            kind, _, ident = ident.partition(":")
        assert r.expiretime(key) == expire_at(kind, ident), key
    for board in BOARDS:
        meta = f"{NS}:{{{board}}}:meta"
        assert r.hexists(meta, "p1") and r.hexists(meta, "p4") and r.hexists(meta, "p0")
        assert not r.hexists(meta, "p2")
