"""The audit trail (seasons.audit): who forgot, cleared or restored what, on every path.

Each test states what it did (actor, action, member, boards, reason) and compares the
entries read back with that, never with what the code wrote; the filters and paging are
compared with a plain-Python list of the entries appended.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import json
import shutil
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from seasons import Seasons
from seasons.archives import Archives
from seasons.audit import ACTIONS, Note
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import ConfigError, Settings
from seasons.errors import ArchiveRejected, BadCursor, InvalidInput, UnknownAction
from seasons.http.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "aud"
NOW = datetime(2099, 3, 11, 15, tzinfo=UTC)  # S3 of a 28-day cycle from 2099-01-05
STREAM = f"{NS}:audit"
AUDIT_KEYS = (STREAM, f"{{{STREAM}}}:members", f"{{{STREAM}}}:ids", f"{{{STREAM}}}:salt")
WRITE = "w-token-123"
ADMIN = "a-token-456"
OPS = "ops-token-789"
SRE = "sre-token-000"
NAMED = [{"name": "ops-oncall", "token": OPS}, {"name": "sre", "token": SRE}]
LOOPBACK = ("127.0.0.1", 50000)

pytestmark = pytest.mark.both_backends


def make_settings(factory: Callable[..., Settings], tmp_path: Path, **api: Any) -> Settings:
    return factory(
        namespace=NS, timezone="UTC", seasons={"length_days": 28, "anchor": "2099-01-05"},
        boards={"kills": {"aggregate": "sum"}, "laps": {"aggregate": "min", "order": "asc"}},
        archive={"dir": str(tmp_path / "archive")}, api=api,
    )  # fmt: skip


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return make_settings(
        settings_factory, tmp_path, write_token=WRITE, admin_token=ADMIN, admin_tokens=NAMED
    )


@pytest.fixture
def app(settings: Settings) -> Iterator[Seasons]:
    with Seasons(settings, clock=ManualClock(NOW)) as facade:
        yield facade


def seed(app: Seasons, members: tuple[str, ...] = ("ann", "bob", "cat")) -> None:
    """Events on 2099-02-27 (S2) and 2099-03-10 (S3) on both boards."""
    events = [
        {"board": b, "member": m, "value": i + 1, "ts": ts}
        for ts in ("2099-02-27T10:00:00+00:00", "2099-03-10T10:00:00+00:00")
        for b in ("kills", "laps")
        for i, m in enumerate(members)
    ]
    app.submit_many(events, backfill=True)


def raw_entries(r: redis.Redis) -> list[dict[str, str]]:
    """The stream as Redis holds it, oldest first, fields decoded."""
    return [
        {k.decode(): v.decode() for k, v in fields.items()}
        for _, fields in r.xrange(STREAM, "-", "+")
    ]


def salted(r: redis.Redis, member: str) -> str:
    """HMAC-SHA256 of ``member`` under the salt in Redis, computed here."""
    salt = r.get(f"{{{STREAM}}}:salt")
    assert salt is not None
    return hmac.new(salt, member.encode(), hashlib.sha256).hexdigest()


def cli_run(settings: Settings, *args: str) -> Any:
    return CliRunner().invoke(
        cli, list(args), obj=CliState(clock=ManualClock(NOW), settings=settings)
    )


def http(settings: Settings, app: Seasons, client: tuple[str, int] | None = None) -> TestClient:
    kwargs: dict[str, Any] = {"base_url": "http://localhost"}
    if client is not None:
        kwargs["client"] = client
    return TestClient(create_app(settings, app=app), **kwargs)


# --- actors -----------------------------------------------------------------------------------


def test_the_token_used_names_the_actor_and_the_request_id_is_echoed(
    app: Seasons, settings: Settings, r: redis.Redis
) -> None:
    seed(app, ("m1", "m2", "m3", "m4"))
    done = [("m1", OPS, "ops-oncall"), ("m2", SRE, "sre"), ("m3", ADMIN, "admin")]
    with http(settings, app) as client:
        for member, token, _ in done:
            resp = client.delete(
                f"/v1/admin/members/{member}", params={"reason": f"ticket {member}"},
                headers={"Authorization": f"Bearer {token}", "X-Request-ID": f"req-{member}"},
            )  # fmt: skip
            assert resp.status_code == 200, resp.text
            assert resp.headers["x-request-id"] == f"req-{member}"
            assert token not in resp.text and token not in str(resp.headers)
        # A write token is never an admin's; without a token a remote client is refused.
        before = r.xlen(STREAM)
        for headers in ({"Authorization": f"Bearer {WRITE}"}, {}):
            resp = client.delete("/v1/admin/members/m4", headers=headers)
            assert resp.status_code == 401, resp.text
            assert "x-request-id" not in resp.headers
        assert r.xlen(STREAM) == before
        # A request id that is not of the accepted form is replaced by a generated one.
        bad = client.get(
            "/v1/admin/audit", headers={"Authorization": f"Bearer {OPS}", "X-Request-ID": "a b"}
        )
        assert bad.status_code == 200 and bad.headers["x-request-id"] not in ("", "a b")
        assert len(bad.headers["x-request-id"]) == 32
    got = raw_entries(r)
    assert [(e["actor"], e["action"], e["member"], e["reason"], e["request_id"]) for e in got] == [
        (actor, "forget", salted(r, m), f"ticket {m}", f"req-{m}") for m, _, actor in done
    ]
    assert all(json.loads(e["boards"]) == ["kills", "laps"] for e in got)


def test_a_loopback_client_without_a_token_is_local(
    settings_factory: Callable[..., Settings], tmp_path: Path, r: redis.Redis
) -> None:
    settings = make_settings(settings_factory, tmp_path)  # no tokens at all
    with Seasons(settings, clock=ManualClock(NOW)) as app:
        seed(app)
        with http(settings, app, LOOPBACK) as client:
            resp = client.delete("/v1/admin/members/ann")
            assert resp.status_code == 200, resp.text
            rid = resp.headers["x-request-id"]
    (entry,) = raw_entries(r)
    assert (entry["actor"], entry["action"], entry["request_id"]) == ("local", "forget", rid)


def test_named_tokens_alone_close_the_loopback_door(
    settings_factory: Callable[..., Settings], tmp_path: Path, r: redis.Redis
) -> None:
    settings = make_settings(settings_factory, tmp_path, admin_tokens=NAMED)
    with Seasons(settings, clock=ManualClock(NOW)) as app, http(settings, app, LOOPBACK) as client:
        assert client.delete("/v1/admin/members/ann").status_code == 401
        ok = client.delete("/v1/admin/members/ann", headers={"Authorization": f"Bearer {SRE}"})
        assert ok.status_code == 200
    assert [e["actor"] for e in raw_entries(r)] == ["sre"]


def test_the_cli_actor_is_the_os_user(app: Seasons, settings: Settings, r: redis.Redis) -> None:
    seed(app)
    assert cli_run(settings, "forget", "ann", "--reason", "asked by mail").exit_code == 0
    result = cli_run(
        settings, "clear", "kills", "-w", "day", "-p", "2099-03-10", "--yes", "--id", "c-cli"
    )
    assert result.exit_code == 0, result.output
    got = raw_entries(r)
    user = f"cli:{getpass.getuser()}"
    assert [(e["actor"], e["action"], e["reason"]) for e in got] == [
        (user, "forget", "asked by mail"), (user, "clear", ""),
    ]  # fmt: skip


# --- each action, once ------------------------------------------------------------------------


def test_forget_appends_one_entry_and_leaves_no_member_id(app: Seasons, r: redis.Redis) -> None:
    secret = "zed-the-secret-member"
    seed(app, (secret, "bob"))
    # What moderation or held events will append: entries naming the member.
    app.audit_trail.append("clear", Note(actor="mod"), NOW, member=secret, boards=["kills"])
    app.audit_trail.append("clear", Note(actor="mod"), NOW, member="bob", boards=["laps"])
    named = app.audit(member=secret).entries
    assert [(e.member, e.actor) for e in named] == [(secret, "mod")]
    app.forget(secret, actor="dpo", reason="erasure request", request_id="gdpr-7")
    got = raw_entries(r)
    assert len(got) == 3
    last = got[-1]
    assert (last["actor"], last["action"], last["reason"], last["request_id"]) == (
        "dpo",
        "forget",
        "erasure request",
        "gdpr-7",
    )
    assert last["member"] == got[0]["member"] == salted(r, secret)
    assert json.loads(last["boards"]) == ["kills", "laps"]
    # No trace of the id under any audit key: the stream's bytes, the hashes, the salt.
    audit_keys = {k for k in r.scan_iter(match=f"*{STREAM}*")}
    assert audit_keys == {k.encode() for k in AUDIT_KEYS if "ids" not in k}
    for name in audit_keys:
        assert secret.encode() not in r.dump(name), name
    assert secret.encode() not in repr(r.xrange(STREAM, "-", "+")).encode()
    assert r.hgetall(f"{{{STREAM}}}:members") == {salted(r, "bob").encode(): b"bob"}
    # Reads give the hash and no id; asking by the id still finds them by its hash.
    entries = app.audit().entries
    assert [(e.action, e.member, e.member_hash) for e in entries] == [
        ("forget", None, salted(r, secret)),
        ("clear", "bob", salted(r, "bob")),
        ("clear", None, salted(r, secret)),
    ]
    assert [e.action for e in app.audit(member=secret).entries] == ["forget", "clear"]


def test_clear_appends_once_per_clear_id(app: Seasons, settings: Settings, r: redis.Redis) -> None:
    seed(app)
    first = app.clear("kills", "day", "2099-03-10", run_id="c-1", actor="ops", reason="test data")
    again = app.clear("kills", "day", "2099-03-10", run_id="c-1", actor="someone-else")
    assert again == first
    with http(settings, app) as client:
        auth = {"Authorization": f"Bearer {OPS}", "Idempotency-Key": "c-2"}
        body = {"window": "day", "period": "2099-03-10", "reason": "again"}
        for _ in range(2):
            resp = client.post("/v1/admin/boards/laps/clear", json=body, headers=auth)
            assert resp.status_code == 200, resp.text
        rid = resp.headers["x-request-id"]
    got = raw_entries(r)
    assert [(e["actor"], e["boards"], e["reason"], e["member"]) for e in got] == [
        ("ops", '["kills"]', "test data", ""), ("ops-oncall", '["laps"]', "again", ""),
    ]  # fmt: skip
    assert got[1]["request_id"] != rid  # the second request was answered, not appended
    after = json.loads(got[0]["after"])
    assert (after["run_id"], after["window"], after["period"]) == ("c-1", "day", "2099-03-10")
    assert after["deleted"] == [f"{NS}:{{kills}}:day:2099-03-10"]


def test_restore_appends_one_entry_and_a_refused_one_none(
    app: Seasons, settings: Settings, r: redis.Redis, tmp_path: Path
) -> None:
    seed(app)
    archives = Archives(app.client, app.scripts, app.settings, app.keys)
    archives.copy("kills", app.keys.season("kills", "S2"), "S2")
    archives.write_files("kills", "S2", NOW)
    data = tmp_path / "archive" / NS / "kills" / "S2.jsonl.gz"
    done = app.restore(data, actor="restorer", reason="after the outage")
    (entry,) = raw_entries(r)
    assert (entry["actor"], entry["action"], entry["boards"], entry["reason"]) == (
        "restorer",
        "restore",
        '["kills"]',
        "after the outage",
    )
    assert json.loads(entry["after"])["restored"][0]["season"] == "S2" == done.season
    # restore --all is one entry for the run, from the CLI too.
    assert cli_run(settings, "restore", "--all").exit_code == 0
    assert [e["actor"] for e in raw_entries(r)] == ["restorer", f"cli:{getpass.getuser()}"]
    # A file without its manifest is refused: no entry.
    lone = tmp_path / "lone" / "S2.jsonl.gz"
    lone.parent.mkdir()
    shutil.copy(data, lone)
    with pytest.raises(ArchiveRejected):
        app.restore(lone)
    assert r.xlen(STREAM) == 2


# --- reads ------------------------------------------------------------------------------------


def test_filters_and_paging_match_a_model(app: Seasons, settings: Settings, r: redis.Redis) -> None:
    members = ["m0", "m1", "m2", None]
    model: list[dict[str, Any]] = []  # oldest first
    for i in range(57):
        member, action = members[i % 4], list(ACTIONS)[i % 3]
        app.audit_trail.append(action, Note(actor=f"a{i}"), NOW, member=member, after={"i": i})
        model.append({"member": member, "action": action, "i": i})
    stream_ids = [sid.decode() for sid, _ in r.xrange(STREAM, "-", "+")]
    cases = [(None, None), ("m1", None), (None, "clear"), ("m2", "restore"), ("nobody", None)]
    with http(settings, app) as client:
        for member, action in cases:
            want = [e["i"] for e in reversed(model)
                    if (member is None or e["member"] == member)
                    and (action is None or e["action"] == action)]  # fmt: skip
            for limit in (1, 4, 1000):
                got: list[int] = []
                after: str | None = None
                while True:
                    page = app.audit(member=member, action=action, limit=limit, after=after)
                    params = {k: v for k, v in (("member", member), ("action", action),
                              ("limit", limit), ("after", after)) if v is not None}  # fmt: skip
                    sent = client.get(
                        "/v1/admin/audit", params=params,
                        headers={"Authorization": f"Bearer {ADMIN}"},
                    )  # fmt: skip
                    assert sent.json() == page.model_dump(mode="json")
                    assert len(page.entries) <= limit
                    got += [e.after["i"] for e in page.entries]
                    if page.next is None:
                        break
                    after = page.next
                assert got == want, (member, action, limit)
    # A cursor is a stream id: the entries older than the i-th are those before it.
    older = app.audit(limit=1000, after=stream_ids[10]).entries
    assert [e.after["i"] for e in older] == list(range(9, -1, -1))
    assert app.audit(after="0-0").entries == []


def test_the_stream_is_capped(settings_factory: Callable[..., Settings], tmp_path: Path,
                              r: redis.Redis) -> None:  # fmt: skip
    settings = settings_factory(namespace=NS, audit={"max_len": 10})
    with Seasons(settings, clock=ManualClock(NOW)) as app:
        for i in range(600):
            app.audit_trail.append("clear", Note(), NOW, once=f"c{i}", after={"i": i})
        # A once-id still in the stream appends nothing.
        assert app.audit_trail.append("clear", Note(), NOW, once="c599") is None
    kept = [json.loads(e["after"])["i"] for e in raw_entries(r)]
    # MAXLEN ~ 10: at least 10 kept, at most one stream node (100 entries) more; the newest.
    assert 10 <= len(kept) <= 110 and kept == list(range(600 - len(kept), 600))
    assert r.zcard(f"{{{STREAM}}}:ids") <= len(kept) + 100
    with pytest.raises(ConfigError, match=r"audit\.max_len"):
        settings_factory(audit={"max_len": 0})


# --- bad input --------------------------------------------------------------------------------


def test_bad_input_is_a_4xx_with_a_code_and_appends_nothing(
    app: Seasons, settings: Settings, r: redis.Redis
) -> None:
    seed(app)
    app.forget("cat", actor="t")
    before = r.xlen(STREAM)
    auth = {"Authorization": f"Bearer {ADMIN}"}
    with http(settings, app) as client:
        for params, code in (
            ({"action": "nope"}, "unknown_action"), ({"after": "yesterday"}, "bad_cursor"),
            ({"after": "1-2-3"}, "bad_cursor"), ({"limit": "0"}, "invalid_input"),
            ({"limit": "1001"}, "invalid_input"), ({"limit": "x"}, "invalid_input"),
            ({"member": "a\x00b"}, "invalid_member"), ({"token": ADMIN}, "unknown_parameter"),
        ):  # fmt: skip
            resp = client.get("/v1/admin/audit", params=params, headers=auth)
            assert resp.status_code == 422 and resp.json()["error"] == code, (params, resp.text)
        long = "x" * 501
        resp = client.delete("/v1/admin/members/ann", params={"reason": long}, headers=auth)
        assert resp.status_code == 422, resp.text
        resp = client.post(
            "/v1/admin/boards/kills/clear", headers=auth,
            json={"window": "day", "period": "2099-03-10", "reason": long},
        )  # fmt: skip
        assert resp.status_code == 422, resp.text
    assert app.rank("kills", "ann", "day", period="2099-03-10") is not None  # not forgotten
    assert app.top("kills", "day", period="2099-03-10").total == 2  # not cleared
    for call, error in (
        (lambda: app.audit(action="ban-everyone"), UnknownAction),
        (lambda: app.audit(after="(5"), BadCursor),
        (lambda: app.audit(limit=0), InvalidInput),
        (lambda: app.forget("ann", reason="y" * 501), InvalidInput),
        (lambda: app.forget("ann", actor=""), InvalidInput),
        (lambda: app.forget("ann", reason="a\x00b"), InvalidInput),
        (lambda: app.clear("kills", "day", "2099-03-10", reason="\ud800"), InvalidInput),
    ):
        with pytest.raises(error):
            call()
    for args in (["audit", "--action", "nope"], ["audit", "--after", "x"],
                 ["audit", "--limit", "0"], ["forget", "ann", "--reason", "z" * 501]):  # fmt: skip
        assert cli_run(settings, *args).exit_code == 2, args
    assert r.xlen(STREAM) == before


def test_the_cli_prints_the_trail(app: Seasons, settings: Settings) -> None:
    seed(app)
    app.forget("bob", actor="dpo", reason="asked")
    app.clear("kills", "day", "2099-03-10", actor="ops")
    printed = cli_run(settings, "audit", "--json", "--action", "forget")
    assert printed.exit_code == 0, printed.output
    page = json.loads(printed.output)
    assert [(e["actor"], e["action"], e["reason"]) for e in page["entries"]] == [
        ("dpo", "forget", "asked")
    ]
    table = cli_run(settings, "audit", "-n", "5")
    assert table.exit_code == 0 and "dpo" in table.output and "ops" in table.output


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "extra", "named"),
    [
        ([{"name": "ops", "token": "t1"}, {"name": "ops", "token": "t2"}], {},
         r"api\.admin_tokens\[1\]\.name 'ops' repeats"),
        ([{"name": "a", "token": "same-t"}, {"name": "b", "token": "same-t"}], {},
         r"api\.admin_tokens\[1\]\.token is the same as api\.admin_tokens\[0\]"),
        ([{"name": "admin", "token": "t1"}], {},
         r"api\.admin_tokens\[0\]\.name 'admin' is reserved"),
        ([{"name": "local", "token": "t1"}], {}, r"'local' is reserved"),
        ([{"name": "ops", "token": WRITE}], {"write_token": WRITE},
         r"api\.admin_tokens\[0\]\.token is the same as api\.write_token"),
        ([{"name": "ops", "token": ADMIN}], {"admin_token": ADMIN},
         r"api\.admin_tokens\[0\]\.token is the same as api\.admin_token"),
        ([{"name": "ops", "token": ""}], {}, r"admin_tokens"),
        ([{"name": "bad name", "token": "t1"}], {}, r"admin_tokens"),
    ],
)  # fmt: skip
def test_admin_tokens_are_checked_at_start(
    settings_factory: Callable[..., Settings], tokens: list[dict[str, str]],
    extra: dict[str, str], named: str,
) -> None:  # fmt: skip
    with pytest.raises(ConfigError, match=named) as info:
        settings_factory(api={"admin_tokens": tokens, **extra})
    for t in tokens:
        if len(t["token"]) > 2:
            assert t["token"] not in str(info.value)


def test_reading_the_trail_needs_an_admin_token(app: Seasons, settings: Settings) -> None:
    with http(settings, app) as client:
        for method in ("GET", "HEAD"):
            for headers in ({}, {"Authorization": f"Bearer {WRITE}"}):
                resp = client.request(method, "/v1/admin/audit", headers=headers)
                assert resp.status_code == 401, (method, headers)
            ok = client.request(
                method, "/v1/admin/audit", headers={"Authorization": f"Bearer {SRE}"}
            )
            assert ok.status_code == 200 and "x-request-id" in ok.headers
        # The public reads are not asked for a token.
        assert client.get("/v1/boards/kills/day").status_code == 200


def test_config_shows_the_names_and_never_the_tokens(settings: Settings) -> None:
    printed = cli_run(settings, "config", "--json")
    assert printed.exit_code == 0, printed.output
    shown = json.loads(printed.output)["api"]["admin_tokens"]
    assert shown == [
        {"name": "ops-oncall", "token": "<redacted>"},
        {"name": "sre", "token": "<redacted>"},
    ]
    assert OPS not in printed.output and SRE not in printed.output
