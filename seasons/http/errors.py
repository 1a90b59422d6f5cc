"""HTTP statuses for Seasons errors, and the handlers that write every error as one JSON shape.

Every error response is ``{"error": <code>, "message": <human text>, "details": ...}``. This is
the only place that maps the domain's errors (:mod:`seasons.errors`) and the HTTP layer's own
(the guard's, the server protocol's: :mod:`seasons.http.guard`, :mod:`seasons.http.server`)
to HTTP statuses:

=====================================  ======  =============================================
error class (code)                     status  why
=====================================  ======  =============================================
UnknownBoard (unknown_board)           404     the board in the path names no resource
NotFound, NotRanked (not_ranked)       404     the member is not on the board
NoResult (no_result), NoReward         404     the member has no result / no reward in the
  (no_reward)                                   season's results (claims, docs/http-api.md)
HeldNotFound (held_not_found)          404     no held event with that id on the board
InvalidInput and subclasses            422     well-formed JSON/query that the domain refuses
  (bad_window, bad_period, limit_exceeded,      (a window or period is a value, not a resource)
  invalid_events, invalid_input,
  unknown_action, bad_cursor, unknown_state,
  unknown_mode)
request validation (invalid_input)     422     FastAPI's own checks, reshaped (a body that is
                                                JSON of the wrong shape: the field is named)
InvalidJson (invalid_json)             400     the body is not JSON at all (or is empty)
Unauthorized (unauthorized)            401     missing or wrong bearer token
Forbidden (forbidden)                  403     no token configured and the client is remote
BodyTooLarge (body_too_large)          413     body over api.max_body_bytes (seasons.http.guard)
UrlTooLong (url_too_long)              414     path + query over guard.MAX_URL_BYTES
UnsupportedMediaType                   415     a JSON route's body is not JSON (text/plain, forms)
  (unsupported_media_type)
UnsupportedContentEncoding             415     a body with a Content-Encoding (gzip...): bodies
  (unsupported_content_encoding)                are read as sent, never decoded
BadRequest (bad_request)               400     not HTTP/1.1 the server parses, or a request
                                                line naming another host than Host
RequestTimeout (request_timeout)       408     headers or body not all sent within
                                                api.header_timeout / api.body_timeout
HeadersTooLarge (headers_too_large)    431     one header line over 16 KiB, or all of them
                                                over 64 KiB (seasons.http.server)
UnsupportedTransferEncoding            501     a Transfer-Encoding other than plain chunked
  (unsupported_transfer_encoding)
UnknownParameter (unknown_parameter)   422     a query parameter the route does not take
Conflict, ArchiveError                 409     the request conflicts with stored state
RewardsNotReady (rewards_not_ready)    409     the season's results are not computed yet
ProvisionalRewards (provisional)       409     a snapshot's results are never claimable
SeasonClosed, DayFolded, HeldTooLate,  409     a held event's approval (or a clear) the
  HeldDecided, HeldRefused                      stored state refuses (docs/writes.md#held-events)
BackendUnavailable                     503     Redis unreachable; retry later
  (backend_unavailable)
BackendFull (backend_full)             503     Redis at maxmemory (noeviction) refuses writes
BackendReadOnly (backend_read_only)    503     Redis is a read-only replica
EvictionPolicy, DataLoss               503     the server is unsafe to write to (see /readyz)
ClaimsLogUnavailable                   503     a claim could not be appended to its claims
  (claims_log_unavailable)                      log under archive.dir; resend the same key
anything else                          500     ``internal_error``, with no details
=====================================  ======  =============================================

Redis errors arrive here as Seasons errors already: the Redis clients and the read executor
translate them (:mod:`seasons.connection`). A redis-py error that reaches a handler is a bug
of ours (an unexpected error reply, CROSSSLOT): a 500 with a log line.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from seasons import errors

log = logging.getLogger("seasons.http")


class Unauthorized(errors.SeasonsError):
    """No bearer token, or not the configured one (the message never repeats a token)."""

    code = "unauthorized"


class Forbidden(errors.SeasonsError):
    """No token is configured for the operation and the client is not on loopback."""

    code = "forbidden"


class BodyTooLarge(errors.SeasonsError):
    """The request body is over ``api.max_body_bytes`` (by Content-Length or as it streams)."""

    code = "body_too_large"


class UrlTooLong(errors.SeasonsError):
    """The path and query string are longer than the guard accepts."""

    code = "url_too_long"


class UnsupportedMediaType(errors.SeasonsError):
    """A JSON route got a body declared as something else (text/plain, a form...)."""

    code = "unsupported_media_type"


class UnsupportedContentEncoding(errors.SeasonsError):
    """A request body sent with a Content-Encoding (gzip, br...): the server never decodes one,
    and reading it as sent would take compressed bytes for JSON."""

    code = "unsupported_content_encoding"


class BadRequest(errors.SeasonsError):
    """A request that is not HTTP/1.1 as the server parses it, or whose request line names
    another host than its ``Host`` header."""

    code = "bad_request"


class RequestTimeout(errors.SeasonsError):
    """The request's headers, or its body, did not all arrive in time."""

    code = "request_timeout"


class HeadersTooLarge(errors.SeasonsError):
    """A header line, or the header lines together, over the server's limits."""

    code = "headers_too_large"


class UnsupportedTransferEncoding(errors.SeasonsError):
    """A Transfer-Encoding the server does not apply: anything but plain ``chunked``."""

    code = "unsupported_transfer_encoding"


class InvalidJson(errors.SeasonsError):
    """The request body is not JSON (or is empty where the route takes one)."""

    code = "invalid_json"


