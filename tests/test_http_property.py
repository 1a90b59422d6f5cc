"""Property: whatever JSON value any field, query parameter or path parameter of any route
holds, the answer is a 2xx or a 4xx, never a 5xx; every 4xx is the error JSON
``{"error", "message", "details"}`` and leaves the database (``DEBUG DIGEST``) and the archive
files exactly as they were.

The routes come from the app's own OpenAPI schema, so a new route is covered without touching
this file. Values are drawn from ``st.recursive`` over None, booleans, integers of any size,
floats (NaN, infinities, -0.0, huge, subnormal), strings with lone surrogates, control and
format characters, lists and objects; path and query values are those values as text,
percent-encoded byte for byte (a lone surrogate becomes ``%ED%A0%80``), or raw escapes that are
not UTF-8 (``%FF``). Every field also draws plausible values (a configured board, a seeded
member), so requests get past the first check often enough to reach the deeper ones.

Requests carry the admin token (accepted for writes too), so authentication is not what
refuses them. The app runs in-process on a redis-server of this module's own, seeded once;
2xx answers may change the data (writes, erasures, rollups), 4xx answers must not.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, seed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis_server import RedisServer

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings, load_settings
from seasons.http.app import create_app

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ERROR_KEYS = {"error", "message", "details"}

# --- arbitrary JSON values -------------------------------------------------------------------

# Characters that break naive handling: lone surrogates (as JSON "\ud800" escapes), Python's
# surrogateescape range, controls, format characters (zero-width, bidi, BOM, soft hyphen),
# separators, the replacement character, a non-BMP character.
TRICKY = "\ud800\udfff\udcff\x00\x1f\x7f\x85\u200b\u200d\u202e\u2066\ufeff\u00ad\u2028\ufffd😀é/"
CHARS = st.characters(exclude_categories=()) | st.sampled_from(TRICKY)
TEXTS = (
    st.builds(
        lambda a, c, b: a + c + b, st.text(max_size=4), st.sampled_from(TRICKY), st.text(max_size=4)
    )
    | st.text(CHARS, max_size=12)
    | st.sampled_from(["", " ", "a" * 129, "é" * 65, "current", "S3", "S3@x", "null", "1e400"])
    | st.builds(lambda c, n: c * n, st.sampled_from("a\u200bé"), st.integers(100, 400))
)
NUMBERS = (
    st.integers()
    | st.integers(min_value=-(10**600), max_value=10**600)  # JSON text stays < 4300 digits
    | st.floats()
    | st.sampled_from([0.0, -0.0, 2.0**53, 2.0**53 + 2, -(2**53) - 1, 1e308, -1e308, 5e-324])
)
# The values that broke an interface once, drawn often (and found among the others too).
NASTY = st.sampled_from(
    [10**400, -(10**400), float("nan"), float("inf"), float("-inf"), -0.0, 1e308, 2**53 + 1,
     "\ud800", "a\udcffb", "\udfff\ud800", "ad\u200bmin", "\u202enimda", "a\x00b", "",
     "a" * 129, "9" * 400, {"\ud800": 1}, ["\ud800"]]
)  # fmt: skip
SCALARS = st.none() | st.booleans() | NUMBERS | TEXTS | NASTY
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXTS, inner, max_size=4),
    max_leaves=8,
)
# For a field that is a string (every path parameter, too): more strings.
TEXTISH = TEXTS | NASTY | JSON_VALUES
ANY = NASTY | JSON_VALUES

# Plausible values by field or parameter name, so that requests also get past the first check.
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "board": st.sampled_from(["kills", "laps"]),
    "window": st.sampled_from(["day", "week", "season", "all"]),
    "member": st.sampled_from(["p001", "p002", "p003", "fresh"]),
    "period": st.sampled_from(["current", "previous", "S2", "S3", "2035-06-13", "2035-06-11"]),
    "season": st.sampled_from(["S3", "S2", "S9"]),
    "rank": st.integers(1, 30),
    "limit": st.integers(1, 20),
    "offset": st.integers(0, 20),
    "size": st.integers(1, 9),
    "last": st.integers(1, 5),
    "value": st.integers(0, 50),
    "ts": st.sampled_from([None, START.isoformat(), START.timestamp()]),
    "event_id": st.text("abc", min_size=1, max_size=3),
    "metadata": st.sampled_from([{}, {"name": "Ann"}, {"level": 3, "old": None}]),
    "days": st.integers(1, 3),
    "players": st.integers(1, 3),
}
# Percent-escapes that are not UTF-8, or that decode to something a route must refuse.
RAW_SEGMENTS = st.sampled_from(
    ["%FF", "%ED%A0%80", "a%FFb", "%C3", "%C0%AF", "%00", "a%E2%80%8Bb", "%E2%80%AE", "%EF%BF%BD"]
)


def _chance(n: int) -> st.SearchStrategy[bool]:
    """True about once in ``n`` draws. (Hypothesis favours the simplest choice, ``0`` of
    ``integers(0, n)`` or the first element of ``sampled_from``: here that is False.)"""
    return st.sampled_from([False] * (n - 1) + [True])


# What a request makes arbitrary besides its fields: the whole body, an unknown field or
# query parameter.
BODY, EXTRA = "<body>", "<extra>"


def _value(name: str, wild: frozenset[str], text: bool = False) -> st.SearchStrategy[Any]:
    """Any value for a wild field (a string more often if ``text``), else a plausible one
    (any value where there is no plausible one)."""
    plausible = PLAUSIBLE.get(name)
    if name in wild or plausible is None:
        return TEXTISH if text else ANY
    return plausible


def _as_text(value: Any) -> str:
    """How a JSON value travels in a path or query: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _escape(text: str) -> str:
    # surrogatepass: a lone surrogate goes out as its 3 bytes, which are not UTF-8.
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


