"""Writes are safe to retry, end to end (docs/writes.md): every batch carries a batch id, and a
resend of a batch that already ran answers its original result and writes nothing.

- Redis stalled (SIGSTOP) longer than the socket timeout while a write is in flight: the copy
  that redis-py's Retry or the facade sends again is harmless, the score is exact;
- a resend by batch id (Python API, HTTP ``Idempotency-Key``, CLI ``--batch-id``) answers the
  original result and leaves the data byte for byte as it was, even after a day closed;
- the same id with other events is refused with nothing written;
- batch ids are forgotten after 48 hours (by the clock the API is given);
- a property: batches sent 1-3 times each give the boards of a model that applies each once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from click.testing import CliRunner
from http_support import seasons_serve
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from redis_server import RedisServer
from reference import Calendar, Model, Rejected, key, snapshot, zset

from seasons import Seasons, WriteResult
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.errors import BatchIdReused, BatchRejected, InvalidBatchId
from seasons.http import scores
from seasons.http.app import create_app
from seasons.keys import Keys

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "wr"
START = datetime(2035, 6, 13, 9, 0, tzinfo=UTC)  # far ahead: EXPIREAT stays in the future
BOARDS = {"kills": {}, "laps": {"aggregate": "min", "order": "asc"}}
Make = Callable[..., Settings]


@pytest.fixture
def make(settings_factory: Make, tmp_path: Path) -> Make:
    def build(**overrides: Any) -> Settings:
        overrides.setdefault("namespace", NS)
        overrides.setdefault("boards", BOARDS)
        overrides.setdefault("archive", {"dir": str(tmp_path / "archive")})
        return settings_factory(**overrides)

    return build


def ev(board: str, member: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"board": board, "member": member, "value": value, **extra}


def day_key(board: str, day: date) -> str:
    return key(NS, board, "day", day.isoformat())


# --- Redis stalls while a write is in flight ------------------------------------------------


@pytest.fixture
def stalled_server() -> Iterator[RedisServer]:
    """A private server (the test stops it with SIGSTOP); always continued and closed."""
    server = RedisServer(args=["--enable-debug-command", "local"])
    try:
        yield server
    finally:
        if server.pid is not None:
            os.kill(server.pid, signal.SIGCONT)
        server.close()


def _private_settings(server: RedisServer, tmp_path: Path, socket_timeout: float) -> Settings:
    toml = tmp_path / "private" / "seasons.toml"
    toml.parent.mkdir(exist_ok=True)
    toml.write_text("")
    return load_settings(
        environ={},
        path=toml,
        namespace=NS,
        boards=BOARDS,
        redis={"url": server.url, "socket_timeout": socket_timeout},
    )


def _write_during_stall(
    server: RedisServer, s: Seasons, stall: float, **event: Any
) -> tuple[WriteResult, int]:
    """Stop Redis, send a write (its script call is then in flight: the connection is open
    and the script loaded), continue Redis after ``stall`` seconds; the result and how many
    write script calls Redis ran meanwhile."""
    s.submit("kills", "warm", 1)  # an open connection and the script loaded on the server
    probe = server.client()
    probe.config_resetstat()
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    timer = threading.Timer(stall, os.kill, (server.pid, signal.SIGCONT))
    timer.start()
    try:
        result = s.submit("kills", "bob", 5, **event)
    finally:
        timer.cancel()
        os.kill(server.pid, signal.SIGCONT)
    calls = probe.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    probe.close()
    return result, int(calls)


@pytest.mark.parametrize("event_id", [None, "e-1"])
def test_a_write_resent_by_the_facade_after_a_stall_is_applied_once(
    stalled_server: RedisServer, tmp_path: Path, event_id: str | None
) -> None:
    """The stall outlasts redis-py's own retries (4 tries of 0.2 s): the facade resends."""
    settings = _private_settings(stalled_server, tmp_path, socket_timeout=0.2)
    extra = {"event_id": event_id} if event_id else {}
    with Seasons(settings, clock=ManualClock(START)) as s:
        result, calls = _write_during_stall(stalled_server, s, 2.2, **extra)
        assert calls >= 2  # the copy in flight and at least one resend both ran
        assert (result.applied, result.duplicates) == (1, 0)
        client = stalled_server.client()
        assert client.zscore(day_key("kills", START.date()), "bob") == 5.0
        client.close()


