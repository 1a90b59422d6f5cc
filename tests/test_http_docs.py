"""The API's documentation pages load everything from the app itself: /docs (Swagger UI) and
/redoc work with no network but the server's own (the browser test renders /docs offline)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import fastapi_offline
import pytest
from http_support import SETTINGS, START

from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app

with warnings.catch_warnings():  # starlette's note about httpx vs httpx2; irrelevant here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

STATIC = Path(fastapi_offline.__file__).parent / "static"


class _Assets(HTMLParser):
    """The URLs a page loads: scripts, stylesheets and icons."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        url = found.get("src") if tag == "script" else found.get("href") if tag == "link" else None
        if url:
            self.urls.append(url)


def assets(html: str) -> list[str]:
    parser = _Assets()
    parser.feed(html)
    return parser.urls


@pytest.fixture
def http(settings_factory: Callable[..., Settings]) -> Iterator[TestClient]:
    settings = settings_factory(**SETTINGS)
    with TestClient(
        create_app(settings, clock=ManualClock(START)),
        client=("127.0.0.1", 50000),
        base_url="http://localhost",
    ) as client:
        yield client


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        ("/docs", {"swagger-ui-bundle.js", "swagger-ui.css"}),
        ("/redoc", {"redoc.standalone.js"}),
    ],
)
def test_documentation_pages_load_their_assets_from_this_server(
    http: TestClient, page: str, expected: set[str]
) -> None:
    got = http.get(page)
    assert got.status_code == 200
    urls = assets(got.text)
    names = {u.rsplit("/", 1)[-1] for u in urls}
    assert expected <= names, urls
    for url in urls:
        parts = urlsplit(url)
        # A path on this server: no scheme, no host (a CDN would need the network).
        assert parts.scheme == "" and parts.netloc == "", url
        assert url.startswith("/"), url
        served = http.get(url)
        assert served.status_code == 200, url
        # The very bytes the package ships, not some error page of the right status.
        assert served.content == (STATIC / parts.path.rsplit("/", 1)[-1]).read_bytes(), url
    assert "cdn." not in got.text
    assert "fonts.googleapis" not in got.text


def test_the_documented_schema_is_the_one_the_docs_page_loads(http: TestClient) -> None:
    html = http.get("/docs").text
    assert "url: '/openapi.json'" in html
    schema = http.get("/openapi.json").json()
    assert "/v1/boards" in schema["paths"]
