"""Dependencies of the HTTP routes, as ``Annotated`` aliases (one place for all of them).

Everything a route needs was built once by :func:`seasons.http.app.create_app` and sits in
``app.state.services``; these aliases hand out its parts and check access.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from redis.commands.core import Script

from config.settings import RedisSettings, Settings
from seasons.api import Seasons
from seasons.clock import Clock
from seasons.connection import backend_errors, make_async_client
from seasons.http.auth import authorize
from seasons.http.metrics import Metrics
from seasons.lanes import async_lane
from seasons.reads import RangeCall


class AsyncReads:
    """The hot range reads (top, around) on the event loop: the same prepared calls as the
    Python API's (:class:`seasons.reads.RangeCall`), awaited, so a read costs no threadpool
    hop and a slow Redis never blocks the loop. On a single server they go down an
    :class:`~seasons.lanes.AsyncLane` (one pipelined connection); on a cluster through
    redis-py's asyncio cluster client."""

    def __init__(self, cfg: RedisSettings, script: Script):
        self._script = script
        self._lane = async_lane(cfg)
        self._client = make_async_client(cfg) if self._lane is None else None
        self._on_client = (
            self._client.register_script(script.script) if self._client is not None else None
        )

    async def json(self, call: RangeCall) -> bytes:
        """The page's JSON as the script wrote it (see :meth:`RangeCall.page`)."""
        with backend_errors():
            if self._lane is not None:
                reply = await self._lane.run(self._script, call.keys, call.args)
            else:
                assert self._on_client is not None
                reply = await self._on_client(keys=call.keys, args=call.args)
        return reply if isinstance(reply, bytes) else reply.encode()

    async def close(self) -> None:
        if self._lane is not None:
            await self._lane.close()
        if self._client is not None:
            await self._client.aclose()


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