def test_redis_py_retry_resending_the_script_is_harmless(
    stalled_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the facade's own resends off, only redis-py's Retry (make_client) sends the
    script again: the stall is shorter than its budget of 4 tries of 0.2 s plus backoff."""
    monkeypatch.setattr("seasons.api.WRITE_ATTEMPTS", 1)
    settings = _private_settings(stalled_server, tmp_path, socket_timeout=0.2)
    with Seasons(settings, clock=ManualClock(START)) as s:
        result, calls = _write_during_stall(stalled_server, s, 0.5)
        assert calls >= 2
        assert (result.applied, result.duplicates) == (1, 0)
        client = stalled_server.client()
        assert client.zscore(day_key("kills", START.date()), "bob") == 5.0
        before = client.execute_command("DEBUG", "DIGEST")
        again = s.submit_many([ev("kills", "bob", 5)], batch_id=result.batch_id)
        assert again == result
        assert client.execute_command("DEBUG", "DIGEST") == before
        client.close()


# --- resends by batch id -------------------------------------------------------------------


@pytest.mark.both_backends
def test_a_resend_answers_the_original_and_changes_nothing(make: Make, r: redis.Redis) -> None:
    settings = make()
    clock = ManualClock(START)
    earlier = (START - timedelta(hours=1)).isoformat()
    batch = [
        ev("kills", "ann", 3),
        ev("kills", "ann", 4, event_id="k1"),
        ev("kills", "bob", 2, event_id="k1"),  # a duplicate within the batch
        ev("laps", "ann", 61.5, ts=earlier),
    ]
    with Seasons(settings, clock=clock) as s:
        first = s.submit_many(batch, batch_id="order-17")
        assert first == WriteResult(applied=3, duplicates=1, batch_id="order-17")
        before = snapshot(r)
        for _ in range(3):
            assert s.submit_many(batch, batch_id="order-17") == first
            assert snapshot(r) == before
        # Without ts the events take the time they arrive: a later resend is the same batch.
        clock.advance(timedelta(minutes=30))
        assert s.submit_many(batch, batch_id="order-17") == first
        assert snapshot(r) == before
        # A new id is a new batch: applied (by event id, k1 is a duplicate now).
        assert s.submit_many(batch).model_dump(exclude={"batch_id"}) == {
            "applied": 2,
            "duplicates": 2,
        }
    assert zset(r, day_key("kills", START.date())) == {"ann": 10.0}
    assert zset(r, day_key("laps", START.date())) == {"ann": 61.5}


@pytest.mark.both_backends
def test_a_resend_after_one_of_its_days_closed_answers_the_original(
    make: Make, r: redis.Redis
) -> None:
    settings = make()
    cal = Calendar(settings)
    keys = Keys(NS)
    today = START.date()
    yesterday = today - timedelta(days=1)
    clock = ManualClock(cal.day_start(today) + timedelta(minutes=10))
    late = (cal.day_start(yesterday) + timedelta(hours=20)).isoformat()
    batch = [ev("kills", "ann", 5), ev("laps", "bob", 70, ts=late), ev("laps", "cid", 80)]
    with Seasons(settings, clock=clock) as s:
        first = s.submit_many(batch, batch_id="multi")
        assert (first.applied, first.duplicates) == (3, 0)
        r.hset(keys.state("laps"), f"closed:{yesterday.isoformat()}", "1")  # the close job
        before = snapshot(r)
        assert s.submit_many(batch, batch_id="multi") == first
        assert snapshot(r) == before
        # The day is really closed: the same events as a new batch are refused.
        with pytest.raises(BatchRejected) as err:
            s.submit_many(batch)
        assert [(p["index"], p["code"]) for p in err.value.details] == [(1, "late_event")]
        assert snapshot(r) == before
    assert zset(r, day_key("laps", yesterday)) == {"bob": 70.0}


@pytest.mark.both_backends
def test_a_partly_applied_batch_resent_applies_the_rest(make: Make, r: redis.Redis) -> None:
    """A connection lost between the boards of a batch (one board's call ran, the other's
    did not): the resend answers the first board's original and applies the second."""
    settings = make()
    batch = [ev("kills", "ann", 5), ev("kills", "bob", 1), ev("laps", "ann", 60)]
    with Seasons(settings, clock=ManualClock(START)) as s:
        first = s.submit_many(batch, batch_id="split")
        assert (first.applied, first.duplicates) == (3, 0)
        kills = snapshot(r)
        # As if the call for laps had never run: none of its keys, no record of the batch.
        for name in [n for n in r.scan_iter() if n.startswith(f"{NS}:{{laps}}:".encode())]:
            r.delete(name)
        assert s.submit_many(batch, batch_id="split") == first
        assert snapshot(r) == kills
        assert s.submit_many(batch, batch_id="split") == first
        assert snapshot(r) == kills


@pytest.mark.both_backends
@pytest.mark.parametrize(
    "other",
    [
        [ev("kills", "ann", 6)],  # another value
        [ev("kills", "cid", 5)],  # another member
        [ev("kills", "ann", 5), ev("kills", "ann", 5)],  # one event more
        [ev("kills", "ann", 5, event_id="x")],  # with an event id
        [ev("kills", "ann", 5, metadata={"tier": "gold"})],  # with metadata
        [ev("kills", "ann", 5, ts=(START - timedelta(hours=1)).isoformat())],  # a given time
        [ev("kills", "ann", 5), ev("laps", "ann", 5)],  # another board as well
    ],
)
def test_the_same_id_with_other_events_is_refused(
    make: Make, r: redis.Redis, other: list[dict[str, Any]]
) -> None:
    with Seasons(make(), clock=ManualClock(START)) as s:
        assert s.submit_many([ev("kills", "ann", 5)], batch_id="b-1").applied == 1
        before = snapshot(r)
        with pytest.raises(BatchIdReused) as err:
            s.submit_many(other, batch_id="b-1")
        assert err.value.code == "batch_id_reused" and "b-1" in err.value.message
        assert snapshot(r) == before


def test_batch_ids_are_kept_per_board(make: Make, r: redis.Redis) -> None:
    """Each board records the batches it applied (one script per board, no key across
    boards): an id that only another board has seen is new to this one."""
    with Seasons(make(), clock=ManualClock(START)) as s:
        assert s.submit("kills", "ann", 5, batch_id="b-1").applied == 1
        assert s.submit("laps", "ann", 5, batch_id="b-1").applied == 1
        assert s.submit("kills", "ann", 5, batch_id="b-1").applied == 1  # the original
    assert zset(r, day_key("kills", START.date())) == {"ann": 5.0}
    assert zset(r, day_key("laps", START.date())) == {"ann": 5.0}


@pytest.mark.both_backends
def test_batch_ids_are_forgotten_after_48_hours(make: Make, r: redis.Redis) -> None:
    settings = make()
    keys = Keys(NS)
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as s:
        first = s.submit("kills", "ann", 5, batch_id="once")
        assert first == WriteResult(applied=1, duplicates=0, batch_id="once")
        stamp = int(START.timestamp())
        for name in (keys.batches("kills"), keys.batch_results("kills")):
            assert r.expiretime(name) == stamp + 48 * 3600 + 1, name
        clock.advance(timedelta(hours=47, minutes=59, seconds=59))
        assert s.submit("kills", "ann", 5, batch_id="once") == first
        assert zset(r, day_key("kills", START.date())) == {"ann": 5.0}
        clock.advance(timedelta(seconds=2))  # 48 hours and one second after it was applied
        assert s.submit("kills", "ann", 5, batch_id="once") == first  # applied again
        later = clock().date()
        assert zset(r, day_key("kills", later)) == {"ann": 5.0}
        # Old ids are pruned by later writes, not only hidden.
        s.submit("kills", "bob", 1, batch_id="old")
        clock.advance(timedelta(hours=49))
        s.submit("kills", "bob", 1, batch_id="new")
        assert r.zscore(keys.batches("kills"), "old") is None
        assert not r.hexists(keys.batch_results("kills"), "old")
        assert r.zscore(keys.batches("kills"), "new") is not None


@pytest.mark.parametrize(
    "bad",
    ["", "x" * 129, "é" * 65, "tab\there", "nul\x00", "\x85next-line", 17, b"bytes",
     "trailing ", " leading", "nbsp\xa0", "\u3000ideographic"],
)  # fmt: skip
def test_invalid_batch_ids_are_refused_before_any_write(
    make: Make, r: redis.Redis, bad: Any
) -> None:
    with Seasons(make(), clock=ManualClock(START)) as s:
        with pytest.raises(InvalidBatchId) as err:
            s.submit("kills", "ann", 5, batch_id=bad)
        assert "batch_id" in err.value.message
        assert r.dbsize() == 0
        assert s.submit("kills", "ann", 5, batch_id="é" * 64).applied == 1  # 128 bytes


# --- HTTP and CLI -----------------------------------------------------------------------------


@pytest.fixture
def http(make: Make) -> Iterator[TestClient]:
    settings = make()
    tc = TestClient(
        create_app(settings, clock=ManualClock(START)),
        client=("127.0.0.1", 50000),  # loopback: writes need no token when none is set
        base_url="http://localhost",
    )
    with tc:
        yield tc


@pytest.mark.both_backends
def test_idempotency_key_on_post_scores(http: TestClient, r: redis.Redis) -> None:
    events = {"events": [ev("kills", "ann", 5), ev("laps", "ann", 60)]}
    resp = http.post("/v1/scores", json=events, headers={"Idempotency-Key": "req-1"})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"applied": 2, "duplicates": 0, "batch_id": "req-1"}
    before = snapshot(r)
    again = http.post("/v1/scores", json=events, headers={"Idempotency-Key": "req-1"})
    assert again.status_code == 200 and again.json() == resp.json()
    assert snapshot(r) == before

    other = http.post(
        "/v1/scores", json={"events": [ev("kills", "ann", 6)]}, headers={"Idempotency-Key": "req-1"}
    )
    assert other.status_code == 409, other.text
    assert other.json()["error"] == "batch_id_reused"
    assert snapshot(r) == before

    # Generated when absent, and a client may resend with it.
    fresh = http.post("/v1/scores", json={"events": [ev("kills", "bob", 1)]}).json()
    generated = fresh["batch_id"]
    assert isinstance(generated, str) and len(generated) == 32
    before = snapshot(r)
    resent = http.post(
        "/v1/scores",
        json={"events": [ev("kills", "bob", 1)]},
        headers={"Idempotency-Key": generated},
    )
    assert resent.json() == fresh
    assert snapshot(r) == before

    # UTF-8 in the header is the batch id as sent.
    key_text = "κλειδί-1"
    utf8 = http.post(
        "/v1/scores",
        json={"events": [ev("kills", "cid", 1)]},
        headers={"Idempotency-Key": key_text.encode()},
    )
    assert utf8.status_code == 200 and utf8.json()["batch_id"] == key_text
    assert zset(r, day_key("kills", START.date())) == {"ann": 5.0, "bob": 1.0, "cid": 1.0}


