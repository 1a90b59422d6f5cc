"""What Seasons and Redis agree on, checked against a real redis-server:

- the write protocol: a batch built by ``script_args`` is one JSON argument whose keys are all
  declared, and writes exactly the boards a plain-Python model computes; a batch that does
  not match the protocol (another version, a missing or mistyped field, an undeclared key, an
  event of no group, too few KEYS...) is refused with an error naming the field, and the
  data set is left as it was (DEBUG DIGEST and DBSIZE);
- the scripts' assembly: each shared fragment is written once and included where needed;
- the minimum Redis version, checked at start.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import ResponseError
from reference import key

from seasons import Seasons, redis_health, write_script
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.connection import make_client
from seasons.errors import BatchRejected, UnsupportedRedis
from seasons.events import ValidEvent, validate_batch
from seasons.keys import Keys
from seasons.scripts import Scripts, assemble, names, script
from seasons.write_script import parse_reply, script_args
from seasons.writes import Writes

NS = "wpr"
NOW = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # a Wednesday
WEEK_WEIGHTS = [1, 2, 3, 1, 1, 1, 2]  # monday first
SEASON_WEIGHTS = [2, 3]  # weeks of a season past these weigh 1
ANCHOR = date(2035, 6, 12)  # S1 is 2035-06-12 .. 2035-06-25; earlier days have no season
LUA = Path(__file__).parent.parent / "seasons" / "lua"
Make = Callable[..., Settings]


def board_settings(make: Make, **board: Any) -> Settings:
    return make(
        namespace=NS,
        timezone="UTC",
        week_start="monday",
        seasons={"length_days": 14, "anchor": ANCHOR.isoformat()},
        boards={"b": {"week_weights": WEEK_WEIGHTS, "season_weights": SEASON_WEIGHTS, **board}},
    )


def at(day: str, hour: int = 8) -> str:  # NOW's day too: before NOW
    return f"{day}T{hour:02d}:00:00+00:00"


def event(member: str, value: float, day: str, **extra: Any) -> dict[str, Any]:
    return {"board": "b", "member": member, "value": value, "ts": at(day), **extra}


# Saturday and Monday before the season, then Tuesday and Wednesday in its first week.
DAYS = ("2035-06-09", "2035-06-11", "2035-06-12", "2035-06-13")
MEMBERS = ("ann", "bob", "cy", "dee", "eve", "fay")


def stream() -> list[dict[str, Any]]:
    """Events on each of DAYS, scores distinct enough that no two members tie."""
    out = []
    for d, day in enumerate(DAYS):
        for m, member in enumerate(MEMBERS):
            if (m + d) % 3 != 2:
                out.append(event(member, 10 * m + d + 1, day))
                out.append(event(member, m + 1, day))
    return out


# --- the plain-Python model ---------------------------------------------------------------


def combine(aggregate: str, old: float | None, new: float) -> float:
    """``new`` comes after ``old`` (set: it replaces it)."""
    if old is None:
        return new
    return {"sum": old + new, "max": max(old, new), "min": min(old, new), "set": new}[aggregate]


def model(events: list[dict[str, Any]], aggregate: str, order: str, max_entries: int) -> Any:
    """{(window, period id): {member: score}} of the day, week and season boards. The events
    come day after day, so combining in their order makes a set board's latest day win."""
    day_boards: dict[date, dict[str, float]] = {}
    for ev in events:
        d = date.fromisoformat(ev["ts"][:10])
        board = day_boards.setdefault(d, {})
        board[ev["member"]] = combine(aggregate, board.get(ev["member"]), ev["value"])
    out: dict[tuple[str, str], dict[str, float]] = {}
    for d, board in day_boards.items():
        out[("day", d.isoformat())] = dict(board)
        monday = d - timedelta(days=d.weekday())
        rolled = [("week", monday.isoformat(), WEEK_WEIGHTS[d.weekday()])]
        if d >= ANCHOR:
            number, offset = divmod((d - ANCHOR).days, 14)
            week = offset // 7
            weight = SEASON_WEIGHTS[week] if week < len(SEASON_WEIGHTS) else 1
            rolled.append(("season", f"S{number + 1}", weight))
        for window, pid, weight in rolled:
            target = out.setdefault((window, pid), {})
            for member, score in board.items():
                target[member] = combine(aggregate, target.get(member), weight * score)
    for (window, _), board in out.items():
        if window != "day" and max_entries:
            kept = sorted(board.items(), key=lambda kv: (kv[1], kv[0]), reverse=order == "desc")
            board.clear()
            board.update(kept[:max_entries])
    return out


