"""League reads (docs/leagues.md): a member's cohort, a cohort by id, and a period's overview,
each one round trip: a call of ``seasons/lua/league_read.lua``, or for a cohort read before
one transaction of plain commands (:class:`seasons.plans.CohortPlan`).

The script gathers what Redis holds (the cohort's members in join order, their scores on the
period's board, reach times, moderation fields, outcomes); here the standings are computed by
:func:`seasons.leagues.standings`, the function the close applies, and once the close wrote
the cohort's outcome the rows are the close's decision. Hidden and banned members are left
out of every read but their own: a member asking for its cohort sees itself as if visible
(flagged ``hidden`` in open mode), as the board reads answer a self-view.

A cohort whose members are all visible, on a board whose ties are not ``earliest``, in a
period whose close has not begun, is ranked by its scores alone: its next read is planned
from this one's members, and while its members and scores stay what they were its rows are
the ones written last (a cohort is read by each of its members, far more often than its
scores change).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, TypeAdapter

from seasons import windows as win
from seasons.clock import Clock, utc_text
from seasons.config.league import MAX_COHORT, LeagueSettings
from seasons.config.settings import BoardSettings, Settings
from seasons.errors import InvalidInput, NoLeague, NotInLeague, UnknownBoard, UnknownCohort
from seasons.executor import Call, script
from seasons.keys import Keys
from seasons.leagues import COHORT_SPAN, Outcome, Zone, current_tier, moved, standings
from seasons.models import LeagueCohort, LeagueOverview, LeagueTier
from seasons.plans import CohortPlan, Guesses
from seasons.read_limits import check_asked_member
from seasons.reads import Read
from seasons.replies import number_text, score_text, string, text
from seasons.ties import of as tie_rule_of

_READ = script("league_read")
_COHORT, _OVERVIEW = TypeAdapter(LeagueCohort), TypeAdapter(LeagueOverview)
MAX_COHORT_ID = 10**9
# Cohorts whose last rows are kept (about 7 KB each for 30 members): the cohorts read lately.
LAST_COHORTS = 1024


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _fields(reply: Any) -> dict[str, Any]:
    """The script's reply {name, value, ...} as a dict."""
    return {_text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}


def _json(model: BaseModel) -> bytes:
    return model.model_dump_json().encode()