# --- the routes, from the OpenAPI schema ------------------------------------------------------


def _schema() -> dict[str, Any]:
    return create_app(Settings(**SETTINGS)).openapi()


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _item_name(name: str) -> str:
    return name[:-1] if name.endswith("s") else name  # "members" -> "member"


def _body_fields(schema: dict[str, Any], node: Any, name: str = "") -> set[str]:
    """The names of every field a body schema has, at any depth."""
    node = _resolve(schema, node)
    if not isinstance(node, dict):
        return set()
    found = {name} if name else set()
    for option in node.get("anyOf", []):
        found |= _body_fields(schema, option, name)
    for key, sub in node.get("properties", {}).items():
        found |= _body_fields(schema, sub, key)
    if "items" in node:
        found |= _body_fields(schema, node["items"], _item_name(name))
    return found


def _body(
    schema: dict[str, Any], node: Any, wild: frozenset[str], name: str = ""
) -> st.SearchStrategy[Any]:
    """A body of the schema's shape: wild fields arbitrary, the others plausible; required
    fields present, optional ones maybe; unknown fields if EXTRA is wild."""
    node = _resolve(schema, node)
    if name in wild or not isinstance(node, dict):
        return _value(name, wild, isinstance(node, dict) and node.get("type") == "string")
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
    if options:
        return st.one_of([_body(schema, o, wild, name) for o in options])
    if node.get("type") == "object" and "properties" in node:
        props = {key: _body(schema, sub, wild, key) for key, sub in node["properties"].items()}
        required = set(node.get("required", ()))
        shaped = st.fixed_dictionaries(
            {k: v for k, v in props.items() if k in required or k in wild},
            optional={k: v for k, v in props.items() if k not in required and k not in wild},
        )
        if EXTRA not in wild:
            return shaped
        extra = st.dictionaries(TEXTS, ANY, min_size=1, max_size=2)
        return st.builds(lambda a, b: {**b, **a}, shaped, extra)
    if node.get("type") == "array":
        item = _body(schema, node.get("items", {}), wild, _item_name(name))
        return st.lists(item, min_size=1, max_size=3)
    return _value(name, wild, node.get("type") == "string")


def _routes() -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, ops in _schema()["paths"].items()
        for method in ops
        if method in ("get", "post", "put", "patch", "delete")
    ]


def _json_body(op: dict[str, Any]) -> Any:
    return op.get("requestBody", {}).get("content", {}).get("application/json")


def _fields(op: dict[str, Any]) -> list[str]:
    """What a request to ``op`` can make arbitrary: each parameter, each body field at any
    depth, the body as a whole, an unknown field or parameter."""
    content = _json_body(op)
    body = _body_fields(_schema_cache(), content["schema"]) | {BODY} if content else set()
    return sorted({p["name"] for p in op.get("parameters", [])} | body | {EXTRA})


