"""Probes and metrics: ``/healthz`` (the process), ``/readyz`` (Redis, its safety and the
worker), ``/metrics`` (Prometheus text).

``/readyz`` is not ready (503) while any of these lasts, the first found giving the error code:
Redis unreachable (``backend_unavailable``), the worker in safe mode after data loss
(``data_loss``), Redis a read-only replica (``backend_read_only``), Redis at maxmemory
(``backend_full``), an evicting ``maxmemory-policy`` without ``redis.allow_eviction``
(``eviction_policy``), no fresh worker heartbeat (``not_ready``). ``details`` lists all of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel

from seasons import redis_health
from seasons.api import Seasons
from seasons.errors import BackendUnavailable
from seasons.http.deps import MetricsDep, SeasonsDep
from seasons.http.errors import ErrorBody, error_response
from seasons.jobs.integrity import read_safe_mode

log = logging.getLogger("seasons.http")
router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    redis: str  # ok | unreachable
    worker: str  # ok | stale (no fresh heartbeat)
    problems: dict[str, str] = {}  # code -> message; empty when ready
    warnings: dict[str, str] = {}  # e.g. eviction allowed by redis.allow_eviction
    memory: dict[str, Any] | None = None  # policy, used_memory, maxmemory, ... (see redis_health)


@router.get("/healthz", response_model=Health, summary="The process is up (no I/O)")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz", response_model=Ready, summary="Redis answers and the worker's heartbeat is fresh",
    responses={503: {"model": ErrorBody, "description": "Not ready; details say why"}},
)  # fmt: skip
def readyz(s: SeasonsDep) -> Any:
    try:
        health = redis_health.read(s.client, s.settings)
        # The worker's heartbeat key carries a TTL a few intervals long: present means fresh.
        beating = bool(s.client.exists(s.keys.heartbeat()))
        safe_mode = read_safe_mode(s.client, s.keys)
    except BackendUnavailable as exc:
        details = {"redis": "unreachable", "worker": "unknown"}
        return error_response(503, exc.code, exc.message, details)
    problems: dict[str, str] = {}
    if safe_mode is not None:
        problems["data_loss"] = (
            f"the worker is in safe mode: {safe_mode.get('message', safe_mode)} (closes and "
            "archives are stopped; see `seasons status` and the recovery docs)"
        )
    problems.update(health.problems())
    if not beating:
        problems["not_ready"] = (
            "the worker's heartbeat is missing or stale: is `seasons worker` running?"
        )
    warnings = {}
    if health.evicting and health.eviction_allowed:
        warnings["eviction_allowed"] = redis_health.eviction_message(health.policy)
    ready = Ready(
        status="ok" if not problems else "not_ready", redis="ok",
        worker="ok" if beating else "stale", problems=problems, warnings=warnings,
        memory=health.to_dict(),
    )  # fmt: skip
    if problems:
        code, message = next(iter(problems.items()))
        return error_response(503, code, message, ready.model_dump())
    return JSONResponse(ready.model_dump())


@router.get(
    "/metrics", summary="Prometheus metrics", response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)  # fmt: skip
def metrics(m: MetricsDep) -> Response:
    body, content_type = m.render()
    return Response(body, media_type=content_type)


class RedisHealthCollector(Collector):
    """Redis's memory and safety at scrape time: used and max memory, whether the policy may
    evict, whether the server is a replica, whether the worker is in safe mode."""

    def __init__(self, app: Seasons):
        self._app = app

    def describe(self) -> Iterable[Metric]:
        return []  # read from Redis at scrape time only

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("seasons_redis_health_up", "1 if Redis's INFO could be read")
        try:
            health = redis_health.read(self._app.client, self._app.settings)
            safe_mode = read_safe_mode(self._app.client, self._app.keys)
        except Exception as exc:  # a scrape must not fail because Redis is away
            if not isinstance(exc, BackendUnavailable):
                log.warning("Redis health unavailable for /metrics: %r", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for name, text, value in (
            ("seasons_redis_used_memory_bytes", "Memory Redis counts against maxmemory",
             health.used_memory),
            ("seasons_redis_maxmemory_bytes", "Redis's maxmemory (0: no limit)", health.maxmemory),
            ("seasons_redis_evicting", "1 if maxmemory-policy is not noeviction",
             int(health.evicting)),
            ("seasons_redis_read_only", "1 if Redis is a read-only replica", int(health.read_only)),
            ("seasons_safe_mode", "1 while the worker is in safe mode after data loss",
             int(safe_mode is not None)),
        ):  # fmt: skip
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], value)
            yield gauge