def expected_expiry(window: str, pid: str, retention: timedelta) -> int:
    last = {
        "day": lambda: date.fromisoformat(pid),
        "week": lambda: date.fromisoformat(pid) + timedelta(days=6),
        "season": lambda: ANCHOR + timedelta(days=14 * int(pid[1:]) - 1),
    }[window]()
    end = datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1)
    return int((end + retention).timestamp())


# --- a batch that round-trips ---------------------------------------------------------------


def valid(settings: Settings, events: list[dict[str, Any]]) -> list[ValidEvent]:
    return validate_batch(events, settings, NOW, backfill=True)


def args_of(settings: Settings, events: list[ValidEvent], **kw: Any) -> tuple[list[str], Any]:
    kw.setdefault("batch_id", "batch-1")
    kw.setdefault("digest", "digest-1")
    keys, argv = script_args("b", events, settings, Keys(NS), NOW, backfill=True, **kw)
    assert len(argv) == 1
    return keys, json.loads(argv[0])


def named_keys(batch: dict[str, Any]) -> set[str]:
    found = set(batch["keys"].values())
    for group in batch["groups"]:
        found.add(group["key"])
        for rollup in group["rollups"]:
            found.add(rollup["key"])
            found.update(
                k
                for k in (
                    group["reached"],
                    rollup["reached"],
                    group["distinct"],
                    rollup["distinct"],
                )
                if k is not None
            )
            found.update(k for k, _, _ in rollup["days"])
    return found


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("aggregate", "order", "max_entries"),
    [
        ("sum", "desc", 0),
        ("max", "desc", 0),
        ("min", "asc", 0),
        ("sum", "desc", 3),
        ("max", "asc", 2),
        ("set", "desc", 0),
        ("set", "asc", 2),
    ],
)
def test_a_batch_round_trips_into_the_boards_of_the_model(
    settings_factory: Make, connect: Any, aggregate: str, order: str, max_entries: int
) -> None:
    settings = board_settings(
        settings_factory, aggregate=aggregate, order=order, max_entries=max_entries
    )
    client = connect(decode_responses=True)
    scripts = Scripts(client)
    events = stream()
    half = len(events) // 2
    for n, part in enumerate((events[:half], events[half:])):
        evs = valid(settings, part)
        keys, batch = args_of(settings, evs, batch_id=f"batch-{n}")
        # Self-describing: the events in batch order, by their fields' names; every key the
        # batch names declared in KEYS, and nothing else.
        assert batch["protocol"] == write_script.PROTOCOL
        rows = [dict(zip(batch["event_fields"], row, strict=True)) for row in batch["events"]]
        assert [(r["index"], r["member"], r["value"]) for r in rows] == [
            (i, e["member"], e["value"]) for i, e in enumerate(part)
        ]
        assert [batch["groups"][r["group"]]["day"] for r in rows] == [e["ts"][:10] for e in part]
        assert named_keys(batch) == set(keys) and len(keys) == len(set(keys))
        for group in batch["groups"]:
            in_season = date.fromisoformat(group["day"]) >= ANCHOR
            assert group["season"] == ("S1" if in_season else None)
            windows = [r["window"] for r in group["rollups"]]
            assert windows == (["week", "season"] if in_season else ["week"])
            # Trimmed and set boards read the days of the period; the others need none.
            wanted = max_entries > 0 or aggregate == "set"
            assert all(bool(r["days"]) == wanted for r in group["rollups"])
        result = parse_reply(scripts.write(keys=keys, args=[json.dumps(batch)]), f"batch-{n}")
        assert (result.applied, result.duplicates) == (len(part), 0)
    want = model(events, aggregate, order, max_entries)
    assert {w for w, _ in want} == {"day", "week", "season"}
    for (window, pid), board in want.items():
        name = key(NS, "b", window, pid)
        assert dict(client.zrange(name, 0, -1, withscores=True)) == board, (window, pid)
        assert client.expiretime(name) == expected_expiry(window, pid, settings.retention)


