"""The sweep: afterwards every key that should expire has a TTL (checked by SCANning the whole
database), and metadata lives exactly as long as its member is on a live or archived key."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from reference import Calendar
from worker_support import Sim, local, season_settings, today

# Every test here runs on one redis-server and again on a Redis Cluster (tests/conftest.py).
pytestmark = pytest.mark.both_backends

# docs/contract.md#keys: archives, metadata, job state; and the namespace marker and safe mode.
NO_TTL = {"archive", "meta", "state", "job", "marker", "safe_mode", "lifecycle"}
LIFECYCLE_IDS = "{seasons:lifecycle}:ids"  # no TTL, trimmed with the stream; outside <ns>:*


def kind_of(key: str) -> tuple[str, str, str]:
    """(kind, board, id) from a key name, spelled from docs/contract.md#keys (not seasons.keys)."""
    rest = key.split(":", 1)[1]
    if rest.startswith("{"):
        board, tail = rest[1:].split("}:", 1)
        kind, _, ident = tail.partition(":")
        return kind, board, ident
    kind, _, ident = rest.partition(":")
    return kind, "", ident


def test_every_key_that_should_expire_has_a_ttl(settings_factory, r, tmp_path: Path) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=4)
    for i in range(9):  # S1 closed and archived, S2 running
        sim.play_day(today() + timedelta(days=i), hours=(0.5, 12))
    sim.worker.closes.snapshot("S2", sim.clock())  # an archive key S2@<ts>
    sim.worker.heartbeat.beat(sim.clock())
    r.set("seasons:lock:rollup", "someone", px=60_000)
    r.zadd("seasons:{kills}:tmp:export:abc", {"x": 1})
    r.set("seasons:junk", "what is this")  # not a key Seasons makes: reported, left alone

    # Take every TTL away, as after a bad restore or a hand-made key.
    names = [k.decode() for k in r.scan_iter(count=1000)]
    kinds = {kind_of(k)[0] for k in names}
    assert {"day", "week", "season", "archive", "meta", "state", "events", "job", "heartbeat",
            "lock", "tmp"} <= kinds  # fmt: skip
    for k in names:
        r.persist(k)

    now = sim.clock()
    result = sim.worker.sweeper.run(now)
    assert result.unknown == ["seasons:junk"]
    assert result.scanned == len([k for k in names if k != LIFECYCLE_IDS])

    cal = Calendar(settings)
    stamp = int(now.timestamp())
    checked = 0
    for raw in r.scan_iter(count=1000):  # the whole database
        key = raw.decode()
        if key == LIFECYCLE_IDS:
            assert r.expiretime(key) == -1
            continue
        kind, board, ident = kind_of(key)
        expires = r.expiretime(key)
        if kind in NO_TTL or key == "seasons:junk":
            assert expires == -1 or kind == "job", key
            continue
        assert expires > 0, f"{key} has no TTL after the sweep"
        checked += 1
        if kind in ("day", "week", "season"):
            assert expires == cal.expire_at(kind, ident), key
        elif kind in ("events", "batches", "batch_results"):
            assert stamp + 48 * 3600 <= expires <= stamp + 48 * 3600 + 2
        else:  # heartbeat, lock, tmp: short-lived
            assert stamp < expires <= stamp + 3600 + 1, key
    assert checked > 20
    sim.close()


def test_metadata_lives_as_long_as_its_member(settings_factory, r, tmp_path: Path) -> None:
    settings = season_settings(settings_factory, tmp_path / "archive")
    sim = Sim(settings, seed=9)
    sim.clock.set(local(today(), 10))
    for member in ("live", "archived", "gone"):
        sim.submit([{"board": "kills", "member": member, "value": 5, "metadata": {"who": member}}])
    sim.worker.closes.snapshot("S1", sim.clock())  # archive key S1@<ts> holds all three
    sim.clock.advance(timedelta(minutes=5))
    live_keys = [k for k in r.scan_iter(match="seasons:{kills}:*") if b":archive:" not in k]
    zsets = [k for k in live_keys if r.type(k) == b"zset" and not k.endswith(b":batches")]
    assert len(zsets) == 3  # day, week, season
    for k in zsets:
        r.zrem(k, "archived", "gone")  # as if their days had expired
    r.zrem(next(r.scan_iter(match="seasons:{kills}:archive:*")), "gone")

    removed = sim.worker.sweeper.run(sim.clock()).metadata_removed
    assert removed == 1
    meta = {k.decode(): json.loads(v) for k, v in r.hgetall("seasons:{kills}:meta").items()}
    assert meta == {"live": {"who": "live"}, "archived": {"who": "archived"}}
    sim.close()
