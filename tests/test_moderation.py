"""Hidden and banned members (docs/fair-play.md): the public keys against a plain-Python model
of the visible members, the twin keys against one of the hidden members.

- random writes of several members (sum, max, set boards; member, shared, dense, earliest
  ties; trimmed boards) interleaved with hide/unhide/ban/unban: after each step every public
  key equals the model's board of the visible members (trimmed), every twin the model's
  board of the hidden ones (untrimmed), reach and distinct sets alike; an unhidden member's
  scores are what they would be had it never been hidden (the model never hides anyone);
  banned events are counted and applied nowhere; a resent batch answers the same;
- a 3x1 cluster run of the same (both_backends);
- 8 writer threads and a moderator flipping one member: no member on a public key and its
  twin, none lost;
- bad input: 4xx with a code over HTTP, exit 2 on the CLI, nothing changed;
- audit entries and lifecycle events: once per change.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
import redis
from click.testing import CliRunner
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from reference import Model, best, zset

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.errors import InvalidInput, InvalidMember, UnknownBoard, UnknownMode, UnknownState
from seasons.http.app import create_app
from seasons.keys import Keys

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "mod"
BOARD = "kills"
START = datetime(2035, 6, 13, 20, 0, 5, tzinfo=UTC)  # far ahead: EXPIREATs stay in the future
MEMBERS = ("a", "b", "c", "d")
WINDOWS = ("day", "week", "season")
Make = Callable[..., Settings]


@pytest.fixture
def make(settings_factory: Make) -> Make:
    def build(**board: Any) -> Settings:
        cfg = {"windows": list(WINDOWS), **board}
        return settings_factory(namespace=NS, boards={BOARD: cfg, "other": {}})

    return build


# --- the model -------------------------------------------------------------------------------


class Moderated:
    """The boards of the contract (reference.Model, which never hides anyone) split by the
    members' states: public = the visible members, trimmed; twin = the others, untrimmed."""

    def __init__(self, settings: Settings):
        self.model = Model(settings)
        self.cfg = settings.boards[BOARD]
        self.state: dict[str, str] = {}  # member -> hidden | banned

    def submit(self, values: list[tuple[str, float]], now: datetime) -> tuple[int, int]:
        """Events at ``now``: (applied, banned)."""
        kept = [(m, v) for m, v in values if self.state.get(m) != "banned"]
        events = [{"board": BOARD, "member": m, "value": v, "ts": now} for m, v in kept]
        if events:
            self.model.submit(events, now)
        return len(kept), len(values) - len(kept)

    def public(self, window: str, pid: str) -> dict[str, float]:
        scores = {
            m: s for m, s in self.model.formula(BOARD, window, pid).items() if m not in self.state
        }
        return scores if window == "day" else best(scores, self.cfg.order, self.cfg.max_entries)

    def twin(self, window: str, pid: str) -> dict[str, float]:
        return {m: s for m, s in self.model.formula(BOARD, window, pid).items() if m in self.state}

    def reach(self, window: str, pid: str, hidden: bool) -> dict[str, float]:
        shown = self.public(window, pid)
        return {
            m: t
            for m, t in self.model.reach(BOARD, window, pid).items()
            if (m in self.state) == hidden and (hidden or m in shown)
        }


def check_redis(r: redis.Redis, keys: Keys, model: Moderated) -> None:
    for window, pid in sorted(model.model.periods(BOARD)):
        public = keys.window(BOARD, window, pid)
        twin = keys.hidden(public)
        assert zset(r, public) == model.public(window, pid), (public, model.state)
        assert zset(r, twin) == model.twin(window, pid), (twin, model.state)
        if model.cfg.ties == "dense":
            distinct = keys.distinct(BOARD, window, pid)
            rows = cast(list[tuple[bytes, float]], r.zrange(distinct, 0, -1, withscores=True))
            got = {score for _, score in rows}
            assert got == {s + 0.0 for s in model.public(window, pid).values()}, distinct
        if model.cfg.ties == "earliest":
            reached = keys.reached(BOARD, window, pid)
            assert zset(r, reached) == model.reach(window, pid, False), reached
            assert zset(r, keys.hidden(reached)) == model.reach(window, pid, True), reached
        if r.exists(twin):  # a twin expires with its public key
            assert r.expiretime(twin) == model.model.cal.expire_at(window, pid), twin