@st.composite
def _requests(draw: st.DrawFn, method: str, path: str) -> dict[str, Any]:
    """One request to ``method path``: one or two of its fields (parameters, body fields at
    any depth, the body as a whole, an unknown field) arbitrary and the others plausible,
    so that every field's own checks are reached; now and then every field arbitrary, or
    none."""
    schema = _schema_cache()
    op = schema["paths"][path][method.lower()]
    content = _json_body(op)
    fields = _fields(op)
    how = draw(st.sampled_from(["one", "two", "one", "none", "two", "one", "all"]))
    if how == "all":
        wild = frozenset(fields)
    elif how == "none":  # a plausible request: the 2xx paths (writes, erasures) run too
        wild = frozenset()
    else:
        size = 1 if how == "one" else min(2, len(fields))
        wild = frozenset(draw(st.sets(st.sampled_from(fields), min_size=size, max_size=size)))
    url = path
    query: list[str] = []
    headers = dict(AUTH)
    for param in op.get("parameters", []):
        name, where = param["name"], param["in"]
        mad = name in wild
        if where == "path":
            raw = draw(RAW_SEGMENTS) if mad and draw(_chance(4)) else None
            # Not empty: an empty segment is another URL, not a value of the parameter.
            value = raw or _escape(_as_text(draw(_value(name, wild, text=True)))) or "%20"
            url = url.replace("{" + name + "}", value)
        elif where == "query" and (mad or draw(st.booleans())):
            raw = draw(RAW_SEGMENTS) if mad and draw(_chance(4)) else None
            is_text = param["schema"].get("type") == "string"
            value = raw or _escape(_as_text(draw(_value(name, wild, is_text))))
            query.append(f"{name}={value}")
        elif where == "header" and (mad or draw(st.booleans())):
            headers[name] = draw(st.text(st.characters(min_codepoint=32, max_codepoint=126)))
    if EXTRA in wild and draw(st.booleans()):  # a query parameter the route does not take
        query.append(f"{_escape(draw(TEXTS)) or 'x'}=1")
    if query:
        url += "?" + "&".join(query)
    body = None
    if content is not None and not (BODY in wild and draw(_chance(4))):
        value = draw(ANY if BODY in wild else _body(schema, content["schema"], wild))
        # ensure_ascii: lone surrogates travel as \udXXX escapes; NaN/Infinity as Python's.
        body = json.dumps(value, ensure_ascii=True).encode()
        headers["content-type"] = "application/json"
    return {"method": method, "url": url, "headers": headers, "content": body}


_SCHEMA: dict[str, Any] = {}


def _schema_cache() -> dict[str, Any]:
    if not _SCHEMA:
        _SCHEMA.update(_schema())
    return _SCHEMA


def _examples(method: str, path: str) -> int:
    """The profile's examples plus a quarter as many again per field (each example makes
    one or two fields arbitrary); a few for a route that takes no input, which only varies
    by an unknown query parameter."""
    op = _schema_cache()["paths"][path][method.lower()]
    full = settings.default.max_examples
    if not (op.get("parameters") or op.get("requestBody")):
        return max(3, full // 10)
    return full + full // 4 * (len(_fields(op)) - 1)


# --- the app under test -----------------------------------------------------------------------


class Target:
    """The app in-process on a redis-server of its own, and what a 4xx must leave alone."""

    def __init__(self, server: RedisServer, archive: Path, client: TestClient):
        self.redis = server.client()
        self.archive = archive
        self.client = client

    def state(self) -> tuple[Any, dict[str, tuple[int, int]]]:
        files = {
            str(p): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(self.archive.rglob("*"))
            if p.is_file()
        }
        return self.redis.execute_command("DEBUG", "DIGEST"), files


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    archive = tmp_path_factory.mktemp("property") / "archive"
    with RedisServer() as server:
        cfg = load_settings(
            environ={},
            path=None,
            redis={"url": server.url},
            archive={"dir": str(archive)},
            api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN},
            **SETTINGS,
        )
        with Seasons(cfg, clock=ManualClock(START)) as app:
            seed(app, days=4, players=12)
            app.client.set(app.keys.heartbeat(), "property", ex=24 * 3600)  # /readyz: ready
            client = TestClient(create_app(cfg, app=app), raise_server_exceptions=False)
            with client:
                yield Target(server, archive, client)


