"""The web page: ``/`` and its three static files, shipped inside the package (seasons/web/).

The files are read once and served from memory with an ETag, so a reload costs a 304. The
page talks only to the JSON API of this same server; it loads nothing from elsewhere.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

from fastapi import APIRouter, Request, Response

from seasons.errors import NotFound
from seasons.http.errors import ErrorBody

router = APIRouter(include_in_schema=False)

FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
# Content-Security-Policy: the page may run only its own script and style and call only this
# server, so an injected member name or metadata value can do nothing.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@cache
def _load(name: str) -> tuple[bytes, str]:
    body = resources.files("seasons").joinpath("web", name).read_bytes()
    return body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _serve(request: Request, name: str) -> Response:
    body, etag = _load(name)
    headers = {
        "ETag": etag,
        "Cache-Control": "no-cache",  # revalidate each time: cheap with the ETag
        "Content-Security-Policy": CSP,
        "X-Content-Type-Options": "nosniff",
    }
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=FILES[name], headers=headers)


@router.get("/")
async def index(request: Request) -> Response:
    return _serve(request, "index.html")


@router.get("/static/{name}", responses={404: {"model": ErrorBody}})
async def static(request: Request, name: str) -> Response:
    if name not in FILES or name == "index.html":
        raise NotFound(f"no static file {name!r}", {"file": name})
    return _serve(request, name)