# --- random writes and moderation against the model -----------------------------------------


def board_cfg() -> st.SearchStrategy[dict[str, Any]]:
    def possible(cfg: dict[str, Any]) -> dict[str, Any]:
        if cfg["ties"] == "earliest":  # no trimming with earliest ties (the settings refuse)
            cfg = {**cfg, "max_entries": 0}
        return cfg

    return st.fixed_dictionaries(
        {
            "aggregate": st.sampled_from(["sum", "max", "set"]),
            "ties": st.sampled_from(["member", "shared", "dense", "earliest"]),
            "max_entries": st.sampled_from([0, 0, 2]),
            "week_weights": st.lists(st.sampled_from([1, 2]), min_size=7, max_size=7),
        }
    ).map(possible)


write = st.tuples(
    st.just("write"),
    st.sampled_from([0, 60, 5 * 3600, 20 * 3600]),  # seconds the clock moves first
    st.lists(st.tuples(st.sampled_from(MEMBERS), st.integers(-3, 9)), min_size=1, max_size=5),
    st.booleans(),  # resend it at once
)
moderate = st.tuples(
    st.just("moderate"),
    st.sampled_from(MEMBERS[:2]),  # a few members flip often; the others stay visible
    st.sampled_from(["visible", "hidden", "banned"]),
    st.sampled_from(["shadow", "open"]),
)


def run_steps(s: Seasons, r: redis.Redis, settings: Settings, clock: ManualClock,
              steps: list[Any]) -> None:  # fmt: skip
    keys = Keys(NS)
    model = Moderated(settings)
    for n, step in enumerate(steps):
        if step[0] == "write":
            _, move, values, resend = step
            clock.advance(timedelta(seconds=move))
            events = [{"board": BOARD, "member": m, "value": v} for m, v in values]
            result = s.submit_many(events, batch_id=f"b{n}")
            applied, banned = model.submit(values, clock())
            assert (result.applied, result.banned, result.duplicates) == (applied, banned, 0)
            if resend:
                again = s.submit_many(events, batch_id=f"b{n}")
                assert again.model_dump() == result.model_dump()
        else:
            _, member, state, mode = step
            before = model.state.get(member, "visible")
            change = s.moderate(member, state, mode=mode, boards=[BOARD], reason=f"step {n}")
            assert [b.board for b in change.boards] == [BOARD]
            assert change.boards[0].before.state == before
            assert change.boards[0].after.state == state
            if state == "visible":
                model.state.pop(member, None)
            else:
                model.state[member] = state
        check_redis(r, keys, model)
        found = s.moderation(MEMBERS[0], boards=[BOARD]).boards[0].state
        assert found == model.state.get(MEMBERS[0], "visible")


@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cfg=board_cfg(), steps=st.lists(st.one_of(write, moderate), min_size=1, max_size=14))
def test_public_and_twin_keys_equal_the_model(
    make: Make, r: redis.Redis, cfg: dict[str, Any], steps: list[Any]
) -> None:
    r.flushall()
    settings = make(**cfg)
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        run_steps(s, r, settings, clock, steps)


@pytest.mark.both_backends
@pytest.mark.parametrize("cfg", [
    {"aggregate": "sum", "ties": "dense", "max_entries": 2},
    {"aggregate": "max", "ties": "earliest"},
])  # fmt: skip
def test_a_fixed_run_on_each_backend(
    make: Make, r: redis.Redis, backend: str, cfg: dict[str, Any]
) -> None:
    settings = make(**cfg)
    clock = ManualClock(START)
    steps: list[Any] = [
        ("write", 0, [("a", 5), ("b", 3), ("c", 4), ("d", 1)], False),
        ("moderate", "a", "hidden", "shadow"),
        ("write", 60, [("a", 2), ("b", 1), ("c", 7)], True),
        ("write", 20 * 3600, [("a", 9), ("d", 2)], False),
        ("moderate", "b", "banned", "open"),
        ("write", 60, [("b", 8), ("a", 1), ("c", 1)], True),
        ("moderate", "a", "visible", "shadow"),
        ("moderate", "b", "hidden", "shadow"),
        ("write", 5 * 3600, [("b", 2), ("a", 3)], False),
        ("moderate", "b", "visible", "shadow"),
    ]
    with Seasons(settings, clock=clock) as s:
        run_steps(s, r, settings, clock, steps)


