"""The jobs and admin operations on a sharded board (``boards.<b>.shards``, seasons.shards),
each against an unsharded twin board fed the same events:

- the sweep gives a store's key without TTL the EXPIREAT the twin's key gets (none left
  "unknown"), and prunes the same members' metadata: each store's against its own keys, the
  board's own (the archives' members) against the archives;
- forget removes the member from its store and from the board's own keys (archive, results,
  metadata): afterwards no key of the namespace names it, and it was on the same kinds of
  keys as on the twin;
- forget of a hidden member removes its moderation records and twins too;
- a clear of a sharded board leaves it as the same clear leaves the twin; one resumed after
  some stores' deletions deletes the others only;
- the seasons catalog and the demo reset see a sharded board's stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner
from worker_support import local, season_settings, today

from seasons import Seasons, shards
from seasons.catalog import archive_dir
from seasons.catalog import seasons as catalog_seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.reset import reset_namespace
from seasons.jobs.worker import Worker
from seasons.keys import Keys

pytestmark = pytest.mark.both_backends

NS = "seasons"
SHARDED, TWIN = "kills", "twin"
MEMBERS = [f"p{i:02d}" for i in range(24)]
TOKEN = "t" * 32


@dataclass
class Rig:
    settings: Settings
    app: Seasons
    worker: Worker
    clock: ManualClock
    keys: Keys
    cfg: Any


@pytest.fixture(params=[(3, "member"), (7, "earliest")], ids=["S3", "S7-earliest"])
def rig(request: pytest.FixtureRequest, settings_factory: Any, tmp_path: Path) -> Iterator[Rig]:
    count, rule = request.param  # earliest: reach sets beside every key, in every job
    board = {"week_weights": [1, 1, 1, 1, 1, 2, 2], "season_weights": [1, 2], "ties": rule}
    settings = season_settings(
        settings_factory, tmp_path / "archive", namespace=NS,
        boards={SHARDED: {**board, "shards": count}, TWIN: board},
        api={"admin_token": TOKEN},
    )  # fmt: skip
    clock = ManualClock(local(today(), 10))
    app = Seasons(settings, clock=clock)
    rig = Rig(settings, app, Worker(app), clock, Keys(NS), settings.boards[SHARDED])
    # Two days of the same events on both boards, every member with metadata.
    for day in range(2):
        clock.set(local(today() + timedelta(days=day), 10))
        events = [
            {
                "member": m,
                "value": 1 + (i * 7 + day) % 13,
                "metadata": {"n": i, "day": day},
                "event_id": f"e{day}-{i}",
            }
            for i, m in enumerate(MEMBERS)
        ]
        app.submit_many([{"board": b, **e} for e in events for b in (SHARDED, TWIN)])
    yield rig
    app.close()


def names(r: redis.Redis) -> set[str]:
    return {k.decode() for k in r.scan_iter(count=1000)}


def twin_name(keys: Keys, key: str) -> str:
    """The twin board's key standing for a sharded board's (a store's or the board's own)."""
    parsed = keys.parse(key)
    assert parsed is not None and parsed.board is not None
    return (
        f"{NS}:{{{TWIN}}}:{parsed.kind}:{parsed.ident}"
        if parsed.ident
        else (f"{NS}:{{{TWIN}}}:{parsed.kind}")
    )


def of_board(keys: Keys, all_keys: set[str], board: str) -> set[str]:
    out = set()
    for k in all_keys:
        parsed = keys.parse(k)
        if parsed is None or parsed.board is None or parsed.kind == "tmp":
            continue  # scratch keys: the snapshot's gathering, an hour at most
        if shards.board_of(parsed.board) == board:
            out.add(k)
    return out


def snapshot(rig: Rig) -> None:
    """An archive of the running season on both boards (S1@<ts>), then its scratch keys gone
    (as an hour later)."""
    rig.worker.closes.snapshot("S1", rig.clock())


# --- the sweep ----------------------------------------------------------------------------


def test_sweep_gives_store_keys_the_ttl_of_the_twins_keys(rig: Rig, r: redis.Redis) -> None:
    snapshot(rig)
    before = names(r)
    stores = {k for k in before if "{" + SHARDED + "#" in k}
    kinds = {rig.keys.parse(k).kind for k in stores}  # type: ignore[union-attr]
    assert {"day", "week", "season", "meta", "events", "batches", "batch_results"} <= kinds
    # Every store holds some of the members (24 members: each of 3 or 7 shards has some).
    assert {rig.keys.parse(k).board for k in stores} == set(  # type: ignore[union-attr]
        shards.stores(SHARDED, rig.cfg)
    )
    for k in before:
        r.persist(k)
    now = rig.clock()
    result = rig.worker.sweeper.run(now)
    assert result.unknown == []
    checked = 0
    for key in sorted(of_board(rig.keys, before, SHARDED)):
        twin = twin_name(rig.keys, key)
        if twin not in before:
            # The board's own (archive, results, gather scratch) are named by the twin's too.
            parsed = rig.keys.parse(key)
            assert parsed is not None and parsed.kind in ("archive", "results", "tmp"), key
            continue
        assert r.expiretime(key) == r.expiretime(twin), (key, twin)
        checked += 1
        if rig.keys.parse(key).kind in ("day", "week", "season", "events"):  # type: ignore[union-attr]
            assert r.expiretime(key) > now.timestamp(), key
    assert checked >= 7 * len(shards.stores(SHARDED, rig.cfg)) // 2


def test_metadata_pruning_removes_the_same_members(rig: Rig, r: redis.Redis) -> None:
    snapshot(rig)  # the archive S1@<ts> holds every member, the board's own meta theirs
    archive = {b: next(k.decode() for k in r.scan_iter(match=f"{NS}:{{{b}}}:archive:*"))
               for b in (SHARDED, TWIN)}  # fmt: skip
    for k in names(r):  # the snapshot's scratch keys, as if expired
        if ":tmp:" in k:
            r.delete(k)
    archived, gone = MEMBERS[:5], MEMBERS[5:10]
    for key in names(r):
        parsed = rig.keys.parse(key)
        if parsed is None or parsed.board is None or parsed.kind not in ("day", "week", "season"):
            continue
        r.zrem(key, *archived, *gone)  # as if their live keys had expired
    for b in (SHARDED, TWIN):
        r.zrem(archive[b], *gone)
    meta_before = {s: set(r.hkeys(rig.keys.meta(s))) for s in shards.stores(SHARDED, rig.cfg)}
    assert sum(len(m) for m in meta_before.values()) == len(MEMBERS)

    removed = rig.worker.sweeper.run(rig.clock()).metadata_removed
    twin_meta = {k.decode() for k in r.hkeys(rig.keys.meta(TWIN))}
    assert twin_meta == set(MEMBERS) - set(gone)
    stores_meta: dict[str, set[str]] = {}
    for s in shards.stores(SHARDED, rig.cfg):
        stores_meta[s] = {k.decode() for k in r.hkeys(rig.keys.meta(s))}
        # A store keeps the metadata of its members still on its live keys, no other.
        assert stores_meta[s] == {m for m in MEMBERS[10:] if shards.member_store(
            SHARDED, rig.cfg, m) == s}, s  # fmt: skip
    own = {k.decode() for k in r.hkeys(rig.keys.meta(SHARDED))}
    assert own == set(MEMBERS) - set(gone)  # on the archive: kept; the gone ones pruned
    assert set().union(*stores_meta.values()) | own == twin_meta
    # The twin lost the gone ones; the sharded board those from its stores (archived and
    # gone) and the gone ones from its own metadata.
    assert removed == len(gone) + (len(archived) + len(gone)) + len(gone)
    # Its metadata is what the twin's is.
    for m in MEMBERS[10:]:
        store = shards.member_store(SHARDED, rig.cfg, m)
        assert r.hget(rig.keys.meta(store), m) == r.hget(rig.keys.meta(TWIN), m)


# --- forget -------------------------------------------------------------------------------


def naming(r: redis.Redis, member: str) -> set[str]:
    """Every key of the database (sorted set or hash) that holds ``member``."""
    out = set()
    for raw in r.scan_iter(count=1000):
        kind = r.type(raw)
        if (kind == b"zset" and r.zscore(raw, member) is not None) or (
            kind == b"hash" and r.hexists(raw, member)
        ):
            out.add(raw.decode())
    return out


def test_forget_removes_the_member_everywhere(rig: Rig, r: redis.Redis) -> None:
    snapshot(rig)
    member = MEMBERS[3]
    store = shards.member_store(SHARDED, rig.cfg, member)
    before = naming(r, member)
    on = {b: {twin_name(rig.keys, k) if b == SHARDED else k for k in of_board(rig.keys, before, b)}
          for b in (SHARDED, TWIN)}  # fmt: skip
    assert on[SHARDED] == on[TWIN]  # the same kinds of keys, store and board's own together
    # On its store's live keys and metadata, and the board's own archive, results, metadata.
    assert {rig.keys.parse(k).board for k in of_board(rig.keys, before, SHARDED)} == {  # type: ignore[union-attr]
        store, SHARDED}  # fmt: skip
    assert rig.keys.meta(store) in before and rig.keys.meta(SHARDED) in before

    report = rig.app.forget(member).model_dump()
    assert naming(r, member) == set()
    boards = report["boards"]
    assert set(boards) == {SHARDED, TWIN}
    got = {b: {twin_name(rig.keys, k) if b == SHARDED else k for k in boards[b]["keys"]
               if ":tmp:" not in k} for b in (SHARDED, TWIN)}  # fmt: skip
    assert got[SHARDED] == got[TWIN]
    assert boards[SHARDED]["metadata"] and boards[TWIN]["metadata"]
    assert len(boards[SHARDED]["files_rewritten"]) == len(boards[TWIN]["files_rewritten"]) > 0
    # The others stay, on both.
    other = MEMBERS[4]
    assert {twin_name(rig.keys, k) for k in of_board(rig.keys, naming(r, other), SHARDED)} == (
        of_board(rig.keys, naming(r, other), TWIN)
    )


def test_forget_removes_a_hidden_member_everywhere(rig: Rig, r: redis.Redis) -> None:
    """A member hidden on both boards: its records (its store's, the board's copy), twins
    and archive twins go with the rest, on the same kinds of keys as on the twin."""
    member = MEMBERS[5]
    for board in (SHARDED, TWIN):
        rig.app.moderate(member, "hidden", boards=[board], reason="cheat")
    snapshot(rig)  # the snapshot's archive twin holds it
    store = shards.member_store(SHARDED, rig.cfg, member)
    before = naming(r, member)
    assert {rig.keys.moderation(store), rig.keys.moderation(SHARDED),
            rig.keys.twin_of(rig.keys.archive(SHARDED, snapshot_id(r, rig)))} <= before  # fmt: skip
    on = {b: {twin_name(rig.keys, k) if b == SHARDED else k for k in of_board(rig.keys, before, b)}
          for b in (SHARDED, TWIN)}  # fmt: skip
    assert on[SHARDED] == on[TWIN]
    report = rig.app.forget(member).model_dump()
    assert naming(r, member) == set()
    assert report["boards"][SHARDED]["moderation"] and report["boards"][TWIN]["moderation"]


def snapshot_id(r: redis.Redis, rig: Rig) -> str:
    """The id of the sharded board's one archive (the snapshot's)."""
    (key,) = r.scan_iter(match=rig.keys.archive(SHARDED, "*"))
    parsed = rig.keys.parse(key.decode())
    assert parsed is not None
    return parsed.ident


# --- clear --------------------------------------------------------------------------------


def view(app: Seasons, board: str) -> list[Any]:
    """Every window's pages of ``board``, its name left out (the twins' names differ)."""
    out = []
    for window in ("day", "week", "season"):
        page = app.top(board, window, limit=100).model_dump(mode="json")
        page.pop("board")
        out.append(page)
    return out


def test_clear_of_a_sharded_board_is_the_twins(rig: Rig, r: redis.Redis) -> None:
    day = today().isoformat()
    assert view(rig.app, SHARDED) == view(rig.app, TWIN)
    for window, period, with_days in (("day", day, False), ("week", "current", True)):
        got = [rig.app.clear(b, window, period, with_days) for b in (SHARDED, TWIN)]
        assert view(rig.app, SHARDED) == view(rig.app, TWIN), (window, period)
        assert [len(x.deleted) > 0 for x in got] == [True, True]
        assert len(got[0].rebuilt) == len(got[1].rebuilt)
        for store in shards.stores(SHARDED, rig.cfg):
            assert not r.exists(rig.keys.day(store, day))
            assert not r.exists(rig.keys.reached(store, "day", day))  # earliest: its reach set
            assert not r.hexists(rig.keys.state(store), f"clearing:{got[0].run_id}")
    # The CLI clears it too.
    state = CliState(clock=rig.clock, settings=rig.settings)
    done = CliRunner().invoke(cli, ["clear", SHARDED, "-w", "season", "-p", "current", "--yes"],
                              obj=state)  # fmt: skip
    assert done.exit_code == 0, done.output


def test_a_clear_resumed_after_some_stores_deletes_the_others_only(
    rig: Rig, r: redis.Redis
) -> None:
    """A clear killed between two stores' deletions, called again with its id: the stores
    already marked are not deleted again (an event written there since stays)."""
    day = today().isoformat()
    first = shards.store(SHARDED, 0)
    r.hset(rig.keys.state(first), "clearing:again", "earlier")  # as the killed run left it
    kept = dict(r.zrange(rig.keys.day(first, day), 0, -1, withscores=True))
    assert kept
    rig.app.clear(SHARDED, "day", day, run_id="again")
    assert dict(r.zrange(rig.keys.day(first, day), 0, -1, withscores=True)) == kept
    for store in shards.stores(SHARDED, rig.cfg)[1:]:
        assert not r.exists(rig.keys.day(store, day))
    assert not r.hexists(rig.keys.state(first), "clearing:again")


# --- what else names a board's keys -------------------------------------------------------


def test_the_seasons_catalog_sees_the_stores(rig: Rig) -> None:
    # S1 has ended, not closed yet: "live" while its standings are in Redis (its stores'),
    # which the sharded board's own tag does not hold.
    rig.clock.set(local(today() + timedelta(days=8), 1))
    listed = catalog_seasons(rig.app.client, rig.settings, rig.keys, rig.clock())
    for season in listed.seasons:
        assert season.boards[SHARDED].state == season.boards[TWIN].state, season.season
    s1 = next(s for s in listed.seasons if s.season == "S1")
    assert s1.boards[SHARDED].state == "live"


def test_demo_reset_deletes_the_stores(settings_factory: Any, r: redis.Redis, tmp_path: Path):
    settings = season_settings(
        settings_factory, tmp_path / "archive", namespace="demo-sh",
        boards={SHARDED: {"shards": 3}, TWIN: {}},
    )  # fmt: skip
    with Seasons(settings, clock=ManualClock(local(today(), 10))) as app:
        app.submit_many([{"board": b, "member": m, "value": 1} for m in MEMBERS
                         for b in (SHARDED, TWIN)])  # fmt: skip
        assert any(b"{kills#" in k for k in r.scan_iter(count=1000))
        deleted, _ = reset_namespace(app)
        assert deleted > 0
        left = [k.decode() for k in r.scan_iter(count=1000)]
        assert not [k for k in left if "{kills" in k or "{twin" in k], left


def test_a_restored_season_is_archived_on_every_store(rig: Rig, r: redis.Redis) -> None:
    """A season restored after a loss refuses late writes on the stores too (each store's
    writes check their own state), as the close left it."""
    rig.clock.set(local(today() + timedelta(days=8), 1))
    rig.worker.tick(rig.clock())  # closes S1 on both boards
    names_of = [*shards.stores(SHARDED, rig.cfg), SHARDED, TWIN]
    closed = {n: r.hget(rig.keys.state(n), "season:S1") for n in names_of}
    assert set(closed.values()) == {b"archived"}
    files = {b: archive_dir(rig.settings, b) / "S1.jsonl.gz" for b in (SHARDED, TWIN)}
    for n in names_of:  # as after a loss of the states and archives
        r.hdel(rig.keys.state(n), "season:S1")
    for b in (SHARDED, TWIN):
        r.delete(rig.keys.archive(b, "S1"))
    for b in (SHARDED, TWIN):
        rig.app.restore(files[b])
    assert {n: r.hget(rig.keys.state(n), "season:S1") for n in names_of} == closed
    assert r.zrange(rig.keys.archive(SHARDED, "S1"), 0, -1, withscores=True) == r.zrange(
        rig.keys.archive(TWIN, "S1"), 0, -1, withscores=True
    )