@pytest.mark.parametrize("header", ["x" * 129, b"tab\tinside", b""])
def test_a_bad_idempotency_key_is_422(http: TestClient, r: redis.Redis, header: Any) -> None:
    resp = http.post(
        "/v1/scores", json={"events": [ev("kills", "ann", 5)]}, headers={"Idempotency-Key": header}
    )
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == "invalid_batch_id" and "Idempotency-Key" in body["message"]
    assert r.dbsize() == 0


def test_spaces_around_an_idempotency_key_are_not_part_of_it(
    redis_url: str, tmp_path: Path
) -> None:
    """HTTP's optional whitespace around a header value (RFC 9110, 5.5) does not make another
    key: on a real ``seasons serve`` (httptools keeps what follows a value), sent as raw bytes,
    every spelling is the batch ``k1``, applied once."""
    env = {"SEASONS_REDIS__URL": redis_url, "SEASONS_NAMESPACE": NS,
           "SEASONS_BOARDS__KILLS__AGGREGATE": "sum"}  # fmt: skip
    body = json.dumps({"events": [ev("kills", "ann", 5)]}).encode()
    with seasons_serve(env, tmp_path / "serve.log") as base:
        port = int(base.rsplit(":", 1)[1])
        answers = []
        for key in (b"k1", b"k1 ", b"k1\t", b" k1  ", b"\tk1 \t "):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(
                    b"POST /v1/scores HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nIdempotency-Key: " + key + b"\r\n"
                    b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
                )
                raw = b""
                while chunk := sock.recv(65536):
                    raw += chunk
            head, _, answer = raw.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), raw
            answers.append(json.loads(answer))
        entry = httpx.get(f"{base}/v1/boards/kills/day/members/ann", timeout=10).json()
    assert answers == [{"applied": 1, "duplicates": 0, "batch_id": "k1"}] * 5
    assert entry["score"] == 5  # one event of 5, applied once


