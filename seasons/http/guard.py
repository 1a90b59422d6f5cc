"""The guard: limits and access checked from the request line and headers, before any work.

FastAPI reads (and keeps) a route's whole body before its dependencies run, so a token
checked in a dependency comes after a 100 MB upload has been buffered. The guard is a raw
ASGI layer in front of the routes that answers from the request line and headers alone:

======  =========================  ====================================================
status  code                       when
======  =========================  ====================================================
414     url_too_long               path + query string over :data:`MAX_URL_BYTES`
422     unknown_parameter          a query parameter the route does not take (names it)
401     unauthorized               token missing or wrong (:class:`~seasons.http.auth.Gate`)
403     forbidden                  no token configured and the client is not local
415     unsupported_media_type     a route with a JSON body got another Content-Type (none
                                   at all is taken as JSON)
413     body_too_large             body over ``api.max_body_bytes`` (Content-Length, or
                                   counted while a chunked body streams in)
======  =========================  ====================================================

A route with a JSON body also refuses a ``Content-Encoding`` (gzip...) with 415
``unsupported_content_encoding``, after the Content-Type: no route decodes a body.

What each route needs is read once, when the app is built, from FastAPI's own route data
(:class:`Rules`): its access level from the ``WriteAccess``/``AdminAccess`` dependency it
declares, its query parameters, whether it takes a body. A request without a query string
whose path starts with no checked route's fixed start (the hot reads: only ``/v1/admin/``
GETs are checked) costs one length check and one prefix test; other requests find their
route with the router's own path patterns, once per distinct path (a bounded cache).

An admin call that passes gets its actor (the name of the token that authorised it, or
``local``) and a request id in its scope (:data:`~seasons.http.deps.ACTOR`,
:data:`~seasons.http.deps.REQUEST_ID`), which its audit entry records: the client's
``X-Request-ID`` if it is 1-128 characters of ``A-Z a-z 0-9 . _ : @ / + = -``, else a
generated one; the response carries it back in ``X-Request-ID``. Other requests pay
nothing for it.

A chunked body is read here, up to the limit, and handed to the route in one message, so
the process never holds more than ``api.max_body_bytes`` of it; a body with a valid
Content-Length is left to stream to the route, the server framing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from re import Pattern
from typing import Any
from urllib.parse import unquote_plus

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import iter_route_contexts
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seasons.audit import REQUEST_ID as REQUEST_ID_FORM
from seasons.audit import new_request_id
from seasons.config.settings import ApiSettings
from seasons.errors import SeasonsError
from seasons.http.auth import Gate, Head, Level
from seasons.http.deps import ACCESS_LEVELS, ACTOR, GUARDED, REQUEST_ID
from seasons.http.errors import (
    GUARD_RESPONSES,
    BodyTooLarge,
    UnknownParameter,
    UnsupportedContentEncoding,
    UnsupportedMediaType,
    UrlTooLong,
    response_of,
)

# Longest path + query string accepted (characters of the decoded path plus bytes of the
# query). The longest legitimate URL, a member id of 128 bytes percent-encoded, is ~500.
MAX_URL_BYTES = 8 * 1024
# Paths remembered with the route they match; the cache is emptied when full.
_CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Rule:
    """What the guard checks for one route."""

    route: Any  # what the router puts in scope["route"]: the metrics label by its template
    path: str  # the template, e.g. /v1/boards/{board}/{window}
    regex: Pattern[str]
    methods: frozenset[str]
    level: Level | None
    body: bool
    query: frozenset[bytes]  # the names as sent, when they need no percent-decoding
    names: frozenset[str]

    def unknown(self, query_string: bytes) -> list[str]:
        """The query parameter names (decoded) that the route does not take."""
        out = []
        for part in query_string.split(b"&"):
            if not part:
                continue
            name = part.partition(b"=")[0]
            if name in self.query:
                continue
            text = unquote_plus(name.decode("latin-1"))
            if text not in self.names:
                out.append(text)
        return out


class Rules:
    """Every route's :class:`Rule`, in the router's order, from FastAPI's route data."""

    def __init__(self, app: FastAPI):
        rules = []
        for ctx in iter_route_contexts(app.routes):
            regex = getattr(ctx, "path_regex", None)
            if regex is None or not ctx.methods:
                continue
            dependant = getattr(ctx, "dependant", None)
            names = frozenset(_query_names(dependant)) if dependant is not None else frozenset()
            levels = set(_levels(dependant)) if dependant is not None else set()
            rules.append(
                Rule(
                    route=ctx.original_route,
                    path=ctx.path_format or "",
                    regex=regex,
                    methods=frozenset(ctx.methods),
                    level="admin" if "admin" in levels else "write" if levels else None,
                    body=getattr(ctx, "body_field", None) is not None,
                    query=frozenset(n.encode() for n in names if _plain(n)),
                    names=names,
                )
            )
        self.all: tuple[Rule, ...] = tuple(rules)
        methods = {m for r in rules for m in r.methods}
        self._by_method = {m: tuple(r for r in rules if m in r.methods) for m in methods}
        # Methods some route of which checks a token or a body: their requests always need
        # their route; for the others (GET, HEAD) only a query string does.
        self.checked = frozenset(
            m for m, found in self._by_method.items() if any(r.level or r.body for r in found)
        )
        # Per such method, the fixed starts of those routes' paths (up to their first
        # parameter): a request whose path starts with none of them needs no check, so the
        # hot reads (GET of /v1/boards/...) skip the route lookup while GET /v1/admin/audit
        # is checked.
        self.prefixes: dict[str, tuple[str, ...]] = {
            m: tuple(sorted({r.path.partition("{")[0] for r in found if r.level or r.body}))
            for m, found in self._by_method.items()
            if m in self.checked
        }
        self._cache: dict[tuple[str, str], Rule | None] = {}

    def find(self, method: str, path: str) -> Rule | None:
        """The route the router will match for ``method`` and ``path``, or None."""
        key = (method, path)
        try:
            return self._cache[key]
        except KeyError:
            pass
        found = next((r for r in self._by_method.get(method, ()) if r.regex.match(path)), None)
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()
        self._cache[key] = found
        return found


