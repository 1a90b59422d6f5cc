"""Dependencies of the HTTP routes, as ``Annotated`` aliases (one place for all of them).

Everything a route needs was built once by :func:`seasons.http.app.create_app` and sits in
``app.state.services``; these aliases hand out its parts. ``WriteAccess`` and ``AdminAccess``
declare a route's access level: :mod:`seasons.http.guard` reads the declaration when the app
is built and checks the token from the headers before the body is read; the dependencies
themselves only document the bearer auth in the schema and make sure the guard ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from redis.commands.core import Script

from config.settings import RedisSettings, Settings
from seasons.api import Seasons
from seasons.clock import Clock
from seasons.connection import backend_errors, make_async_client
from seasons.http.auth import Level
from seasons.http.metrics import Metrics
from seasons.lanes import async_lane
from seasons.reads import PointsCall, RangeCall
from seasons.scripts import Scripts


class AsyncReads:
    """The reads on the event loop: the same prepared calls as the Python API's
    (:class:`~seasons.reads.RangeCall` for pages and around, :class:`~seasons.reads.PointsCall`
    for a member's entry, lookup and history), awaited, so a read costs no threadpool hop and
    a slow Redis never blocks the loop. On a single server they go down an
    :class:`~seasons.lanes.AsyncLane` (one pipelined connection); on a cluster through
    redis-py's asyncio cluster client."""

    def __init__(self, cfg: RedisSettings, scripts: Scripts):
        self._range, self._points = scripts.read_range, scripts.read_points
        self._lane = async_lane(cfg)
        self._client = make_async_client(cfg) if self._lane is None else None
        # On the asyncio client: the same scripts, registered with it (EVALSHA, NOSCRIPT).
        self._registered = (
            {s: self._client.register_script(s.script) for s in (self._range, self._points)}
            if self._client is not None
            else {}
        )

    async def _run(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        with backend_errors():
            if self._lane is not None:
                return await self._lane.run(script, keys, args)
            return await self._registered[script](keys=keys, args=args)

    async def json(self, call: RangeCall) -> bytes:
        """The page's JSON as the script wrote it (see :meth:`RangeCall.page`)."""
        reply = await self._run(self._range, call.keys, call.args)
        return reply if isinstance(reply, bytes) else reply.encode()

    async def points(self, call: PointsCall) -> Any:
        """The result of a points read (no call when it asks for nothing)."""
        reply = await self._run(self._points, call.keys, call.args) if call.asks else None
        return call.finish(reply)

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


# The scope key where the guard records the access level it checked.
GUARDED = "seasons.access"
# Documents "Authorization: Bearer <token>" in the schema; the guard reads the header itself.
_bearer = HTTPBearer(
    auto_error=False,
    description="api.write_token (writes) or api.admin_token (writes and admin calls)",
)
Bearer = Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]


def _checked(request: Request, level: Level) -> None:
    # Fails closed: a route declaring a level that the guard did not check (a route the
    # guard's table missed) is a bug, never an open door.
    if request.scope.get(GUARDED) != level:
        raise RuntimeError(f"{level} access of {request.url.path} was not checked by the guard")


async def _write_access(request: Request, _: Bearer) -> None:
    _checked(request, "write")


async def _admin_access(request: Request, _: Bearer) -> None:
    _checked(request, "admin")


# What the guard looks for among a route's dependencies.
ACCESS_LEVELS: dict[Any, Level] = {_write_access: "write", _admin_access: "admin"}


SeasonsDep = Annotated[Seasons, Depends(_seasons)]
SettingsDep = Annotated[Settings, Depends(_settings)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
NowDep = Annotated[datetime, Depends(_now)]
# Route dependencies: put them in ``dependencies=[...]`` or as an unused parameter.
WriteAccess = Depends(_write_access)
AdminAccess = Depends(_admin_access)
