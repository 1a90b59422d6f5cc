"""The fast path of the hot requests: a raw ASGI layer that answers them before FastAPI does.

FastAPI's routing, dependency resolution and validation cost more CPU per request than the
read itself (``docs/benchmarks.md``). This layer sits inside the metrics middleware and
the guard (so limits, access and request metrics are exactly as for any request) and in
front of the FastAPI app. For a ``GET`` of a page, around a rank, around a member, a member's
entry, climb or history, a league's cohort of a member, a cohort by id or a league's overview,
a ``POST`` of a lookup (and ``/healthz``) it finds the route the router
would find (the guard's :class:`Rules`, the router's own patterns in its order), reads the
query (and the lookup's body) itself, prepares the same read as the FastAPI route
(:mod:`seasons.http.boards`) and sends the script's JSON. A ``POST /v1/scores`` runs the
route's own write (:func:`seasons.http.scores.record`) with the body and ``Idempotency-Key``
read here.

Anything it does not take in plainly -- a query value that is not plain digits where a
number goes, a percent-encoded or repeated parameter, a member id that came with bytes that
are not UTF-8, a body that is not the route's plain JSON, a ``root_path`` -- goes to
the FastAPI app untouched (the body it read handed on as it came), so every error body and
status stays the one FastAPI gives; a body that is not JSON at all is answered here with the
app's own 400 ``invalid_json`` (:func:`seasons.http.errors.not_json`). Errors of the read
itself (unknown board, limits, not ranked, Redis away) are answered with the same response
as the app's handlers give.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from seasons.errors import SeasonsError
from seasons.http import boards, health, leagues, scores
from seasons.http.deps import GUARDED, Services
from seasons.http.errors import not_json, response_of
from seasons.http.guard import Rules
from seasons.http.guard import replay as _replay
from seasons.models import WriteResult
from seasons.read_limits import DEFAULT_TO_TEXT
from seasons.reads import Read

_PREFIXES = ("/v1/boards/", "/v1/leagues/")
_METHODS = ("GET", "POST")
_PATHS = ("/healthz", "/v1/scores")
_JSON = (b"content-type", b"application/json")
# Longest run of digits taken as a number here; longer ones go to FastAPI's validation.
_DIGITS = 18

Params = dict[str, str]
Query = dict[str, str]
# What a fast handler makes of a request: a prepared read, a body that needs no Redis, the
# body of a write under way, or None to hand the request to FastAPI.
Answer = Read[Any] | bytes | Awaitable[bytes] | None


@dataclass(frozen=True, slots=True)
class Asked:
    """A request as the fast path read it."""

    params: Params  # path parameters
    query: Query
    body: bytes
    scope: Scope

    def header(self, name: bytes) -> str | None:
        """The first value of a header (``name`` in lower case), decoded as Latin-1 as
        Starlette does."""
        for key, value in self.scope["headers"]:
            if key == name:
                return str(value.decode("latin-1"))
        return None


Handler = Callable[[Services, Asked], Answer]


# A query parameter not given, where the read has a default of its own (never a value: _int
# answers digits only).
_ABSENT = -1


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


def _page(services: Services, asked: Asked) -> Answer:
    q = asked.query
    limit, offset = _int(q, "limit", 10), _int(q, "offset", 0)
    if limit is None or offset is None:
        return None
    board, window = asked.params["board"], asked.params["window"]
    return boards.top(services, board, window, q.get("period", "current"), limit, offset)


def _around_rank(services: Services, asked: Asked) -> Answer:
    q = asked.query
    rank, size = _int(asked.params, "rank", 0), _int(q, "size", 5)
    if rank is None or size is None:
        return None
    board, window = asked.params["board"], asked.params["window"]
    return boards.ranked(services, board, window, rank, size, q.get("period", "current"))


def _around_member(services: Services, asked: Asked) -> Answer:
    q = asked.query
    member, size = _member(asked.params), _int(q, "size", 5)
    if member is None or size is None:
        return None
    board, window = asked.params["board"], asked.params["window"]
    return boards.around(services, board, window, member, size, q.get("period", "current"))


def _entry(services: Services, asked: Asked) -> Answer:
    member = _member(asked.params)
    if member is None:
        return None
    board, window = asked.params["board"], asked.params["window"]
    return boards.entry(services, board, window, member, asked.query.get("period", "current"))


def _climb(services: Services, asked: Asked) -> Answer:
    member = _member(asked.params)
    if member is None:
        return None
    q = asked.query
    board, window = asked.params["board"], asked.params["window"]
    to, period = q.get("to", DEFAULT_TO_TEXT), q.get("period", "current")
    return boards.climb(services, board, window, member, to, period)


def _history(services: Services, asked: Asked) -> Answer:
    q = asked.query
    member, last = _member(asked.params), _int(q, "last", _ABSENT)
    if member is None or last is None:
        return None
    window = q.get("window", "day")
    return boards.history(
        services, asked.params["board"], member, window, None if last == _ABSENT else last
    )


def _lookup(services: Services, asked: Asked) -> Answer:
    try:
        members = boards.LookupIn.model_validate_json(asked.body).members
    except ValidationError:
        _refuse_if_not_json(asked.body)
        return None
    board, window = asked.params["board"], asked.params["window"]
    period = asked.query.get("period", "current")
    return services.seasons.reads.lookup(board, window, members, period)


def _league_member(services: Services, asked: Asked) -> Answer:
    member = _member(asked.params)
    if member is None:
        return None
    period = asked.query.get("period", "current")
    return services.seasons.league_reads.member(asked.params["board"], member, period)


def _league_cohort(services: Services, asked: Asked) -> Answer:
    cohort = _int(asked.params, "cohort", 0)
    if not cohort:  # not digits, or 0: FastAPI's validation words it
        return None
    board, period = asked.params["board"], asked.params["period"]
    return services.seasons.league_reads.cohort(board, cohort, period)


def _league_overview(services: Services, asked: Asked) -> Answer:
    period = asked.query.get("period", "current")
    return services.seasons.league_reads.overview(asked.params["board"], period)


def _refuse_if_not_json(body: bytes) -> None:
    """A body the route's model refused: not JSON at all is answered here, as the app's
    handlers answer it (400 invalid_json); JSON of another shape goes to FastAPI for its
    422 naming the field."""
    found = not_json(body)
    if found is not None:
        raise found


_WRITTEN = WriteResult.__pydantic_serializer__


def _scores(services: Services, asked: Asked) -> Answer:
    if asked.scope.get(GUARDED) != "write":
        return None  # the route's own check answers (it fails closed)
    try:
        body = scores.ScoresIn.model_validate_json(asked.body)
    except ValidationError:
        _refuse_if_not_json(asked.body)
        return None
    returned = asked.query.get("return")
    if returned not in (None, "standing"):
        return None  # the route refuses it, as FastAPI words it
    header = asked.header(_IDEMPOTENCY_KEY)
    batch_id = None if header is None else scores.batch_id_of(header)
    standing = scores.standing_of(body, returned, asked.query.get("window"))

    async def write() -> bytes:
        # The write path is blocking (redis-py): in the threadpool, as FastAPI runs the route.
        args = (services.seasons, services.metrics, body.events, batch_id, standing)
        result = await run_in_threadpool(scores.record, *args)
        return bytes(_WRITTEN.to_json(result))

    return write()


_IDEMPOTENCY_KEY = scores.IDEMPOTENCY_KEY.lower().encode()
_HEALTHY = health.Health.__pydantic_serializer__.to_json(health.Health(status="ok"))


def _healthz(services: Services, asked: Asked) -> Answer:
    return _HEALTHY  # what the route answers, without the route (load balancers poll it)


# The FastAPI route each fast handler stands in for, and the query parameters it takes.
FAST: dict[Callable[..., Any], tuple[Handler, frozenset[str]]] = {
    boards.lookup: (_lookup, frozenset({"period"})),
    boards.page: (_page, frozenset({"period", "limit", "offset"})),
    boards.around_rank: (_around_rank, frozenset({"size", "period"})),
    boards.around_member: (_around_member, frozenset({"size", "period"})),
    boards.member_entry: (_entry, frozenset({"period"})),
    boards.member_climb: (_climb, frozenset({"to", "period"})),
    boards.member_history: (_history, frozenset({"window", "last"})),
    leagues.member_cohort: (_league_member, frozenset({"period"})),
    leagues.cohort: (_league_cohort, frozenset()),
    leagues.overview: (_league_overview, frozenset({"period"})),
    scores.post_scores: (_scores, frozenset({"return", "window"})),
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
        self._handlers = {
            id(rule.route): FAST[rule.route.endpoint]
            for rule in rules.all
            if getattr(rule.route, "endpoint", None) in FAST
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in _METHODS
            or not (scope["path"].startswith(_PREFIXES) or scope["path"] in _PATHS)
            or scope.get("root_path")
        ):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        rule = self.rules.find(scope["method"], path)
        fast = self._handlers.get(id(rule.route)) if rule is not None else None
        if rule is None or fast is None:
            await self.app(scope, receive, send)
            return
        handle, names = fast
        query = parse_query(scope["query_string"], names)
        found = rule.regex.match(path)
        if query is None or found is None:
            await self.app(scope, receive, send)
            return
        body = await _body(receive) if rule.body else b""
        if body is None:
            return  # the client went away
        try:
            got = handle(self.services, Asked(found.groupdict(), query, body, scope))
            if got is None:
                await self.app(scope, _replay(body, receive) if rule.body else receive, send)
                return
            if isinstance(got, Read):
                answer = await self.services.body(got)
            elif isinstance(got, bytes):
                answer = got
            else:
                answer = await got
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
