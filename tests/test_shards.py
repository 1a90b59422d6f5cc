"""Sharded boards (boards.<b>.shards, docs/sharding.md) against unsharded twins.

Two namespaces of one Redis (or one cluster) hold the same boards under the same names, one
with ``shards = S``, the other unsharded, each with its worker and archive folder on one
ManualClock. Both take the same random events (ties across shards, non-ASCII and very long
member ids, metadata, late events and a backfill) over a whole season and a day; at each
checkpoint every read of every window answers alike on both, and both agree with the plain
Python model of tests/reference.py. The season archive files (data and manifest) are then
byte-identical.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from reference import Model
from worker_support import local, today

from seasons import Seasons, shards
from seasons.archives import Archives
from seasons.clock import ManualClock
from seasons.errors import BatchRejected
from seasons.jobs.worker import Worker
from seasons.replies import Writer
from seasons.shard_reads import Board, ShardReads, fixed
from seasons.ties import of as ties_of

ZONE = "Europe/Berlin"
BOARDS: dict[str, Any] = {
    # sum, high first, weighted days
    "kills": {"week_weights": [1, 1, 1, 1, 1, 2, 2], "season_weights": [1, 2]},
    # min, low first, shared ranks, trimmed to the best 9 on the rolled-up windows
    "laps": {"aggregate": "min", "order": "asc", "ties": "shared", "max_entries": 9},
    # the latest value, high first, with a month window
    "power": {"aggregate": "set", "windows": ["day", "week", "month", "season"]},
    # the best value, high first, shared ranks
    "best": {"aggregate": "max", "ties": "shared"},
    # every day ever, folded into a base per shard by the day closes
    "forever": {"windows": ["day", "week", "season", "alltime"]},
    # equal scores in the order they were reached, high first, weighted days
    "first": {"ties": "earliest", "season_weights": [1, 3]},
    # the best (lowest) value, low first, equal ones in the order they were reached
    "quick": {"aggregate": "min", "order": "asc", "ties": "earliest"},
}
MEMBERS = [
    *(f"p{i:02d}" for i in range(30)),
    "Ünïcødé-åäö",
    "名前",
    "🎮player",
    "x" * 128,  # the longest member id
    "y" * 126 + "é",
    "a b",
    "zz",
]


class Twins:
    """A sharded namespace and its unsharded twin on one clock, with the model."""

    def __init__(
        self, factory: Any, tmp_path: Path, n: int, seed: int, boards: dict[str, Any] = BOARDS
    ):
        self.clock = ManualClock(local(today(ZONE), 0.5, ZONE))
        base: dict[str, Any] = {
            "timezone": ZONE,
            "seasons": {"length_days": 7, "anchor": today(ZONE).isoformat()},
        }
        sharded = {b: {**cfg, "shards": n} for b, cfg in boards.items()}
        self.sharded = Seasons(
            factory(namespace="sh", boards=sharded, archive={"dir": str(tmp_path / "sh")},
                    **base),
            clock=self.clock,
        )  # fmt: skip
        self.twin = Seasons(
            factory(namespace="tw", boards=boards, archive={"dir": str(tmp_path / "tw")},
                    **base),
            clock=self.clock,
        )  # fmt: skip
        self.workers = [Worker(self.sharded), Worker(self.twin)]
        self.model = Model(self.twin.settings)
        self.rng = random.Random(seed)
        self.n = self.applied = 0

    def close(self) -> None:
        self.sharded.close()
        self.twin.close()

    def events(self, count: int, ts: Any = None) -> list[dict[str, Any]]:
        rng, out = self.rng, []
        for _ in range(count):
            self.n += 1
            ev: dict[str, Any] = {
                "board": rng.choice(sorted(BOARDS)), "member": rng.choice(MEMBERS),
                # few values: equal scores on several shards
                "value": rng.choice([1, 2, 3, 5, 8, -1, 2.5]),
                # events of one batch a few seconds apart: reach times tie, and differ
                "event_id": f"e{self.n}",
                "ts": ts or self.clock() - timedelta(seconds=rng.choice([0, 0, 3, 40])),
            }  # fmt: skip
            if rng.random() < 0.3:
                ev["metadata"] = {"level": rng.randrange(9), "tag": rng.choice(["ä", "b"])}
            out.append(ev)
        return out

    def submit(self, events: list[dict[str, Any]], *, backfill: bool = False) -> None:
        """The same batch to both namespaces and the model: all accept it or none."""
        outcomes = []
        for app in (self.sharded, self.twin):
            try:
                result = app.submit_many(events, backfill=backfill, batch_id=f"b{self.n}")
                outcomes.append((result.applied, result.duplicates))
            except BatchRejected as exc:
                outcomes.append(("rejected", len(exc.details)))
        assert outcomes[0] == outcomes[1]
        if outcomes[0][0] != "rejected":
            self.model.submit(events, self.clock(), backfill=backfill)
            self.applied += int(outcomes[0][0])

    def tick(self) -> None:
        for w in self.workers:
            w.tick(self.clock())

    def play_day(self, day: Any) -> None:
        for hour in (0.5, 9, 21):
            self.clock.set(local(day, hour, ZONE))
            if hour < 1:  # late events of the day before, within the grace
                self.submit(self.events(6, ts=self.clock() - timedelta(hours=1)))
            self.submit(self.events(40))
            self.tick()


def same(a: Any, b: Any) -> None:
    dump = (lambda x: None if x is None else x.model_dump(mode="json")) if a is not None else None
    assert (dump(a) if dump else None) == (b.model_dump(mode="json") if b is not None else None)


def dumped(x: Any) -> Any:
    """A read's answer as JSON data: a model, a list of them, None, or an error's name."""
    if isinstance(x, list):
        return [dumped(y) for y in x]
    return x if x is None or isinstance(x, str) else x.model_dump(mode="json")


def reads(app: Seasons, board: str, window: str, period: str) -> list[Any]:
    """Every read of one window of one board, as the app answers them. A read that raises
    answers its error's name (a period not there yet: the same on both twins)."""
    calls: list[Any] = []
    for offset, limit in ((0, 1), (0, 10), (3, 7), (9, 40), (60, 5)):
        calls.append(lambda o=offset, n=limit: app.top(board, window, period=period, offset=o,
                                                       limit=n))  # fmt: skip
    for rank, size in ((1, 5), (8, 5), (30, 9), (100, 3)):
        calls.append(lambda k=rank, n=size: app.around_rank(board, k, window, period=period,
                                                            size=n))  # fmt: skip
    for member in MEMBERS[::3] + ["nobody"]:
        calls += [
            lambda m=member: app.rank(board, m, window, period=period),
            lambda m=member: app.around(board, m, window, period=period),
            lambda m=member: app.climb(board, m, window, period=period, to=[1, 3, 10, 50]),
        ]
    calls.append(lambda: app.lookup(board, MEMBERS[::2] + ["nobody"], window, period=period))
    out = []
    for call in calls:
        try:
            out.append(dumped(call()))
        except Exception as exc:
            out.append(type(exc).__name__)
    return out