@pytest.mark.parametrize("aggregate", ["sum", "set"])
def test_an_earliest_batch_names_its_reach_sets_and_each_events_time(
    settings_factory: Make, aggregate: str
) -> None:
    """ties = "earliest": every board of the batch has its reach set beside it, declared in
    KEYS, and each event carries its ts (epoch seconds) for them; other boards name none."""
    settings = board_settings(settings_factory, aggregate=aggregate, ties="earliest")
    events = stream()
    keys, batch = args_of(settings, valid(settings, events))
    assert named_keys(batch) == set(keys) and len(keys) == len(set(keys))
    for group in batch["groups"]:
        assert group["reached"] == f"{NS}:{{b}}:reached:day:{group['day']}"
        for rollup in group["rollups"]:
            window, pid = rollup["key"].split(":")[-2:]
            assert rollup["reached"] == f"{NS}:{{b}}:reached:{window}:{pid}"
    rows = [dict(zip(batch["event_fields"], row, strict=True)) for row in batch["events"]]
    assert [r["ts"] for r in rows] == [datetime.fromisoformat(e["ts"]).timestamp() for e in events]
    plain = board_settings(settings_factory, aggregate=aggregate)
    keys, batch = args_of(plain, valid(plain, events))
    assert not any(":reached:" in k for k in keys)
    assert all(g["reached"] is None for g in batch["groups"])
    assert all(r["reached"] is None for g in batch["groups"] for r in g["rollups"])


@pytest.mark.parametrize("aggregate", ["sum", "set"])
def test_a_dense_batch_names_its_distinct_sets(settings_factory: Make, aggregate: str) -> None:
    """ties = "dense": every board of the batch has its distinct set beside it, declared in
    KEYS; other boards name none."""
    settings = board_settings(settings_factory, aggregate=aggregate, ties="dense")
    events = stream()
    keys, batch = args_of(settings, valid(settings, events))
    assert named_keys(batch) == set(keys) and len(keys) == len(set(keys))
    for group in batch["groups"]:
        assert group["distinct"] == f"{NS}:{{b}}:distinct:day:{group['day']}"
        assert group["reached"] is None
        for rollup in group["rollups"]:
            window, pid = rollup["key"].split(":")[-2:]
            assert rollup["distinct"] == f"{NS}:{{b}}:distinct:{window}:{pid}"
    plain = board_settings(settings_factory, aggregate=aggregate)
    keys, batch = args_of(plain, valid(plain, events))
    assert not any(":distinct:" in k for k in keys)
    assert all(g["distinct"] is None for g in batch["groups"])
    assert all(r["distinct"] is None for g in batch["groups"] for r in g["rollups"])


def test_the_same_batch_through_the_api_equals_the_model(settings_factory: Make) -> None:
    """The whole path (validation, one call, the reply), event ids and metadata included."""
    settings = board_settings(settings_factory, max_entries=3)
    events = [{**e, "event_id": f"e{i}", "metadata": {"n": i % 4}} for i, e in enumerate(stream())]
    again = [{**events[0]}, {**events[-1]}]  # ids seen: duplicates, nothing changes
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        result = s.submit_many(events, backfill=True)
        assert (result.applied, result.duplicates) == (len(events), 0)
        result = s.submit_many(again, backfill=True)
        assert (result.applied, result.duplicates) == (0, 2)
        for (window, pid), board in model(events, "sum", "desc", 3).items():
            page = s.top("b", window, period=pid, limit=100)
            assert {e.member: e.score for e in page.entries} == board
            last = {e["member"]: e["metadata"] for e in events}
            assert all(e.metadata == last[e.member] for e in page.entries)


# --- a batch that does not match is refused, and nothing is written -------------------------


def delete(path: str) -> Callable[[Any], None]:
    def edit(batch: Any) -> None:
        *parents, last = path.split(".")
        node = batch
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        del node[int(last) if last.isdigit() else last]

    return edit


