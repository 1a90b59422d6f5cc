"""``GET /v1/seasons``: the seasons, their status, and each board's state and archives."""

from __future__ import annotations

from fastapi import APIRouter

from seasons import catalog
from seasons.http.deps import SeasonsDep
from seasons.http.errors import ERROR_RESPONSES

router = APIRouter(prefix="/v1", tags=["seasons"], responses={503: ERROR_RESPONSES[503]})


def _listed(states: dict[str, str]) -> str:
    return "\n".join(f"- `{name}`: {text}" for name, text in states.items())


@router.get(
    "/seasons", response_model=catalog.SeasonsList,
    summary="Seasons with status (upcoming, running, ended, closing, archived) and archives",
    description=(
        "The configured seasons (of a cycle: the recent ones and the next), each with its "
        "status and, for each board, that board's state, its archive's manifest and its "
        "snapshots. Days are local dates in the configured "
        "timezone.\n\nA season's `status`:\n" + _listed(catalog.SEASON_STATUSES)
        + "\n\nA board's `state` in a season:\n" + _listed(catalog.BOARD_STATES)
    ),
)  # fmt: skip
def list_seasons(s: SeasonsDep) -> catalog.SeasonsList:
    return catalog.seasons(s.client, s.settings, s.keys, s.clock())
