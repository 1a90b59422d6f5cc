"""Dependencies of the HTTP routes, as ``Annotated`` aliases (one place for all of them).

Everything a route needs was built once by :func:`seasons.http.app.create_app` and sits in
``app.state.services``; these aliases hand out its parts and check access.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Request

from config.settings import Settings
from seasons.api import Seasons
from seasons.clock import Clock
from seasons.connection import backend_errors
from seasons.http.auth import authorize
from seasons.http.metrics import Metrics
from seasons.models import Page
from seasons.reads import RangeCall
from seasons.scripts import sources


class AsyncReads:
    """The hot range reads (top, around) on an asyncio client: the same prepared calls as
    the Python API's (:class:`seasons.reads.RangeCall`), awaited on the event loop, so a
    read costs no threadpool hop and a slow Redis never blocks the loop."""

    def __init__(self, client: Any):
        self.client = client
        self._script = client.register_script(sources()["read_range"])

    async def run(self, call: RangeCall) -> Page:
        with backend_errors():
            reply = await self._script(keys=call.keys, args=call.args)
        return call.page(reply)

    async def close(self) -> None:
        await self.client.aclose()


@dataclass(frozen=True)
class Services:
    """What one app serves from: settings, the facade (its Redis client and clock), metrics."""

    settings: Settings
    seasons: Seasons
    metrics: Metrics
    reads: AsyncReads

    @property
    def clock(self) -> Clock:
        return self.seasons.clock


# Dependencies are async: they do no I/O, and a sync one would cost a trip to the threadpool.
async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]


async def _seasons(services: ServicesDep) -> Seasons:
    return services.seasons


async def _settings(services: ServicesDep) -> Settings:
    return services.settings


async def _metrics(services: ServicesDep) -> Metrics:
    return services.metrics


async def _now(services: ServicesDep) -> datetime:
    return services.clock()


async def _write_access(
    request: Request, settings: Annotated[Settings, Depends(_settings)]
) -> None:
    authorize(request, settings.api, "write")


async def _admin_access(
    request: Request, settings: Annotated[Settings, Depends(_settings)]
) -> None:
    authorize(request, settings.api, "admin")


SeasonsDep = Annotated[Seasons, Depends(_seasons)]
SettingsDep = Annotated[Settings, Depends(_settings)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
NowDep = Annotated[datetime, Depends(_now)]
# Route dependencies: put them in ``dependencies=[...]`` or as an unused parameter.
WriteAccess = Depends(_write_access)
AdminAccess = Depends(_admin_access)
