"""Where a read reads (:mod:`seasons.reads`): a board, a window and a period resolved into the
keys that hold them, the live key and its archive, the twin a hidden member's self-view reads
(``seasons/lua/lib/hidden.lua``) and the sets the board's tie rule keeps beside them.

``current`` and ``previous``, and the periods of a history, depend on the local day alone
(settings are frozen): they are remembered until it ends.
"""

from __future__ import annotations

from datetime import datetime

from seasons import calendar, replies, ties
from seasons import windows as win
from seasons.clock import Clock, system_clock
from seasons.config.settings import BoardSettings, Settings
from seasons.errors import NotRanked, UnknownBoard
from seasons.keys import Keys


def unranked(board: str, window: str, member: str, period_id: str) -> NotRanked:
    """The error of a read of ``member``, not on the board in period ``period_id``."""
    return NotRanked(
        f"{member!r} is not ranked on board {board!r}, {window} {period_id}",
        {"board": board, "window": window, "period": period_id, "member": member},
    )


class Targets:
    """The keys of the reads of one namespace's boards (what :class:`seasons.reads.Reads`
    stands on)."""

    def __init__(self, settings: Settings, keys: Keys, clock: Clock = system_clock):
        self.settings = settings
        self.keys = keys
        self.clock = clock
        # (window, "current" | "previous") -> (valid from, valid until, period): see _resolve.
        self._relative: dict[tuple[str, str], tuple[datetime, datetime, win.Period]] = {}
        # (board, window, last) -> (valid from, valid until, KEYS, periods): see _recent.
        self._histories: dict[
            tuple[str, str, int], tuple[datetime, datetime, list[str], list[bytes], list[str]]
        ] = {}

    def board(self, board: str) -> BoardSettings:
        """The settings of ``board``; :class:`UnknownBoard` naming the configured boards."""
        cfg = self.settings.boards.get(board)
        if cfg is None:
            raise UnknownBoard(board, list(self.settings.boards))
        return cfg

    def target(
        self, board: str, window: str, period: str, now: datetime | None = None
    ) -> tuple[str, str, str]:
        """(period id, live key, archive key) of a read. Seasons read their archive once it
        exists; a snapshot id ``S@<timestamp>`` exists only as an archive."""
        spec = win.board_window(board, self.board(board), window)
        if spec.archived and "@" in period:
            base = period.split("@", 1)[0]
            calendar.season_by_id(base, self.settings)  # the season part must name a season
            key = self.keys.archive(board, period)
            return period, key, key
        p = self._resolve(window, period, self.clock() if now is None else now)
        live = self.keys.window(board, p.window, p.id)
        archive = self.keys.archive(board, p.id) if spec.archived else live
        return p.id, live, archive

    def beside(self, board: str, window: str, period_id: str) -> tuple[str, str] | None:
        """(the set beside the live key, the set beside the archive key) of a read of
        ``period_id`` (an id as :meth:`target` answers it) that the board's tie rule keeps
        (:meth:`seasons.ties.TieSpec.beside`: reach sets, distinct sets), or None: a
        snapshot's both are the archive's; a window without archives has one key, twice."""
        cfg = self.board(board)
        name = ties.of(cfg).beside(self.keys)
        if name is None:
            return None
        archived = win.board_window(board, cfg, window).archived
        archive = name(board, "archive", period_id)
        if archived and "@" in period_id:
            return archive, archive
        live = name(board, win.spec(window).name, period_id)
        return live, archive if archived else live

    def _resolve(self, window: str, period: str, now: datetime) -> win.Period:
        """:func:`win.resolve_period`, remembered for ``current`` and ``previous`` until the
        local day of ``now`` ends: they depend on that day alone (settings are frozen)."""
        if period != "current" and period != "previous":
            return win.resolve_period(window, period, now, self.settings)
        hit = self._relative.get((window, period))
        if hit is not None and hit[0] <= now < hit[1]:
            return hit[2]
        found = win.resolve_period(window, period, now, self.settings)
        self._relative[(window, period)] = (*self._today(now), found)
        return found

    def not_ranked(self, board: str, window: str, member: str, period: str) -> NotRanked:
        """The error of every interface for a member that is not on the board (the CLI's
        exit status 3, HTTP's 404 not_ranked); ``period`` as asked (``current``...)."""
        return unranked(board, window, member, self.target(board, window, period)[0])

    def _recent(
        self, board: str, cfg: BoardSettings, archived: bool, window: str, last: int
    ) -> tuple[list[str], list[bytes], list[str]]:
        """The KEYS of a history's read_points call, the start of each period's JSON
        (``{"period":<id>,"rank":``) and each period's live key, remembered until the local
        day ends: the last periods depend on that day alone (settings are frozen)."""
        now = self.clock()
        hit = self._histories.get((board, window, last))
        if hit is not None and hit[0] <= now < hit[1]:
            return hit[2], hit[3], hit[4]
        periods = win.recent_periods(window, last, now, self.settings)
        keys = [self.keys.meta(board), self.keys.moderation(board)]
        lives = []
        for p in periods:
            live = self.keys.window(board, p.window, p.id)
            archive = self.keys.archive(board, p.id) if archived else live
            twin, sides = self._twin(board, window, p.id, live)
            keys += [live, archive, twin, *sides]
            lives.append(live)
        ids = [b'{"period":' + replies.text(p.id) + b',"rank":' for p in periods]
        if len(self._histories) >= len(self.settings.boards) * 64:
            self._histories.clear()  # a bound: histories of many lengths were asked
        self._histories[(board, window, last)] = (*self._today(now), keys, ids, lives)
        return keys, ids, lives

    def _today(self, now: datetime) -> tuple[datetime, datetime]:
        """The start and end of the local day of ``now``."""
        zone = self.settings.zone
        today = calendar.local_day(now, zone)
        return calendar.day_start(today, zone), calendar.day_end(today, zone)

    def _points_keys(self, board: str, window: str, pid: str, live: str, archive: str) -> list[str]:
        """The KEYS of a read_points call on one board: meta, the moderation hash, live,
        archive, the live key's twin and the sets their tie rule keeps beside them
        (:meth:`_sides`)."""
        twin, sides = self._twin(board, window, pid, live)
        return [self.keys.meta(board), self.keys.moderation(board), live, archive, twin, *sides]

    def _twin(self, board: str, window: str, pid: str, live: str) -> tuple[str, tuple[str, ...]]:
        """Where a hidden member's self-view of a read reads (``seasons/lua/lib/hidden.lua``):
        the twin of the live key (a snapshot, which is its archive alone, names its own key
        there, which the scripts read as no twin); and the sets the board's tie rule keeps
        beside the live and the archive key (:meth:`beside`), with the twin's reach set on an
        earliest board."""
        sides: tuple[str, ...] = self.beside(board, window, pid) or ()
        snapshot = "@" in pid and win.board_window(board, self.board(board), window).archived
        twin = live if snapshot else self.keys.twin_of(live)
        if sides and self.board(board).ties == "earliest":
            sides = (*sides, twin if snapshot else self.keys.twin_of(sides[0]))
        return twin, sides

    @staticmethod
    def _cap(cfg: BoardSettings, window: str) -> int:
        """The size a trimmed board keeps on ``window`` (0: untrimmed): day boards never
        are. A hidden member's self-view stands within it."""
        return cfg.max_entries if win.spec(window).rolled_up else 0
