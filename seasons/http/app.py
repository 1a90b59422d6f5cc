"""The HTTP application (docs/http-api.md): ``create_app(settings)`` builds it, ready to serve.

One FastAPI app per process, built from settings at the edge. The board reads (pages, around,
a member's entry, lookup, history) are the facade's prepared reads, awaited on the event loop
(:func:`seasons.executor.async_executor`); other routes that call Redis are sync functions
(FastAPI runs them in its threadpool; redis-py's pool is thread-safe); routes without I/O are
async. Nothing caches a broken connection: when Redis goes away each request fails fast with
503 ``backend_unavailable``, and the clients and the executor reconnect by themselves on the
first request after Redis is back.

In front of the routes, :class:`~seasons.http.guard.Guard` checks limits and access from the
request line and headers before any body is read (``docs/security.md``).
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from seasons.api import Seasons
from seasons.clock import Clock, system_clock
from seasons.config.loading import load_settings
from seasons.config.settings import Settings
from seasons.executor import async_executor
from seasons.http import (
    admin,
    boards,
    errors,
    health,
    jobs,
    leagues,
    lifecycle,
    moderation,
    rewards,
    scores,
    seasons,
    web,
)
from seasons.http.access_log import SafeQuery
from seasons.http.deps import Services
from seasons.http.fast import FastReads
from seasons.http.guard import Guard, Rules, document
from seasons.http.head import HeadAsGet
from seasons.http.jobs import job_stats_reader
from seasons.http.metrics import Metrics, MetricsMiddleware

# FastAPI's native OpenTelemetry (FastAPI 0.165+) asks the global providers whether it is
# configured on every request, a cost on every read; Seasons' request metrics are Prometheus
# (/metrics), so it is off where FastAPI has it.
_NO_OPENTELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def create_app(
    settings: Settings,
    *,
    clock: Clock = system_clock,
    app: Seasons | None = None,
    freeze_gc: bool = False,
) -> FastAPI:
    """The HTTP app for ``settings``.

    ``clock`` drives every read and write (tests pass a :class:`~seasons.clock.ManualClock`).
    ``app`` is a ready facade to serve from instead of building one (its owner closes it).
    ``freeze_gc``: for a server process (``seasons serve``): at startup, move everything
    loaded so far out of the garbage collector's sight (:func:`gc.freeze`). A full collection
    otherwise walks all of FastAPI, pydantic and redis-py each time, ~35 ms on a small
    machine, stalling every request in flight (p99 of ``python -m bench``, HTTP).
    """
    facade = app if app is not None else Seasons(settings, clock=clock)
    metrics = Metrics(job_stats=job_stats_reader(facade))
    metrics.add_collector(health.RedisHealthCollector(facade))

    executor = async_executor(facade.client, settings.redis)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if freeze_gc:
            gc.collect()
            gc.freeze()
        yield
        await executor.close()
        if app is None:
            facade.close()

    # /docs (Swagger UI) and /redoc from files shipped in fastapi-offline, served under
    # /static-offline-docs: FastAPI's own pages load them from a CDN, blank offline.
    api = FastAPIOffline(
        title="Seasons",
        summary="Time-windowed, seasonal leaderboards on Redis",
        version="1",
        lifespan=lifespan,
        # A path with a trailing slash is a 404 like any unknown path, not a redirect: the
        # redirect's Location would repeat the query string (a token sent there) to the client
        # and to whatever logs the redirected request.
        redirect_slashes=False,
        **_NO_OPENTELEMETRY,
    )
    api.state.services = Services(
        settings=settings, seasons=facade, metrics=metrics, executor=executor
    )
    errors.install(api)
    routers = (
        boards,
        leagues,
        scores,
        seasons,
        rewards,
        moderation,
        admin,
        jobs,
        lifecycle,
        health,
        web,
    )
    for module in routers:
        api.include_router(module.router)
    # From the routes as included: each one's access level, query parameters and body.
    rules = Rules(api)
    # The last added is the outermost: the metrics see the guard's answers too, the fast
    # reads come after the guard's checks, a HEAD is a GET to all but the metrics, and the
    # access log never sees a query value that no route takes.
    api.add_middleware(FastReads, services=api.state.services, rules=rules)
    api.add_middleware(Guard, rules=rules, api=settings.api)
    api.add_middleware(HeadAsGet)
    api.add_middleware(MetricsMiddleware, metrics=metrics)
    api.add_middleware(SafeQuery, rules=rules)
    schema = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            api.openapi_schema = document(schema(), rules)
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    return api


def from_environment() -> FastAPI:
    """App factory for ``uvicorn --factory seasons.http.app:from_environment`` (settings from
    the environment and TOML like the CLI); used to run several uvicorn worker processes.

    Run uvicorn with ``--no-proxy-headers``: the app takes the client address from
    ``api.trusted_proxies`` itself, and uvicorn would otherwise rewrite the peer address from
    ``X-Forwarded-For`` (for 127.0.0.1 by default, for everyone with
    ``FORWARDED_ALLOW_IPS=*``). Requests with forwarding headers never get the loopback
    exemption of empty tokens either way."""
    return create_app(load_settings(), freeze_gc=True)
