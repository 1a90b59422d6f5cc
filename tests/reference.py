"""A plain-Python reference model of docs/contract.md (time, boards and scores, writes), for
the core's correctness tests.

Windows: day, week, month (calendar months, weighted by day of month) and season.

It shares no code with ``seasons/``: the calendar is re-derived from ``zoneinfo`` (a day's first
instant by bisecting UTC seconds, a week's first day by walking back, seasons by counting from
the anchor), boards are dicts recomputed from every accepted event with the contract's formulas,
and ranks come from sorting by Redis's own order (score, then member bytes). Only the settings
objects of ``config`` are read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo

from seasons.config.settings import BoardSettings, Settings

WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
ONE_DAY = timedelta(days=1)
DEDUPE = timedelta(hours=48)
FUTURE = timedelta(minutes=5)
META_FIELDS = 16

Scores = dict[str, float]


# --- the calendar ---------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _first_instant(day: date, zone_name: str) -> int:
    """Epoch second of the first instant whose local date in ``zone_name`` is ``day``."""
    zone = ZoneInfo(zone_name)
    midnight_as_utc = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())
    lo, hi = midnight_as_utc - 26 * 3600, midnight_as_utc + 26 * 3600  # local date < day, >= day

    def reached(t: int) -> bool:
        return datetime.fromtimestamp(t, UTC).astimezone(zone).date() >= day

    assert not reached(lo) and reached(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reached(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class Season:
    id: str
    first: date
    last: date


class Calendar:
    """Days, weeks, months and seasons of one configuration, derived from first principles."""

    def __init__(self, settings: Settings):
        self.zone_name = settings.timezone
        self.zone = ZoneInfo(settings.timezone)
        self.week_start = WEEKDAY_NAMES.index(settings.week_start)
        self.grace = settings.late_grace
        self.retention = settings.retention
        self.cycle_anchor = settings.seasons.anchor
        self.cycle_length = settings.seasons.length_days
        self.season_list = [Season(s.id, s.start, s.end) for s in settings.seasons.list]

    # days
    def local_date(self, instant: datetime) -> date:
        return instant.astimezone(self.zone).date()

    def day_start(self, day: date) -> datetime:
        return datetime.fromtimestamp(_first_instant(day, self.zone_name), UTC)

    def day_end(self, day: date) -> datetime:
        return self.day_start(day + ONE_DAY)

    # weeks
    def week_first(self, day: date) -> date:
        while day.weekday() != self.week_start:
            day -= ONE_DAY
        return day

    def week_days(self, first: date) -> list[date]:
        return [first + timedelta(days=i) for i in range(7)]

    # months
    def month_days(self, any_day: date) -> list[date]:
        """Every day of the calendar month holding ``any_day``, walked one day at a time."""
        day = any_day
        while (day - ONE_DAY).month == any_day.month:
            day -= ONE_DAY
        out = []
        while day.month == any_day.month:
            out.append(day)
            day += ONE_DAY
        return out

    # seasons
    def season_of(self, day: date) -> Season | None:
        if self.season_list:
            return next((s for s in self.season_list if s.first <= day <= s.last), None)
        if day < self.cycle_anchor:
            return None
        number, first = 1, self.cycle_anchor
        while day > first + timedelta(days=self.cycle_length - 1):
            number, first = number + 1, first + timedelta(days=self.cycle_length)
        return Season(f"S{number}", first, first + timedelta(days=self.cycle_length - 1))

    def season_by_id(self, season_id: str) -> Season:
        if self.season_list:
            return next(s for s in self.season_list if s.id == season_id)
        number = int(season_id[1:])
        first = self.cycle_anchor + timedelta(days=self.cycle_length * (number - 1))
        return Season(season_id, first, first + timedelta(days=self.cycle_length - 1))

    def season_week(self, day: date, season: Season) -> int:
        """0-based week of the season: days 1-7 are week 0, days 8-14 week 1, ..."""
        week, start = 0, season.first
        while day >= start + timedelta(days=7):
            week, start = week + 1, start + timedelta(days=7)
        return week

    # periods
    def period_id(self, window: str, day: date) -> str | None:
        if window == "day":
            return day.isoformat()
        if window == "week":
            return self.week_first(day).isoformat()
        if window == "month":
            return f"{day.year:04d}-{day.month:02d}"
        season = self.season_of(day)
        return season.id if season else None

    def period_days(self, window: str, pid: str) -> list[date]:
        if window == "day":
            return [date.fromisoformat(pid)]
        if window == "week":
            return self.week_days(date.fromisoformat(pid))
        if window == "month":
            year, month = (int(x) for x in pid.split("-"))
            return self.month_days(date(year, month, 1))
        s = self.season_by_id(pid)
        return [s.first + timedelta(days=i) for i in range((s.last - s.first).days + 1)]

    def expire_at(self, window: str, pid: str) -> int:
        """EXPIREAT of a live key: end of the period's last local day + retention."""
        last = self.period_days(window, pid)[-1]
        return int((self.day_end(last) + self.retention).timestamp())

    def current(self, window: str, now: datetime) -> str | None:
        return self.period_id(window, self.local_date(now))

    def previous(self, window: str, now: datetime) -> str | None:
        """The last period of ``window`` that has ended."""
        today = self.local_date(now)
        if window == "season":
            day = today - ONE_DAY
            while day >= (self.cycle_anchor if not self.season_list else date(1970, 1, 1)):
                s = self.season_of(day)
                if s is not None and s.last < today:
                    return s.id
                day -= ONE_DAY
            return None
        if window == "day":
            return (today - ONE_DAY).isoformat()
        if window == "month":
            return self.period_id("month", self.month_days(today)[0] - ONE_DAY)
        return (self.week_first(today) - timedelta(days=7)).isoformat()

    def recent(self, window: str, now: datetime, last: int) -> list[str]:
        """The ``last`` periods up to the current one, oldest first (seasons: those begun)."""
        today = self.local_date(now)
        if window == "day":
            return [(today - timedelta(days=i)).isoformat() for i in range(last)][::-1]
        if window == "week":
            first = self.week_first(today)
            return [(first - timedelta(days=7 * i)).isoformat() for i in range(last)][::-1]
        if window == "month":
            out, day = [], today
            for _ in range(last):
                first = self.month_days(day)[0]
                out.append(self.period_id("month", first))
                day = first - ONE_DAY
            return [pid for pid in out if pid is not None][::-1]
        if self.season_list:  # the seasons begun by today (in a gap: those that ended)
            return [s.id for s in self.season_list if s.first <= today][-last:]
        current = self.season_of(today)
        if current is None:
            return []
        number = int(current.id[1:])
        return [f"S{n}" for n in range(max(1, number - last + 1), number + 1)]

    # acceptance
    def time_problem(self, ts: datetime, now: datetime) -> str | None:
        if ts > now + FUTURE:
            return "future_event"
        if now >= self.day_end(self.local_date(ts)) + self.grace:
            return "late_event"
        return None


