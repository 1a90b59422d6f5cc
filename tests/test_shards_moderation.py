"""Hidden and banned members (docs/fair-play.md) on sharded boards, against unsharded twins.

The twins of tests/test_shards.py (a sharded namespace and an unsharded one, the same
random events on one clock) are moderated alike: members hidden in shadow and open mode and
banned, on some boards or all, while events keep coming for them (and for the others). At
each checkpoint every read of every member on every window answers alike on both, the
self-views (entry, around, climb, lookup, history, a write's standings) included, with their
``hidden`` flags; so do the moderation records. Unhiding brings a member back alike. The
season's archive files, the archives' twins, a late ban's amended results and rewards, and
the claims are the twin's. A crash of a moderation call between the store's change and the
board's copy of the record is mended by the recovery.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from test_shards import BOARDS, ZONE, Twins, dumped, reads
from worker_support import local, today

from seasons import Seasons, shards
from seasons.moderation import RECOVER_AFTER

# The boards of tests/test_shards.py, two of them with rewards (claims, amended results).
TIERS = [{"ranks": "1", "reward": "gold"}, {"ranks": "2-3", "reward": "silver"}]
REWARDED = {**BOARDS, **{b: {**BOARDS[b], "rewards": TIERS} for b in ("kills", "laps")}}
# (member, state, mode, boards): None is every board. Members with odd ids, long ones and
# ones on trimmed boards among them.
MODERATED: list[tuple[str, str, str, list[str] | None]] = [
    ("p01", "hidden", "shadow", None),
    ("p02", "hidden", "open", None),
    ("p03", "banned", "shadow", ["kills", "laps"]),
    ("名前", "hidden", "open", ["laps", "best", "forever"]),
    ("x" * 128, "banned", "open", ["power"]),
    ("nobody-yet", "hidden", "open", None),  # no entries anywhere until later
]


def moderate(t: Twins, member: str, state: str, mode: str, boards: list[str] | None) -> None:
    """The same call on both namespaces: the same change on each board."""
    got = []
    for app in (t.sharded, t.twin):
        change = app.moderate(member, state, mode=mode, boards=boards, reason="fair play")
        got.append([(b.board, b.changed, b.moved, b.before.state, b.after.state)
                    for b in change.boards])  # fmt: skip
    assert got[0] == got[1]


def member_reads(app: Seasons, board: str, window: str, period: str, members: list[str]) -> Any:
    """Every read addressed to each of ``members`` (self-views when it is hidden)."""
    out: list[Any] = []
    for member in members:
        for call in (
            lambda m=member: app.rank(board, m, window, period=period),
            lambda m=member: app.around(board, m, window, period=period, size=5),
            lambda m=member: app.around(board, m, window, period=period, size=1),
            lambda m=member: app.climb(board, m, window, period=period, to=[1, 2, 9, 40]),
            lambda m=member: app.history(board, m, window, last=3),
        ):
            out.append(answer(call))
    out.append(answer(lambda: app.lookup(board, members, window, period=period)))
    return out


def answer(call: Any) -> Any:
    """A read's answer as JSON data, or its error's name (a period not there yet: the same
    error on both)."""
    try:
        return dumped(call())
    except Exception as exc:
        return type(exc).__name__


def check(t: Twins) -> None:
    asked = [m for m, *_ in MODERATED] + ["p00", "p04", "zz"]
    for board, cfg in BOARDS.items():
        for window in cfg.get("windows", ["day", "week", "season"]):
            for period in ("current", "previous"):
                want = reads(t.twin, board, window, period)
                assert reads(t.sharded, board, window, period) == want, (board, window, period)
                want = member_reads(t.twin, board, window, period, asked)
                got = member_reads(t.sharded, board, window, period, asked)
                assert got == want, (board, window, period)
    for member in asked:
        assert t.sharded.moderation(member) == t.twin.moderation(member)
    # The board's copy of each record is its store's (seasons.moderation).
    client, keys = t.sharded.client, t.sharded.keys
    for board, cfg in t.sharded.settings.boards.items():
        for member in asked:
            store = shards.member_store(board, cfg, member)
            assert client.hget(keys.moderation(board), member) == client.hget(
                keys.moderation(store), member
            )


def rewarded(app: Seasons, board: str, season: str, member: str) -> list[Any]:
    """``member``'s reward, then its claim (the claim's time left out), or the errors."""
    out: list[Any] = []
    for call in (lambda: app.rewards(board, season, member),
                 lambda: app.claim(board, season, member)):  # fmt: skip
        try:
            out.append(call().model_dump(mode="json", exclude={"claimed_at"}))
        except Exception as exc:
            out.append(type(exc).__name__)
    return out


def standings(t: Twins, events: list[dict[str, Any]], window: str) -> None:
    got = []
    for app in (t.sharded, t.twin):
        result = app.submit_many(events, standing=True, standing_window=window)
        got.append([s.model_dump() for s in result.standings or []])
    assert got[0] == got[1]
    t.model.submit(events, t.clock())


@pytest.mark.parametrize("n", [3, 7])
def test_moderated_members_read_as_on_the_unsharded_twin(
    settings_factory: Any, tmp_path: Path, n: int
) -> None:
    twins_season(settings_factory, tmp_path, n)


@pytest.mark.parametrize("backend", ["cluster"], indirect=True)
def test_moderated_members_on_a_cluster(settings_factory: Any, tmp_path: Path, backend: str):
    twins_season(settings_factory, tmp_path, 3)


def twins_season(settings_factory: Any, tmp_path: Path, n: int) -> None:
    t = Twins(settings_factory, tmp_path, n, seed=100 + n, boards=REWARDED)
    first = today(ZONE)
    try:
        t.play_day(first)
        for m in MODERATED:
            moderate(t, *m)
        check(t)
        for i in range(1, 8):
            t.play_day(first + timedelta(days=i))
            if i == 1:  # the moderated members write too: to the twins, or (banned) nowhere
                events = t.events(20)
                for k, (member, *_) in enumerate(MODERATED):
                    events[k]["member"] = member
                # A hidden member last on every board: its self-view at the bottom.
                events += [{"board": b, "member": "nobody-yet", "event_id": f"last-{b}",
                            "value": 10**6 if b == "laps" else -(10**6), "ts": t.clock()}
                           for b in BOARDS]  # fmt: skip
                for window in ("day", "season"):
                    standings(t, [{**e, "event_id": f"{e['event_id']}-{window}"}
                                  for e in events], window)  # fmt: skip
                check(t)
            if i == 3:
                moderate(t, "p01", "visible", "shadow", None)  # back on every board
                moderate(t, "p02", "banned", "open", ["kills"])  # hidden -> banned: record
                moderate(t, "p05", "hidden", "open", ["laps"])  # a member of a trimmed board
                check(t)
        t.clock.set(local(first + timedelta(days=8), 6, ZONE))
        t.tick()
        check(t)
        season = t.twin.top("kills", "season", period="previous").period
        for board in BOARDS:
            for suffix in (".jsonl.gz", ".manifest.json"):
                mine = tmp_path / "sh" / "sh" / board / f"{season}{suffix}"
                theirs = tmp_path / "tw" / "tw" / board / f"{season}{suffix}"
                assert mine.read_bytes() == theirs.read_bytes(), (board, suffix)
            # The archive's twin: the members hidden at the close, as the twin's.
            twins = [app.client.zrange(app.keys.twin_of(app.keys.archive(board, season)), 0, -1,
                                       withscores=True) for app in (t.sharded, t.twin)]  # fmt: skip
            assert twins[0] == twins[1], board
        assert t.twin.client.exists(t.twin.keys.twin_of(t.twin.keys.archive("laps", season)))
        # A late ban and an unhide after the close amend the season's results alike; the
        # rewards and claims follow them alike.
        winners = [e.member for e in t.twin.top("kills", "season", period="previous").entries]
        t.sharded.claim("kills", season, winners[1])
        t.twin.claim("kills", season, winners[1])
        moderate(t, winners[0], "banned", "shadow", None)
        moderate(t, winners[1], "banned", "shadow", ["kills"])
        moderate(t, "名前", "visible", "shadow", None)
        check(t)
        for board in BOARDS:
            assert (t.sharded.rewards(board, season).model_dump()
                    == t.twin.rewards(board, season).model_dump())  # fmt: skip
            for member in [*winners[:3], "名前", "p03"]:
                got = [rewarded(app, board, season, member) for app in (t.sharded, t.twin)]
                assert got[0] == got[1], (board, member)
    finally:
        t.close()


def test_a_crash_before_the_boards_copy_is_mended_by_the_recovery(
    settings_factory: Any, tmp_path: Path
) -> None:
    """A call cut off right after the store's change (before its follow-ups): the store holds
    the record and the pending follow-up, the board's copy not yet; the recovery a minute
    later copies it, then appends the audit entry and the event, as the call would have."""
    t = Twins(settings_factory, tmp_path, 3, seed=7)
    try:
        t.play_day(today(ZONE))
        app, keys, client = t.sharded, t.sharded.keys, t.sharded.client
        member = "p07"
        store = shards.member_store("kills", app.settings.boards["kills"], member)

        def crash(point: str) -> None:
            if point == "moderate:kills/applied":
                raise KeyboardInterrupt(point)

        app._moderator.checkpoint = crash
        with pytest.raises(KeyboardInterrupt):
            app.moderate(member, "banned", boards=["kills"], reason="cheat")
        assert client.hexists(keys.moderation(store), member)
        assert client.hlen(keys.moderation_pending(store)) == 1
        assert not client.hexists(keys.moderation("kills"), member)
        # The store's change is whole: off the public board.
        assert member not in [e.member for e in app.top("kills", "season", limit=100).entries]
        assert app._moderator.recover(t.clock() + RECOVER_AFTER / 2) == 0  # too young
        assert app._moderator.recover(t.clock() + RECOVER_AFTER) == 1
        assert client.hget(keys.moderation("kills"), member) == client.hget(
            keys.moderation(store), member
        )
        assert client.hlen(keys.moderation_pending(store)) == 0
        entries = app.audit(member=member, limit=10).entries
        assert [(e.action, e.boards) for e in entries] == [("ban", ["kills"])]
        assert [e.type for e in app.lifecycle(1000).events if e.type == "member_banned"] == [
            "member_banned"
        ]
    finally:
        t.close()
