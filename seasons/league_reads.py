"""League reads (docs/leagues.md): a member's cohort, a cohort by id, and a period's overview,
each one call of ``seasons/lua/league_read.lua``.

The script gathers what Redis holds (the cohort's members in join order, their scores on the
period's board, reach times, moderation fields, outcomes); here the standings are computed by
:func:`seasons.leagues.standings`, the function the close applies, and once the close wrote
the cohort's outcome the rows are the close's decision. Hidden and banned members are left
out of every read but their own: a member asking for its cohort sees itself as if visible
(flagged ``hidden`` in open mode), as the board reads answer a self-view.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, TypeAdapter

from seasons import windows as win
from seasons.clock import Clock, utc_text
from seasons.config.league import LeagueSettings
from seasons.config.settings import BoardSettings, Settings
from seasons.errors import InvalidInput, NoLeague, NotInLeague, UnknownBoard, UnknownCohort
from seasons.executor import Call, script
from seasons.keys import Keys
from seasons.leagues import COHORT_SPAN, Member, Outcome, Zone, current_tier, moved, standings
from seasons.models import LeagueCohort, LeagueOverview, LeagueTier
from seasons.read_limits import check_asked_member
from seasons.reads import Read
from seasons.replies import number_text, text
from seasons.ties import of as tie_rule_of

_READ = script("league_read")
_COHORT, _OVERVIEW = TypeAdapter(LeagueCohort), TypeAdapter(LeagueOverview)
MAX_COHORT_ID = 10**9


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _fields(reply: Any) -> dict[str, Any]:
    """The script's reply {name, value, ...} as a dict."""
    return {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


def _number(value: Any) -> float | None:
    return None if value is None else float(_text(value))


def _json(model: BaseModel) -> bytes:
    return model.model_dump_json().encode()


class LeagueReads:
    """The league reads of one namespace, prepared as :class:`seasons.reads.Read` so that the
    Python API, the CLI and the HTTP server run them alike (one script call each)."""

    def __init__(self, settings: Settings, keys: Keys, clock: Clock):
        self.settings, self.keys, self.clock = settings, keys, clock
        # The script's KEYS of each (board, period) read lately: built once, not per read.
        self._keys: dict[tuple[str, str], list[str]] = {}

    def league(self, board: str) -> tuple[BoardSettings, LeagueSettings]:
        """The board's settings and league; :class:`UnknownBoard`, :class:`NoLeague`."""
        cfg = self.settings.boards.get(board)
        if cfg is None:
            raise UnknownBoard(board, list(self.settings.boards))
        if cfg.league is None:
            with_league = sorted(b for b, c in self.settings.boards.items() if c.league)
            raise NoLeague(
                f"board {board!r} has no league (boards with one: "
                f"{', '.join(with_league) or 'none'})",
                {"board": board},
            )
        return cfg, cfg.league

    def period(self, league: LeagueSettings, period: str) -> win.Period:
        """``period`` (an id of the league's window, ``current`` or ``previous``) resolved;
        :class:`BadPeriod` otherwise."""
        return win.resolve_period(league.window, period, self.clock(), self.settings)

    def _call(
        self, board: str, league: LeagueSettings, p: win.Period, args: dict[str, Any]
    ) -> Call:
        keys = self._keys.get((board, p.id))
        if keys is None:
            k, pid = self.keys, p.id
            live = k.window(board, league.window, pid)
            reached = k.reached(board, league.window, pid)
            keys = [
                k.league(board, pid, "joined"), k.league(board, pid, "cohorts"),
                k.league(board, pid, "open"), k.league(board, pid, "outcome"),
                k.league_state(board), k.league_tier(board), live, k.twin_of(live),
                k.moderation(board), reached, k.twin_of(reached),
            ]  # fmt: skip
            if len(self._keys) >= 64:  # a few boards x periods are read at a time
                self._keys.clear()
            self._keys[(board, p.id)] = keys
        body = {"span": COHORT_SPAN, "period": p.id, **args}
        return Call(_READ, keys, [json.dumps(body, ensure_ascii=False, separators=(",", ":"))])

    def _resets_at(self, p: win.Period) -> str:
        end = win.period_end(p, self.settings.zone)
        assert end is not None  # league windows end
        return utc_text(end)

    def member(self, board: str, member: str, period: str = "current") -> Read[LeagueCohort]:
        """``member``'s cohort in ``period``; :class:`NotInLeague` if it has none."""
        cfg, league = self.league(board)
        check_asked_member(member)
        p = self.period(league, period)
        reach = tie_rule_of(cfg).reach_set
        call = self._call(board, league, p, {"mode": "member", "member": member,
                                             "reached": reach})  # fmt: skip

        def render(reply: Any) -> bytes:
            f = _fields(reply)
            status = _text(f["status"])
            if status != "ok":
                why = ("it is waiting for the previous period's close to join one"
                       if status == "waiting" else "it joined none")  # fmt: skip
                raise NotInLeague(
                    f"member {member!r} has no cohort in {league.window} {p.id} of the league "
                    f"of board {board!r} ({why})",
                    {
                        "board": board,
                        "period": p.id,
                        "member": member,
                        "waiting": status == "waiting",
                    },
                )
            return self._cohort(board, cfg, league, p, f, member)

        return Read(call, render, _COHORT)

    def cohort(self, board: str, cohort: int, period: str = "current") -> Read[LeagueCohort]:
        """Cohort ``cohort`` of ``period``; :class:`UnknownCohort` if there is none."""
        cfg, league = self.league(board)
        if (
            isinstance(cohort, bool)
            or not isinstance(cohort, int)
            or not 1 <= cohort <= MAX_COHORT_ID
        ):
            raise InvalidInput(
                f"cohort must be an integer from 1 to {MAX_COHORT_ID}, got {cohort!r}",
                {"cohort": cohort},
            )
        p = self.period(league, period)
        reach = tie_rule_of(cfg).reach_set
        call = self._call(board, league, p, {"mode": "cohort", "cohort": cohort, "reached": reach})

        def render(reply: Any) -> bytes:
            f = _fields(reply)
            if _text(f["status"]) != "ok":
                raise UnknownCohort(
                    f"no cohort {cohort} in {league.window} {p.id} of the league of board "
                    f"{board!r}",
                    {"board": board, "period": p.id, "cohort": cohort},
                )
            return self._cohort(board, cfg, league, p, f, None)

        return Read(call, render, _COHORT)

    def overview(self, board: str, period: str = "current") -> Read[LeagueOverview]:
        """Members and cohorts per tier of ``period``, lowest tier first (a tier no longer
        configured after them)."""
        _, league = self.league(board)
        p = self.period(league, period)
        call = self._call(board, league, p, {"mode": "overview"})

        def render(reply: Any) -> bytes:
            f = _fields(reply)
            flat, open_ = f["cohorts"], f["open"]
            filling = {int(_text(open_[i])): int(open_[i + 1]) for i in range(0, len(open_), 2)}
            members: dict[str, int] = {t: 0 for t in league.tiers}
            cohorts: dict[str, int] = {t: 0 for t in league.tiers}
            for i in range(0, len(flat), 2):
                cid, tier = int(_text(flat[i])), json.loads(_text(flat[i + 1]))["tier"]
                cohorts[tier] = cohorts.get(tier, 0) + 1
                members[tier] = members.get(tier, 0) + filling.get(cid, league.cohort_size)
            tiers = [LeagueTier(tier=t, members=members[t], cohorts=cohorts[t]) for t in cohorts]
            return _json(LeagueOverview(
                board=board, period=p.id, window=league.window, resets_at=self._resets_at(p),
                final=bool(f["closed"]), tiers=tiers,
            ))  # fmt: skip

        return Read(call, render, _OVERVIEW)

    def _cohort(
        self, board: str, cfg: BoardSettings, league: LeagueSettings, p: win.Period,
        f: dict[str, Any], asker: str | None,
    ) -> bytes:  # fmt: skip
        cid = int(f["cohort"])
        info = json.loads(_text(f["info"]))
        names = [_text(m) for m in f["members"]]
        scores = [_number(s) for s in f["scores"]]
        reached = [_number(s) for s in f["reached"]] or [None] * len(names)
        flags = [None if m is None else json.loads(_text(m)) for m in f["moderation"]]
        outcomes = {
            m: Outcome.from_json(m, o)
            for m, o in zip(names, f["outcomes"], strict=True)
            if o is not None and json.loads(o).get("cohort") == cid
        }
        tier = info["tier"]
        # A hidden member is shown to itself alone, as if visible (open mode: flagged).
        hidden = {m for m, flag in zip(names, flags, strict=True) if flag is not None}
        own_flag = next((fl for m, fl in zip(names, flags, strict=True) if m == asker), None)
        mine = asker in hidden
        table = standings(
            [Member(m, s, r, m in hidden and m != asker)
             for m, s, r in zip(names, scores, reached, strict=True)],
            tier, league, cfg,
        )  # fmt: skip
        open_mode = own_flag is not None and own_flag.get("mode") == "open"
        shown = [r for r in table.rows if r.member not in hidden or r.member == asker]
        promote, demote, promotion_score = table.promote, table.demote, table.promotion_score
        # (member, score, rank, zone, tier_after, reward, hidden) of each row shown.
        rows: list[Row] = []
        if outcomes:  # final: the close's decision
            place = {m: i for i, m in enumerate(names)}
            finals = [outcomes[r.member] for r in shown if r.member in outcomes]
            finals.sort(key=lambda o: (o.rank is None, o.rank or 0, place[o.member]))
            for o in finals:
                rows.append((
                    o.member, o.score, o.rank, o.zone, o.tier_after, o.reward,
                    mine and open_mode and o.member == asker,
                ))  # fmt: skip
            ups = [o for o in finals if o.zone is Zone.PROMOTE and o.score is not None]
            promote = len(ups)
            demote = sum(1 for o in finals if o.zone is Zone.DEMOTE)
            promotion_score = None
            if ups:
                pick = min if cfg.order == "desc" else max
                promotion_score = pick(o.score for o in ups if o.score is not None)
        else:
            after = {z: moved(league, tier, z) for z in (None, *Zone)}
            for r in shown:
                rows.append((
                    r.member, r.score, r.rank, r.zone, after[r.zone],
                    league.reward_of(r.rank) if r.rank is not None else None,
                    mine and open_mode and r.member == asker,
                ))  # fmt: skip
        member_tier = None
        if asker is not None:
            stored = f.get("tier")
            member_tier = current_tier(league, None if stored is None else _text(stored))
        # Written here, not through the model (LeagueCohort.model_dump_json writes the same
        # text): a read renders on the side that scales out, and cheaply (seasons.replies).
        head = b"".join((
            b'{"board":', text(board), b',"period":', text(p.id), b',"window":',
            text(league.window), b',"cohort":%d,"tier":' % cid, text(tier), b',"group":',
            text(info.get("group", "")), b',"member":', _opt_text(asker), b',"member_tier":',
            _opt_text(member_tier), b',"resets_at":', text(self._resets_at(p)),
            b',"promote":%d,"demote":%d,"promotion_score":' % (promote, demote),
            _opt_number(promotion_score), b',"final":', b"true" if outcomes else b"false",
            b',"rows":[',
        ))  # fmt: skip
        return head + b",".join(map(_row_json, rows)) + b"]}"


Row = tuple[str, float | None, int | None, Zone | None, str, str | None, bool]


def _opt_text(value: str | None) -> bytes:
    return b"null" if value is None else text(value)


def _opt_number(value: float | None) -> bytes:
    return b"null" if value is None else number_text(float(value))


def _row_json(row: Row) -> bytes:
    """One row as :class:`seasons.models.LeagueRow` writes it."""
    member, score, rank, zone, tier_after, reward, hidden = row
    return _ROW % (
        text(member), _opt_number(score), b"null" if rank is None else b"%d" % rank,
        _ZONES[zone], text(tier_after), _opt_text(reward), b"true" if hidden else b"false",
    )  # fmt: skip


_ROW = b'{"member":%s,"score":%s,"rank":%s,"zone":%s,"tier_after":%s,"reward":%s,"hidden":%s}'
_ZONES: dict[Zone | None, bytes] = {None: b"null"}
_ZONES.update({z: b'"' + z.value.encode() + b'"' for z in Zone})
