"""Request metrics keep a bounded label set whatever clients send (docs/http-api.md#metrics).

A real ``seasons serve``: hundreds of requests of odd methods (WebDAV's, made-up ones the
parser knows) on unknown paths and on real routes add, per method label, one series set for
``route="unmatched"`` only; each request is counted under the labels the documented rule
gives (``method`` one of HTTP's or ``other``, ``unmatched`` for a 404 or a 405), read back with
prometheus_client's own parser of the exposition text.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import httpx
from http_support import seasons_serve
from prometheus_client.parser import text_string_to_metric_families

from seasons.http.metrics import request_labels

HTTP_METHODS = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}
ODD_METHODS = [
    "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE", "LOCK", "UNLOCK", "SEARCH", "PURGE",
    "REPORT", "MKACTIVITY", "CHECKOUT", "MERGE", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "LINK",
    "UNLINK", "ACL", "MKCALENDAR", "M-SEARCH", "PUT", "PATCH", "OPTIONS", "TRACE", "DELETE",
]  # fmt: skip
# Routes none of ODD_METHODS is taken on (405), and paths of no route (404).
ROUTES = ["/v1/scores", "/v1/boards/kills/day", "/v1/boards/kills/day/members/ann", "/metrics",
          "/docs", "/static/app.js", "/v1/seasons", "/healthz"]  # fmt: skip
UNKNOWN = [f"/no/such/path/{i}" for i in range(20)]
# Each histogram series set: 15 buckets, _count, _sum, _created; each counter: _total, _created.
PER_LATENCY, PER_COUNTER = 18, 2


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_odd_methods_and_paths_add_a_bounded_set_of_series(redis_url: str, tmp_path: Path) -> None:
    env = {"SEASONS_REDIS__URL": redis_url, "SEASONS_BOARDS__KILLS__AGGREGATE": "sum"}
    expected: Counter[tuple[str, str, str]] = Counter()
    with (
        seasons_serve(env, tmp_path / "serve.log") as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        client.get("/metrics")  # its own series exist before the count starts
        before = samples(client.get("/metrics").text)
        for method in ODD_METHODS:
            for path in ROUTES + UNKNOWN:
                status = client.request(method, path).status_code
                assert status in (404, 405), (method, path, status)
                assert status == (405 if path in ROUTES else 404), (method, path, status)
                label = method if method in HTTP_METHODS else "other"
                expected[(label, "unmatched", str(status))] += 1
        after = samples(client.get("/metrics").text)

    counted: Counter[tuple[str, str, str]] = Counter()
    for (name, labels), value in after.items():
        if name == "seasons_http_requests_total":
            got = dict(labels)
            key = (got["method"], got["route"], got["status"])
            delta = value - before.get((name, labels), 0.0)
            if key != ("GET", "/metrics", "200") and delta:
                counted[key] += int(delta)
    assert counted == expected

    method_labels = {label for label, _, _ in expected}  # other, PUT, PATCH, OPTIONS, ...
    new = set(after) - set(before)
    assert len(new) <= len(method_labels) * (PER_LATENCY + 2 * PER_COUNTER), sorted(new)[:50]


def test_labels_of_one_request() -> None:
    """The rule itself, on route objects of the shape the router gives."""
    page = SimpleNamespace(path_format="/v1/boards/{board}/{window}", methods={"GET"})
    assert request_labels("GET", page, 200) == ("GET", "/v1/boards/{board}/{window}", "200")
    assert request_labels("HEAD", page, 200) == ("HEAD", "/v1/boards/{board}/{window}", "200")
    assert request_labels("POST", page, 405) == ("POST", "unmatched", "405")
    assert request_labels("BREW", page, 405) == ("other", "unmatched", "405")
    assert request_labels("GET", None, 404) == ("GET", "unmatched", "404")
    assert request_labels("GET", page, 299) == ("GET", "/v1/boards/{board}/{window}", "other")
    mount = SimpleNamespace(path="/static-offline-docs")  # a mount takes every method
    assert request_labels("GET", mount, 200) == ("GET", "/static-offline-docs", "200")
