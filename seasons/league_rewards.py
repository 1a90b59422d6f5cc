"""Cohort rewards of a league period and their claims, exactly once (docs/leagues.md).

The close writes each member's :class:`seasons.leagues.Outcome` with the reward of its rank
(``[[boards.<b>.league.rewards]]``). A claim has the semantics of a season reward's
(:mod:`seasons.rewards`): ``seasons/lua/league_claim.lua`` checks the period's close and the
member's outcome and writes the claim with HSETNX into the period's ``claims`` hash, so one
claim records it and every other answers the same; a claim answered ``already_claimed``
false is first appended to a claims log (:mod:`seasons.claimlog`), ``league-<P>`` standing
for the season id: ``<archive.dir>/<ns>/<board>/league-<P>.claims.jsonl``.
"""

from __future__ import annotations

import json

from seasons import claimlog
from seasons.backend import Backend
from seasons.clock import utc_text
from seasons.errors import NoReward, RewardsNotReady
from seasons.league_reads import LeagueReads
from seasons.models import LeagueClaim
from seasons.read_limits import check_asked_member
from seasons.rewards import run_claim
from seasons.writes import check_batch_id, new_batch_id


def log_name(period_id: str) -> str:
    """The claims log's season part for league period ``period_id``."""
    return f"league-{period_id}"


def claim(
    b: Backend, reads: LeagueReads, board: str, period: str, member: str,
    claim_id: str | None = None,
) -> LeagueClaim:  # fmt: skip
    """Claim ``member``'s cohort reward of ``period`` on ``board``: the first claim records it
    (``already_claimed`` false), every later one answers the same (true), but one with the
    first one's ``claim_id``, which answers false again. :class:`RewardsNotReady` before the
    period's close is complete, :class:`NoReward` without a reward."""
    _, league = reads.league(board)
    check_asked_member(member)
    p = reads.period(league, period)
    claim_id = new_batch_id() if claim_id is None else check_batch_id(claim_id, "claim_id")
    k = b.keys
    keys = [k.league_state(board), k.league(board, p.id, "outcome"),
            k.league(board, p.id, "claims")]  # fmt: skip
    args = [member, utc_text(b.clock(), "microseconds"), claim_id, p.id]
    status, *rest = run_claim(b, "league_claim", keys, args)
    status = status.decode() if isinstance(status, bytes) else status
    where = {"board": board, "period": p.id}
    if status == "not_ready":
        raise RewardsNotReady(
            f"the close of {league.window} {p.id} of the league of board {board!r} is not "
            "complete: its rewards are not claimable yet",
            where,
        )
    if status in ("no_result", "no_reward"):
        why = "no outcome" if status == "no_result" else "an outcome without reward"
        raise NoReward(
            f"member {member!r} has no cohort reward in {league.window} {p.id} of the league "
            f"of board {board!r} ({why})",
            {**where, "member": member},
        )
    outcome, stored = json.loads(rest[0]), json.loads(rest[1])
    if status == "claimed":
        # What an app pays out on must outlive Redis: logged, fsynced, before it is answered.
        logged = claimlog.LoggedClaim(
            board=board, season=log_name(p.id), member=member, reward=stored["reward"],
            rank=stored["rank"], claim_id=stored["claim_id"], claimed_at=stored["claimed_at"],
        )  # fmt: skip
        claimlog.append(claimlog.log_path(b.settings, board, log_name(p.id)), logged)
    return LeagueClaim(
        board=board, period=p.id, member=member, cohort=outcome.get("cohort"),
        rank=stored["rank"], score=outcome.get("score"), reward=stored["reward"],
        claimed_at=stored["claimed_at"], already_claimed=status == "already",
    )  # fmt: skip
