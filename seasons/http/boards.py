"""Reads of boards: pages, members, around, friends lookup and history (SPEC section 9).

Every route calls the Python API (:class:`seasons.Seasons`) and returns its model, so each
JSON body is the ``model_dump()`` of what the Python API and the CLI's ``--json`` give for the
same query. Limits are checked by the read path, which names the limit in a 422.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from seasons import catalog
from seasons.api import Seasons
from seasons.errors import InvalidMember, NotRanked
from seasons.events import member_problem
from seasons.http.deps import NowDep, Services, ServicesDep, SettingsDep
from seasons.http.errors import ERROR_RESPONSES
from seasons.models import Entry, History, Page
from seasons.reads import MAX_LAST, MAX_LIMIT, MAX_LOOKUP, MAX_SIZE, RangeCall

router = APIRouter(prefix="/v1/boards", tags=["boards"], responses=ERROR_RESPONSES)

# Bounds are documented in the schema (json_schema_extra) but checked by the read path, so a
# request over a limit gets the same limit_exceeded error as the Python API and the CLI.
Board = Annotated[str, Path(description="A configured board")]
Window = Annotated[str, Path(description="day, week or season")]
WindowQ = Annotated[str, Query(description="day, week or season")]
Member = Annotated[str, Path(description="Member id (1-128 bytes of UTF-8)")]
PeriodQ = Annotated[
    str,
    Query(description="A period id (YYYY-MM-DD for day/week, a season id, or S@<ts> for a "
          "snapshot), current or previous"),
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
    int, Query(description=f"Periods, 1-{MAX_LAST}, oldest first",
               json_schema_extra={"minimum": 1, "maximum": MAX_LAST})
]  # fmt: skip


class LookupIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    members: list[str] = Field(description=f"Up to {MAX_LOOKUP} member ids")


@router.get("", response_model=catalog.Boards, summary="Boards, their config and current periods")
async def list_boards(settings: SettingsDep, now: NowDep) -> catalog.Boards:
    return catalog.boards(settings, now)


# Registered before the member routes: "/members/{member:path}" takes slashes (member ids may have
# them) and would otherwise swallow ".../history" and ".../around".
@router.get(
    "/{board}/members/{member:path}/history", response_model=History,
    summary="A member's rank and score in each of the last periods",
)  # fmt: skip
async def member_history(
    request: Request, services: ServicesDep, board: Board, member: Member,
    window: WindowQ = "day", last: LastQ = 14,
) -> History:  # fmt: skip
    return await read_history(services, board, path_member(request, member), window, last)


@router.get(
    "/{board}/{window}/members/{member:path}/around", response_model=Page,
    summary="Entries centred on a member",
)  # fmt: skip
async def around_member(
    request: Request, services: ServicesDep, board: Board, window: Window, member: Member,
    size: SizeQ = 5, period: PeriodQ = "current",
) -> Response:  # fmt: skip
    member = path_member(request, member)
    return _json(await read_around_member(services, board, window, member, size, period))


@router.get(
    "/{board}/{window}/members/{member:path}", response_model=Entry,
    summary="A member's entry (404 not_ranked if absent)",
)  # fmt: skip
async def member_entry(
    request: Request, services: ServicesDep, board: Board, window: Window, member: Member,
    period: PeriodQ = "current",
) -> Entry:  # fmt: skip
    return await read_entry(services, board, window, path_member(request, member), period)


@router.get(
    "/{board}/{window}/ranks/{rank}/around", response_model=Page,
    summary="Entries centred on a rank",
)  # fmt: skip
async def around_rank(
    services: ServicesDep, board: Board, window: Window,
    rank: Annotated[int, Path(description="1-based rank", json_schema_extra={"minimum": 1})],
    size: SizeQ = 5, period: PeriodQ = "current",
) -> Response:  # fmt: skip
    return _json(await read_around_rank(services, board, window, rank, size, period))


@router.post(
    "/{board}/{window}/lookup", response_model=list[Entry],
    summary="The ranked ones among the given members (a friends board), best first",
)  # fmt: skip
async def lookup(
    services: ServicesDep, board: Board, window: Window, body: LookupIn,
    period: PeriodQ = "current",
) -> list[Entry]:  # fmt: skip
    s = services.seasons
    found: list[Entry] = await services.reads.points(
        s.reader.members_call(board, window, body.members, period, s.clock())
    )
    return found


@router.get("/{board}/{window}", response_model=Page, summary="A page of the board, best first")
async def page(
    services: ServicesDep, board: Board, window: Window,
    period: PeriodQ = "current", limit: LimitQ = 10, offset: OffsetQ = 0,
) -> Response:  # fmt: skip
    return _json(await read_page(services, board, window, period, limit, offset))


# --- the reads themselves: the routes above and the fast path (seasons.http.fast) both call
# these, with the arguments already parsed, so the two cannot answer differently.


async def read_page(
    services: Services, board: str, window: str, period: str, limit: int, offset: int
) -> bytes:
    """The JSON of a page (a :class:`~seasons.models.Page`), as the script wrote it."""
    s = services.seasons
    call = s.reader.page_call(board, window, period, s.clock(), limit=limit, offset=offset)
    return await services.reads.json(call)


async def read_around_rank(
    services: Services, board: str, window: str, rank: int, size: int, period: str
) -> bytes:
    """The JSON of the page centred on ``rank``."""
    s = services.seasons
    call = s.reader.around_rank_call(board, window, rank, period, s.clock(), size=size)
    return await services.reads.json(call)


async def read_around_member(
    services: Services, board: str, window: str, member: str, size: int, period: str
) -> bytes:
    """The JSON of the page centred on ``member``; :class:`NotRanked` if it is not ranked."""
    s = services.seasons
    call = s.reader.around_member_call(board, window, member, period, s.clock(), size=size)
    reply = await services.reads.json(call)
    if RangeCall.empty(reply):
        raise _not_ranked(s, board, window, member, period)
    return reply


async def read_entry(
    services: Services, board: str, window: str, member: str, period: str
) -> Entry:
    """``member``'s entry; :class:`NotRanked` if it is not ranked."""
    s = services.seasons
    found: list[Entry] = await services.reads.points(
        s.reader.members_call(board, window, [member], period, s.clock())
    )
    if not found:
        raise _not_ranked(s, board, window, member, period)
    return found[0]


async def read_history(
    services: Services, board: str, member: str, window: str, last: int
) -> History:
    """``member``'s rank and score in each of the last ``last`` periods of ``window``."""
    # The facade's history() gives the points only; the reader's History is the whole JSON.
    s = services.seasons
    history: History = await services.reads.points(
        s.reader.history_call(board, member, window, s.clock(), last=last)
    )
    return history


# The hot reads (page, around) take one dependency and answer with a plain Response holding
# the script's JSON: each FastAPI dependency, validation and serialisation costs CPU per
# request (python -m bench, HTTP). The JSON is a Page's (tests/test_http_*.py check it).
def _json(reply: bytes) -> Response:
    return Response(reply, media_type="application/json")


def _not_ranked(s: Seasons, board: str, window: str, member: str, period: str) -> NotRanked:
    """The same error as the CLI's ``rank``/``around`` give (exit status 3 there)."""
    period_id = s.reader.target(board, window, period, s.clock())[0]
    return NotRanked(
        f"{member!r} is not ranked on board {board!r}, {window} {period_id}",
        {"board": board, "window": window, "period": period_id, "member": member},
    )


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