# --- ranking ----------------------------------------------------------------------------------


def redis_order(scores: Mapping[str, float], order: str) -> list[tuple[str, float]]:
    """Members best first: by score, equal scores in Redis's order (member bytes; reversed
    for ``desc``, which reads the sorted set from its end)."""
    items = sorted(scores.items(), key=lambda kv: (kv[1], kv[0].encode()))
    return items[::-1] if order == "desc" else items


def ranked(
    scores: Mapping[str, float],
    order: str,
    ties: str,
    reached: Mapping[str, float] | None = None,
) -> list[tuple[int, str, float]]:
    """(rank, member, score) best first; ``shared``: 1 + members strictly better; ``dense``:
    1 + distinct scores strictly better; ``earliest``: by score, then the time ``reached``
    gives the member (earlier first; a member it lacks counts as reached last), then member
    bytes ascending, for both orders; ranks are positions."""
    if ties == "earliest":
        if reached is None:
            raise ValueError("ranked: earliest ties need the reach time of each member")
        sign = -1 if order == "desc" else 1
        items = sorted(
            scores.items(),
            key=lambda kv: (sign * kv[1], reached.get(kv[0], float("inf")), kv[0].encode()),
        )
        return [(position, m, s) for position, (m, s) in enumerate(items, start=1)]
    out = []
    for position, (member, score) in enumerate(redis_order(scores, order)):
        if ties == "member":
            out.append((position + 1, member, score))
            continue
        better = [s for s in scores.values() if (s > score if order == "desc" else s < score)]
        rank = 1 + len(set(better) if ties == "dense" else better)
        out.append((rank, member, score))
    return out