def put(path: str, value: Any) -> Callable[[Any], None]:
    def edit(batch: Any) -> None:
        *parents, last = path.split(".")
        node = batch
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(last) if last.isdigit() else last] = value

    return edit


# (what is wrong, how the batch is changed, what the refusal says)
MALFORMED: list[tuple[str, Callable[[Any], None], str]] = [
    (
        "another version",
        put("protocol", 2),
        f"protocol: this script speaks protocol {write_script.PROTOCOL}, got the number 2",
    ),
    (
        "no version",
        delete("protocol"),
        f"protocol: this script speaks protocol {write_script.PROTOCOL}, got nothing",
    ),
    ("missing field", delete("max_entries"), "max_entries: must be an integer >= 0, got nothing"),
    ("missing key", delete("keys.meta"), "keys.meta: must be a string, got nothing"),
    ("no scratch key", delete("keys.scratch"), "keys.scratch: must be a string, got nothing"),
    (
        "expiry as text",
        put("groups.0.rollups.0.expire_at", "never"),
        'groups[0].rollups[0].expire_at: must be an integer or null, got the string "never"',
    ),
    ("wrong type", put("now", "soon"), 'now: must be a number, got the string "soon"'),
    ("not a boolean", put("check_only", 0), "check_only: must be true or false, got the number 0"),
    (
        "unknown value",
        put("aggregate", "avg"),
        'aggregate: must be sum or max or min or set, got the string "avg"',
    ),
    ("misspelled field", put("max_entrys", 3), "max_entrys: unknown field"),
    (
        "fractional expiry",
        put("groups.0.expire_at", 1.5),
        "groups[0].expire_at: must be an integer",
    ),
    (
        "weight as text",
        put("groups.1.rollups.0.weight", "2"),
        'groups[1].rollups[0].weight: must be a number, got the string "2"',
    ),
    (
        "season not text",
        put("groups.0.season", 7),
        "groups[0].season: must be a string or null, got the number 7",
    ),
    ("unknown group field", put("groups.0.window", "week"), "groups[0].window: unknown field"),
    (
        "two groups, one day",
        put("groups.1.day", "2035-06-12"),
        'groups[1].day: "2035-06-12" is the day of another group',
    ),
    ("groups not a list", put("groups", {"a": 1}), "groups: must be an array, got an object"),
    (
        "undeclared key",
        put("groups.0.rollups.0.key", "elsewhere:{b}:week:x"),
        'groups[0].rollups[0].key: "elsewhere:{b}:week:x" is not declared in KEYS',
    ),
    (
        "undeclared board key",
        put("keys.state", "wpr:{b}:other"),
        'keys.state: "wpr:{b}:other" is not declared in KEYS',
    ),
    (
        "columns renamed",
        put("event_fields", ["group", "index", "member", "score", "event_id", "metadata", "ts"]),
        "event_fields: this script reads events as [group, index, member, value, event_id, "
        "metadata, ts], the batch sends [group, index, member, score, event_id, metadata, ts]",
    ),
    (
        "columns reordered",
        put("event_fields", ["index", "group", "member", "value", "event_id", "metadata", "ts"]),
        "event_fields: this script reads events as",
    ),
    (
        "event too short",
        put("events.1", [0, 1, "ann", 3.0, None, None]),
        "events[1]: must be an array of 7 values (event_fields), got an array",
    ),
    (
        "event as object",
        put("events.0", {"group": 0}),
        "events[0]: must be an array of 7 values (event_fields), got an object",
    ),
    (
        "ts as text",
        put("events.0.6", "now"),
        'events[0].ts: must be a number, got the string "now"',
    ),
    ("no ts", put("events.0.6", None), "events[0].ts: must be a number, got null"),
    (
        "no reach set field",
        delete("groups.0.reached"),
        "groups[0].reached: must be a string or null, got nothing",
    ),
    (
        "a rollup without its reach set field",
        delete("groups.0.rollups.0.reached"),
        "groups[0].rollups[0].reached: must be a string or null, got nothing",
    ),
    (
        "no distinct set field",
        delete("groups.0.distinct"),
        "groups[0].distinct: must be a string or null, got nothing",
    ),
    (
        "a rollup without its distinct set field",
        delete("groups.0.rollups.0.distinct"),
        "groups[0].rollups[0].distinct: must be a string or null, got nothing",
    ),
    (
        "an undeclared distinct set",
        put("groups.0.rollups.0.distinct", "wpr:{b}:distinct:week:x"),
        'groups[0].rollups[0].distinct: "wpr:{b}:distinct:week:x" is not declared in KEYS',
    ),
    (
        "an undeclared reach set",
        put("groups.0.reached", "wpr:{b}:reached:day:x"),
        'groups[0].reached: "wpr:{b}:reached:day:x" is not declared in KEYS',
    ),
    (
        "event of no group",
        put("events.2.0", 5),
        "events[2].group: the number 5, but the batch has 2 group(s)",
    ),
    (
        "negative group",
        put("events.2.0", -1),
        "events[2].group: must be an integer >= 0, got the number -1",
    ),
    (
        "value as text",
        put("events.0.3", "3"),
        'events[0].value: must be a number, got the string "3"',
    ),
    ("member missing", put("events.0.2", None), "events[0].member: must be a string, got null"),
    (
        "fractional index",
        put("events.0.1", 0.5),
        "events[0].index: must be an integer >= 0, got the number 0.5",
    ),
    (
        "metadata unmarked",
        put("events.0.5", '{"a":1}'),
        "events[0].metadata: must begin with '=' or '~'",
    ),
    ("no standing field", delete("standing"), "standing: must be an object or null, got nothing"),
    (
        "a standing of no tie rule",
        put("standing", {"window": "week", "ties": "best"}),
        'standing.ties: must be member or shared or dense or earliest, got the string "best"',
    ),
    (
        "a standing with an unknown field",
        put("standing", {"window": "week", "ties": "member", "limit": 3}),
        "standing.limit: unknown field",
    ),
    (
        "earliest standings without reach sets",
        put("standing", {"window": "week", "ties": "earliest"}),
        "standing.ties: earliest ranks need the reach set of the week board of groups[0]",
    ),
]
TRIMMED: list[tuple[str, Callable[[Any], None], str]] = [
    (
        "no days to recompute from",
        delete("groups.0.rollups.0.days"),
        "groups[0].rollups[0].days: must be an array, got nothing",
    ),
    (
        "a day without weight",
        put("groups.0.rollups.0.days.0", ["wpr:{b}:day:2035-06-12"]),
        "groups[0].rollups[0].days[0]: must be [day key, weight, day], got an array",
    ),
    (
        "a day that is not a date",
        put("groups.0.rollups.0.days.0.2", "monday"),
        'groups[0].rollups[0].days[0][2]: must be a day, YYYY-MM-DD, got the string "monday"',
    ),
    (
        "a day undeclared",
        put("groups.0.rollups.0.days.0.0", "wpr:{b}:day:1999-01-01"),
        'groups[0].rollups[0].days[0][0]: "wpr:{b}:day:1999-01-01" is not declared in KEYS',
    ),
    (
        "a reach set on a trimmed board",  # any declared key: the field alone is wrong
        put("groups.0.rollups.0.reached", "wpr:{b}:state"),
        "groups[0].rollups[0].reached: must be null on a board with max_entries > 0",
    ),
]