def check_reads(t: Twins) -> None:
    for board, cfg in BOARDS.items():
        windows = cfg.get("windows", ["day", "week", "season"])
        for window in windows:
            for period in ("current", "previous"):
                want = reads(t.twin, board, window, period)
                assert reads(t.sharded, board, window, period) == want, (board, window, period)
                if period == "current":  # answered, none refused
                    assert not [x for x in want if isinstance(x, str)], (board, window)
            for member in MEMBERS[:3]:
                assert t.sharded.history(board, member, window, last=3) == t.twin.history(
                    board, member, window, last=3
                )
        # and both agree with the model on the current season
        ranked = t.model.ranked(board, "season", t.sharded.top(board, "season").period)
        page = t.sharded.top(board, "season", limit=200)
        got = [(e.rank, e.member, e.score) for e in page.entries]
        assert got == [(r, m, s) for r, m, s in ranked][: len(got)]
        assert page.total == len(ranked)


@pytest.mark.parametrize("n", [2, 3, 7, 16])
def test_a_sharded_season_reads_and_archives_as_its_unsharded_twin(
    settings_factory: Any, tmp_path: Path, n: int
) -> None:
    season_of_twins(settings_factory, tmp_path, n)


@pytest.mark.parametrize("backend", ["cluster"], indirect=True)
@pytest.mark.parametrize("n", [3, 16])
def test_a_sharded_season_on_a_cluster(
    settings_factory: Any, tmp_path: Path, n: int, backend: str
) -> None:
    season_of_twins(settings_factory, tmp_path, n)