def test_multi_board_batches_held_approvals_and_banned_ids(
    settings_factory: Make, r: redis.Redis
) -> None:
    """A batch over two boards with a hidden member on one; an approved held event of a
    hidden member goes to the twins; a banned event's id stays seen after unban."""
    settings = settings_factory(namespace=NS, boards={
        BOARD: {"windows": list(WINDOWS), "member_rate": {"events": 1, "per": "PT1H"}},
        "other": {"windows": list(WINDOWS)},
    })  # fmt: skip
    keys = Keys(NS)
    day = START.date().isoformat()
    mine, other = keys.day(BOARD, day), keys.day("other", day)
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        s.submit_many([{"board": BOARD, "member": "a", "value": 1},
                       {"board": "other", "member": "a", "value": 1}])  # fmt: skip
        s.moderate("a", "hidden", boards=[BOARD], reason="x")
        got = s.submit_many([{"board": BOARD, "member": "a", "value": 2, "event_id": "h1"},
                             {"board": "other", "member": "a", "value": 2},
                             {"board": BOARD, "member": "b", "value": 4}])  # fmt: skip
        assert (got.applied, got.held, got.banned) == (2, 1, 0)  # a's rate: 1 an hour
        assert zset(r, mine) == {"b": 4.0} and zset(r, keys.hidden(mine)) == {"a": 1.0}
        assert zset(r, other) == {"a": 3.0} and not r.exists(keys.hidden(other))
        s.approve(BOARD, "h1", reason="fine")
        assert zset(r, keys.hidden(mine)) == {"a": 3.0} and zset(r, mine) == {"b": 4.0}
        s.moderate("a", "banned", boards=[BOARD], reason="x")
        clock.advance(timedelta(hours=1))  # a new interval of member_rate: nothing held
        got = s.submit_many([{"board": BOARD, "member": "a", "value": 5, "event_id": "z"}],
                            batch_id="ban-1")  # fmt: skip
        assert (got.applied, got.duplicates, got.banned) == (0, 0, 1)
        again = s.submit_many([{"board": BOARD, "member": "a", "value": 5, "event_id": "z"}],
                              batch_id="ban-1")  # fmt: skip
        assert again.model_dump() == got.model_dump()
        s.moderate("a", "visible", reason="appeal")
        got = s.submit_many([{"board": BOARD, "member": "a", "value": 5, "event_id": "z"}])
        assert (got.applied, got.duplicates, got.banned) == (0, 1, 0)
        assert zset(r, mine) == {"a": 3.0, "b": 4.0} and not r.exists(keys.hidden(mine))
        week = keys.window(BOARD, "week", "2035-06-11")
        assert zset(r, week) == {"a": 3.0, "b": 4.0} and not r.exists(keys.hidden(week))


def test_a_hidden_members_limit_counts_its_score_on_the_twins(
    settings_factory: Make, r: redis.Redis
) -> None:
    settings = settings_factory(namespace=NS, boards={
        BOARD: {"windows": list(WINDOWS), "max_period_gain": {"value": 50, "window": "day"}},
    })  # fmt: skip
    day = Keys(NS).day(BOARD, START.date().isoformat())
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit(BOARD, "a", 40)
        s.moderate("a", "hidden", reason="x")
        assert s.submit(BOARD, "a", 20).held == 1  # 40 + 20 > 50: its score, on the twin
        assert s.submit(BOARD, "a", 10).applied == 1
        assert zset(r, Keys(NS).hidden(day)) == {"a": 50.0} and zset(r, day) == {}


