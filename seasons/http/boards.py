"""Reads of boards: pages, members, around, climb, friends lookup and history.

Every route runs the facade's prepared read (:attr:`seasons.Seasons.reads`) on the event loop
and sends the script's JSON, the same JSON the Python API validates into its model: each body
is the ``model_dump_json()`` of what the Python API gives for the same query, and the CLI's
``--json`` (scores in their one form, :data:`seasons.models.Score`: ``3`` for ``3.0``; on a
composite board each with its ``parts``). Limits are checked when the read is prepared, which
names the limit in a 422.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from seasons import catalog
from seasons import windows as win
from seasons.errors import InvalidMember
from seasons.events import member_problem
from seasons.http.deps import NowDep, Services, ServicesDep, SettingsDep
from seasons.http.errors import ERROR_RESPONSES
from seasons.models import Climb, Entry, EntryDetail, History, Page
from seasons.read_limits import (
    DEFAULT_TO_TEXT,
    MAX_LAST,
    MAX_LIMIT,
    MAX_LOOKUP,
    MAX_SIZE,
    MAX_TARGET_RANK,
    MAX_TARGETS,
    parse_targets,
)  # fmt: skip
from seasons.reads import Read

router = APIRouter(prefix="/v1/boards", tags=["boards"], responses=ERROR_RESPONSES)

# Bounds are documented in the schema (json_schema_extra) but checked by the read path, so a
# request over a limit gets the same limit_exceeded error as the Python API and the CLI.
Board = Annotated[str, Path(description="A configured board")]
# The windows are listed in the schema from the one table (seasons.windows.SPECS); which
# of them a board keeps is checked by the read path (bad_window, naming the board's windows).
_WINDOWS = {"enum": list(win.WINDOWS)}
_WINDOW_HELP = "A window the board keeps (GET /v1/boards lists each board's windows)"
Window = Annotated[str, Path(description=_WINDOW_HELP, json_schema_extra=_WINDOWS)]
WindowQ = Annotated[str, Query(description=_WINDOW_HELP, json_schema_extra=_WINDOWS)]
Member = Annotated[str, Path(description="Member id (1-128 bytes of UTF-8)")]
PeriodQ = Annotated[
    str,
    Query(description="A period id (" + "; ".join(f"{w.name}: {w.ids}" for w in win.SPECS.values())
          + "; or S@<ts> for a season snapshot), current or previous"),
]  # fmt: skip
LimitQ = Annotated[
    int, Query(description=f"Entries per page, 1-{MAX_LIMIT}",
               json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT})
]  # fmt: skip
OffsetQ = Annotated[int, Query(description="Entries to skip", json_schema_extra={"minimum": 0})]
SizeQ = Annotated[
    int, Query(description=f"Entries returned, 1-{MAX_SIZE}",
               json_schema_extra={"minimum": 1, "maximum": MAX_SIZE})
]  # fmt: skip
LastQ = Annotated[
    int | None,
    Query(description=f"Periods, 1-{MAX_LAST}, oldest first; by default the window's own "
                      "number (history_last of GET /v1/boards: 14 days, 12 weeks, months or "
                      "seasons)",
          json_schema_extra={"minimum": 1, "maximum": MAX_LAST}),
]  # fmt: skip


ToQ = Annotated[
    str, Query(description=f"Ranks to reach, comma separated: 1-{MAX_TARGETS} of them, each "
               f"1-{MAX_TARGET_RANK}", examples=["10,100"])
]  # fmt: skip


class LookupIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    members: list[str] = Field(description=f"Up to {MAX_LOOKUP} member ids")


@router.get("", response_model=catalog.Boards, summary="Boards, their config and current periods")
async def list_boards(settings: SettingsDep, now: NowDep) -> catalog.Boards:
    return catalog.boards(settings, now)


def _answers(model: Any) -> dict[int | str, dict[str, Any]]:
    """The documented 200 of a read route: ``model``'s schema. The route sends the read
    script's JSON of that model as it is (:meth:`seasons.reads.Read.body`), so FastAPI does
    not serialise it again (``response_model=None``)."""
    return {200: {"model": model, "description": "Successful Response"}, **ERROR_RESPONSES}


# Registered before the member routes: "/members/{member:path}" takes slashes (member ids may have
# them) and would otherwise swallow ".../history", ".../around" and ".../climb".
@router.get(
    "/{board}/members/{member:path}/history", response_model=None, responses=_answers(History),
    summary="A member's rank and score in each of the last periods",
)  # fmt: skip
async def member_history(
    request: Request, services: ServicesDep, board: Board, member: Member,
    window: WindowQ = "day", last: LastQ = None,
) -> JsonBody:  # fmt: skip
    read = history(services, board, path_member(request, member), window, last)
    return JsonBody(await services.body(read))


@router.get(
    "/{board}/{window}/members/{member:path}/around", response_model=None,
    responses=_answers(Page), summary="Entries centred on a member",
)  # fmt: skip
async def around_member(
    request: Request, services: ServicesDep, board: Board, window: Window, member: Member,
    size: SizeQ = 5, period: PeriodQ = "current",
) -> JsonBody:  # fmt: skip
    read = around(services, board, window, path_member(request, member), size, period)
    return JsonBody(await services.body(read))


@router.get(
    "/{board}/{window}/members/{member:path}/climb", response_model=None,
    responses=_answers(Climb),
    summary="The scores at some ranks and how far a member's score is from each",
)  # fmt: skip
async def member_climb(
    request: Request, services: ServicesDep, board: Board, window: Window, member: Member,
    to: ToQ = DEFAULT_TO_TEXT, period: PeriodQ = "current",
) -> JsonBody:  # fmt: skip
    read = climb(services, board, window, path_member(request, member), to, period)
    return JsonBody(await services.body(read))


@router.get(
    "/{board}/{window}/members/{member:path}", response_model=None,
    responses=_answers(EntryDetail),
    summary="A member's entry with its percentile and gap up (404 not_ranked if absent)",
)  # fmt: skip
async def member_entry(
    request: Request, services: ServicesDep, board: Board, window: Window, member: Member,
    period: PeriodQ = "current",
) -> JsonBody:  # fmt: skip
    read = entry(services, board, window, path_member(request, member), period)
    return JsonBody(await services.body(read))


@router.get(
    "/{board}/{window}/ranks/{rank}/around", response_model=None, responses=_answers(Page),
    summary="Entries centred on a rank",
)  # fmt: skip
async def around_rank(
    services: ServicesDep, board: Board, window: Window,
    rank: Annotated[int, Path(description="1-based rank", json_schema_extra={"minimum": 1})],
    size: SizeQ = 5, period: PeriodQ = "current",
) -> JsonBody:  # fmt: skip
    return JsonBody(await services.body(ranked(services, board, window, rank, size, period)))


@router.post(
    "/{board}/{window}/lookup", response_model=None, responses=_answers(list[Entry]),
    summary="The ranked ones among the given members (a friends board), best first",
)  # fmt: skip
async def lookup(
    services: ServicesDep, board: Board, window: Window, body: LookupIn,
    period: PeriodQ = "current",
) -> JsonBody:  # fmt: skip
    read = services.seasons.reads.lookup(board, window, body.members, period)
    return JsonBody(await services.body(read))


@router.get(
    "/{board}/{window}", response_model=None, responses=_answers(Page),
    summary="A page of the board, best first",
)  # fmt: skip
async def page(
    services: ServicesDep, board: Board, window: Window,
    period: PeriodQ = "current", limit: LimitQ = 10, offset: OffsetQ = 0,
) -> JsonBody:  # fmt: skip
    return JsonBody(await services.body(top(services, board, window, period, limit, offset)))


# --- the reads themselves, prepared by the facade: the routes above and the fast path
# (seasons.http.fast) both call these, with the arguments already parsed, so the two cannot
# answer differently.


def top(
    services: Services, board: str, window: str, period: str, limit: int, offset: int
) -> Read[Page]:
    return services.seasons.reads.page(board, window, period, limit=limit, offset=offset)


def ranked(
    services: Services, board: str, window: str, rank: int, size: int, period: str
) -> Read[Page]:
    return services.seasons.reads.around_rank(board, window, rank, period, size=size)


def around(
    services: Services, board: str, window: str, member: str, size: int, period: str
) -> Read[Page | None]:
    return services.seasons.reads.around_member(board, window, member, period, size=size)


def entry(
    services: Services, board: str, window: str, member: str, period: str
) -> Read[EntryDetail | None]:
    return services.seasons.reads.entry(board, window, member, period)


def climb(
    services: Services, board: str, window: str, member: str, to: str, period: str
) -> Read[Climb | None]:
    ranks = parse_targets(to)
    return services.seasons.reads.climb(board, window, member, period, to=ranks)


def history(
    services: Services, board: str, member: str, window: str, last: int | None
) -> Read[History]:
    return services.seasons.reads.history(board, member, window, last=last)


class JsonBody(Response):
    """A body that is JSON already (a read script's reply)."""

    media_type = "application/json"


def path_member(request: Request, member: str, *, stored: bool = False) -> str:
    """``member`` as the route got it from the path, or :class:`InvalidMember` if its bytes
    are not UTF-8. The ASGI server (uvicorn; httpx's transport in tests) percent-decodes the
    path with ``errors="replace"``, so ``%FF`` or ``%ED%A0%80`` (a surrogate) reach the route
    as U+FFFD, a valid character that could even be ranked: only the raw path tells them from
    a real U+FFFD (``%EF%BF%BD``). The member rule itself is checked by the read path and the
    erasure, for every interface (``stored``: the erasure's rule, see
    :func:`seasons.events.check_stored_member`)."""
    if "\ufffd" not in member:
        return member
    raw = request.scope.get("raw_path")
    if not raw:
        return member
    # httpx's ASGI transport puts the query in raw_path; ASGI servers do not.
    data = unquote_to_bytes(raw.split(b"?", 1)[0])
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return member
    # Match the route once more on the path decoded with surrogateescape: each byte that is
    # not UTF-8 becomes a lone surrogate, which the member rule refuses and names.
    text = data.decode("utf-8", "surrogateescape")
    root = request.scope.get("root_path", "")
    if root and text.startswith(root):
        text = text[len(root) :]
    route = request.scope.get("route")
    found = route.path_regex.match(text) if route is not None else None
    raw_member = found.group("member") if found is not None else text
    problem = member_problem(raw_member, stored=stored) or InvalidMember(
        f"the path is not valid UTF-8: {text!r}", {"member": None}
    )
    raise problem