def season_of_twins(settings_factory: Any, tmp_path: Path, n: int) -> None:
    """A whole season and a day on both namespaces: every read alike at four points, then
    the archives byte for byte."""
    t = Twins(settings_factory, tmp_path, n, seed=n)
    try:
        first = today(ZONE)
        for i in range(8):
            t.play_day(first + timedelta(days=i))
            if i in (0, 3, 6):
                check_reads(t)
            if i == 2:  # a backfill of the first day, closed by now
                t.clock.set(local(first + timedelta(days=i), 22, ZONE))
                t.submit(t.events(5, ts=local(first, 12, ZONE)), backfill=True)
        t.clock.set(local(first + timedelta(days=8), 6, ZONE))
        t.tick()
        check_reads(t)
        assert t.applied > 8 * 3 * 40 * 0.9  # the batches were written, not refused
        # The members' keys are on their shards' slots only.
        client = t.sharded.client
        for board in BOARDS:
            for key in client.scan_iter(match=f"sh:{{{board}#*"):
                name = key.decode() if isinstance(key, bytes) else key
                store = name[len("sh:{") : name.index("}")]
                if ":day:" in name or ":season:" in name:
                    for m in client.zrange(name, 0, -1):
                        m = m.decode() if isinstance(m, bytes) else m
                        assert shards.store(board, shards.shard_of(m, n)) == store
        # One archive per board, files byte for byte the twin's.
        season = t.twin.top("kills", "season", period="previous").period
        for board in BOARDS:
            for suffix in (".jsonl.gz", ".manifest.json"):
                mine = tmp_path / "sh" / "sh" / board / f"{season}{suffix}"
                theirs = tmp_path / "tw" / "tw" / board / f"{season}{suffix}"
                assert theirs.exists()
                assert mine.read_bytes() == theirs.read_bytes(), (board, suffix)
            assert (
                t.sharded.rewards(board, season).model_dump()
                == t.twin.rewards(board, season).model_dump()
            )
    finally:
        t.close()


@pytest.mark.both_backends
def test_a_sharded_board_on_a_cluster(settings_factory: Any, tmp_path: Path, backend: str) -> None:
    t = Twins(settings_factory, tmp_path, 3, seed=5)
    try:
        first = today(ZONE)
        for i in range(2):
            t.play_day(first + timedelta(days=i))
        check_reads(t)
    finally:
        t.close()


def test_settings_refuse_what_a_sharded_board_cannot_keep(settings_factory: Any) -> None:
    for extra, named in (
        ({"ties": "dense"}, 'ties = "dense"'),
        ({"league": {"window": "week", "tiers": ["bronze", "silver"]}}, "league"),
    ):
        with pytest.raises(Exception, match=named):
            settings_factory(boards={"b": {"shards": 3, **extra}})
    with pytest.raises(Exception, match="shards"):
        settings_factory(boards={"b": {"shards": 0}})
    settings_factory(boards={"b": {"shards": 3, "ties": "earliest"}})  # kept


