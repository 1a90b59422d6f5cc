"""The fast path of the hot reads: a raw ASGI layer that answers them before FastAPI does.

FastAPI's routing, dependency resolution and validation cost more CPU per request than the
read itself (``docs/http-performance.md``). This layer sits inside the metrics middleware and
the guard (so limits, access and request metrics are exactly as for any request) and in
front of the FastAPI app. For a ``GET`` of a page, around a rank, around a member, a member's
entry or history, a ``POST`` of a lookup (and ``/healthz``) it finds the route the router
would find (the guard's :class:`Rules`, the router's own patterns in its order), reads the
query (and the lookup's body) itself, prepares the same read as the FastAPI route
(:mod:`seasons.http.boards`) and sends the script's JSON.

Anything it does not take in plainly -- a query value that is not plain digits where a
number goes, a percent-encoded or repeated parameter, a member id that came with bytes that
are not UTF-8, a lookup body that is not ``{"members": [...]}``, a ``root_path`` -- goes to
the FastAPI app untouched (the body it read handed on as it came), so every error body and
status stays the one FastAPI gives. Errors of the read itself (unknown board, limits, not
ranked, Redis away) are answered with the same response as the app's handlers give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from seasons.errors import SeasonsError
from seasons.http import boards, health
from seasons.http.deps import Services
from seasons.http.errors import response_of
from seasons.http.guard import Rules
from seasons.http.guard import replay as _replay
from seasons.reads import Read

_PREFIX = "/v1/boards/"
_METHODS = ("GET", "POST")
_HEALTHZ = "/healthz"
_JSON = (b"content-type", b"application/json")
# Longest run of digits taken as a number here; longer ones go to FastAPI's validation.
_DIGITS = 18

Params = dict[str, str]
Query = dict[str, str]
# A fast read: path parameters, query and request body -> the prepared read (or a body that
# needs no read), or None to hand the request to FastAPI.
Prepare = Callable[[Services, Params, Query, bytes], Read[Any] | bytes | None]


def _int(query: Query, name: str, default: int) -> int | None:
    value = query.get(name)
    if value is None:
        return default
    if not value.isdigit() or not value.isascii() or len(value) > _DIGITS:
        return None
    return int(value)


def _member(params: Params) -> str | None:
    member = params["member"]
    # U+FFFD may stand for bytes that are not UTF-8: boards.path_member tells them apart.
    return None if "\ufffd" in member else member


def _page(services: Services, params: Params, query: Query, body: bytes) -> Read[Any] | None:
    limit, offset = _int(query, "limit", 10), _int(query, "offset", 0)
    if limit is None or offset is None:
        return None
    period = query.get("period", "current")
    return boards.top(services, params["board"], params["window"], period, limit, offset)


def _around_rank(services: Services, params: Params, query: Query, body: bytes) -> Read[Any] | None:
    rank, size = _int(params, "rank", 0), _int(query, "size", 5)
    if rank is None or size is None:
        return None
    period = query.get("period", "current")
    return boards.ranked(services, params["board"], params["window"], rank, size, period)


def _around_member(
    services: Services, params: Params, query: Query, body: bytes
) -> Read[Any] | None:
    member, size = _member(params), _int(query, "size", 5)
    if member is None or size is None:
        return None
    period = query.get("period", "current")
    return boards.around(services, params["board"], params["window"], member, size, period)


def _entry(services: Services, params: Params, query: Query, body: bytes) -> Read[Any] | None:
    member = _member(params)
    if member is None:
        return None
    period = query.get("period", "current")
    return boards.entry(services, params["board"], params["window"], member, period)


def _history(services: Services, params: Params, query: Query, body: bytes) -> Read[Any] | None:
    member, last = _member(params), _int(query, "last", 14)
    if member is None or last is None:
        return None
    window = query.get("window", "day")
    return boards.history(services, params["board"], member, window, last)


def _lookup(services: Services, params: Params, query: Query, body: bytes) -> Read[Any] | None:
    try:
        members = boards.LookupIn.model_validate_json(body).members
    except ValidationError:
        return None  # FastAPI's 422, with its own wording
    period = query.get("period", "current")
    return services.seasons.reads.lookup(params["board"], params["window"], members, period)


_HEALTHY = health.Health.__pydantic_serializer__.to_json(health.Health(status="ok"))


def _healthz(services: Services, params: Params, query: Query, body: bytes) -> bytes:
    return _HEALTHY  # what the route answers, without the route (load balancers poll it)


# The FastAPI route each fast read stands in for, and the query parameters it takes.
FAST_READS: dict[Callable[..., Any], tuple[Prepare, frozenset[str]]] = {
    boards.lookup: (_lookup, frozenset({"period"})),
    boards.page: (_page, frozenset({"period", "limit", "offset"})),
    boards.around_rank: (_around_rank, frozenset({"size", "period"})),
    boards.around_member: (_around_member, frozenset({"size", "period"})),
    boards.member_entry: (_entry, frozenset({"period"})),
    boards.member_history: (_history, frozenset({"window", "last"})),
    health.healthz: (_healthz, frozenset()),
}


def parse_query(query_string: bytes, names: frozenset[str]) -> Query | None:
    """The query as FastAPI would read it, when that is plain: ``name=value`` pairs of the
    route's names, none repeated, nothing percent-encoded; else None."""
    if not query_string:
        return {}
    if b"%" in query_string or b"+" in query_string:
        return None
    out: Query = {}
    for part in query_string.decode("latin-1").split("&"):
        if not part:
            continue  # as parse_qsl does
        name, eq, value = part.partition("=")
        if not eq or not value or name not in names or name in out:
            return None
        out[name] = value
    return out


class FastReads:
    """The ASGI layer (see the module's doc). Add it inside the guard."""

    def __init__(self, app: ASGIApp, services: Services, rules: Rules):
        self.app = app
        self.services = services
        self.rules = rules
        # By the route's id: FastAPI's routes are not hashable.
        self._reads = {
            id(rule.route): FAST_READS[rule.route.endpoint]
            for rule in rules.all
            if getattr(rule.route, "endpoint", None) in FAST_READS
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in _METHODS
            or not (scope["path"].startswith(_PREFIX) or scope["path"] == _HEALTHZ)
            or scope.get("root_path")
        ):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        rule = self.rules.find(scope["method"], path)
        fast = self._reads.get(id(rule.route)) if rule is not None else None
        if rule is None or fast is None:
            await self.app(scope, receive, send)
            return
        prepare, names = fast
        query = parse_query(scope["query_string"], names)
        found = rule.regex.match(path)
        if query is None or found is None:
            await self.app(scope, receive, send)
            return
        body = await _body(receive) if rule.body else b""
        if body is None:
            return  # the client went away
        try:
            read = prepare(self.services, found.groupdict(), query, body)
            if read is None:
                await self.app(scope, _replay(body, receive) if rule.body else receive, send)
                return
            answer = read if isinstance(read, bytes) else await self.services.body(read)
        except SeasonsError as exc:
            scope["route"] = rule.route  # the metrics' label
            await response_of(exc)(scope, receive, send)
            return
        scope["route"] = rule.route
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(len(answer)).encode()), _JSON],
            }
        )
        await send({"type": "http.response.body", "body": answer})


async def _body(receive: Receive) -> bytes | None:
    """The request body (the guard has checked its size and type), or None if the client
    went away."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
