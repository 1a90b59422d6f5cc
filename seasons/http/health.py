"""Probes and metrics: ``/healthz`` (the process), ``/readyz`` (Redis and the worker),
``/metrics`` (Prometheus text)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from redis.exceptions import RedisError

from seasons.http.deps import MetricsDep, SeasonsDep
from seasons.http.errors import ErrorBody, error_response

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: str


class Ready(BaseModel):
    status: str
    redis: str  # ok | unreachable
    worker: str  # ok | stale (no fresh heartbeat)


@router.get("/healthz", response_model=Health, summary="The process is up (no I/O)")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz", response_model=Ready, summary="Redis answers and the worker's heartbeat is fresh",
    responses={503: {"model": ErrorBody, "description": "Not ready; details say why"}},
)  # fmt: skip
def readyz(s: SeasonsDep) -> Any:
    try:
        s.client.ping()
        # The worker's heartbeat key carries a TTL a few intervals long: present means fresh.
        beating = bool(s.client.exists(s.keys.heartbeat()))
    except RedisError as exc:
        details = {"redis": "unreachable", "worker": "unknown"}
        return error_response(503, "backend_unavailable", f"Redis is unreachable: {exc}", details)
    if not beating:
        return error_response(
            503, "not_ready", "the worker's heartbeat is missing or stale: is `seasons worker` "
            "running?", {"redis": "ok", "worker": "stale"},
        )  # fmt: skip
    return JSONResponse(Ready(status="ok", redis="ok", worker="ok").model_dump())


@router.get(
    "/metrics", summary="Prometheus metrics", response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)  # fmt: skip
def metrics(m: MetricsDep) -> Response:
    body, content_type = m.render()
    return Response(body, media_type=content_type)
