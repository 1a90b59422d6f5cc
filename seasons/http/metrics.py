"""Prometheus metrics of one HTTP app: requests, latency, score events, and the worker's jobs.

Each app has its own registry (tests build many apps in one process). Request metrics are
labelled by route template (``/v1/boards/{board}/{window}``), never by raw path, and every
label has a bounded set of values whatever clients send (:func:`request_labels`): the series
are those of the routes, plus a few for requests no route took. The worker runs in another
process: its job runs and durations are read from the job state it keeps in Redis at scrape
time by :class:`JobsCollector`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from http import HTTPStatus
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("seasons.http")

# Where prometheus_client keeps each process's values in multiprocess mode. Read by
# prometheus_client when it is imported: set it before (``seasons serve`` does, for workers).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

# Request labels besides templates, methods and codes (request_labels): a method outside
# METHODS or a code outside HTTPStatus is OTHER; a request no route took (an unknown path,
# 404; a method the path does not take, 405) is UNMATCHED, whatever its path.
OTHER = "other"
UNMATCHED = "unmatched"
# The methods of HTTP (RFC 9110, and PATCH); others (WebDAV's PROPFIND...) count as OTHER.
METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"}
)
_STATUSES = frozenset(s.value for s in HTTPStatus)

# What JobsCollector needs: job name -> its recorded state (runs, failures, last duration...).
JobStats = Callable[[], Mapping[str, Mapping[str, Any]]]
# In the hooks job's state: hook name -> its deliveries (seasons.hooks.HookSummary's fields).
HOOKS_FIELD = "by_hook"


class Metrics:
    """The metrics of one app, in a registry of its own."""

    def __init__(self, job_stats: JobStats | None = None):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "seasons_http_requests", "HTTP requests by route and status",
            ["method", "route", "status"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "seasons_http_request_duration_seconds", "HTTP request latency by route",
            ["method", "route"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.events = Counter(
            "seasons_events", "Score events received over HTTP by outcome "
            "(applied, duplicate, held, banned, rejected)", ["outcome"], registry=self.registry,
        )  # fmt: skip
        for outcome in ("applied", "duplicate", "held", "banned", "rejected"):
            self.events.labels(outcome)
        # Read at scrape time (from Redis): never summed over processes.
        self._collectors: list[Collector] = []
        if job_stats is not None:
            self.add_collector(JobsCollector(job_stats))

    def add_collector(self, collector: Collector) -> None:
        """A collector read at scrape time by whichever process answers /metrics."""
        self.registry.register(collector)
        self._collectors.append(collector)

    def render(self) -> tuple[bytes, str]:
        """The exposition. With ``PROMETHEUS_MULTIPROC_DIR`` set (``seasons serve --workers
        N`` sets it), request and event metrics are the sum over every worker process (their
        values live in files there); the scrape-time collectors are read once."""
        if os.environ.get(MULTIPROC_ENV):
            registry = CollectorRegistry()
            MultiProcessCollector(registry)
            for collector in self._collectors:
                registry.register(collector)
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class JobsCollector(Collector):
    """The worker's jobs as it recorded them in Redis (``seasons.jobs.state``): when each last ran,
    how long it took, how it ended, when it runs next; run counters if the worker keeps them."""

    def __init__(self, job_stats: JobStats):
        self._job_stats = job_stats

    def describe(self) -> Iterable[Metric]:
        return []  # read from Redis at scrape time only; nothing to describe up front

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "seasons_job_state_up", "1 if the worker's job state could be read from Redis"
        )
        try:
            stats = self._job_stats()
        except Exception as exc:  # a scrape must not fail because Redis is away
            log.warning("job state unavailable for /metrics: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        gauges = {
            "last_duration": GaugeMetricFamily(
                "seasons_job_last_duration_seconds", "Duration of the job's last run",
                labels=["job"]),
            "last_success": GaugeMetricFamily(
                "seasons_job_last_success", "1 if the job's last run succeeded, else 0",
                labels=["job"]),
            "last_end": GaugeMetricFamily(
                "seasons_job_last_end_timestamp_seconds", "When the job's last run ended",
                labels=["job"]),
            "next_run": GaugeMetricFamily(
                "seasons_job_next_run_timestamp_seconds", "When the job runs next",
                labels=["job"]),
        }  # fmt: skip
        counters = {
            "runs": CounterMetricFamily("seasons_job_runs", "Runs of the job", labels=["job"]),
            "failures": CounterMetricFamily(
                "seasons_job_failures", "Failed runs of the job", labels=["job"]),
            "total_duration": CounterMetricFamily(
                "seasons_job_duration_seconds", "Time spent in runs of the job", labels=["job"]),
        }  # fmt: skip
        for job, state in sorted(stats.items()):
            start, end = _instant(state.get("last_start")), _instant(state.get("last_end"))
            if start is not None and end is not None and end >= start:
                gauges["last_duration"].add_metric([job], end - start)
            if end is not None:
                gauges["last_end"].add_metric([job], end)
            if (status := state.get("last_status")) is not None:
                gauges["last_success"].add_metric([job], 1.0 if status == "ok" else 0.0)
            if (nxt := _instant(state.get("next_run"))) is not None:
                gauges["next_run"].add_metric([job], nxt)
            for field, family in counters.items():
                if (value := _number(state.get(field))) is not None:
                    family.add_metric([job], value)
        yield from gauges.values()
        yield from counters.values()
        yield from _hook_metrics(stats.get("hooks", {}).get(HOOKS_FIELD) or {})


def _hook_metrics(by_hook: Mapping[str, Mapping[str, Any]]) -> Iterator[Metric]:
    """Each webhook's deliveries (seasons.hooks): given up counts as failed."""
    deliveries = CounterMetricFamily(
        "seasons_hook_deliveries", "Lifecycle events a webhook took (delivered) or that were "
        "given up after its max_age (failed)", labels=["hook", "outcome"],
    )  # fmt: skip
    pending = GaugeMetricFamily(
        "seasons_hook_pending", "Lifecycle events not yet delivered to the webhook",
        labels=["hook"],
    )  # fmt: skip
    retrying = GaugeMetricFamily(
        "seasons_hook_retrying", "Pending events whose delivery failed so far", labels=["hook"]
    )
    last_error = GaugeMetricFamily(
        "seasons_hook_last_error_timestamp_seconds", "When the webhook's last attempt failed",
        labels=["hook"],
    )  # fmt: skip
    for hook, found in sorted(by_hook.items()):
        for outcome in ("delivered", "failed"):
            deliveries.add_metric([hook, outcome], _number(found.get(outcome)) or 0.0)
        pending.add_metric([hook], _number(found.get("pending")) or 0.0)
        retrying.add_metric([hook], _number(found.get("retrying")) or 0.0)
        last = found.get("last_error")
        if isinstance(last, Mapping) and (at := _instant(last.get("at"))) is not None:
            last_error.add_metric([hook], at)
    yield from (deliveries, pending, retrying, last_error)


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _instant(value: Any) -> float | None:
    """Epoch seconds of an ISO 8601 instant (or of a number of seconds), else None."""
    if value is None:
        return None
    if (number := _number(value)) is not None:
        return number
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed.timestamp() if parsed.tzinfo is not None else None