def state_of(r: redis.Redis) -> tuple[Any, int]:
    return r.execute_command("DEBUG", "DIGEST"), r.dbsize()


@pytest.fixture
def loaded(settings_factory: Make, r: redis.Redis, connect: Any) -> Any:
    """A board with a batch applied (so the digest is not that of an empty data set), the
    script of the client, and the arguments of a second batch of two days."""

    def build(max_entries: int = 0) -> tuple[Any, list[str], dict[str, Any], Settings]:
        settings = board_settings(settings_factory, max_entries=max_entries)
        client = connect(decode_responses=True)
        scripts = Scripts(client)
        first = valid(settings, stream()[:6])
        keys, batch = args_of(settings, first, batch_id="first")
        assert parse_reply(scripts.write(keys=keys, args=[json.dumps(batch)])).applied == 6
        second = valid(
            settings,
            [
                event("ann", 1, "2035-06-12", metadata={"a": 1}),
                event("bob", 2, "2035-06-13", event_id="x"),
                event("cy", 3, "2035-06-13"),
            ],
        )
        keys, batch = args_of(settings, second, batch_id="second")
        assert [g["day"] for g in batch["groups"]] == ["2035-06-12", "2035-06-13"]
        return scripts, keys, batch, settings

    return build


@pytest.mark.parametrize(
    ("edit", "message"), [(e, m) for _, e, m in MALFORMED], ids=[w for w, _, _ in MALFORMED]
)
def test_a_malformed_batch_is_refused_naming_the_field(
    loaded: Any, r: redis.Redis, edit: Callable[[Any], None], message: str
) -> None:
    scripts, keys, batch, _ = loaded()
    bad = copy.deepcopy(batch)
    edit(bad)
    before = state_of(r)
    with pytest.raises(ResponseError) as refused:
        scripts.write(keys=keys, args=[json.dumps(bad)])
    assert str(refused.value).startswith(f"write.lua: {message}")
    assert state_of(r) == before
    # The batch as built is fine: the edit alone made it wrong.
    assert parse_reply(scripts.write(keys=keys, args=[json.dumps(batch)])).applied == 3
    assert state_of(r) != before