# What json.loads raises other than JSONDecodeError: bytes that are not UTF-8 (nor UTF-16/32
# with a BOM), or an integer longer than Python parses.
NOT_TEXT = "the request body is not JSON: not UTF-8 text, or an integer of over 4300 digits"


def not_json(body: bytes) -> InvalidJson | None:
    """Why ``body`` is not JSON, or None if it is. Both paths of a JSON route ask this (the
    FastAPI handlers below and :mod:`seasons.http.fast`), so they answer alike. It parses as
    Starlette does (``json.loads`` of the bytes)."""
    if not body:
        return InvalidJson("the request body is empty: this route takes a JSON object")
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:
        return InvalidJson(
            f"the request body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            {"line": exc.lineno, "column": exc.colno, "position": exc.pos},
        )
    except (ValueError, RecursionError):
        return InvalidJson(NOT_TEXT)
    return None


class UnknownParameter(errors.InvalidInput):
    """A query parameter the route does not take (``?token=`` among them)."""

    code = "unknown_parameter"


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: str
    message: str
    details: Any = None


# Most specific first: the first class an error is an instance of decides its status.
STATUS: tuple[tuple[type[errors.SeasonsError], int], ...] = (
    (errors.UnknownBoard, 404),
    (errors.NotFound, 404),
    (errors.InvalidInput, 422),
    (InvalidJson, 400),
    (BadRequest, 400),
    (RequestTimeout, 408),
    (HeadersTooLarge, 431),
    (UnsupportedTransferEncoding, 501),
    (UnsupportedContentEncoding, 415),
    (Unauthorized, 401),
    (Forbidden, 403),
    (BodyTooLarge, 413),
    (UrlTooLong, 414),
    (UnsupportedMediaType, 415),
    (errors.Conflict, 409),
    (errors.ArchiveError, 409),
    (errors.BackendUnavailable, 503),
    (errors.EvictionPolicy, 503),
    (errors.DataLoss, 503),
    (errors.ClaimsLogUnavailable, 503),
)

# Documented on every route, so the OpenAPI schema lists each status a client can get.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in (
        (404, "Unknown board, or member not ranked"),
        (422, "Invalid input or over a limit"),
        (503, "Redis is unreachable or refuses writes (full, a replica)"),
    )
}
# What the guard (seasons.http.guard) may answer before a route runs; it adds these to the
# schema: 414 and 422 on every operation, 413 and 415 on those that take a body.
GUARD_RESPONSES: dict[int, str] = {
    400: "Request body is not JSON (invalid_json)",
    413: "Request body over api.max_body_bytes",
    414: "Path and query string too long",
    415: "Content-Type is not JSON, or the body has a Content-Encoding",
    422: "Unknown query parameter",
}
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing or wrong bearer token"},
    403: {"model": ErrorBody, "description": "No token configured and the client is remote"},
}


def status_of(exc: errors.SeasonsError) -> int:
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 400


class _AsciiJSON(JSONResponse):
    """JSON with non-ASCII escaped: an error may quote input that is not valid Unicode (a lone
    surrogate from a ``\\udXXX`` escape), which UTF-8 cannot encode but JSON can carry."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False).encode("ascii")


def error_response(
    status: int, code: str, message: str, details: Any = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = {"error": code, "message": message, "details": details}
    return _AsciiJSON(body, status_code=status, headers=headers)


def response_of(exc: errors.SeasonsError) -> JSONResponse:
    """The error response for ``exc``: its status, the one JSON shape, and for a 401 the
    ``WWW-Authenticate`` challenge (for a Content-Encoding refused, ``Accept-Encoding``)."""
    headers = (
        {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized)
        # The codings the server takes (RFC 9110, 12.5.3): none.
        else {"Accept-Encoding": "identity"} if isinstance(exc, UnsupportedContentEncoding)
        else None
    )  # fmt: skip
    return error_response(status_of(exc), exc.code, exc.message, exc.details, headers)


async def _seasons_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.SeasonsError)
    return response_of(exc)


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # Only where and what: "input" could echo a large body back, "ctx" holds raw objects.
    problems = [
        {"loc": [str(p) for p in e.get("loc", ())], "type": e.get("type"), "msg": e.get("msg")}
        for e in exc.errors()
    ]
    body_missing = problems == [{"loc": ["body"], "type": "missing", "msg": problems[0]["msg"]}]
    if body_missing or any(p["type"] == "json_invalid" for p in problems):
        raw = exc.body if isinstance(exc.body, bytes | str) else b""
        found = not_json(raw.encode() if isinstance(raw, str) else raw)
        return response_of(found or InvalidJson("the request body is not JSON"))
    for p in problems:
        if p["loc"] == ["body"] and p["type"] in _NOT_AN_OBJECT:
            p["msg"] = f"must be a JSON object, not {_json_kind(exc.body)}"
    message = "; ".join(f"{'.'.join(p['loc'])}: {p['msg']}" for p in problems[:5])
    return error_response(422, "invalid_input", message or "invalid request", problems)


# Pydantic's error types for a body that is JSON but not an object ("valid dictionary").
_NOT_AN_OBJECT = frozenset({"model_attributes_type", "model_type", "dict_type"})


def _json_kind(value: Any) -> str:
    kinds = ((bool, "a boolean"), (str, "a string"), (int | float, "a number"), (list, "an array"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and "parsing the body" in str(exc.detail):
        # FastAPI's answer to a body json.loads refused other than as a JSONDecodeError.
        return response_of(InvalidJson(NOT_TEXT))
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(
        exc.status_code, code, str(exc.detail), None, dict(exc.headers or {}) or None
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "internal_error", "internal error; see the server log")


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the one JSON shape."""
    app.add_exception_handler(errors.SeasonsError, _seasons_error)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http_exception)
    app.add_exception_handler(Exception, _unexpected)