class LeagueReads:
    """The league reads of one namespace, prepared as :class:`seasons.reads.Read` so that the
    Python API, the CLI and the HTTP server run them alike (one script call each)."""

    def __init__(self, settings: Settings, keys: Keys, clock: Clock):
        self.settings, self.keys, self.clock = settings, keys, clock
        # The script's KEYS of each (board, period) read lately: built once, not per read.
        self._keys: dict[tuple[str, str], list[str]] = {}
        self._ends: dict[tuple[str, str], str] = {}  # (window, period id) -> resets_at
        self._guesses = Guesses()  # the cohorts read lately, for the plans (CohortPlan)
        # The last rows rendered of each cohort read lately, and what they were ranked from.
        self._last: dict[tuple[str, int], tuple[Any, int, int, float | None, bytes]] = {}
        self._row_tails: dict[tuple[str, str], dict[Zone | None, list[bytes]]] = {}

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
                k.league(board, pid, "counts"),
            ]  # fmt: skip
            if len(self._keys) >= 64:  # a few boards x periods are read at a time
                self._keys.clear()
            self._keys[(board, p.id)] = keys
        body = {"span": COHORT_SPAN, "period": p.id, **args}
        return Call(_READ, keys, [json.dumps(body, ensure_ascii=False, separators=(",", ":"))])

    def _resets_at(self, p: win.Period) -> str:
        """The period's end, worked out once per period."""
        out = self._ends.get((p.window, p.id))
        if out is None:
            end = win.period_end(p, self.settings.zone)
            assert end is not None  # league windows end
            if len(self._ends) >= 64:
                self._ends.clear()
            out = self._ends[(p.window, p.id)] = utc_text(end)
        return out

    def member(self, board: str, member: str, period: str = "current") -> Read[LeagueCohort]:
        """``member``'s cohort in ``period``; :class:`NotInLeague` if it has none."""
        cfg, league = self.league(board)
        check_asked_member(member)
        p = self.period(league, period)
        reach = tie_rule_of(cfg).reach_set
        call = self._call(board, league, p, {"mode": "member", "member": member,
                                             "reached": reach})  # fmt: skip
        plan = None if reach else CohortPlan.of(self._guesses, call.keys, COHORT_SPAN, member, None)

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
            return self._cohort(board, cfg, league, p, f, member, call.keys[0])

        return Read(call, render, _COHORT, plan=plan)

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
        plan = None if reach else CohortPlan.of(self._guesses, call.keys, COHORT_SPAN, None, cohort)

        def render(reply: Any) -> bytes:
            f = _fields(reply)
            if _text(f["status"]) != "ok":
                raise UnknownCohort(
                    f"no cohort {cohort} in {league.window} {p.id} of the league of board "
                    f"{board!r}",
                    {"board": board, "period": p.id, "cohort": cohort},
                )
            return self._cohort(board, cfg, league, p, f, None, call.keys[0])

        return Read(call, render, _COHORT, plan=plan)

    def overview(self, board: str, period: str = "current") -> Read[LeagueOverview]:
        """Members and cohorts per tier of ``period``, lowest tier first (a tier no longer
        configured after them)."""
        _, league = self.league(board)
        p = self.period(league, period)
        call = self._call(board, league, p, {"mode": "overview"})

        def render(reply: Any) -> bytes:
            f = _fields(reply)
            flat = f["counts"]
            counts = {_text(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
            # The configured tiers, then any tier joined and no longer configured.
            tiers = list(league.tiers) + sorted(
                {field.partition(":")[2] for field in counts} - set(league.tiers)
            )
            out = [
                LeagueTier(tier=t, members=counts.get(f"members:{t}", 0),
                           cohorts=counts.get(f"cohorts:{t}", 0))
                for t in tiers
            ]  # fmt: skip
            return _json(LeagueOverview(
                board=board, period=p.id, window=league.window, resets_at=self._resets_at(p),
                final=bool(f["closed"]), tiers=out,
            ))  # fmt: skip

        return Read(call, render, _OVERVIEW)

    def _cohort(
        self, board: str, cfg: BoardSettings, league: LeagueSettings, p: win.Period,
        f: dict[str, Any], asker: str | None, joined: str,
    ) -> bytes:  # fmt: skip
        cid = int(f["cohort"])
        members, raw_scores = f["members"], f["scores"]
        if members and not isinstance(members[0], bytes):  # text through a cluster client
            members = [m.encode() for m in members]
            raw_scores = [None if s is None else s.encode() for s in raw_scores]
        info = json.loads(f["info"])
        tier = info["tier"]
        flags = f["moderation"]
        final = any(o is not None for o in f["outcomes"])
        if final or f["closing"] or f["reached"] or None in raw_scores or any(flags):
            # Read by the script each time (seasons.plans.CohortPlan), ranked each time.
            self._guesses.forget_cohort(joined, cid)
            promote, demote, promotion_score, rows = self._ranked(
                board, cfg, league, tier, cid, members, raw_scores, f, asker
            )
        else:
            # Every member visible, scores alone decide: the next read is planned, and the
            # rows are those of the last read of the cohort while its scores stay the same.
            self._guesses.remember_cohort(joined, cid, members)
            seen = (tier, tuple(members), tuple(raw_scores))
            last = self._last.get((joined, cid))
            if last is None or last[0] != seen:
                last = (seen, *self._ranked(
                    board, cfg, league, tier, cid, members, raw_scores, f, None
                ))  # fmt: skip
                if len(self._last) >= LAST_COHORTS:
                    self._last.clear()
                self._last[(joined, cid)] = last
            _, promote, demote, promotion_score, rows = last
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
            _opt_number(promotion_score), b',"final":', b"true" if final else b"false",
            b',"rows":[',
        ))  # fmt: skip
        return head + rows + b"]}"

    def _ranked(
        self, board: str, cfg: BoardSettings, league: LeagueSettings, tier: str, cid: int,
        members: list[bytes], raw_scores: list[Any], f: dict[str, Any],
        asker: str | None,
    ) -> tuple[int, int, float | None, bytes]:  # fmt: skip
        """A cohort's promote and demote counts, the score that reaches promotion and its
        rows' JSON: the live standings (:func:`seasons.leagues.standings`), or once the
        close wrote the cohort's outcome the close's decision."""
        scores = [None if s is None else float(s) for s in raw_scores]
        reached = [None if r is None else float(r) for r in f["reached"]] or None
        flags = f["moderation"]
        hidden = {i for i, flag in enumerate(flags) if flag is not None}
        # A hidden member is shown to itself alone, ranked as if visible (open mode: flagged).
        own = None
        if hidden and asker is not None and (me := asker.encode()) in members:
            own = members.index(me)
        flagged = own if own in hidden and json.loads(flags[own]).get("mode") == "open" else None
        table = standings(
            members, scores, tier, league, cfg, reached=reached, hidden=hidden - {own}
        )
        shown = list(zip(table.order, table.ranks, table.zones, strict=True))
        if hidden:
            shown = [(i, rank, zone) for i, rank, zone in shown if i == own or i not in hidden]
        if any(o is not None for o in f["outcomes"]):  # final: the close's decision
            return self._final(cfg, members, f["outcomes"], cid, [i for i, _, _ in shown], flagged)
        tails = self._tails(board, league, tier)
        rows = [
            b'{"member":%s,"score":%s%s' % (
                string(members[i]),
                b"null" if raw_scores[i] is None else score_text(raw_scores[i]),
                tails[zone][rank or 0] if i != flagged else _tail(
                    rank, zone, moved(league, tier, zone),
                    league.reward_of(rank) if rank else None, True,
                ),
            )
            for i, rank, zone in shown
        ]  # fmt: skip
        return table.promote, table.demote, table.promotion_score, b",".join(rows)

    def _final(
        self, cfg: BoardSettings, members: list[bytes], outcomes: list[Any], cid: int,
        shown: list[int], flagged: int | None,
    ) -> tuple[int, int, float | None, bytes]:  # fmt: skip
        """The rows of a cohort whose outcome the close wrote (the close's ranks, zones,
        tiers and rewards, in rank order then join order) of the members at positions
        ``shown``, its promote and demote counts and the score that reached promotion;
        ``flagged`` the position of the member shown as hidden."""
        finals: list[tuple[int, Outcome]] = []
        for i in shown:
            raw = outcomes[i]
            if raw is not None and json.loads(raw).get("cohort") == cid:
                finals.append((i, Outcome.from_json(_text(members[i]), raw)))
        finals.sort(key=lambda x: (x[1].rank is None, x[1].rank or 0, x[0]))
        rows = [
            b'{"member":%s,"score":%s%s' % (
                string(members[i]), _opt_number(o.score),
                _tail(o.rank, o.zone, o.tier_after, o.reward, i == flagged),
            )
            for i, o in finals
        ]  # fmt: skip
        ups = [o.score for _, o in finals if o.zone is Zone.PROMOTE and o.score is not None]
        demote = sum(1 for _, o in finals if o.zone is Zone.DEMOTE)
        best = None
        if ups:
            best = min(ups) if cfg.order == "desc" else max(ups)
        return len(ups), demote, best, b",".join(rows)

    def _tails(
        self, board: str, league: LeagueSettings, tier: str
    ) -> dict[Zone | None, list[bytes]]:
        """The end of a live row of a member not flagged hidden, from its rank on (rank,
        zone, tier after, reward), by zone and rank (0: none): a cohort's rows differ only
        in member and score before it. Worked out once per board and tier."""
        out = self._row_tails.get((board, tier))
        if out is None:
            rewards = [None] + [league.reward_of(r) for r in range(1, MAX_COHORT + 1)]
            out = {
                zone: [
                    _tail(rank or None, zone, moved(league, tier, zone), rewards[rank], False)
                    for rank in range(MAX_COHORT + 1)
                ]
                for zone in (None, *Zone)
            }
            if len(self._row_tails) >= 64:
                self._row_tails.clear()
            self._row_tails[(board, tier)] = out
        return out


def _opt_text(value: str | None) -> bytes:
    return b"null" if value is None else text(value)


def _opt_number(value: float | None) -> bytes:
    return b"null" if value is None else number_text(float(value))


def _tail(
    rank: int | None, zone: Zone | None, tier_after: str, reward: str | None, hidden: bool
) -> bytes:
    """A row (:class:`seasons.models.LeagueRow`) from its rank on."""
    return b',"rank":%s,"zone":%s,"tier_after":%s,"reward":%s,"hidden":%s}' % (
        b"null" if rank is None else b"%d" % rank, _ZONES[zone], text(tier_after),
        _opt_text(reward), b"true" if hidden else b"false",
    )  # fmt: skip


_ZONES: dict[Zone | None, bytes] = {None: b"null"}
_ZONES.update({z: b'"' + z.value.encode() + b'"' for z in Zone})