def _walk(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _walk(sub)


def _query_names(dependant: Dependant) -> Iterator[str]:
    for dep in _walk(dependant):
        for param in dep.query_params:
            yield param.alias


def _levels(dependant: Dependant) -> Iterator[Level]:
    for dep in _walk(dependant):
        if dep.call in ACCESS_LEVELS:
            yield ACCESS_LEVELS[dep.call]


def _plain(name: str) -> bool:
    """True if ``name`` is sent as itself in a query string (nothing to percent-decode)."""
    return name.isascii() and "%" not in name and "+" not in name


def _length(value: bytes) -> int:
    try:
        return int(value)
    except ValueError:  # ASGI servers refuse these; count it as over any limit
        return 1 << 62


def _is_json(content_type: bytes) -> bool:
    media = content_type.partition(b";")[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


class Guard:
    """The ASGI layer in front of the routes (see the module's doc). Add it inside the
    metrics middleware, so that its answers are counted by route template and status."""

    def __init__(self, app: ASGIApp, rules: Rules, api: ApiSettings):
        self.app = app
        self.rules = rules
        self.gate = Gate(api)
        self.max_body = api.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query: bytes = scope["query_string"]
        if len(scope["path"]) + len(query) > MAX_URL_BYTES:
            await self._refuse(
                scope, receive, send, None,
                UrlTooLong(f"the path and query string are longer than {MAX_URL_BYTES} bytes",
                           {"limit": MAX_URL_BYTES}),
            )  # fmt: skip
            return
        method: str = scope["method"]
        path = _route_path(scope)
        if not query and not path.startswith(self.rules.prefixes.get(method, ())):
            await self.app(scope, receive, send)
            return
        rule = self.rules.find(method, path)
        if rule is None:  # the router answers 404 or 405, reading no body
            await self.app(scope, receive, send)
            return
        try:
            body = await self._check(rule, scope, receive)
        except SeasonsError as exc:
            await self._refuse(scope, receive, send, rule, exc)
            return
        if REQUEST_ID in scope:
            send = _echo(scope[REQUEST_ID], send)
        if body is None:
            await self.app(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)

    async def _check(self, rule: Rule, scope: Scope, receive: Receive) -> bytes | None:
        """Raise the first problem of the request; the body if it had to be read here."""
        query: bytes = scope["query_string"]
        if query and (unknown := rule.unknown(query)):
            raise UnknownParameter(
                f"unknown query parameter{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(repr(n[:64]) for n in unknown[:10])} for {rule.path}; it takes "
                f"{', '.join(sorted(rule.names)) or 'none'}"
                + ("; tokens go in an 'Authorization: Bearer' header" if any(
                    "token" in n.lower() for n in unknown) else ""),
                {"unknown": [n[:64] for n in unknown[:10]], "known": sorted(rule.names)},
            )  # fmt: skip
        if rule.level is None and not rule.body:
            return None
        head = Head.of(scope)
        if rule.level is not None:
            client = scope.get("client")
            actor = self.gate.check(rule.level, head, client[0] if client else None)
            scope[GUARDED] = rule.level
            if rule.level == "admin":
                scope[ACTOR] = actor
                scope[REQUEST_ID] = _request_id(scope)
        if not rule.body:
            return None
        if not head.content_type:
            # Taken as JSON (curl --data-binary, many HTTP libraries): the route's parser
            # would otherwise see bytes and answer that the body is not an object.
            scope["headers"] = [*scope["headers"], (b"content-type", b"application/json")]
        elif not _is_json(head.content_type):
            media = head.content_type.decode("latin-1")[:100]
            raise UnsupportedMediaType(
                f"{rule.path} takes a JSON body (Content-Type: application/json), not {media!r}",
                {"content_type": media},
            )
        if head.content_encoding is not None:
            coding = head.content_encoding.decode("latin-1")[:100]
            raise UnsupportedContentEncoding(
                f"{rule.path} reads its JSON body as sent: no Content-Encoding is decoded "
                f"(got {coding!r})",
                {"content_encoding": coding},
            )
        if head.content_length is not None:
            if _length(head.content_length) > self.max_body:
                raise self._too_large()
            return None
        return await self._read(receive)

    async def _read(self, receive: Receive) -> bytes:
        """A body without Content-Length (chunked), read up to the limit."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return b""
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self) -> BodyTooLarge:
        return BodyTooLarge(
            f"the request body is over api.max_body_bytes ({self.max_body} bytes)",
            {"limit": self.max_body, "setting": "api.max_body_bytes"},
        )

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, rule: Rule | None, exc: SeasonsError
    ) -> None:
        if rule is not None:
            scope["route"] = rule.route
        await response_of(exc)(scope, receive, send)


def _request_id(scope: Scope) -> str:
    """The client's X-Request-ID if it has the accepted form, else a new one."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            sent = value.decode("latin-1")
            return sent if REQUEST_ID_FORM.fullmatch(sent) else new_request_id()
    return new_request_id()


def _echo(request_id: str, send: Send) -> Send:
    """``send`` adding ``X-Request-ID`` to the response's headers."""
    header = (b"x-request-id", request_id.encode("latin-1"))

    async def echo(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), header]}
        await send(message)

    return echo


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the route: the body read by the guard, then the client's messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def document(schema: dict[str, Any], rules: Rules) -> dict[str, Any]:
    """Add the guard's answers to an OpenAPI schema: 414 and 422 on every operation, 400
    (the error handlers' invalid_json), 413 and 415 on those with a body (statuses and texts
    from :data:`GUARD_RESPONSES`)."""
    by_op = {(r.path, m.lower()): r for r in rules.all for m in r.methods}
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            rule = by_op.get((path, method))
            if rule is None:
                continue
            statuses = (400, 413, 414, 415, 422) if rule.body else (414, 422)
            responses = operation.setdefault("responses", {})
            for status in statuses:
                responses.setdefault(
                    str(status), {"description": GUARD_RESPONSES[status], "content": error}
                )
    return schema