@pytest.mark.parametrize("max_entries", [0, 2])
def test_the_alltime_board_and_its_base(settings_factory: Make, r: redis.Redis,
                                        max_entries: int) -> None:  # fmt: skip
    """A day folded into the all-time base already: a hidden member's events reach the base's
    twin too, and unhide brings base and board back (trimmed: the best two)."""
    settings = settings_factory(namespace=NS, boards={
        BOARD: {"windows": [*WINDOWS, "alltime"], "max_entries": max_entries},
    })  # fmt: skip
    keys = Keys(NS)
    alltime, base = keys.window(BOARD, "alltime", "all"), keys.base(BOARD, "alltime")
    r.hset(keys.state(BOARD), "folded:alltime", START.date().isoformat())
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit_many([{"board": BOARD, "member": m, "value": v}
                       for m, v in (("a", 5), ("b", 3), ("c", 1))])  # fmt: skip
        s.moderate("a", "hidden", reason="x")
        s.submit(BOARD, "a", 2)
        top = {"b": 3.0, "c": 1.0}
        assert zset(r, alltime) == top and zset(r, base) == top
        assert zset(r, keys.hidden(alltime)) == {"a": 7.0} == zset(r, keys.hidden(base))
        s.moderate("a", "visible", reason="x")
        every = {"a": 7.0, "b": 3.0, "c": 1.0}
        assert zset(r, base) == every
        assert zset(r, alltime) == (every if max_entries == 0 else {"a": 7.0, "b": 3.0})
        assert not r.exists(keys.hidden(alltime)) and not r.exists(keys.hidden(base))
        s.moderate("a", "banned", reason="x")  # the trimmed board takes c back
        assert zset(r, alltime) == top and zset(r, base) == top


# --- what a change records ------------------------------------------------------------------


def test_audit_entries_and_lifecycle_events_once_per_change(make: Make) -> None:
    settings = make()
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        s.submit(BOARD, "a", 5)
        s.moderate("a", "hidden", reason="smurf", actor="ops")
        clock.advance(timedelta(seconds=1))
        again = s.moderate("a", "hidden", reason="smurf", actor="ops")  # nothing to change
        assert [b.changed for b in again.boards] == [False, False]
        clock.advance(timedelta(seconds=1))
        s.moderate("a", "hidden", mode="open", boards=[BOARD], reason="smurf", actor="ops")
        clock.advance(timedelta(seconds=1))
        s.moderate("a", "banned", boards=[BOARD], reason="cheat", actor="ops")
        clock.advance(timedelta(seconds=1))
        s.moderate("a", "visible", reason="appeal", actor="ops")
        entries = list(reversed(s.audit(member="a", limit=50).entries))
        assert [(e.action, e.boards, e.reason) for e in entries] == [
            ("hide", ["kills", "other"], "smurf"),
            ("hide", ["kills"], "smurf"),  # the mode changed
            ("ban", ["kills"], "cheat"),
            ("unban", ["kills"], "appeal"),
            ("unhide", ["other"], "appeal"),
        ]
        assert entries[2].before == {"kills": {"state": "hidden", "mode": "open",
                                               "reason": "smurf"}}  # fmt: skip
        events = [
            (e.type, e.data["board"])
            for e in reversed(s.lifecycle(limit=50).events)
            if e.type.startswith("member_")
        ]
        assert events == [
            ("member_hidden", "kills"), ("member_hidden", "other"),
            ("member_banned", "kills"),
            ("member_unhidden", "kills"), ("member_unhidden", "other"),
        ]  # fmt: skip
        got = s.moderation("a").boards
        assert [(b.board, b.state) for b in got] == [("kills", "visible"), ("other", "visible")]
        assert s.top(BOARD, "day").entries[0].member == "a"


# --- bad input ------------------------------------------------------------------------------


BAD: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"state": "gone"}, UnknownState),
    ({"mode": "loud"}, UnknownMode),
    ({"boards": ["nope"]}, UnknownBoard),
    ({"boards": []}, InvalidInput),
    ({"reason": "x" * 501}, InvalidInput),
    ({"reason": "  "}, InvalidInput),
    ({"member": ""}, InvalidMember),
]


@pytest.mark.parametrize(("change", "error"), BAD)
def test_bad_input_changes_nothing(
    make: Make, r: redis.Redis, change: dict[str, Any], error: type[Exception]
) -> None:
    settings = make()
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit(BOARD, "a", 5)
        before = {k: r.dump(k) for k in r.scan_iter("*")}
        args = {"member": "a", "state": "hidden", "reason": "why", **change}
        member, state = args.pop("member"), args.pop("state")
        with pytest.raises(error):
            s.moderate(member, state, **args)
        assert {k: r.dump(k) for k in r.scan_iter("*")} == before