def test_ids_with_whitespace_around_them_are_refused_everywhere(make: Make, r: redis.Redis) -> None:
    """Claim and clear ids follow the batch id rule (one check): nothing is written."""
    with Seasons(make(), clock=ManualClock(START)) as s:
        s.submit("kills", "ann", 5)
        before = snapshot(r)
        with pytest.raises(InvalidBatchId, match="clear id begins or ends with whitespace"):
            s.clear("kills", "day", "current", run_id="run-1 ")
        with pytest.raises(InvalidBatchId, match="claim_id begins or ends with whitespace"):
            s.claim("kills", "S1", "ann", claim_id=" claim-1")
        assert snapshot(r) == before


def test_a_header_that_is_not_utf8_is_refused() -> None:
    """What the server hands over for the bytes FF FE (Latin-1); the test client cannot send
    such bytes as they are (it re-encodes header values)."""
    with pytest.raises(InvalidBatchId, match="Idempotency-Key header is not valid UTF-8"):
        scores.batch_id_of(b"\xff\xfe".decode("latin-1"))


def test_the_openapi_schema_documents_the_header(http: TestClient) -> None:
    schema = http.get("/openapi.json").json()
    params = schema["paths"]["/v1/scores"]["post"]["parameters"]
    header = [p for p in params if p["in"] == "header" and p["name"] == "Idempotency-Key"]
    assert len(header) == 1 and not header[0].get("required", False)
    assert "48 hours" in header[0]["description"]
    result = schema["components"]["schemas"]["WriteResult"]["properties"]
    assert set(result) == {
        "applied",
        "duplicates",
        "batch_id",
        "standings",
        "held",
        "held_events",
        "banned",
    }


