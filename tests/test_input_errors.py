"""Every input error is a 4xx / exit status 2 / ``InvalidInput``, through every interface.

Numbers of any size (a 401-digit integer, 5000 digits, NaN, infinities) in a value, a
metadata field or an event time; lone surrogates and bytes that are not UTF-8 in members,
metadata and paths; invisible format characters in member ids. Each is refused with a message
that names what is wrong, never a traceback, an ``OverflowError``/``UnicodeEncodeError`` or a
500, and the data in Redis (``DEBUG DIGEST``) is the same afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, seed
from redis_server import RedisServer

from seasons import Seasons
from seasons.cli import CliState, cli
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.errors import BackendUnavailable, BatchRejected, InvalidInput, InvalidMember
from seasons.events import check_member
from seasons.http.app import create_app

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

HUGE = 10**400  # 401 digits: float() of it overflows
HUGER = 10**5000  # past Python's 4300-digit limit for int <-> str
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

# Members the rule refuses, with what the message must name. Written out here rather than
# derived from unicodedata, so that the test states the rule independently of the code.
REFUSED: list[tuple[str, str]] = [
    ("ad\u200bmin", "U+200B"),  # zero-width space
    ("\u202enimda", "U+202E"),  # right-to-left override
    ("a\u202ab", "U+202A"),
    ("a\u2066b\u2069", "U+2066"),  # left-to-right isolate
    ("\ufeffann", "U+FEFF"),  # byte order mark
    ("an\u00adn", "U+00AD"),  # soft hyphen
    ("a\u200db", "U+200D"),  # zero-width joiner
    ("a\u200eb", "U+200E"),  # left-to-right mark
    ("a\u2060b", "U+2060"),  # word joiner
    ("a\u2028b", "U+2028"),  # line separator
    ("a\x00b", "U+0000"),
    ("a\x7fb", "U+007F"),
    ("a\x85b", "U+0085"),
    ("\ud800", "U+D800"),  # lone surrogate (a JSON "\ud800" escape)
    ("x\udcff", "0xFF"),  # a byte that is not UTF-8, as Python decodes argv
    ("", "empty"),
    ("a" * 129, "129 bytes"),
    ("é" * 65, "130 bytes"),
]
# The entries above that break only the format-character rule: erasure still takes them.
FORMAT_ONLY = {member for member, _ in REFUSED[:10]}
ACCEPTED = ["uid_tankId", "a b", "ünïcødé", "名前", "😀", "\ufffd", "a/b", "é" * 64, "a" * 128]


@pytest.mark.parametrize(("member", "named"), REFUSED)
def test_the_member_rule_refuses_and_names(member: str, named: str) -> None:
    why = check_member(member)
    assert why is not None and named in why


@pytest.mark.parametrize("member", ACCEPTED)
def test_the_member_rule_accepts(member: str) -> None:
    assert check_member(member) is None


@pytest.mark.parametrize("value", [None, 3, 1.5, b"ann", ["ann"]])
def test_a_member_must_be_a_string(value: Any) -> None:
    assert check_member(value) is not None


# --- the data set every test starts from -------------------------------------------------------


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        **SETTINGS,
        archive={"dir": str(tmp_path / "archive")},
        api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN},
    )


@pytest.fixture
def app(settings: Settings) -> Iterator[Seasons]:
    with Seasons(settings, clock=ManualClock(START)) as s:
        seed(s, days=3, players=8)
        yield s


def digest(r: redis.Redis) -> Any:
    return r.execute_command("DEBUG", "DIGEST")


# --- Python API -------------------------------------------------------------------------------


def _reads(app: Seasons, member: str) -> dict[str, Callable[[], Any]]:
    from seasons.jobs.registry import sweeper_of

    return {
        "rank": lambda: app.rank("kills", member, "day"),
        "around": lambda: app.around("kills", member, "week"),
        "lookup": lambda: app.lookup("kills", ["p001", member], "season"),
        "history": lambda: app.history("kills", member),
        "forget": lambda: sweeper_of(app.backend).forget(member, app.clock()),
    }


@pytest.mark.parametrize(("member", "named"), REFUSED[:4] + REFUSED[13:16])
def test_python_api_reads_and_erasure_refuse_a_bad_member(
    app: Seasons, r: redis.Redis, member: str, named: str
) -> None:
    before = digest(r)
    for name, call in _reads(app, member).items():
        if name == "forget" and member in FORMAT_ONLY:
            continue  # a format character: erasure takes members stored before the rule
        with pytest.raises(InvalidMember) as caught:
            call()
        assert named in caught.value.message, name
        assert caught.value.details["member"] == member, name
    assert digest(r) == before


def test_python_api_refuses_a_bad_member_before_any_redis_call(tmp_path: Path) -> None:
    # A stopped server: a read that reached Redis would raise BackendUnavailable instead.
    with RedisServer() as server:
        cfg = load_settings(
            environ={}, path=None, redis={"url": server.url}, archive={"dir": str(tmp_path)},
            **SETTINGS,
        )  # fmt: skip
        with Seasons(cfg, clock=ManualClock(START)) as s:
            server.stop()
            for call in _reads(s, "\ud800").values():
                with pytest.raises(InvalidMember):
                    call()
            with pytest.raises(BackendUnavailable):
                s.rank("kills", "p001")  # the control: a valid member does reach Redis


# (event fields, field of the problem)
BAD_EVENTS: list[tuple[dict[str, Any], str]] = [
    ({"value": HUGE}, "value"),
    ({"value": -HUGE}, "value"),
    ({"value": HUGER}, "value"),
    ({"value": float("nan")}, "value"),
    ({"value": float("inf")}, "value"),
    ({"value": 2**53 + 1}, "value"),
    ({"ts": HUGE}, "ts"),
    ({"ts": HUGER}, "ts"),
    ({"ts": 1e400}, "ts"),
    ({"ts": float("nan")}, "ts"),
    ({"ts": "9" * 5000}, "ts"),
    ({"ts": "2035-06-13T12:00:00\ud800"}, "ts"),
    ({"ts": True}, "ts"),
    ({"metadata": {"level": HUGE}}, "metadata"),
    ({"metadata": {"level": HUGER}}, "metadata"),
    ({"metadata": {"level": float("nan")}}, "metadata"),
    ({"metadata": {"name": "\ud800"}}, "metadata"),
    ({"metadata": {"\udcff": 1}}, "metadata"),
    ({"event_id": "\ud800"}, "event_id"),
    ({"member": "ad\u200bmin"}, "member"),
    ({"member": "\u202enimda"}, "member"),
    ({"member": "\ud800"}, "member"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_EVENTS)
def test_python_api_writes_refuse_bad_numbers_and_text(
    app: Seasons, r: redis.Redis, fields: dict[str, Any], field: str
) -> None:
    event = {"board": "kills", "member": "ann", "value": 1, **fields}
    before = digest(r)
    with pytest.raises(BatchRejected) as caught:
        app.submit_many([event])
    assert [p["field"] for p in caught.value.details] == [field]
    assert len(caught.value.message) < 500  # a number's 5000 digits are not printed
    assert digest(r) == before


def test_event_ids_keep_only_the_control_character_rule(app: Seasons) -> None:
    """Event ids are opaque: a format character is allowed there (not in members)."""
    result = app.submit("kills", "ann", 2, event_id="id\u200bwith\u202eformat")
    assert (result.applied, result.duplicates) == (1, 0)


# --- HTTP -------------------------------------------------------------------------------------


@pytest.fixture
def client(settings: Settings, app: Seasons) -> Iterator[TestClient]:
    with TestClient(create_app(settings, app=app), raise_server_exceptions=False) as tc:
        yield tc


def _is_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error", "message", "details"}
    if code is not None:
        assert body["error"] == code, body
    return body


def _post_json(client: TestClient, url: str, text: str) -> Any:
    headers = {**AUTH, "content-type": "application/json"}
    return client.post(url, content=text.encode(), headers=headers)


def _events(*events: dict[str, Any]) -> str:
    # Python's JSON: NaN and Infinity as the tokens its parser (and FastAPI's) accepts, lone
    # surrogates as \udXXX escapes, a 401-digit integer as its digits.
    return json.dumps({"events": list(events)}, ensure_ascii=True)


ANN = {"board": "kills", "member": "ann", "value": 1}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"value": HUGE}, "value"),
        ({"ts": HUGE}, "ts"),
        ({"ts": 1e300}, "ts"),
        ({"value": float("nan")}, "value"),
        ({"value": float("-inf")}, "value"),
        ({"metadata": {"n": HUGE}}, "metadata"),
        ({"metadata": {"n": "\ud800"}}, "metadata"),
        ({"member": "\ud800"}, "member"),
        ({"member": "ad\u200bmin"}, "member"),
    ],
)
def test_http_scores_refuse_bad_numbers_and_text(
    client: TestClient, r: redis.Redis, fields: dict[str, Any], field: str
) -> None:
    before = digest(r)
    body = _is_error(_post_json(client, "/v1/scores", _events({**ANN, **fields})), 422)
    assert field in {p.get("field") for p in body["details"]}, body
    assert digest(r) == before


def test_http_a_number_past_the_digit_limit_is_a_4xx(client: TestClient, r: redis.Redis) -> None:
    before = digest(r)
    text = _events({**ANN, "value": 12345}).replace("12345", "9" * 5000)
    response = _post_json(client, "/v1/scores", text)
    assert 400 <= response.status_code < 500, response.text
    assert digest(r) == before


@pytest.mark.parametrize("member", ["\\ud800", "\\udcff", "ad\\u200bmin", "\\u202enimda", ""])
def test_http_lookup_refuses_a_bad_member(client: TestClient, r: redis.Redis, member: str) -> None:
    before = digest(r)
    text = '{"members":["p001","MEMBER"]}'.replace("MEMBER", member)
    response = _post_json(client, "/v1/boards/kills/day/lookup", text)
    body = _is_error(response, 422, "invalid_member")
    assert body["details"]["member"] == json.loads(f'"{member}"')
    assert digest(r) == before


MEMBER_ROUTES = [
    ("GET", "/v1/boards/kills/day/members/{m}"),
    ("GET", "/v1/boards/kills/week/members/{m}/around"),
    ("GET", "/v1/boards/kills/members/{m}/history"),
    ("DELETE", "/v1/admin/members/{m}"),
]
# Percent-encoded path members, with what the 422's message must name.
BAD_PATH_MEMBERS = [
    ("%ED%A0%80", "0xED"),  # the UTF-8-style bytes of a lone surrogate
    ("%FF", "0xFF"),
    ("p0%FF01", "0xFF"),
    ("%C3", "0xC3"),  # a truncated sequence
    ("ad%E2%80%8Bmin", "U+200B"),
    ("%E2%80%AEnimda", "U+202E"),
    ("a%00b", "U+0000"),
]
# Refused by reads and writes, but erased: members stored before the format-character rule.
ERASABLE = {"ad%E2%80%8Bmin", "%E2%80%AEnimda"}


@pytest.mark.parametrize(
    ("method", "route", "escaped", "named"),
    [
        (method, route, escaped, named)
        for method, route in MEMBER_ROUTES
        for escaped, named in BAD_PATH_MEMBERS
        if not (method == "DELETE" and escaped in ERASABLE)
    ],
)
def test_http_path_members_are_checked(
    client: TestClient, r: redis.Redis, method: str, route: str, escaped: str, named: str
) -> None:
    before = digest(r)
    response = client.request(method, route.format(m=escaped), headers=AUTH)
    body = _is_error(response, 422, "invalid_member")
    assert named in body["message"]
    assert digest(r) == before


@pytest.mark.parametrize(("method", "route"), MEMBER_ROUTES)
def test_http_a_real_replacement_character_is_a_member_like_any(
    client: TestClient, r: redis.Redis, method: str, route: str
) -> None:
    """U+FFFD sent as its UTF-8 (%EF%BF%BD) is a valid member id: not ranked, not refused."""
    response = client.request(method, route.format(m="%EF%BF%BD"), headers=AUTH)
    if method == "DELETE" or route.endswith("/history"):
        assert response.status_code == 200
        assert response.json()["member"] == "\ufffd"
    else:
        _is_error(response, 404, "not_ranked")
    ranked = client.request(method, route.format(m="p001"), headers=AUTH)
    assert ranked.status_code == 200, ranked.text  # the control: a seeded member


def test_http_path_members_through_a_real_server(
    settings: Settings, app: Seasons, r: redis.Redis
) -> None:
    """uvicorn, not the test transport, decodes the path: the same answers."""
    import httpx
    from http_support import serving

    before = digest(r)
    with serving(create_app(settings, app=app)) as base, httpx.Client(base_url=base) as http:
        for escaped, named in BAD_PATH_MEMBERS:
            for method, route in MEMBER_ROUTES:
                if method == "DELETE" and escaped in ERASABLE:
                    continue
                response = http.request(method, route.format(m=escaped), headers=AUTH)
                assert named in _is_error(response, 422, "invalid_member")["message"]
        response = http.get(MEMBER_ROUTES[0][1].format(m="%EF%BF%BD"))
        _is_error(response, 404, "not_ranked")
    assert digest(r) == before


# --- CLI --------------------------------------------------------------------------------------


@pytest.fixture
def env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    toml = tmp_path / "cli.toml"
    boards = "\n".join(
        f'[boards.{name}]\naggregate = "{b["aggregate"]}"\norder = "{b.get("order", "desc")}"'
        for name, b in SETTINGS["boards"].items()
    )
    toml.write_text(
        f'[seasons]\nlength_days = 14\nanchor = "2035-05-14"\n{boards}\n'
        f'[archive]\ndir = "{settings.archive.dir}"\n'
    )
    cleared = {k: "" for k in os.environ if k.startswith("SEASONS_")}
    return {**cleared, "SEASONS_CONFIG": str(toml), "SEASONS_REDIS__URL": settings.redis.url}


def _cli(env: dict[str, str], *args: str, input: str | None = None) -> Result:
    clean = {k: (v or None) for k, v in env.items()}
    result = CliRunner().invoke(
        cli, list(args), input=input, env=clean, obj=CliState(clock=ManualClock(START))
    )
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit
    ), repr(result.exception)
    assert "Traceback" not in result.output
    return result


CLI_BAD_INPUT: list[tuple[list[str], str]] = [
    (["submit", "kills", "ann", str(HUGE)], "value"),
    (["submit", "kills", "ann", "--", str(-HUGE)], "value"),
    (["submit", "kills", "ann", "1e400"], "value"),
    (["submit", "kills", "ann", "9" * 5000], "value"),
    (["submit", "kills", "ann", "1", "--ts", str(HUGE)], "ts"),
    (["submit", "kills", "ann", "1", "--meta", f"level={HUGE}"], "metadata"),
    (["submit", "kills", "ad\u200bmin", "1"], "U+200B"),
    (["submit", "kills", "\udcff", "1"], "0xFF"),
    (["rank", "kills", "ad\u200bmin"], "U+200B"),
    (["rank", "kills", "\u202enimda", "--window", "day"], "U+202E"),
    (["around", "kills", "\udcff"], "0xFF"),
    (["history", "kills", "a\u2066b"], "U+2066"),
    (["forget", "p\x00001"], "U+0000"),
    (["forget", ""], "empty"),
]


@pytest.mark.parametrize(("args", "named"), CLI_BAD_INPUT)
def test_cli_bad_input_is_exit_2_without_a_traceback(
    app: Seasons, env: dict[str, str], r: redis.Redis, args: list[str], named: str
) -> None:
    before = digest(r)
    result = _cli(env, *args)
    assert result.exit_code == 2, result.output
    assert named in result.stderr
    assert digest(r) == before


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("huge.jsonl", json.dumps({**ANN, "value": HUGE})),
        ("nan.jsonl", json.dumps({**ANN, "value": float("nan")})),
        ("meta.jsonl", json.dumps({**ANN, "metadata": {"n": HUGE}})),
        ("surrogate.jsonl", json.dumps({**ANN, "member": "\ud800"})),
        ("format.jsonl", json.dumps({**ANN, "member": "ad\u200bmin"})),
        ("huge.csv", f"board,member,value\nkills,ann,{HUGE}\n"),
        ("ts.csv", f"board,member,value,ts\nkills,ann,1,{HUGE}\n"),
    ],
)
def test_cli_import_of_bad_numbers_and_text_is_exit_2(
    app: Seasons, env: dict[str, str], r: redis.Redis, tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    # A valid line first: the whole file is refused, not only its bad line.
    ok = json.dumps({**ANN, "member": "ok"}) + "\n" if name.endswith(".jsonl") else ""
    path.write_text(ok + text + "\n" if ok else text)
    before = digest(r)
    result = _cli(env, "import", str(path))
    assert result.exit_code == 2, result.output
    assert digest(r) == before


def test_cli_in_a_real_process(app: Seasons, env: dict[str, str], r: redis.Redis) -> None:
    """argv that is not UTF-8 and a 401-digit value, through the installed console script:
    both problems on stderr, exit status 2, no traceback, nothing written."""
    exe = Path(sys.executable).with_name("seasons")
    environ = {k: v for k, v in {**os.environ, **env}.items() if v}
    before = digest(r)
    argv = [os.fsencode(exe), b"submit", b"kills", b"p0\xff01", str(HUGE).encode()]
    done = subprocess.run(argv, env=environ, capture_output=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"0xFF" in done.stderr and b"2^53" in done.stderr, done.stderr
    assert digest(r) == before


def test_invalid_input_is_the_base_of_these_errors() -> None:
    assert issubclass(InvalidMember, InvalidInput) and issubclass(BatchRejected, InvalidInput)


def test_a_member_stored_before_the_format_rule_can_still_be_erased(
    app: Seasons, client: TestClient, r: redis.Redis
) -> None:
    """Reads refuse ``ad\u200bmin``, but an older Seasons may hold it: erasure must reach it,
    through the Python API and the DELETE route alike."""
    from seasons.jobs.registry import sweeper_of

    legacy = {"py": "ad\u200bmin", "http": "\u202enimda"}
    day = app.keys.day("kills", app.clock().date())
    for member in legacy.values():  # as an older version stored them
        r.zadd(day, {member.encode(): 7})
        r.hset(app.keys.meta("kills"), member.encode(), b'{"name":"x"}')
    sweeper_of(app.backend).forget(legacy["py"], app.clock())
    response = client.delete("/v1/admin/members/%E2%80%AEnimda", headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json()["member"] == legacy["http"]
    for member in legacy.values():
        assert r.zscore(day, member.encode()) is None
        assert r.hget(app.keys.meta("kills"), member.encode()) is None