def test_the_cli_and_http(settings_factory: Make, r: redis.Redis) -> None:
    token = "t" * 32
    settings = settings_factory(
        namespace=NS, boards={BOARD: {"windows": list(WINDOWS)}, "other": {}},
        api={"admin_token": token},
    )  # fmt: skip
    keys = Keys(NS)
    with Seasons(settings, clock=ManualClock(START)) as s:
        s.submit(BOARD, "a", 5)
        s.submit(BOARD, "b", 2)
    public = keys.window(BOARD, "day", START.date().isoformat())
    app = create_app(settings, clock=ManualClock(START))
    auth = {"Authorization": f"Bearer {token}"}
    with TestClient(app, base_url="http://localhost", headers=auth) as http:
        url = "/v1/admin/members/a/moderation"
        for body, code in [
            ({"state": "gone", "reason": "x"}, "unknown_state"),
            ({"state": "hidden", "mode": "loud", "reason": "x"}, "unknown_mode"),
            ({"state": "hidden", "boards": ["nope"], "reason": "x"}, "unknown_board"),
            ({"state": "hidden", "reason": "x" * 501}, "invalid_input"),
            ({"state": "hidden"}, "invalid_input"),
            ({"state": 5, "reason": "x"}, "invalid_input"),
        ]:
            got = http.put(url, json=body)
            assert 400 <= got.status_code < 500 and got.json()["error"] == code, got.text
        assert not r.exists(keys.moderation(BOARD))
        assert zset(r, public) == {"a": 5.0, "b": 2.0}
        got = http.put(url, json={"state": "hidden", "boards": [BOARD], "reason": "alt"})
        assert got.status_code == 200, got.text
        assert got.json()["boards"][0]["after"]["state"] == "hidden"
        shown = http.get(url).json()
        assert {b["board"]: b["state"] for b in shown["boards"]} == {
            BOARD: "hidden", "other": "visible"}  # fmt: skip
        assert shown["boards"][0]["reason"] == "alt"
        assert zset(r, public) == {"b": 2.0}
        assert zset(r, keys.hidden(public)) == {"a": 5.0}
        http.put(url, json={"state": "banned", "boards": [BOARD], "reason": "cheat"})
        events = [{"board": BOARD, "member": "a", "value": 1},
                  {"board": BOARD, "member": "b", "value": 1}]  # fmt: skip
        got = http.post("/v1/scores", json={"events": events})
        assert got.status_code == 200 and got.json()["banned"] == 1, got.text
        assert got.json()["applied"] == 1
        assert 'seasons_events_total{outcome="banned"} 1.0' in http.get("/metrics").text
        assert zset(r, public) == {"b": 3.0}
        assert zset(r, keys.hidden(public)) == {"a": 5.0}
        http.put(url, json={"state": "hidden", "boards": [BOARD], "reason": "alt"})
    state = CliState(clock=ManualClock(START), settings=settings)
    for args in (["hide", "b", "--board", "nope", "--reason", "x"], ["hide", "b"],
                 ["ban", "b", "--mode", "loud", "--reason", "x"],
                 ["ban", "b", "--reason", "x" * 501]):  # fmt: skip
        bad = CliRunner().invoke(cli, args, obj=state)
        assert bad.exit_code == 2, (args, bad.output)
    assert zset(r, public) == {"b": 3.0}
    ok = CliRunner().invoke(cli, ["unhide", "a", "--reason", "appeal", "--json"], obj=state)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["boards"][0]["after"]["state"] == "visible"
    assert zset(r, public) == {"a": 5.0, "b": 3.0}
    shown = CliRunner().invoke(cli, ["moderation", "a"], obj=state)
    assert shown.exit_code == 0 and "kills\tvisible" in shown.output, shown.output


# --- a race: writers and a moderator --------------------------------------------------------


