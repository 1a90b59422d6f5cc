"""What is configured and where each board stands: boards with their current periods, and
seasons with their status and archives (``GET /v1/boards``, ``GET /v1/seasons``).

Pure functions of settings, ``now`` and what Redis and the archive directory hold; the
results are pydantic models whose ``model_dump()`` is the HTTP JSON.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from seasons import calendar, shards
from seasons import windows as win
from seasons.config.settings import BoardSettings, SeasonSpan, Settings
from seasons.connection import RedisClient
from seasons.errors import ArchiveError
from seasons.files import MANIFEST_MAX, open_regular
from seasons.keys import SEASON_ARCHIVED, SEASON_CLOSING, STATE_SEASON, Keys
from seasons.manifest import is_amendment

# A cycle of seasons never ends: list this many before the current one, and the next.
SEASONS_LISTED = 24


class PeriodInfo(BaseModel):
    # The one period of a window that never ends (alltime) has no days, start or end: null.
    period: str
    first_day: date | None
    last_day: date | None
    starts_at: datetime | None
    resets_at: datetime | None  # when the period ends and the next one begins


class WindowInfo(BaseModel):
    """A window, from the one table (``seasons.windows.SPECS``)."""

    window: str
    ids: str  # how its period ids are written
    rolled_up: bool  # a weighted aggregate of the day boards
    archived: bool  # its periods are archived when they end (seasons)
    expires: bool  # false: one period that never ends (alltime), its key without TTL
    history_last: int  # periods a history shows by default
    recent: list[PeriodInfo]  # the latest periods up to the current one, newest first


class LeagueInfo(BaseModel):
    """A board's league (``[boards.<b>.league]``), for a viewer to find it: its reads are
    ``GET /v1/leagues/{board}...``."""

    window: str  # the window whose periods the league's periods are
    tiers: list[str]  # lowest first
    cohort_size: int


class BoardInfo(BaseModel):
    board: str
    aggregate: str
    order: str
    ties: str
    windows: list[str]  # the windows this board keeps
    week_weights: list[float]
    month_weights: list[float]
    season_weights: list[float]
    max_entries: int
    # The hash tags its live keys spread over (docs/sharding.md): a member's keys are under
    # {<board>#<crc32 of its id mod shards>} when more than 1.
    shards: int = 1
    current: dict[str, PeriodInfo | None]  # window -> period (season: None between seasons)
    league: LeagueInfo | None = None  # None: the board has no league


class Boards(BaseModel):
    timezone: str
    week_start: str
    late_grace_seconds: float
    windows: list[WindowInfo]
    boards: list[BoardInfo]
    default_board: str | None  # the board a viewer sees first (None: no boards)


class ArchiveInfo(BaseModel):
    """An archived season (or a snapshot ``S@<ts>``) of one board, from its manifest."""

    season: str
    count: int | None = None
    score_sum: float | None = None
    sha256: str | None = None
    created_at: str | None = None
    file: str


BoardState = Literal["upcoming", "live", "closing", "archived", "empty"]
SeasonStatus = Literal["upcoming", "running", "ended", "closing", "archived"]

# What each state means, for the models and the OpenAPI description of GET /v1/seasons.
BOARD_STATES: dict[str, str] = {
    "upcoming": "the season has not started",
    "live": "its standings are in Redis and not archived: the season is running, or it "
    "ended and awaits its close",
    "closing": "its close is under way (final rollup, archive, verification)",
    "archived": "closed: its final standings are archived (in Redis, and as files under "
    "archive.dir, restorable with `seasons restore`)",
    "empty": "the season ended with no standings: nothing in Redis and no archive (it "
    "never had data, or its data expired before a close could archive it)",
}
SEASON_STATUSES: dict[str, str] = {
    "upcoming": "its first day has not begun",
    "running": "today is one of its days",
    "ended": "its last day is over and no board is closing or archived (yet)",
    "closing": "some boards are closing or archived, not all archived",
    "archived": "every board is archived",
}


def _described(states: dict[str, str]) -> str:
    return "; ".join(f"{name}: {text}" for name, text in states.items())


class SeasonBoard(BaseModel):
    state: BoardState = Field(description=_described(BOARD_STATES))
    archive: ArchiveInfo | None  # its archive files' manifest, if written
    snapshots: list[ArchiveInfo]  # snapshots of the running season (S@<UTC time>)


class SeasonInfo(BaseModel):
    season: str
    first_day: date
    last_day: date
    status: SeasonStatus = Field(description=_described(SEASON_STATUSES))
    boards: dict[str, SeasonBoard]  # every board (each keeps a season window)


class SeasonsList(BaseModel):
    current: str | None
    seasons: list[SeasonInfo]


def _period(p: win.Period | None, settings: Settings) -> PeriodInfo | None:
    if p is None:
        return None
    zone = settings.zone
    if p.endless:
        return PeriodInfo(period=p.id, first_day=None, last_day=None, starts_at=None,
                          resets_at=None)  # fmt: skip
    return PeriodInfo(
        period=p.id, first_day=p.first, last_day=p.last,
        starts_at=calendar.day_start(p.first, zone), resets_at=win.period_end(p, zone),
    )  # fmt: skip


def _league(cfg: BoardSettings) -> LeagueInfo | None:
    league = cfg.league
    if league is None:
        return None
    return LeagueInfo(
        window=league.window, tiers=list(league.tiers), cohort_size=league.cohort_size
    )


def boards(settings: Settings, now: datetime) -> Boards:
    """Every window, and every configured board with its settings and the current period of
    each window it keeps."""
    today = calendar.local_day(now, settings.zone)
    out = []
    for name, cfg in sorted(settings.boards.items()):
        kept = win.board_windows(cfg)
        current: dict[str, PeriodInfo | None] = {
            w.name: _period(w.period_of_day(today, settings), settings) for w in kept
        }
        out.append(BoardInfo(
            board=name, aggregate=cfg.aggregate, order=cfg.order, ties=cfg.ties,
            windows=[w.name for w in kept], week_weights=list(cfg.week_weights),
            month_weights=list(cfg.month_weights), season_weights=list(cfg.season_weights),
            max_entries=cfg.max_entries, shards=cfg.shards, current=current,
            league=_league(cfg),
        ))  # fmt: skip
    windows = [
        WindowInfo(
            window=w.name, ids=w.ids, rolled_up=w.rolled_up, archived=w.archived,
            expires=w.expires, history_last=w.history_last,
            recent=[
                info
                for p in reversed(win.recent_periods(w.name, w.history_last, now, settings))
                if (info := _period(p, settings)) is not None
            ],
        )
        for w in win.SPECS.values()
    ]  # fmt: skip
    return Boards(
        timezone=settings.timezone, week_start=settings.week_start,
        late_grace_seconds=settings.late_grace.total_seconds(), windows=windows, boards=out,
        default_board=default_board(settings),
    )  # fmt: skip


def default_board(settings: Settings) -> str | None:
    """``api.default_board`` if set, else the first board (by name) whose high scores lead,
    else the first board: a leaderboard of most points is the one most viewers look for."""
    names = sorted(settings.boards)
    if settings.api.default_board:
        return settings.api.default_board
    return next(
        (n for n in names if settings.boards[n].order == "desc"), names[0] if names else None
    )


def listed_seasons(settings: Settings, today: date) -> list[SeasonSpan]:
    """The seasons to list: all of an explicit list; of a cycle, the recent ones and the next."""
    cfg = settings.seasons
    if cfg.list:
        return list(cfg.list)
    if today < cfg.anchor:
        return [calendar.season_by_id("S1", settings)]
    current = calendar.season_of_day(today, settings)
    assert current is not None  # every day from the anchor on is in a cycle season
    number = int(current.id[1:])
    first = max(1, number - SEASONS_LISTED + 1)
    return [calendar.season_by_id(f"S{n}", settings) for n in range(first, number + 2)]


def archive_dir(settings: Settings, board: str) -> Path:
    return settings.archive.dir / settings.namespace / board


def _manifest(path: Path, season: str) -> ArchiveInfo:
    data: dict[str, Any] = {}
    try:
        with open_regular(path) as f:  # never a FIFO's open that waits for a writer
            loaded = json.loads(f.read(MANIFEST_MAX + 1))
        if isinstance(loaded, dict):
            data = loaded
    except (OSError, ValueError, ArchiveError):
        pass  # listed without its figures; `seasons restore` reports what is wrong with it
    fields = {k: data.get(k) for k in ("count", "score_sum", "sha256", "created_at")}
    if not isinstance(fields["created_at"], str | None):
        fields["created_at"] = str(fields["created_at"])
    file = str(path.with_name(path.name.replace(".manifest.json", ".jsonl.gz")))
    try:
        return ArchiveInfo(season=season, file=file, **fields)
    except ValueError:
        return ArchiveInfo(season=season, file=file)


def _archives(settings: Settings, board: str) -> dict[str, ArchiveInfo]:
    """Season id (or ``S@<ts>``) -> its archive files' manifest, for one board."""
    folder = archive_dir(settings, board)
    if not folder.is_dir():
        return {}
    out = {}
    for path in sorted(folder.glob("*.manifest.json")):
        if is_amendment(path.name):
            continue  # amended results (seasons.amend): not an archive of their own
        season = path.name[: -len(".manifest.json")]
        out[season] = _manifest(path, season)
    return out