def _check(target: Target, request: dict[str, Any]) -> None:
    """The property, for one request."""
    before = target.state()
    response = target.client.request(**request)
    status = response.status_code
    shown = f"{request['method']} {request['url']} {request['content']!r:.300}"
    assert status < 500, f"{status} for {shown}: {response.text[:300]}"
    assert 200 <= status < 300 or 400 <= status < 500, f"{status} for {shown}"
    if status >= 400:
        body = response.json()
        assert isinstance(body, dict) and set(body) == ERROR_KEYS, (shown, body)
        assert isinstance(body["error"], str) and isinstance(body["message"], str)
        assert target.state() == before, f"a {status} changed the data: {shown}"


@pytest.mark.parametrize(("method", "path"), _routes())
def test_any_input_is_answered_2xx_or_4xx(target: Target, method: str, path: str) -> None:
    @given(request=_requests(method, path))
    @settings(
        max_examples=_examples(method, path),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    def run(request: dict[str, Any]) -> None:
        _check(target, request)

    run()


# --- every field with every value that once broke an interface ---------------------------------

# One plausible value per name: what every other field holds while one is set to a bad value.
FIXED: dict[str, Any] = {
    "board": "kills", "window": "week", "member": "p001", "period": "current", "season": "S3",
    "rank": 1, "limit": 5, "offset": 0, "size": 3, "last": 3, "value": 1,
    "ts": START.isoformat(), "event_id": "sweep", "metadata": {"name": "Ann"}, "days": 1,
    "players": 1,
}  # fmt: skip
BAD: list[Any] = [
    10**400, float("nan"), float("-inf"), 2**53 + 1, "\ud800", "a\udcffb", "ad\u200bmin",
    "\u202enimda", "a\x00b", "", "a" * 129, None, {"\ud800": 1}, ["\ud800"],
]  # fmt: skip


def _fixed_body(schema: dict[str, Any], node: Any, field: str, bad: Any, name: str = "") -> Any:
    node = _resolve(schema, node)
    if name == field:
        return bad
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
    if options:
        return _fixed_body(schema, options[0], field, bad, name)
    if node.get("type") == "object" and "properties" in node:
        return {
            key: _fixed_body(schema, sub, field, bad, key)
            for key, sub in node["properties"].items()
            if key in FIXED or key == field or key in node.get("required", ())
            or _body_fields(schema, sub) & {field}
        }  # fmt: skip
    if node.get("type") == "array":
        return [_fixed_body(schema, node.get("items", {}), field, bad, _item_name(name))]
    return FIXED.get(name)


def _fixed_request(method: str, path: str, field: str, bad: Any) -> dict[str, Any] | None:
    """``method path`` with every field plausible but ``field``, which holds ``bad``; None
    where ``bad`` cannot travel there (a header takes ASCII text only)."""
    schema = _schema_cache()
    op = schema["paths"][path][method.lower()]
    url, query, headers = path, [], dict(AUTH)
    for param in op.get("parameters", []):
        name, where = param["name"], param["in"]
        value = bad if name == field else FIXED.get(name)
        if where == "header":
            if name == field:
                text = _as_text(bad)
                if not text.isascii() or not text.isprintable():
                    return None
                headers[name] = text
        elif where == "path":
            url = url.replace("{" + name + "}", _escape(_as_text(value)) or "%20")
        elif value is not None or name == field:
            query.append(f"{name}={_escape(_as_text(value))}")
    if query:
        url += "?" + "&".join(query)
    body = None
    content = _json_body(op)
    if content is not None:
        value = bad if field == BODY else _fixed_body(schema, content["schema"], field, bad)
        body = json.dumps(value, ensure_ascii=True).encode()
        headers["content-type"] = "application/json"
    return {"method": method, "url": url, "headers": headers, "content": body}


def _fields_of_routes() -> list[tuple[str, str, str]]:
    return [
        (method, path, field)
        for method, path in _routes()
        for field in _fields(_schema_cache()["paths"][path][method.lower()])
        if field != EXTRA
    ]


@pytest.mark.parametrize(("method", "path", "field"), _fields_of_routes())
def test_every_field_takes_every_bad_value(
    target: Target, method: str, path: str, field: str
) -> None:
    for bad in BAD:
        request = _fixed_request(method, path, field, bad)
        if request is not None:
            _check(target, request)
