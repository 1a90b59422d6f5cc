"""The Python API: one facade over the write and read paths."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from seasons.amend import Amender, Amendment
from seasons.archives import Archives
from seasons.audit import DEFAULT_ACTOR, Audit, Note
from seasons.backend import Backend
from seasons.clock import Clock, system_clock
from seasons.config.loading import load_settings
from seasons.config.settings import Settings
from seasons.connection import RedisClient, make_client
from seasons.erasure import Cleared, Forgotten
from seasons.errors import BackendUnreachable
from seasons.executor import sync_executor
from seasons.held import Held, held_summary
from seasons.jobs.registry import clear_of, sweeper_of
from seasons.keys import Keys
from seasons.league_reads import LeagueReads
from seasons.league_rewards import claim as claim_league
from seasons.lifecycle import Lifecycle, LifecycleEvents
from seasons.models import (
    AuditPage,
    Claim,
    Climb,
    Entry,
    EntryDetail,
    Event,
    HeldDecision,
    HeldPage,
    HistoryPoint,
    LeagueClaim,
    LeagueCohort,
    LeagueOverview,
    MemberModeration,
    MemberReward,
    ModerationChange,
    Page,
    RewardsPage,
    WriteResult,
)
from seasons.moderation import DEFAULT_MODE, Moderation, Moderator
from seasons.read_limits import DEFAULT_TO
from seasons.reads import Read, Reads, T
from seasons.restore import Restored, Restorer
from seasons.rewards import Rewards
from seasons.scripts import Scripts
from seasons.writes import Writes, new_batch_id

# A write that meets a connection error or timeout (BackendUnreachable, after redis-py's own
# retries) is sent this many times in all, backing off from WRITE_BACKOFF seconds (doubling).
WRITE_ATTEMPTS = 4
WRITE_BACKOFF = 0.1


class Seasons:
    """Windowed, seasonal leaderboards on Redis.

    >>> s = Seasons.from_settings()
    >>> s.submit("kills", "ann", 3, batch_id="b-1")
    WriteResult(applied=1, duplicates=0, batch_id='b-1')
    >>> s.top("kills", "day").entries[0].member
    'ann'
    """

    def __init__(
        self, settings: Settings, *, client: RedisClient | None = None,
        clock: Clock = system_clock,
    ):  # fmt: skip
        self.settings = settings
        self.clock = clock
        self.keys = Keys(settings.namespace)
        self.client = client if client is not None else make_client(settings.redis)
        self.scripts = Scripts(self.client)
        # Every read is prepared by `reads` and run by `executor` (seasons.executor); the HTTP
        # server runs the same prepared reads on its asyncio executor.
        self.reads = Reads(settings, self.keys, clock)
        self.league_reads = LeagueReads(settings, self.keys, clock)
        self.writes = Writes(self.client, self.scripts, settings, self.keys, clock)
        self.executor = sync_executor(self.client)
        self.writes.executor = self.executor  # a sharded board's standings are merged reads
        # What the jobs (seasons.jobs.registry) and the rewards run on.
        self.backend = Backend(self.client, self.scripts, settings, self.keys, clock)
        self._rewards = Rewards(self.backend, self.reads, self.run)
        # The audit trail: forget, clear and restore append to it here (and moderation and
        # held events through the same append).
        self.audit_trail = Audit(self.client, self.keys, settings)
        self._held = Held(self.writes)
        lifecycle = Lifecycle(self.client, self.keys, settings)
        # Results amended after a late ban (seasons.amend): run by each moderation change.
        self.amender = Amender(
            self.client, Archives(self.client, self.scripts, settings, self.keys), self.keys,
            lifecycle,
        )  # fmt: skip
        self._moderator = Moderator(
            Moderation(self.client, self.scripts, settings, self.keys), self.audit_trail,
            lifecycle, self.amender,
        )  # fmt: skip

    @classmethod
    def from_settings(
        cls, settings: Settings | None = None, *, clock: Clock = system_clock, **kwargs: Any
    ) -> Seasons:
        """Build from ``settings``, or load them from the environment and TOML like the CLI."""
        return cls(settings if settings is not None else load_settings(), clock=clock, **kwargs)

    def close(self) -> None:
        self.executor.close()
        self.client.close()

    def __enter__(self) -> Seasons:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes ---------------------------------------------------------------------------

    def submit(
        self,
        board: str,
        member: str,
        value: float,
        *,
        ts: str | float | datetime | None = None,
        event_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        batch_id: str | None = None,
        standing: bool = False,
        standing_window: str | None = None,
    ) -> WriteResult:
        """Record one score event (a batch of one, see :meth:`submit_many`). Raises
        :class:`seasons.errors.BatchRejected` if invalid."""
        event: dict[str, Any] = {"board": board, "member": member, "value": value}
        if ts is not None:
            event["ts"] = ts
        if event_id is not None:
            event["event_id"] = event_id
        if metadata is not None:
            event["metadata"] = metadata
        return self.submit_many(
            [event], batch_id=batch_id, standing=standing, standing_window=standing_window
        )

    def submit_many(
        self,
        events: Iterable[Mapping[str, Any] | Event],
        *,
        batch_id: str | None = None,
        backfill: bool = False,
        standing: bool = False,
        standing_window: str | None = None,
    ) -> WriteResult:
        """Record a batch: validated whole, then applied atomically per board.

        ``batch_id`` (1-128 bytes; generated when None, returned in the result) makes the
        batch safe to send again for 48 hours: a resend answers the original result and
        writes nothing. The same id with other events raises
        :class:`seasons.errors.BatchIdReused`. A connection error or timeout during the
        write, which may or may not have run, is retried here with the same id.

        ``standing``: the result's ``standings`` hold, per event, its member's rank and
        score after the batch on the board of the event's day in ``standing_window``
        (default ``season``; :class:`seasons.errors.BadWindow` if a board of the batch keeps
        no such window), read by the same script call as the write; a hidden or banned
        member's is its own view (docs/fair-play.md#writes). A resend of an applied batch
        reads them when resent."""
        batch = self.writes.check(
            events, batch_id=batch_id, backfill=backfill, standing=standing,
            standing_window=standing_window,
        )  # fmt: skip
        # Each resend carries the same batch id, events and `now`: the script answers a
        # copy that ran already with its recorded result, so resending is safe. A refusal
        # (full, a replica, NotReplicated) is raised at once.
        for attempt in range(WRITE_ATTEMPTS - 1):
            try:
                return self.writes.apply(batch)
            except BackendUnreachable:
                time.sleep(WRITE_BACKOFF * 2**attempt)
        return self.writes.apply(batch)

    # --- held events (docs/writes.md#held-events) -------------------------------------------

    def held(self, board: str, *, limit: int = 100, after: str | None = None) -> HeldPage:
        """The events a per-member limit holds on ``board``, oldest arrival first: ``limit``
        (1-1000), after the event id ``after`` (a page's ``next``)."""
        return self._held.list(board, limit, after)

    def approve(
        self, board: str, event_id: str, *, actor: str = DEFAULT_ACTOR,
        reason: str | None = None, request_id: str | None = None,
    ) -> HeldDecision:  # fmt: skip
        """Apply a held event exactly once with its original ``ts``, as a backfill write of
        it would (:class:`seasons.errors.SeasonClosed` when its season is closing or
        archived, :class:`seasons.errors.DayFolded`, :class:`seasons.errors.HeldTooLate`: it
        stays held). Approving again answers ``repeated`` and applies nothing;
        :class:`seasons.errors.HeldDecided` if it was rejected,
        :class:`seasons.errors.HeldNotFound` if there is no such held event.

        The decision appends one ``held_approve`` entry to the audit trail (``actor``,
        ``reason``, ``request_id``), once per event however often it is asked."""
        note = Note.of(actor, reason, request_id)
        return self._audited(self._held.approve(board, event_id), note)

    def reject(
        self, board: str, event_id: str, *, actor: str = DEFAULT_ACTOR,
        reason: str | None = None, request_id: str | None = None,
    ) -> HeldDecision:  # fmt: skip
        """Drop a held event: it is never applied. Rejecting again answers ``repeated``;
        :class:`seasons.errors.HeldDecided` if it was approved. Appends one ``held_reject``
        entry to the audit trail, as :meth:`approve` does."""
        note = Note.of(actor, reason, request_id)
        return self._audited(self._held.reject(board, event_id), note)

    def _audited(self, decision: HeldDecision, note: Note) -> HeldDecision:
        """``decision``, with its audit entry appended. A repeated decision appends only if
        the first one's append was lost (the process stopped between the two): the entry's
        once-id is the event's decision."""
        record = decision.after
        self.audit_trail.append(
            f"held_{decision.action}", note, self.clock(), member=record.member,
            boards=[decision.board], once=f"held:{decision.board}:{decision.event_id}",
            before=held_summary(decision.before), after=held_summary(record),
        )  # fmt: skip
        return decision

    # --- hidden and banned members (docs/fair-play.md) ---------------------------------------

    def moderate(
        self, member: str, state: str, *, mode: str = DEFAULT_MODE,
        boards: Iterable[str] | None = None, reason: str, actor: str = DEFAULT_ACTOR,
        request_id: str | None = None,
    ) -> ModerationChange:  # fmt: skip
        """Set ``member``'s state on ``boards`` (default: every board): ``visible``,
        ``hidden`` (absent from every public read, its writes kept aside) or ``banned``
        (hidden, and its new events applied nowhere). ``mode``: its self-view, ``shadow``
        (answered as if visible) or ``open`` (flagged). One atomic call per board; each
        board that changed appends to the audit trail (actions hide, unhide, ban, unban)
        and its state change emits a lifecycle event. Bad input (unknown state, mode or
        board, a reason empty or over 500 characters) raises before anything changes."""
        note = Note.of(actor, reason, request_id)
        return self._moderator.moderate(
            member, state, mode=mode, boards=boards, reason=reason, note=note, now=self.clock()
        )

    def resume_amendments(self) -> list[Amendment]:
        """Finish the amendments of results cut off by a crash, on every board
        (seasons.amend); the next moderation call on a board does it too."""
        now = self.clock()
        return [a for b in sorted(self.settings.boards) for a in self.amender.resume(b, now)]

    def moderation(self, member: str, *, boards: Iterable[str] | None = None) -> MemberModeration:
        """``member``'s state, mode, reason, time and actor on each board (default: all)."""
        return self._moderator.status(member, None if boards is None else list(boards))

    # --- reads ----------------------------------------------------------------------------

    def run(self, read: Read[T]) -> T:
        """Run a prepared read (:attr:`reads`): its result (None where a read of one member
        finds it not on the board)."""
        return read.result(self.executor.run(read.call, read.plan))

    def top(
        self,
        board: str,
        window: str = "season",
        *,
        period: str = "current",
        limit: int = 10,
        offset: int = 0,
    ) -> Page:
        """A page of the board, best first, with ``total`` members in all."""
        return self.run(self.reads.page(board, window, period, limit=limit, offset=offset))

    def rank(
        self, board: str, member: str, window: str = "season", *, period: str = "current"
    ) -> EntryDetail | None:
        """The member's entry with its ``percentile``, ``gap_up`` and the board's ``total``,
        or None if it is not on the board."""
        return self.run(self.reads.entry(board, window, member, period))

    def climb(
        self,
        board: str,
        member: str,
        window: str = "season",
        *,
        to: Iterable[int] = DEFAULT_TO,
        period: str = "current",
    ) -> Climb | None:
        """The member's rank and score and, for each rank of ``to`` (1 to 1000 ranks, each
        1 to 10^9), the score at that position of the board and the change of score that
        reaches it (0 once the member's rank is that rank or better); None if it is not on
        the board. A hidden or banned member's rank and score are its own view
        (docs/boards.md#hidden-and-banned-members), the targets the public board's."""
        return self.run(self.reads.climb(board, window, member, period, to=to))

    def around(
        self,
        board: str,
        member: str,
        window: str = "season",
        *,
        size: int = 5,
        period: str = "current",
    ) -> Page | None:
        """``size`` entries centred on the member (shifted at the ends); None if not ranked."""
        return self.run(self.reads.around_member(board, window, member, period, size=size))

    def around_rank(
        self,
        board: str,
        rank: int,
        window: str = "season",
        *,
        size: int = 5,
        period: str = "current",
    ) -> Page:
        """``size`` entries centred on ``rank`` (shifted at the ends)."""
        return self.run(self.reads.around_rank(board, window, rank, period, size=size))

    def lookup(
        self,
        board: str,
        members: Iterable[str],
        window: str = "season",
        *,
        period: str = "current",
    ) -> list[Entry]:
        """The ranked ones among ``members`` (a friends board), best first."""
        return self.run(self.reads.lookup(board, window, list(members), period))

    def history(
        self, board: str, member: str, window: str = "day", *, last: int | None = None
    ) -> list[HistoryPoint]:
        """Rank and score of the member in each of the last ``last`` periods, oldest first
        (by default the window's own number: 14 days, 12 weeks, months or seasons)."""
        return self.run(self.reads.history(board, member, window, last=last)).history

    # --- rewards of a season -------------------------------------------------------------

    def rewards(
        self, board: str, season: str, member: str | None = None, *, offset: int = 0,
        limit: int = 100,
    ) -> MemberReward | RewardsPage:  # fmt: skip
        """A season's results on ``board`` as its close computed them (``season``: an id,
        or a snapshot ``S@<ts>``, whose results are provisional).

        With ``member``: that member's rank, score, reward and claim
        (:class:`seasons.errors.NoResult` if it has none). Without: a page of the results in
        rank order (``limit`` 1-1000) with the summary (each tier's reward, members granted
        and claims). :class:`seasons.errors.RewardsNotReady` before the results exist."""
        if member is not None:
            return self._rewards.member(board, season, member)
        return self._rewards.page(board, season, offset=offset, limit=limit)

    def claim(self, board: str, season: str, member: str, *, claim_id: str | None = None) -> Claim:
        """Claim ``member``'s reward of ``season`` on ``board``, exactly once: the first
        claim records it (``already_claimed`` false); every other, concurrent or later,
        answers the same reward and ``claimed_at`` with ``already_claimed`` true.

        ``claim_id`` (1-128 bytes; generated when None) names this claim: sent again with
        the same id, a claim that was recorded answers ``already_claimed`` false again, so a
        caller that lost the answer (a timeout) can ask again and know the claim is its
        own. A connection error or timeout is retried here with the same id.

        Raises :class:`seasons.errors.NoReward` (no result, or no reward),
        :class:`seasons.errors.RewardsNotReady` (results not computed yet) and
        :class:`seasons.errors.ProvisionalRewards` (a snapshot's results); nothing is written
        then. An answer ``already_claimed`` false is first appended to the season's claims
        log under ``archive.dir`` and fsynced (:mod:`seasons.claimlog`), so a restore brings
        it back after Redis lost it; :class:`seasons.errors.ClaimsLogUnavailable` when it
        cannot be (the claim stands in Redis: call again with the same ``claim_id``)."""
        claim_id = new_batch_id() if claim_id is None else claim_id
        for attempt in range(WRITE_ATTEMPTS - 1):
            try:
                return self._rewards.claim(board, season, member, claim_id)
            except BackendUnreachable:
                time.sleep(WRITE_BACKOFF * 2**attempt)
        return self._rewards.claim(board, season, member, claim_id)

    # --- leagues (docs/leagues.md) -----------------------------------------------------------

    def league(
        self, board: str, member: str | None = None, *, period: str = "current",
        cohort: int | None = None,
    ) -> LeagueCohort | LeagueOverview:  # fmt: skip
        """A league read of ``period`` (an id of the league's window, ``current`` or
        ``previous``) on ``board``, one round trip: ``member``'s cohort
        (:class:`seasons.errors.NotInLeague` if it has none, also while it waits to join),
        cohort ``cohort`` (:class:`seasons.errors.UnknownCohort`), or without either the
        overview: members and cohorts per tier. Rows are the live standings
        (:func:`seasons.leagues.standings`) until the close wrote the cohort's outcome, then
        the close's decision. :class:`seasons.errors.NoLeague` for a board without one."""
        if member is not None:
            return self.run(self.league_reads.member(board, member, period))
        if cohort is not None:
            return self.run(self.league_reads.cohort(board, cohort, period))
        return self.run(self.league_reads.overview(board, period))

    def claim_league(
        self, board: str, period: str, member: str, claim_id: str | None = None
    ) -> LeagueClaim:
        """Claim ``member``'s cohort reward of league ``period`` on ``board``, exactly once,
        as :meth:`claim` does for a season's reward (the claim id, the claims log):
        :class:`seasons.errors.RewardsNotReady` before the period's close is complete,
        :class:`seasons.errors.NoReward` without one."""
        claim_id = new_batch_id() if claim_id is None else claim_id
        for attempt in range(WRITE_ATTEMPTS - 1):
            try:
                return claim_league(
                    self.backend, self.league_reads, board, period, member, claim_id
                )
            except BackendUnreachable:
                time.sleep(WRITE_BACKOFF * 2**attempt)
        return claim_league(self.backend, self.league_reads, board, period, member, claim_id)

    # --- erasure --------------------------------------------------------------------------

    def forget(
        self, member: str, *, actor: str = DEFAULT_ACTOR, reason: str | None = None,
        request_id: str | None = None,
    ) -> Forgotten:  # fmt: skip
        """Remove ``member`` everywhere: every live and archived board, its metadata, and
        the archive files it is in (rewritten with new manifests), as ``seasons forget`` and
        ``DELETE /v1/admin/members/{member}`` do. A member Seasons cannot hold raises
        :class:`seasons.errors.InvalidMember` before any Redis call.

        Then one ``forget`` entry is appended to the audit trail (:meth:`audit`) naming
        ``actor``, ``reason`` (at most 500 characters) and ``request_id``; the member's id
        leaves the trail with it (its entries keep only its salted hash)."""
        note = Note.of(actor, reason, request_id)
        now = self.clock()
        found = Forgotten.model_validate(sweeper_of(self.backend).forget(member, now))
        self.audit_trail.append(
            "forget", note, now, member=member, forgotten=True, boards=found.boards,
            after={b: {"keys": len(r.keys), "metadata": r.metadata,
                       "files_rewritten": len(r.files_rewritten), "held": r.held,
                       "moderation": r.moderation}
                   for b, r in found.boards.items()} | {"lifecycle": found.lifecycle},
        )  # fmt: skip
        return found

    def clear(
        self,
        board: str,
        window: str,
        period: str,
        with_days: bool = False,
        *,
        run_id: str | None = None,
        actor: str = DEFAULT_ACTOR,
        reason: str | None = None,
        request_id: str | None = None,
    ) -> Cleared:
        """Clear one period of a board (``seasons clear``, ``POST
        /v1/admin/boards/{board}/clear``): a day's key is deleted and every rolled-up board
        holding the day recomputed; a week, month, season or all-time board is recomputed
        from its days, which ``with_days`` clears first.

        ``run_id`` (generated when None, returned in the result) makes it safe to call again:
        a clear stopped midway resumes without deleting again, a finished one answers its
        result for 48 hours. Refused with :class:`seasons.errors.Conflict` (nothing changed):
        a closing or archived season, a day folded into an all-time base, a board to
        recompute with days past retention, another clear of the board running.

        A clear that finishes appends one ``clear`` entry to the audit trail (``actor``,
        ``reason``, ``request_id``), once per ``run_id``: asked again, it appends nothing."""
        note = Note.of(actor, reason, request_id)
        return clear_of(self.backend).run(
            board, window, period, self.clock(), with_days=with_days, run_id=run_id, note=note
        )

    def restore(
        self, file: str | Path, *, force: bool = False, actor: str = DEFAULT_ACTOR,
        reason: str | None = None,
    ) -> Restored:  # fmt: skip
        """Load an archive file back into Redis after checking everything it claims, as
        ``seasons restore FILE`` does (:mod:`seasons.restore`): raises
        :class:`seasons.errors.ArchiveRejected` (a bad file) or
        :class:`seasons.errors.ArchiveExists` (other standings, without ``force``), writing
        nothing. Appends one ``restore`` entry to the audit trail. (``restore --all``, which
        also ends safe mode, is the CLI's: :meth:`seasons.restore.Restorer.restore_all`.)"""
        note = Note.of(actor, reason)
        restorer = Restorer(self.client, self.settings, self.keys)
        return restorer.restore(Path(file), self.clock(), force=force, note=note)

    # --- lifecycle events -------------------------------------------------------------------

    def lifecycle(self, limit: int = 20, after: str | None = None) -> LifecycleEvents:
        """The last ``limit`` (1-1000) events of the lifecycle stream, newest first; with
        ``after`` (a ``stream_id`` from a page), those older than it. The events and their
        ids: docs/contract.md#lifecycle-events."""
        return Lifecycle(self.client, self.keys, self.settings).read(limit, after)

    # --- the audit trail ----------------------------------------------------------------------

    def audit(
        self, *, member: str | None = None, action: str | None = None, limit: int = 20,
        after: str | None = None,
    ) -> AuditPage:  # fmt: skip
        """Entries of the audit trail (who forgot, cleared, restored what, when and why),
        newest first: up to ``limit`` (1-1000), only ``action``'s and/or those naming
        ``member`` if given, older than ``after`` (a page's ``next``) if given. Raises
        :class:`seasons.errors.UnknownAction`, :class:`seasons.errors.BadCursor`,
        :class:`seasons.errors.InvalidInput` (limit) or
        :class:`seasons.errors.InvalidMember`."""
        return self.audit_trail.read(member=member, action=action, limit=limit, after=after)