def test_cli_submit_batch_id(
    make: Make, redis_settings: dict[str, Any], tmp_path: Path, r: redis.Redis
) -> None:
    toml = tmp_path / "cli.toml"
    toml.write_text(f'namespace = "{NS}"\n[boards.kills]\n')
    env = {k: None for k in os.environ if k.startswith("SEASONS_")} | {
        "SEASONS_REDIS__URL": redis_settings["url"],
        "SEASONS_CONFIG": str(toml),
    }

    def run(*args: str) -> Any:
        return CliRunner().invoke(
            cli, list(args), env=env, obj=CliState(clock=ManualClock(START)), catch_exceptions=False
        )

    first = run("submit", "kills", "ann", "5", "--batch-id", "cli-1", "--json")
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == '{"applied": 1, "duplicates": 0}'  # as before batch ids
    again = run("submit", "kills", "ann", "5", "--batch-id", "cli-1")
    assert again.exit_code == 0 and again.stdout.startswith("applied: ann 5")
    assert zset(r, day_key("kills", START.date())) == {"ann": 5.0}
    other = run("submit", "kills", "ann", "6", "--batch-id", "cli-1")
    assert other.exit_code == 1 and "cli-1" in other.stderr
    bad = run("submit", "kills", "ann", "6", "--batch-id", "")
    assert bad.exit_code == 2 and "batch_id" in bad.stderr
    spaced = run("submit", "kills", "ann", "6", "--batch-id", "cli-1 ")
    assert spaced.exit_code == 2 and "batch_id begins or ends with whitespace" in spaced.stderr
    assert zset(r, day_key("kills", START.date())) == {"ann": 5.0}