def test_writers_and_a_moderator_lose_nothing(make: Make, r: redis.Redis) -> None:
    settings = make(aggregate="sum")
    writers, flips = 8, 30
    done = threading.Event()
    errors: list[BaseException] = []
    written = [0] * writers  # batches each writer had acknowledged

    def writer(w: int) -> None:
        try:
            with Seasons(settings) as s:
                while not done.is_set():
                    i = written[w]
                    s.submit_many([{"board": BOARD, "member": "x", "value": 1},
                                   {"board": BOARD, "member": f"w{w}", "value": 1}],
                                  batch_id=f"w{w}-{i}")  # fmt: skip
                    written[w] = i + 1
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def moderator() -> None:
        try:
            with Seasons(settings) as s:
                for flip in range(flips):  # ends hidden (an even count of flips)
                    s.moderate("x", ("hidden", "visible")[flip % 2], boards=[BOARD],
                               reason="flip")  # fmt: skip
                    while min(written) <= flip // 4:  # let every writer in between
                        if errors:
                            return
                        time.sleep(0.001)
                s.moderate("x", "hidden", boards=[BOARD], reason="end")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            done.set()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    mod = threading.Thread(target=moderator)
    mod.start()
    mod.join()
    for t in threads:
        t.join()
    assert not errors, errors
    keys = Keys(NS)
    totals: dict[tuple[str, str], float] = {}
    for name in r.scan_iter(match=f"{NS}:{{{BOARD}}}:*"):
        key = name.decode()
        parsed = keys.parse(key)
        assert parsed is not None
        if parsed.kind in ("day", "week", "season"):
            public, twin = zset(r, key), zset(r, keys.hidden(key))
            assert "x" not in public  # hidden at the end: on the twin only
            assert set(public) & set(twin) == set()
            totals[parsed.kind, "x"] = totals.get((parsed.kind, "x"), 0) + twin.get("x", 0)
            for m, v in public.items():
                totals[parsed.kind, m] = totals.get((parsed.kind, m), 0) + v
    want: dict[tuple[str, str], float] = {}
    for window in ("day", "week", "season"):
        want[window, "x"] = sum(written)
        want.update({(window, f"w{w}"): written[w] for w in range(writers)})
    assert totals == want


def test_forget_deletes_the_lifecycle_events_naming_the_member(make: Make, r: redis.Redis) -> None:
    """Erasure: a forgotten member's moderation events leave the lifecycle stream and its id
    set (both hold its id); another member's events, and events naming no member, stay."""
    settings = make()
    keys = Keys(NS)
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        for member in ("gone-player", "kept-player"):
            s.submit(BOARD, member, 5)
            s.moderate(member, "hidden", boards=[BOARD], reason="smurf", actor="ops")
            clock.advance(timedelta(seconds=1))
            s.moderate(member, "visible", boards=[BOARD], reason="appeal", actor="ops")
            clock.advance(timedelta(seconds=1))
        r.xadd(keys.lifecycle(), {"id": "unrelated:1", "type": "day_closed", "at": "x",
                                  "data": '{"board":"kills","day":"2035-01-01"}'})  # fmt: skip
        before = [e.id for e in s.lifecycle(limit=50).events]
        found = s.forget("gone-player")
        assert found.lifecycle == 2
        after = [e.id for e in s.lifecycle(limit=50).events]
        assert after == [i for i in before if "gone-player" not in i]
        assert len(after) == len(before) - 2 and "unrelated:1" in after
        # Every entry a read can reach (XDEL leaves a deleted entry's bytes in its stream node
        # until the MAXLEN trim drops the node: docs/fair-play.md), and the id set whole.
        entries = r.xrange(keys.lifecycle(), "-", "+")
        assert all(b"gone-player" not in b"".join([*f.keys(), *f.values()]) for _, f in entries)
        raw = r.dump(keys.lifecycle_ids())
        assert raw is not None and b"gone-player" not in raw
        assert any(b"kept-player" in m for m in r.zrange(keys.lifecycle_ids(), 0, -1))


