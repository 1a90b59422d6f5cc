"""``GET /v1/seasons``: the seasons, their status, and each board's state and archives."""

from __future__ import annotations

from fastapi import APIRouter

from seasons import catalog
from seasons.http.deps import SeasonsDep
from seasons.http.errors import ERROR_RESPONSES

router = APIRouter(prefix="/v1", tags=["seasons"], responses={503: ERROR_RESPONSES[503]})


@router.get(
    "/seasons", response_model=catalog.SeasonsList,
    summary="Seasons with status (upcoming, running, ended, closing, archived) and archives",
)  # fmt: skip
def list_seasons(s: SeasonsDep) -> catalog.SeasonsList:
    return catalog.seasons(s.client, s.settings, s.keys, s.clock())