def seasons(client: RedisClient, settings: Settings, keys: Keys, now: datetime) -> SeasonsList:
    """The listed seasons, each with its status overall and its state and archive per board
    (:data:`BOARD_STATES`, :data:`SEASON_STATUSES`)."""
    today = calendar.local_day(now, settings.zone)
    spans = listed_seasons(settings, today)
    names = sorted(settings.boards)
    # One round trip: each board's season states, and which season keys exist.
    pipe = client.pipeline(transaction=False)
    for board in names:
        pipe.hmget(keys.state(board), [STATE_SEASON + s.id for s in spans])
    # A sharded board's season lives in its stores (seasons.shards): held if any holds it.
    stores = {board: shards.stores(board, settings.boards[board]) for board in names}
    for board in names:
        for span in spans:
            for store in stores[board]:  # one EXISTS each: the stores are in other slots
                pipe.exists(keys.season(store, span.id))
    replies = pipe.execute() if names else []
    states, held = replies[: len(names)], iter(replies[len(names) :])
    exists = {
        (board, span.id): any([bool(next(held)) for _ in stores[board]])
        for board in names for span in spans
    }  # fmt: skip
    archives = {board: _archives(settings, board) for board in names}
    current = calendar.season_of_day(today, settings)
    out = []
    for i, span in enumerate(spans):
        started, ended = span.start <= today, calendar.season_end(span, settings.zone) <= now
        per_board: dict[str, SeasonBoard] = {}
        for b, board in enumerate(names):
            archive = archives[board].get(span.id)
            state = _board_state(
                states[b][i], started=started, ended=ended, held=exists[(board, span.id)],
                archived_file=archive is not None,
            )  # fmt: skip
            snaps = [a for sid, a in archives[board].items() if sid.startswith(span.id + "@")]
            per_board[board] = SeasonBoard(state=state, archive=archive, snapshots=snaps)
        out.append(SeasonInfo(
            season=span.id, first_day=span.start, last_day=span.end,
            status=_status(list(per_board.values()), started=started, ended=ended),
            boards=per_board,
        ))  # fmt: skip
    return SeasonsList(current=current.id if current else None, seasons=out)


def _board_state(
    recorded: Any, *, started: bool, ended: bool, held: bool, archived_file: bool
) -> BoardState:
    """One board's state in one season: what its close recorded in the board's state hash,
    else what the season's dates, its key in Redis and its archive files say."""
    if recorded == SEASON_ARCHIVED:
        return "archived"
    if recorded == SEASON_CLOSING:
        return "closing"
    if not started:
        return "upcoming"
    if not ended or held:
        return "live"
    return "archived" if archived_file else "empty"


def _status(boards: list[SeasonBoard], *, started: bool, ended: bool) -> SeasonStatus:
    if boards and all(b.state == "archived" for b in boards):
        return "archived"
    if any(b.state in ("closing", "archived") for b in boards):
        return "closing"
    if not started:
        return "upcoming"
    return "ended" if ended else "running"