@pytest.mark.parametrize(
    ("edit", "message"), [(e, m) for _, e, m in TRIMMED], ids=[w for w, _, _ in TRIMMED]
)
def test_a_trimmed_board_needs_its_days(
    loaded: Any, r: redis.Redis, edit: Callable[[Any], None], message: str
) -> None:
    scripts, keys, batch, _ = loaded(max_entries=3)
    assert batch["groups"][0]["rollups"][0]["days"]  # sent only for trimmed boards
    edit(batch)
    before = state_of(r)
    with pytest.raises(ResponseError, match="^write.lua: ") as refused:
        scripts.write(keys=keys, args=[json.dumps(batch)])
    assert str(refused.value).startswith(f"write.lua: {message}")
    assert state_of(r) == before


@pytest.mark.parametrize(
    ("keys_of", "args_of_batch", "message"),
    [
        (lambda k: k[:-1], lambda b: [json.dumps(b)], "is not declared in KEYS"),
        (lambda k: [], lambda b: [json.dumps(b)], 'keys.state: "wpr:{b}:state" is not declared'),
        (lambda k: k, lambda b: [json.dumps(b)[:-1]], "ARGV[1]: not JSON"),
        (lambda k: k, lambda b: ["[1, 2]"], "ARGV[1]: must be an object, got an array"),
        (lambda k: k, lambda b: [json.dumps(b), "1"], "ARGV: must be 1 argument"),
        (lambda k: k, lambda b: [], "ARGV: must be 1 argument (the batch as JSON), got 0"),
    ],
    ids=["too few KEYS", "no KEYS", "not JSON", "not an object", "two arguments", "none"],
)
def test_keys_and_arguments_that_do_not_match_are_refused(
    loaded: Any, r: redis.Redis, keys_of: Any, args_of_batch: Any, message: str
) -> None:
    scripts, keys, batch, _ = loaded()
    before = state_of(r)
    with pytest.raises(ResponseError) as refused:
        scripts.write(keys=keys_of(keys), args=args_of_batch(batch))
    assert str(refused.value).startswith("write.lua: ") and message in str(refused.value)
    assert state_of(r) == before


def test_a_resent_batch_id_is_checked_before_its_recorded_answer(
    loaded: Any, r: redis.Redis
) -> None:
    """A batch id applied already answers its record (and rewrites it, for WAIT): only
    after the batch has been found well formed."""
    scripts, keys, batch, _ = loaded()
    assert parse_reply(scripts.write(keys=keys, args=[json.dumps(batch)])).applied == 3
    again = {**batch, "check_only": "no"}
    before = state_of(r)
    with pytest.raises(ResponseError, match="^write.lua: check_only: must be true or false"):
        scripts.write(keys=keys, args=[json.dumps(again)])
    assert state_of(r) == before
    assert parse_reply(scripts.write(keys=keys, args=[json.dumps(batch)])).applied == 3