@pytest.mark.parametrize("crowded", [False, True])
def test_wide_batches_read_small_and_large_hashes_alike(
    settings_factory: Make, r: redis.Redis, crowded: bool
) -> None:
    """A batch of 40 members reads the moderation, metadata, rate and held hashes whole
    while they are small (a listpack, which HMGET scans once per field) and field by field
    once large (``crowded``: 200 other fields each first): the same hidden, banned, held,
    duplicate and merged-metadata outcomes either way, as worked out here by hand."""
    settings = settings_factory(namespace=NS, boards={
        BOARD: {"windows": list(WINDOWS), "member_rate": {"events": 2, "per": "PT1H"}},
    })  # fmt: skip
    keys = Keys(NS)
    day = keys.day(BOARD, START.date().isoformat())
    members = [f"m{i:02d}" for i in range(40)]
    hidden, banned = {"m03", "m07"}, {"m11"}
    with Seasons(settings, clock=ManualClock(START)) as s:
        if crowded:
            s.submit_many([{"board": BOARD, "member": f"z{i}", "value": 1, "metadata": {"k": i},
                            "event_id": f"z{i}"} for i in range(200)])  # fmt: skip
            for i in range(130):
                s.moderate(f"ghost{i}", "hidden", boards=[BOARD], reason="crowd")
        s.submit_many([{"board": BOARD, "member": m, "value": 1, "metadata": {"lvl": i}}
                       for i, m in enumerate(members)])  # fmt: skip
        for m in sorted(hidden):
            s.moderate(m, "hidden", boards=[BOARD], reason="x")
        for m in sorted(banned):
            s.moderate(m, "banned", boards=[BOARD], reason="x")
        # Each member twice more: its rate (2 an hour) lets one through and holds the other.
        batch = [{"board": BOARD, "member": m, "value": 10 + k, "metadata": {"x": k},
                  "event_id": f"{m}-{k}"} for k in (0, 1) for m in members]  # fmt: skip
        r.config_resetstat()
        got = s.submit_many(batch)
        whole = r.info("commandstats").get("cmdstat_hgetall", {}).get("calls", 0)
        assert (whole > 0) == (not crowded)  # each way was taken
        assert (got.applied, got.held, got.banned) == (39, 40, 1)
        assert sorted(e.index for e in got.held_events) == list(range(40, 80))
        again = s.submit_many(batch)  # held ids count as seen
        assert (again.applied, again.held, again.duplicates) == (0, 0, 80)
        shown = {m: 11.0 for m in members if m not in hidden | banned}
        assert zset(r, day) == ({f"z{i}": 1.0 for i in range(200)} if crowded else {}) | shown
        # A banned member's entries are kept aside as a hidden one's; its new events nowhere.
        assert zset(r, keys.hidden(day)) == dict.fromkeys(sorted(hidden), 11.0) | {"m11": 1.0}
        for i, m in enumerate(members):
            meta = r.hget(keys.meta(BOARD), m)
            assert meta is not None and json.loads(meta)["lvl"] == i
            assert json.loads(meta).get("x") == (None if m in banned else 0), m


def test_forget_drops_a_crashed_calls_follow_ups_naming_the_member(
    make: Make, r: redis.Redis
) -> None:
    """A moderation call cut off after its board's script leaves its follow-ups pending
    (the member hidden, no audit entry or event yet); forgetting the member drops them, so
    the recovery a minute later appends no entry and no event naming it, and puts no id back
    in the audit trail's hash -> id map."""
    settings = make()
    keys = Keys(NS)
    clock = ManualClock(START)

    class Crash(Exception):
        pass

    def crash(name: str) -> None:
        if name == f"moderate:{BOARD}/applied":
            raise Crash(name)

    with Seasons(settings, clock=clock) as s:
        s.submit(BOARD, "gone-player", 5)
        s.submit(BOARD, "kept-player", 4)
        s._moderator.checkpoint = crash
        for member in ("gone-player", "kept-player"):
            with pytest.raises(Crash):
                s.moderate(member, "hidden", boards=[BOARD], reason="smurf", actor="ops")
        s._moderator.checkpoint = lambda name: None
        assert r.hlen(keys.moderation_pending(BOARD)) == 2
        s.forget("gone-player")
        assert r.hlen(keys.moderation_pending(BOARD)) == 1  # the other member's stays
        clock.advance(timedelta(minutes=2))
        assert s._moderator.recover(clock()) == 1
        hides = s.audit(action="hide").entries
        assert [e.member for e in hides] == ["kept-player"]
        events = [(e.type, e.data.get("member")) for e in s.lifecycle(limit=50).events]
        assert ("member_hidden", "kept-player") in events
        assert all(m != "gone-player" for _, m in events)
        everything = b"".join(k + v for k, v in r.hgetall(keys.audit_members()).items())
        assert b"gone-player" not in everything and b"kept-player" in everything