def best(scores: Mapping[str, float], order: str, n: int) -> Scores:
    """The best ``n`` members (0 = all) in Redis order."""
    if n <= 0:
        return dict(scores)
    return dict(redis_order(scores, order)[:n])


def around_start(position: int, size: int, total: int) -> int:
    """First 0-based position of an ``around`` window (docs/contract.md#reads)."""
    if total <= size:
        return 0
    start = max(0, position - size // 2)
    return min(start, total - size)


def percentile(scores: Mapping[str, float], order: str, member: str) -> float:
    """100 x members with a strictly worse score / members on the board."""
    mine = scores[member]
    worse = sum(1 for s in scores.values() if (s < mine if order == "desc" else s > mine))
    return 100 * worse / len(scores)


def gap_up(scores: Mapping[str, float], order: str, member: str) -> float | None:
    """How far the member's score is from the nearest strictly better one; None if none."""
    mine = scores[member]
    better = [s for s in scores.values() if (s > mine if order == "desc" else s < mine)]
    if not better:
        return None
    nearest = min(better) if order == "desc" else max(better)
    return abs(nearest - mine)


def climb_targets(
    scores: Mapping[str, float],
    order: str,
    ties: str,
    member: str,
    to: list[int],
    reached: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """``{"rank", "score", "gap"}`` per rank of ``to``: the score that reaches that rank by
    tying it -- the score at that position in Redis order, or with ``dense`` ties the k-th
    distinct score -- (None past the end), and how far the member's score is from it (0 once
    its rank, by ``ties``, is that rank or better, or past the end). ``reached``: the reach
    times of an ``earliest`` board (see :func:`ranked`)."""
    rows = ranked(scores, order, ties, reached)
    rank = next(r for r, m, _ in rows if m == member)
    if ties == "dense":
        targets = sorted(set(scores.values()), reverse=order == "desc")
    else:
        targets = [s for _, _, s in rows]
    out: list[dict[str, Any]] = []
    for k in to:
        if k > len(targets):
            out.append({"rank": k, "score": None, "gap": 0})
            continue
        at = targets[k - 1]
        out.append({"rank": k, "score": at, "gap": 0 if rank <= k else abs(at - scores[member])})
    return out


def combine(aggregate: str, old: float | None, new: float) -> float:
    """``old`` (None: nothing yet) and a later ``new`` combined the board's way: ``set`` keeps
    the later one, so callers combine in time order (events in batch order, days in order)."""
    if old is None or aggregate == "set":
        return new
    if aggregate == "sum":
        return old + new
    return max(old, new) if aggregate == "max" else min(old, new)


# --- the model ------------------------------------------------------------------------------


class Rejected(Exception):
    """The model rejects a batch: ``problems`` is a list of (index, code)."""

    def __init__(self, problems: list[tuple[int, str]]):
        super().__init__(problems)
        self.problems = problems


@dataclass
class Model:
    """Every accepted event's effect, and boards computed from the formulas of the contract."""

    settings: Settings
    cal: Calendar = field(init=False)
    days: dict[str, dict[date, Scores]] = field(init=False)
    # ties = "earliest": per board and day, member -> the epoch second its day score was
    # reached (kept for every board; only earliest boards store it).
    reached: dict[str, dict[date, Scores]] = field(init=False)
    meta: dict[str, dict[str, dict[str, Any]]] = field(init=False)
    applied_ids: dict[tuple[str, str], datetime] = field(default_factory=dict)
    closed_days: set[tuple[str, date]] = field(default_factory=set)
    archived: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.cal = Calendar(self.settings)
        self.days = {b: {} for b in self.settings.boards}
        self.reached = {b: {} for b in self.settings.boards}
        self.meta = {b: {} for b in self.settings.boards}

    def cfg(self, board: str) -> BoardSettings:
        return self.settings.boards[board]

    # writes
    def submit(
        self, events: Iterable[Mapping[str, Any]], now: datetime, *, backfill: bool = False
    ) -> tuple[int, int]:
        """Apply a valid batch in order, or raise :class:`Rejected` changing nothing.

        Events here are well formed (board, member, value, ts as an aware datetime); the model
        decides the time, state, duplicate and metadata rules.
        """
        batch = list(events)
        problems = []
        for i, ev in enumerate(batch):
            why = self.cal.time_problem(ev["ts"], now)
            if why == "late_event" and backfill:
                why = None
            if why:
                problems.append((i, why))
        if problems:
            raise Rejected(problems)
        seen: set[tuple[str, str]] = set()
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        plan = []
        for i, ev in enumerate(batch):
            board, day = ev["board"], self.cal.local_date(ev["ts"])
            season = self.cal.season_of(day)
            if season and (board, season.id) in self.archived:
                problems.append((i, "season_closed"))
            elif (board, day) in self.closed_days and not backfill:
                problems.append((i, "late_event"))
            eid = ev.get("event_id")
            dup = False
            if eid is not None:
                key = (board, eid)
                at = self.applied_ids.get(key)
                dup = key in seen or (at is not None and at >= now - DEDUPE)
                seen.add(key)
            if ev.get("metadata") is not None and not dup:
                mkey = (board, ev["member"])
                current = merged.get(mkey, dict(self.meta[board].get(ev["member"], {})))
                for k, v in ev["metadata"].items():
                    if v is None:
                        current.pop(k, None)
                    else:
                        current[k] = v
                if len(current) > META_FIELDS:
                    problems.append((i, "metadata_too_large"))
                merged[mkey] = current
            plan.append((ev, day, dup))
        if problems:
            raise Rejected(problems)
        applied = dups = 0
        for ev, day, dup in plan:
            if dup:
                dups += 1
                continue
            applied += 1
            board, member = ev["board"], ev["member"]
            scores = self.days[board].setdefault(day, {})
            old = scores.get(member)
            scores[member] = combine(self.cfg(board).aggregate, old, ev["value"])
            self._reach_day(board, day, member, old, ev["value"], ev["ts"].timestamp())
            if ev.get("event_id") is not None:
                self.applied_ids[(board, ev["event_id"])] = now
        for (board, member), values in merged.items():
            if values:
                self.meta[board][member] = values
            else:
                self.meta[board].pop(member, None)
        return applied, dups

    def _reach_day(
        self, board: str, day: date, member: str, old: float | None, value: float, ts: float
    ) -> None:
        """The day's reach of ``member`` after an event of ``value`` at ``ts`` (its day score
        was ``old``, None: not on the day yet): sum: the latest event that changed the score;
        max (min): the earliest event with the best value; set: the last event."""
        aggregate = self.cfg(board).aggregate
        reach = self.reached[board].setdefault(day, {})
        if old is None or aggregate == "set":
            reach[member] = ts
        elif aggregate == "sum":
            if old + value != old:
                reach[member] = max(reach[member], ts)
        elif (value > old) if aggregate == "max" else (value < old):
            reach[member] = ts
        elif value == old:
            reach[member] = min(reach[member], ts)

    def weight(self, board: str, window: str, pid: str, day: date) -> float:
        """The weight of ``day``'s scores in ``window`` ``pid`` of ``board``."""
        cfg = self.cfg(board)
        if window == "day":
            return 1.0
        if window == "week":
            return cfg.week_weights[(day - self.cal.week_first(day)).days]
        if window == "month":  # by day of the month; days past the list weigh 1
            index = day.day - 1
            return cfg.month_weights[index] if index < len(cfg.month_weights) else 1.0
        season = self.cal.season_by_id(pid)
        index = self.cal.season_week(day, season)
        return cfg.season_weights[index] if index < len(cfg.season_weights) else 1.0

    def reach(self, board: str, window: str, pid: str) -> Scores:
        """The reach set of ``window`` ``pid`` (ties = "earliest"): member -> when it
        reached its score there, from its days: sum: the latest reach of the days that have
        it; max (min): the earliest reach of the days whose weighted score is the best; set:
        the reach of the latest day that has it."""
        aggregate = self.cfg(board).aggregate
        best: Scores = {}
        out: Scores = {}
        for day in self.cal.period_days(window, pid):
            scores = self.days[board].get(day)
            if not scores:
                continue
            weight = self.weight(board, window, pid, day)
            reach = self.reached[board][day]
            for member, score in scores.items():
                at, x = reach[member], weight * score
                if member not in out or aggregate == "set":
                    best[member], out[member] = x, at
                elif aggregate == "sum":
                    out[member] = max(out[member], at)
                elif (x > best[member]) if aggregate == "max" else (x < best[member]):
                    best[member], out[member] = x, at
                elif x == best[member]:
                    out[member] = min(out[member], at)
        return out

    # boards
    def formula(self, board: str, window: str, pid: str) -> Scores:
        """The board of the contract, untrimmed. A ``set`` board's member: the weighted score of
        the latest day that has it (the days are walked in order)."""
        cfg = self.cfg(board)
        out: Scores = {}
        for day in self.cal.period_days(window, pid):
            scores = self.days[board].get(day)
            if not scores:
                continue
            if window == "day":
                weight = 1.0
            elif window == "week":
                weight = cfg.week_weights[(day - self.cal.week_first(day)).days]
            elif window == "month":  # by day of the month; days past the list weigh 1
                index = day.day - 1
                weight = cfg.month_weights[index] if index < len(cfg.month_weights) else 1.0
            else:
                season = self.cal.season_by_id(pid)
                index = self.cal.season_week(day, season)
                weight = cfg.season_weights[index] if index < len(cfg.season_weights) else 1.0
            for member, score in scores.items():
                out[member] = combine(cfg.aggregate, out.get(member), weight * score)
        return out

    def board(self, board: str, window: str, pid: str) -> Scores:
        """What the live sorted set must hold: the formula, trimmed on every board but day."""
        scores = self.formula(board, window, pid)
        if window == "day":
            return scores
        return best(scores, self.cfg(board).order, self.cfg(board).max_entries)

    def ranked(self, board: str, window: str, pid: str) -> list[tuple[int, str, float]]:
        cfg = self.cfg(board)
        reached = self.reach(board, window, pid) if cfg.ties == "earliest" else None
        return ranked(self.board(board, window, pid), cfg.order, cfg.ties, reached=reached)

    def periods(self, board: str) -> set[tuple[str, str]]:
        """Every (window, period id) of a window the board keeps whose board has at least one
        member."""
        out = set()
        for day, scores in self.days[board].items():
            if not scores:
                continue
            for window in self.cfg(board).windows:
                pid = self.cal.period_id(window, day)
                if pid is not None:
                    out.add((window, pid))
        return out

    def metadata(self, board: str, member: str) -> dict[str, Any]:
        return dict(self.meta[board].get(member, {}))

    def distinct(self, board: str, window: str, pid: str) -> set[float]:
        """ties = "dense": the scores the board's distinct set must hold, one per distinct
        score of the board (-0.0 and 0 are one score)."""
        return {s + 0.0 for s in self.board(board, window, pid).values()}


def key(namespace: str, board: str, window: str, pid: str) -> str:
    """A public key name, spelled from docs/contract.md#keys."""
    return f"{namespace}:{{{board}}}:{window}:{pid}"


# --- reading Redis as it is -------------------------------------------------------------------


def zset(client: Any, name: str) -> Scores:
    """A sorted set as {member: score}, read raw with ZRANGE WITHSCORES."""
    return {m.decode(): s for m, s in client.zrange(name, 0, -1, withscores=True)}


def names(client: Any, pattern: str = "*") -> set[str]:
    """Every key name matching ``pattern`` (SCAN, never KEYS)."""
    return {n.decode() if isinstance(n, bytes) else n for n in client.scan_iter(match=pattern)}


def snapshot(client: Any) -> dict[bytes, tuple[bytes, int]]:
    """Every key of the database: its DUMP (type, value) and its PEXPIRETIME."""
    out = {}
    for name in client.scan_iter(count=1000):
        out[name] = (client.dump(name), client.pexpiretime(name))
    assert len(out) == client.dbsize()
    return out


def alltime(model: Model, board: str, days: Iterable[date] | None = None) -> Scores:
    """What the alltime board must hold: every accepted event's day combined, each day
    weighing 1, in day order (a ``set`` board: the latest day with the member), trimmed like
    the other rolled-up boards. ``days``: only those days (a base folded up to some day, or a
    board whose alltime window was kept only from some day on)."""
    cfg = model.cfg(board)
    wanted = None if days is None else set(days)
    out: Scores = {}
    for day in sorted(model.days[board]):
        if wanted is not None and day not in wanted:
            continue
        for member, score in model.days[board][day].items():
            out[member] = combine(cfg.aggregate, out.get(member), score)
    return best(out, cfg.order, cfg.max_entries)