@pytest.mark.both_backends
def test_the_standings_a_write_answers_are_the_twins(
    settings_factory: Any, tmp_path: Path, backend: str
) -> None:
    """The ranks of a write's standings on a sharded board are over every shard (a merged
    read after the batch), the twin's ranks; past max_entries, as the twin, none."""
    t = Twins(settings_factory, tmp_path, 7, seed=31)
    try:
        t.play_day(today(ZONE))
        for window in ("day", "week", "season"):
            events = t.events(30)
            got = []
            for app in (t.sharded, t.twin):
                result = app.submit_many(events, standing=True, standing_window=window)
                got.append([s.model_dump() for s in result.standings or []])
            assert got[0] == got[1] and len(got[0]) == 30
            assert any(s["rank"] and s["rank"] > 1 for s in got[0])
    finally:
        t.close()


@pytest.mark.both_backends
def test_http_answers_a_sharded_board_with_the_twins_bytes(
    settings_factory: Any, tmp_path: Path, backend: str
) -> None:
    """Over HTTP (the fast path and the FastAPI routes, on the server's asyncio executor: own
    connections on one server, redis-py's asyncio cluster client on a cluster), every read of
    a sharded board is the unsharded twin's body, byte for byte."""
    import warnings
    from urllib.parse import quote

    from seasons.http.app import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    t = Twins(settings_factory, tmp_path, 7, seed=9)
    try:
        first = today(ZONE)
        for i in range(2):
            t.play_day(first + timedelta(days=i))
        paths, lookups = [], []
        for board in BOARDS:
            for window in ("day", "week", "season"):
                base = f"/v1/boards/{board}/{window}"
                paths += [base, f"{base}?limit=3&offset=4", f"{base}/ranks/6/around?size=5"]
                for member in (MEMBERS[0], MEMBERS[31], MEMBERS[33], "nobody"):
                    m = quote(member, safe="")
                    paths += [
                        f"{base}/members/{m}", f"{base}/members/{m}/around?size=4",
                        f"{base}/members/{m}/climb?to=1,5",
                        f"/v1/boards/{board}/members/{m}/history?window={window}&last=3",
                        f"{base}/members/%{ord(m[0]):02X}{m[1:]}",  # the routed path
                    ]  # fmt: skip
                lookups.append(f"{base}/lookup")
        apps = [create_app(app.settings, clock=t.clock) for app in (t.sharded, t.twin)]
        with (
            TestClient(apps[0], client=("127.0.0.1", 4000)) as mine,
            TestClient(apps[1], client=("127.0.0.1", 4000)) as theirs,
        ):
            for path in paths:
                a, b = mine.get(path), theirs.get(path)
                assert (a.status_code, a.content) == (b.status_code, b.content), path
            asked = {"members": ["p01", "p02", "nobody", MEMBERS[32], MEMBERS[33]]}
            for path in lookups:
                a, b = mine.post(path, json=asked), theirs.post(path, json=asked)
                assert (a.status_code, a.content) == (b.status_code, b.content), path
                assert a.status_code == 200, a.text
            listed = {b["board"]: b["shards"] for b in mine.get("/v1/boards").json()["boards"]}
            assert listed == dict.fromkeys(BOARDS, 7)
            codes = [mine.get(p).status_code for p in paths]
            assert codes.count(200) > len(paths) // 5 and 404 in codes
    finally:
        t.close()


def test_a_batch_nothing_could_refuse_goes_to_each_shard_once(
    settings_factory: Any, r: Any
) -> None:
    """A batch over several shards is checked on every shard before it is applied, unless no
    shard could refuse it (a fresh batch id, events of today, no metadata)."""

    def calls() -> int:
        stats = r.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))

    app = Seasons(settings_factory(boards={"s": {"shards": 5}}))
    try:
        events = [{"board": "s", "member": f"m{i}", "value": 1} for i in range(40)]
        stores = len({shards.shard_of(e["member"], 5) for e in events})
        app.submit_many(events[:1])  # the script loaded
        for batch, passes in (
            ({}, 1),
            ({"batch_id": "mine"}, 2),  # a caller's id may have been seen with other events
            ({"metadata": {"a": 1}}, 2),
        ):
            sent = [{**e, "metadata": batch["metadata"]} if "metadata" in batch else e
                    for e in events]  # fmt: skip
            before = calls()
            app.submit_many(sent, batch_id=batch.get("batch_id"))
            assert calls() - before == passes * stores, batch
    finally:
        app.close()