# --- property: resends change nothing -----------------------------------------------------------

MEMBERS = ["ann", "bob", "cid"]
event_st = st.fixed_dictionaries(
    {
        "board": st.sampled_from(sorted(BOARDS)),
        "member": st.sampled_from(MEMBERS),
        "value": st.integers(-5, 20),
        "back": st.integers(0, 3 * 3600),  # seconds before now
    },
    optional={"event_id": st.sampled_from(["e1", "e2", "e3"])},
)
batch_st = st.tuples(
    st.lists(event_st, min_size=1, max_size=6),
    st.integers(1, 3),  # times sent
    st.integers(0, 90),  # minutes the clock moves on after
)


@pytest.mark.both_backends
@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(batch_st, min_size=1, max_size=6))
def test_batches_sent_several_times_equal_batches_applied_once(
    make: Make, r: redis.Redis, batches: list[tuple[list[dict[str, Any]], int, int]]
) -> None:
    r.flushall()
    settings = make()
    clock = ManualClock(START)
    model = Model(settings)
    with Seasons(settings, clock=clock) as s:
        for n, (raw, sends, minutes) in enumerate(batches):
            now = clock()
            events = [
                {k: v for k, v in e.items() if k != "back"}
                | {"ts": (now - timedelta(seconds=e["back"])).isoformat()}
                for e in raw
            ]
            timed = [{**e, "ts": datetime.fromisoformat(e["ts"])} for e in events]
            try:
                want = model.submit(timed, now)
            except Rejected:
                for _ in range(sends):
                    with pytest.raises(BatchRejected):
                        s.submit_many(events, batch_id=f"batch-{n}")
                continue
            results = [s.submit_many(events, batch_id=f"batch-{n}") for _ in range(sends)]
            assert all((x.applied, x.duplicates) == want for x in results)
            clock.advance(timedelta(minutes=minutes))
    for board in BOARDS:
        for window, pid in model.periods(board):
            assert zset(r, key(NS, board, window, pid)) == model.board(board, window, pid)


def test_a_pipeline_that_lost_its_script_loads_it_and_runs_once(r: Any, connect: Any) -> None:
    """Redis restarted under a multi-board pipeline: redis-py reconnects and resends it
    without loading the script (it does that only before its first try), so the pipeline
    meets NOSCRIPT. The write path loads write.lua and runs it again, once."""
    from seasons.scripts import Scripts

    client = connect(decode_responses=True)
    scripts = Scripts(client)
    tries = []

    def run() -> list[Any]:
        tries.append(1)
        if len(tries) == 1:
            client.script_flush()  # what a restart does to the script cache
            pipe = client.pipeline(transaction=False)
            pipe.evalsha(scripts.write.sha, 0)
            return list(pipe.execute())  # NOSCRIPT
        return list(client.script_exists(scripts.write.sha))

    assert scripts.loaded("write", run) == [True]
    assert len(tries) == 2
