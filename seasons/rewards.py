"""Rewards of a season and their claims, exactly once.

The season close computes each board's results (``keys.results``: member -> JSON
``{"rank", "score", "reward"}``, "" -> the summary JSON); a snapshot ``S@<ts>`` computes them
too, marked provisional. Here they are read, and claimed: one script
(``seasons/lua/claim.lua``) checks the member's result and reward and writes the claim with
HSETNX into ``keys.claims``, so that of any number of claims of one reward, concurrent or
not, exactly one records it and every one answers the same reward and time. A claim that
answers ``already_claimed`` false is first appended to the season's claims log on disk
(:mod:`seasons.claimlog`), which ``seasons restore`` loads back after a data loss.

A season whose results were amended after a late ban (:mod:`seasons.amend`) answers its
effective view: each member's best result over the versions (``keys.best``), a member hidden
or banned now without reward (its claim, if any, kept and flagged ``void``), and a better
reward claimable once more after a first claim (``upgrade``; logged apart, to
``<S>.upgrades.jsonl``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from redis.client import Pipeline

from seasons import calendar, claimlog
from seasons.amend import latest_version, version_key
from seasons.backend import Backend
from seasons.clock import utc_text
from seasons.config.settings import Settings
from seasons.connection import on_one_connection
from seasons.errors import (
    BadPeriod,
    NoResult,
    NoReward,
    NotReplicated,
    ProvisionalRewards,
    RewardsNotReady,
)
from seasons.events import member_problem
from seasons.models import Claim, MemberReward, Page, RewardsPage, RewardsSummary, RewardTier
from seasons.reads import Read, Reads
from seasons.results import SUMMARY
from seasons.writes import check_batch_id, new_batch_id

# The snapshot part of a season id S@<ts> (seasons.archives.snapshot_id).
_SNAPSHOT = re.compile(r"[0-9]{8}T[0-9]{6}Z")
# Claims are counted for a summary with HSCAN, this many fields a call.
_SCAN_COUNT = 1000


def check_season(season: str, settings: Settings) -> str:
    """``season`` if it names a configured season, or a snapshot ``S@<ts>`` of one;
    :class:`BadPeriod` otherwise."""
    base, at, stamp = season.partition("@")
    calendar.season_by_id(base, settings)
    if at and not _SNAPSHOT.fullmatch(stamp):
        raise BadPeriod(
            f"bad snapshot id {season!r}: a snapshot is <season>@YYYYMMDDTHHMMSSZ",
            {"season": season},
        )
    return season


class Rewards:
    """The rewards of the seasons of one namespace, built once by the facade: its backend,
    and its reads and how it runs one (:meth:`seasons.api.Seasons.run`), for the order of a
    page of results."""

    def __init__(self, backend: Backend, reads: Reads, run: Callable[[Read[Page]], Page]):
        self.b, self.reads, self.run = backend, reads, run

    def _check(self, board: str, season: str, member: str | None = None) -> None:
        self.reads.board(board)  # UnknownBoard, naming the configured boards
        check_season(season, self.b.settings)
        if member is not None and (problem := member_problem(member)) is not None:
            raise problem

    def _summary(self, board: str, season: str, text: str | bytes | None) -> dict[str, Any]:
        if text is None:
            raise RewardsNotReady(
                f"the results of season {season!r} on board {board!r} are not computed "
                "(the season is not closed yet, or its close has not reached its results step)",
                {"board": board, "season": season},
            )
        summary: dict[str, Any] = json.loads(text)
        return summary

    def member(self, board: str, season: str, member: str) -> MemberReward:
        """``member``'s result and claim; :class:`NoResult` when it has none."""
        self._check(board, season, member)
        keys = self.b.keys
        results, claims = keys.results(board, season), keys.claims(board, season)
        pipe = self.b.client.pipeline(transaction=False)
        pipe.hmget(results, [SUMMARY, member])
        pipe.hget(claims, member)
        pipe.hget(keys.best(board, season), member)
        pipe.exists(keys.best(board, season))
        pipe.hexists(keys.moderation(board), member)
        (summary_text, result), claim, best, amended, hidden = pipe.execute()
        summary = self._summary(board, season, summary_text)
        void = False
        if amended:  # the effective view: the best of every version (seasons.amend)
            result = best
            if hidden and claim is None:
                raise NoReward(
                    f"member {member!r} has no reward in season {season!r} on board "
                    f"{board!r} (void: it is hidden or banned)",
                    {"board": board, "season": season, "member": member},
                )
            void = bool(hidden)
        if result is None:
            raise NoResult(
                f"member {member!r} has no result in season {season!r} on board {board!r}",
                {"board": board, "season": season, "member": member},
            )
        out = _member_reward(board, season, member, result, claim, summary["provisional"])
        return out.model_copy(update={"void": void}) if void else out

    def page(self, board: str, season: str, *, offset: int, limit: int) -> RewardsPage:
        """A page of the latest version of the results (an amended season's latest, else the
        close's) in rank order, with that version's summary."""
        self._check(board, season)
        version, key = self._latest(board, season)
        summary = self._summary(board, season, self.b.client.hget(key, SUMMARY))
        # Checks offset and limit (UnknownBoard, InvalidInput) as every page read does.
        read = self.reads.page(board, "season", season, limit=limit, offset=offset)
        if version == 1:
            # The archive's page gives the order: one page's reads, where sorting the
            # results hash would read all of it.
            members = [e.member for e in self.run(read).entries]
        else:
            members = self._ranked(key)[offset : offset + limit]
        entries: list[MemberReward] = []
        if members:
            pipe = self.b.client.pipeline(transaction=False)
            pipe.hmget(key, members)
            pipe.hmget(self.b.keys.claims(board, season), members)
            pipe.hmget(self.b.keys.moderation(board), members)
            found, claimed, hidden = pipe.execute()
            amended = version > 1
            for m, r, c, h in zip(members, found, claimed, hidden, strict=True):
                # Hidden or banned since the latest version: void (seasons.amend).
                if r is None or (amended and h is not None and c is None):
                    continue
                e = _member_reward(board, season, m, r, c, summary["provisional"])
                entries.append(e.model_copy(update={"void": True}) if amended and h else e)
        return RewardsPage(
            season=season, board=board, offset=offset, limit=limit, total=summary["total"],
            version=version, summary=self._summarised(board, season, summary), entries=entries,
        )  # fmt: skip

    def _latest(self, board: str, season: str) -> tuple[int, str]:
        """(the latest version of the results, its hash)."""
        version = latest_version(self.b.client, self.b.keys, board, season)
        return version, version_key(self.b.keys, board, season, version)

    def _ranked(self, key: str) -> list[str]:
        """The members of an amended version in rank order, equal ranks by member bytes (as
        its file, seasons.amend_files): the whole hash, read and sorted (its ranks are not
        the archive's, whose order a version-1 page reads)."""
        rows = [
            (json.loads(v)["rank"], k.encode("utf-8", "surrogatepass"), k)
            for k, v in self.b.client.hscan_iter(key, count=_SCAN_COUNT)
            if k != SUMMARY
        ]
        return [m for _, _, m in sorted(rows)]

    def summary(self, board: str, season: str) -> RewardsSummary:
        """The results' summary: tiers, how many each granted and how many were claimed."""
        self._check(board, season)
        text = self.b.client.hget(self._latest(board, season)[1], SUMMARY)
        return self._summarised(board, season, self._summary(board, season, text))

    def _summarised(self, board: str, season: str, summary: dict[str, Any]) -> RewardsSummary:
        by_reward: Counter[str] = Counter()
        claims = self.b.keys.claims(board, season)
        for _, value in self.b.client.hscan_iter(claims, count=_SCAN_COUNT):
            by_reward[json.loads(value)["reward"]] += 1
        tiers = [
            RewardTier(tier=t["tier"], reward=t["reward"], count=t["count"],
                       claimed=by_reward[t["reward"]])
            for t in summary["tiers"]
        ]  # fmt: skip
        return RewardsSummary(
            season=season, board=board, provisional=summary["provisional"],
            computed_at=summary["computed_at"], total=summary["total"],
            version=summary.get("version", 1), granted=sum(t.count for t in tiers),
            claimed=by_reward.total(), tiers=tiers,
        )  # fmt: skip

    def claim(self, board: str, season: str, member: str, claim_id: str | None = None) -> Claim:
        """Claim ``member``'s reward: the first claim records it (``already_claimed``
        false), every later one answers the same reward and time (true), but one with the
        first one's ``claim_id`` (a resend), which answers false again.

        An answer false is appended to the season's claims log (:mod:`seasons.claimlog`)
        and fsynced first; :class:`ClaimsLogUnavailable` when it cannot be (the claim
        stands in Redis: resend with the same ``claim_id``)."""
        self._check(board, season, member)
        claim_id = new_batch_id() if claim_id is None else check_batch_id(claim_id, "claim_id")
        k = self.b.keys
        keys = [k.results(board, season), k.claims(board, season), k.best(board, season),
                k.upgrades(board, season), k.moderation(board)]  # fmt: skip
        status, *rest = self._run(
            keys, [member, utc_text(self.b.clock(), "microseconds"), claim_id]
        )
        where = {"board": board, "season": season}
        if status == "not_ready":
            self._summary(board, season, None)
        if status == "provisional":
            raise ProvisionalRewards(
                f"season {season!r} on board {board!r} has provisional results (a snapshot): "
                "they are never claimable",
                where,
            )
        if status in ("no_result", "no_reward"):
            why = "no result" if status == "no_result" else "a result without reward"
            raise NoReward(
                f"member {member!r} has no reward in season {season!r} on board {board!r} ({why})",
                {**where, "member": member},
            )
        result, stored = json.loads(rest[0]), json.loads(rest[1])
        if status == "upgraded":  # logged apart: a member's latest is the one kept (restore)
            logged = claimlog.LoggedClaim(
                board=board, season=season, member=member, reward=stored["reward"],
                rank=stored["rank"], claim_id=stored["claim_id"], claimed_at=stored["claimed_at"],
            )  # fmt: skip
            claimlog.append(claimlog.upgrades_path(self.b.settings, board, season), logged)
        if status == "claimed":
            # What an app pays out on must outlive Redis: logged, fsynced, before it is
            # answered (a resend with the same claim id logs it again, and answers).
            logged = claimlog.LoggedClaim(
                board=board, season=season, member=member, reward=stored["reward"],
                rank=stored["rank"], claim_id=stored["claim_id"], claimed_at=stored["claimed_at"],
            )  # fmt: skip
            claimlog.append(claimlog.log_path(self.b.settings, board, season), logged)
        return Claim(
            season=season, board=board, member=member, rank=stored["rank"],
            score=result["score"], reward=stored["reward"], claimed_at=stored["claimed_at"],
            already_claimed=status in ("already", "upgrade_already", "void"),
            upgrade=status in ("upgraded", "upgrade_already"), void=status == "void",
        )  # fmt: skip

    def _run(self, keys: list[str], args: list[str]) -> list[Any]:
        return run_claim(self.b, "claim", keys, args)