def test_an_export_of_a_live_sharded_period_is_the_twins(
    settings_factory: Any, tmp_path: Path
) -> None:
    t = Twins(settings_factory, tmp_path, 7, seed=21)
    try:
        t.play_day(today(ZONE))
        for board in BOARDS:
            for window in ("day", "week", "season"):
                files = []
                for app in (t.sharded, t.twin):
                    out = tmp_path / f"{app.settings.namespace}-{board}-{window}.jsonl"
                    archives = Archives(app.client, app.scripts, app.settings, app.keys)
                    archives.export(board, window, "current", out, t.clock())
                    files.append(out.read_bytes())
                assert files[0] == files[1] and files[0].count(b"\n") > 3, (board, window)
        assert not list(t.sharded.client.scan_iter(match="sh:*:tmp:*"))  # nothing left behind
    finally:
        t.close()


@pytest.mark.parametrize(
    ("n", "ties", "order"), [(7, "member", "desc"), (16, "shared", "asc"), (5, "earliest", "asc")]
)
def test_deep_pages_of_a_large_sharded_board_are_the_twins(
    settings_factory: Any, n: int, ties: str, order: str
) -> None:
    """Pages far from the top are read from slices around each shard's share of the offset
    (seasons.shard_reads): at random offsets and sizes, and around random ranks, they are
    the unsharded board's pages, including past the end."""
    cfg = {"ties": ties, "order": order}
    apps = [
        Seasons(settings_factory(namespace=ns, boards={"b": {**cfg, "shards": k}}))
        for ns, k in (("sh", n), ("tw", 1))
    ]
    try:
        rng = random.Random(n)
        now = datetime.now(UTC)
        events = [
            {"board": "b", "member": f"m{i}", "value": rng.choice([rng.randrange(400), 7, 0]),
             "ts": now - timedelta(seconds=rng.choice([0, 1, 2]))}  # earliest: times that tie
            for i in range(4_000)
        ]  # fmt: skip
        for app in apps:
            for k in range(0, len(events), 1_000):
                app.submit_many(events[k : k + 1_000])
        for _ in range(60):
            offset, limit = rng.randrange(4_100), rng.choice([1, 5, 30, 200])
            a, b = (app.top("b", "day", offset=offset, limit=limit) for app in apps)
            assert a == b, (offset, limit)
            rank, size = rng.randrange(1, 4_100), rng.choice([1, 4, 25])
            a, b = (app.around_rank("b", rank, "day", size=size) for app in apps)
            assert a == b, (rank, size)
    finally:
        for app in apps:
            app.close()