def request_labels(method: str, route: Any, status: int) -> tuple[str, str, str]:
    """The (method, route, status) labels of a request, each from a bounded set: ``method``
    if in :data:`METHODS`, else :data:`OTHER`; the template of ``route`` (what the router,
    the guard or the fast path put in ``scope["route"]``) if it takes ``method``, else
    :data:`UNMATCHED`; the status code if HTTP defines it, else :data:`OTHER`."""
    taken = getattr(route, "methods", None)
    if route is None or (
        # A route given for a method it does not take is the router's 405. HEAD is a GET
        # without a body: counted with the GET route that answers it.
        taken is not None and method not in taken and not (method == "HEAD" and "GET" in taken)
    ):
        template = UNMATCHED
    else:
        template = _template(route)
    return (
        method if method in METHODS else OTHER,
        template,
        str(status) if status in _STATUSES else OTHER,
    )


def _template(route: Any) -> str:
    return str(getattr(route, "path_format", None) or getattr(route, "path", UNMATCHED))


class MetricsMiddleware:
    """Counts and times every HTTP request by its route template and status."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics
        # The labelled series by (method, route's template, status) as the request came:
        # prometheus-client's labels() takes a lock and builds its key on every call, which
        # the hot reads should not pay. A method and a template decide whether a route took
        # the request (the router matches a route that takes the method before it answers
        # 405). Bounded: past the limit, series are looked up each time.
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def _record(self, method: str, route: Any, status: int, seconds: float) -> None:
        key = (method, _template(route), status)
        series = self._series.get(key)
        if series is None:
            m = self.metrics
            method_label, template, status_label = request_labels(method, route, status)
            series = (
                m.latency.labels(method_label, template),
                m.requests.labels(method_label, template, status_label),
            )
            if len(self._series) < 10_000:
                self._series[key] = series
        series[0].observe(seconds)
        series[1].inc()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            self._record(
                scope.get("method", ""), scope.get("route"), status, time.perf_counter() - start
            )