def test_the_python_side_raises_a_clear_error_and_writes_nothing(
    settings_factory: Make, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If script_args and write.lua ever disagree, a write raises RuntimeError naming the
    field (a bug of ours, not BatchRejected), on one board and on several (whose check-only
    pass meets it before any board is written)."""
    settings = settings_factory(namespace=NS, boards={"b": {}, "c": {}})
    protocol = write_script.PROTOCOL
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        s.submit_many([{"board": "b", "member": "ann", "value": 1}])
        before = state_of(r)
        monkeypatch.setattr(write_script, "PROTOCOL", protocol - 1)
        one = [{"board": "b", "member": "bob", "value": 2}]
        with pytest.raises(
            RuntimeError, match=f"write.lua: protocol: this script speaks protocol {protocol}"
        ):
            s.submit_many(one)
        assert state_of(r) == before
        two = [*one, {"board": "c", "member": "cy", "value": 3}]
        with pytest.raises(RuntimeError, match="nothing written"):
            s.submit_many(two)
        assert state_of(r) == before
        monkeypatch.setattr(write_script, "PROTOCOL", protocol)
        monkeypatch.setattr(write_script, "EVENT_FIELDS", ("group", "index", "member", "value"))
        with pytest.raises(RuntimeError, match="write.lua: event_fields: "):
            s.submit_many(two)
        assert state_of(r) == before
        monkeypatch.undo()
        assert s.submit_many(two).applied == 2
    # And through the call the CLI's import check uses.
    client = make_client(settings.redis)
    try:
        evs = validate_batch(one, settings, NOW)
        call = script_args("b", evs, settings, Keys(NS), NOW, batch_id="x", digest="x")
        with pytest.raises(RuntimeError, match="write.lua: keys.state: "):
            Writes(client, Scripts(client), settings, Keys(NS)).send([(call[0][1:], call[1])])
    finally:
        client.close()


def test_state_refusals_are_batch_rejected_with_their_field(
    settings_factory: Make, r: redis.Redis
) -> None:
    """A closed day, and metadata too large once merged: the script's typed refusal
    becomes BatchRejected, nothing written."""
    settings = settings_factory(namespace=NS, boards={"b": {}})
    with Seasons(settings, clock=ManualClock(NOW)) as s:
        many = {f"f{i}": i for i in range(10)}
        s.submit_many([{"board": "b", "member": "ann", "value": 1, "metadata": many}])
        r.hset(f"{NS}:{{b}}:state", "closed:2035-06-13", "1")
        before = state_of(r)
        more = {f"g{i}": i for i in range(10)}
        batch = [
            {"board": "b", "member": "bob", "value": 1},
            {"board": "b", "member": "ann", "value": 1, "metadata": more},
        ]
        with pytest.raises(BatchRejected) as refused:
            s.submit_many(batch)
        assert [(p["index"], p["field"], p["code"]) for p in refused.value.details] == [
            (0, "ts", "late_event"),
            (1, "ts", "late_event"),
            (1, "metadata", "metadata_too_large"),
        ]
        assert state_of(r) == before


# --- the scripts: one registry, fragments written once ---------------------------------------


def test_each_script_is_one_body_with_its_fragments_included_once() -> None:
    lib = sorted(p.stem for p in (LUA / "lib").glob("*.lua"))
    assert {"aggregate", "json", "trim"} <= set(lib)
    # Each fragment is recognised by the first function it defines.
    first_function = {}
    for part in lib:
        found = re.search(
            r"^local function (\w+)\(", (LUA / "lib" / f"{part}.lua").read_text(), re.M
        )
        assert found is not None, part
        first_function[part] = found.group(1)

    def includes(text: str) -> set[str]:
        return set(re.findall(r"^--! include (\S+)$", text, re.M))

    for name in names():
        source = script(name).source
        own = (LUA / f"{name}.lua").read_text()
        assert "--! include" not in source
        assert source.splitlines()[0] == own.splitlines()[0]  # a shebang stays first
        # The fragments the script names, and those they name in turn.
        wanted, todo = set(), includes(own)
        while todo:
            part = todo.pop()
            wanted.add(part)
            todo |= includes((LUA / "lib" / f"{part}.lua").read_text()) - wanted
        for part in lib:
            marker = f"local function {first_function[part]}("
            included = part in wanted
            assert (marker in source) == included, (name, part)
            assert source.count(f"-- {part}: ") == included, (name, part)
    # Written once: the copies that were in each script are gone.
    for path in LUA.glob("*.lua"):
        text = path.read_text()
        assert "ZREMRANGEBYRANK" not in text and "ZUNIONSTORE" not in text, path.name
        assert "cjson.encode" not in text, path.name


def test_an_include_of_nothing_is_an_error_naming_it() -> None:
    with pytest.raises(LookupError, match=r"seasons/lua/x.lua: '--! include nope'"):
        assemble("x", "-- x\n--! include nope\n", {"trim": "-- trim\n"})
    both = assemble("x", "--! include a\n--! include b\n", {"a": "A\n--! include b", "b": "B"})
    assert both.splitlines() == ["A", "B", "-- (include b: above)"]


def test_redis_py_and_the_executor_run_the_same_scripts(connect: Any) -> None:
    client = connect(decode_responses=True)
    scripts = Scripts(client)
    for name in names():
        assert getattr(scripts, name).sha == script(name).sha
        assert getattr(scripts, name).script == script(name).source
    sha = script("archive_copy").sha
    client.script_load(script("archive_copy").source)
    assert client.evalsha(sha, 2, "{a}x", "{a}y") == -1  # neither key exists
    with pytest.raises(AttributeError):
        scripts.nope  # noqa: B018


# --- the Redis version ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("7.0.15", (7, 0, 15)),
        ("7.0.0", (7, 0, 0)),
        ("6.2.14", (6, 2, 14)),
        ("7.4-rc1", (7, 4, 0)),
        ("255.255.255", (255, 255, 255)),
        (" 8.0.1\r", (8, 0, 1)),
        ("unstable", None),
        ("", None),
    ],
)
def test_redis_versions_are_read(text: str, parsed: tuple[int, int, int] | None) -> None:
    assert redis_health.parse_version(text) == parsed


@pytest.mark.parametrize(
    ("text", "refused"),
    [("7.0.0", False), ("7.0.15", False), ("7.2.4", False), ("8.0.1", False),
     ("6.2.14", True), ("6.0.20", True), ("5.0.14", True), ("unstable", True)],
)  # fmt: skip
def test_servers_older_than_the_minimum_are_refused_naming_both_versions(
    text: str, refused: bool
) -> None:
    assert redis_health.MIN_REDIS == (7, 0)
    problem = redis_health.version_problem(text)
    assert (problem is not None) == refused
    if problem is not None:
        assert repr(text) in problem or f"Redis {text} " in problem
        assert "Redis 7.0 or later" in problem


def test_the_server_of_the_tests_passes_the_start_check(settings_factory: Make) -> None:
    settings = settings_factory(namespace=NS)
    client = make_client(settings.redis)
    try:
        version = redis_health.parse_version(str(client.info("server")["redis_version"]))
        assert version is not None and version >= redis_health.MIN_REDIS
        redis_health.check_version(client)
        redis_health.check_redis(client, settings, what="test")
    finally:
        client.close()


def test_an_old_server_is_refused_at_start(
    settings_factory: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the worker and `seasons serve` call at start, with INFO answering an old
    version: UnsupportedRedis, naming both versions."""
    settings = settings_factory(namespace=NS)
    client = make_client(settings.redis)
    real_info = redis.Redis.info

    def info(self: Any, section: str | None = None, *args: Any, **kwargs: Any) -> Any:
        found = real_info(self, section, *args, **kwargs)
        return {**found, "redis_version": "6.2.14"} if section == "server" else found

    monkeypatch.setattr(redis.Redis, "info", info)
    try:
        with pytest.raises(UnsupportedRedis) as refused:
            redis_health.check_redis(client, settings, what="test")
        assert "Redis 6.2.14 is too old" in refused.value.message
        assert "Redis 7.0 or later" in refused.value.message
        assert refused.value.details == {"redis_version": "6.2.14", "minimum": "7.0"}
    finally:
        client.close()
