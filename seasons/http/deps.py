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

from seasons.api import Seasons
from seasons.clock import Clock
from seasons.config.settings import Settings
from seasons.executor import AsyncExecutor
from seasons.http.auth import Level
from seasons.http.metrics import Metrics
from seasons.reads import Read


@dataclass(frozen=True)
class Services:
    """What one app serves from: settings, the facade (its Redis client, clock and prepared
    reads), metrics, and the executor that runs the facade's reads on the event loop."""

    settings: Settings
    seasons: Seasons
    metrics: Metrics
    executor: AsyncExecutor

    async def body(self, read: Read[Any]) -> bytes:
        """The JSON body of a prepared read (:class:`~seasons.errors.NotRanked` where the
        member is not on the board): awaited, so a read costs no threadpool hop and a slow
        Redis never blocks the loop."""
        reply = await self.executor.run(read.call, read.plan)
        return read.body(reply)

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
# Where it records an admin call's actor (the token's name, or "local") and request id.
ACTOR = "seasons.actor"
REQUEST_ID = "seasons.request_id"
# Documents "Authorization: Bearer <token>" in the schema; the guard reads the header itself.
_bearer = HTTPBearer(
    auto_error=False,
    description="api.write_token (writes), or api.admin_token or one of api.admin_tokens "
    "(writes and admin calls)",
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


async def _caller(request: Request) -> Caller:
    scope = request.scope
    if scope.get(GUARDED) != "admin":  # only admin routes take a Caller: the guard's bug
        raise RuntimeError(f"the caller of {request.url.path} was not named by the guard")
    return Caller(actor=scope[ACTOR], request_id=scope[REQUEST_ID])


@dataclass(frozen=True)
class Caller:
    """Who made an admin call (the guard's findings): what its audit entry records."""

    actor: str
    request_id: str


SeasonsDep = Annotated[Seasons, Depends(_seasons)]
CallerDep = Annotated[Caller, Depends(_caller)]
SettingsDep = Annotated[Settings, Depends(_settings)]
MetricsDep = Annotated[Metrics, Depends(_metrics)]
NowDep = Annotated[datetime, Depends(_now)]
# Route dependencies: put them in ``dependencies=[...]`` or as an unused parameter.
WriteAccess = Depends(_write_access)
AdminAccess = Depends(_admin_access)