@pytest.mark.both_backends
def test_held_events_of_a_sharded_board_are_the_twins(settings_factory: Any, backend: str) -> None:
    """member_rate and max_period_gain on a sharded board: the same events held as on the
    twin, listed in the same pages (merged over the shards by arrival), approved and
    rejected alike, and the boards alike after."""
    cfg = {"member_rate": {"events": 2, "per": "PT1H"},
           "max_period_gain": {"value": 40, "window": "day"}}  # fmt: skip
    apps = [
        Seasons(settings_factory(namespace=ns, boards={"b": {**cfg, "shards": n}}))
        for ns, n in (("sh", 5), ("tw", 1))
    ]
    try:
        rng = random.Random(3)
        for k in range(6):
            events = [
                {"board": "b", "member": rng.choice(MEMBERS), "value": rng.choice([3, 9, 30]),
                 "event_id": f"e{k}-{i}"}
                for i in range(12)
            ]  # fmt: skip
            results = [app.submit_many(events) for app in apps]
            assert [(x.applied, x.held) for x in results[:1]] == [
                (x.applied, x.held) for x in results[1:]
            ]

        same = ("event_id", "state", "member", "value", "index", "reason", "window", "score")

        def pages(app: Seasons) -> list[Any]:
            """Every page; each record without its times and generated batch id."""
            out, after = [], None
            while True:
                page = app.held("b", limit=4, after=after)
                out.append([{k: e.model_dump()[k] for k in same} for e in page.events])
                if page.next is None:
                    return out
                after = page.next

        held = pages(apps[1])
        assert pages(apps[0]) == held and sum(map(len, held)) > 4
        ids = [e["event_id"] for page in held for e in page]
        for n, event_id in enumerate(ids[:6]):
            for app in apps:
                decide = app.reject if n % 2 else app.approve
                decided = decide("b", event_id)
                assert decided.event_id == event_id and not decided.repeated
        assert pages(apps[0]) == pages(apps[1])
        tops = [app.top("b", "day", limit=50).model_dump() for app in apps]
        assert tops[0] == tops[1]
        again = [app.approve("b", ids[0]) for app in apps]
        assert [d.repeated for d in again] == [True, True]
        # Erasure takes the member's held records from its shard too.
        gone = held[0][0]["member"]
        for app in apps:
            report = app.forget(gone)
            assert report.boards["b"].held > 0
        assert pages(apps[0]) == pages(apps[1])
        assert all(e["member"] != gone for page in pages(apps[0]) for e in page)
    finally:
        for app in apps:
            app.close()


def test_an_earliest_page_a_write_lands_between_its_rounds_is_read_again(
    settings_factory: Any,
) -> None:
    """A page of an earliest board is read in rounds (seasons.shard_reads: its slices, then
    its end runs and reach times). Members written between them that move the page's
    scores: the rounds disagree, and the page is read again, answering the board after the
    write, as a read that starts then does."""
    clock = ManualClock(local(today(ZONE), 12, ZONE))
    cfg = {"ties": "earliest", "shards": 3}
    with Seasons(settings_factory(timezone=ZONE, boards={"b": cfg}), clock=clock) as app:
        noon = clock()
        app.submit_many(  # positions 0-9 score 5, 10-29 score 3, reached a second apart
            [{"board": "b", "member": f"m{i:02d}", "value": 5 if i < 10 else 3,
              "ts": noon - timedelta(seconds=60 - i)} for i in range(30)]
        )  # fmt: skip
        settings = app.settings.boards["b"]
        board = Board(app.keys, "b", settings, "day", today(ZONE).isoformat(), None, 0)
        reads = ShardReads(Writer(settings.composite_score()), ties_of(settings))

        def drive(write: bool) -> tuple[Any, int]:
            """The page [8, 13) read round by round; with ``write``, three members of score
            5, reached before every other, written just before the second round."""
            gen = reads.page(board, b"", fixed(8), 5).start()
            batch, rounds = next(gen), 0
            try:
                while True:
                    rounds += 1
                    if write and rounds == 2:
                        app.submit_many([
                            {"board": "b", "member": f"new{i}", "value": 5,
                             "ts": noon - timedelta(seconds=120)} for i in range(3)
                        ])  # fmt: skip
                    pipe = app.client.pipeline(transaction=True)
                    for command in batch:
                        pipe.execute_command(*command)
                    batch = gen.send(pipe.execute())
            except StopIteration as stop:
                return stop.value, rounds

        clean, clean_rounds = drive(False)
        raced, raced_rounds = drive(True)
        after, _ = drive(False)
        assert raced_rounds > clean_rounds  # read again
        assert raced == after != clean
        page = app.top("b", "day", offset=8, limit=5)
        assert [e.member for e in page.entries] == ["m05", "m06", "m07", "m08", "m09"]
        assert page.total == 33