def run_claim(b: Backend, name: str, keys: list[str], args: list[str]) -> list[Any]:
    """The reply of claim script ``name`` (``claim``, ``league_claim``; ARGV[3] the claim's
    id). With ``redis.wait_replicas`` > 0 it is followed by WAIT on its connection, as writes
    are: a claim no replica holds yet could be lost to a failover and granted again, so it
    raises :class:`NotReplicated` (claim again with the same claim id: the answer is the
    same)."""
    replicas = b.settings.redis.wait_replicas
    run = getattr(b.scripts, name)
    if replicas <= 0:
        reply: list[Any] = run(keys=keys, args=args)
        return reply
    timeout = b.settings.redis.wait_timeout_ms

    def fill(pipe: Pipeline) -> None:
        run(keys=keys, args=args, client=pipe)
        pipe.wait(replicas, timeout)

    reply, acked = b.scripts.loaded(name, lambda: on_one_connection(b.client, keys[0], fill))
    if int(acked) < replicas:
        raise NotReplicated(
            f"the claim was recorded on the master, but only {acked} of {replicas} "
            f"replicas acknowledged it within {timeout} ms (redis.wait_replicas): claim "
            f"again with the same claim id {args[2]!r}",
            {"replicas": replicas, "acknowledged": int(acked), "claim_id": args[2]},
        )
    return reply


def _member_reward(
    board: str, season: str, member: str, result: str, claim: str | None, provisional: bool
) -> MemberReward:
    r = json.loads(result)
    claimed_at = None if claim is None else json.loads(claim)["claimed_at"]
    return MemberReward(
        season=season, board=board, member=member, rank=r["rank"], score=r["score"],
        reward=r["reward"], claimed=claim is not None, claimed_at=claimed_at,
        provisional=provisional,
    )  # fmt: skip
