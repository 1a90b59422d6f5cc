"""One hierarchy of errors; each builds a message that names what was wrong.

HTTP status codes and CLI exit statuses are chosen from these at the edges, never here.
"""

from __future__ import annotations

from typing import Any


class SeasonsError(Exception):
    """Base of every error Seasons raises on purpose."""

    code = "error"

    def __init__(self, message: str, details: Any = None):
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, "details": self.details}


class InvalidInput(SeasonsError):
    """The request itself is wrong (bad value, bad name, over a limit)."""

    code = "invalid_input"


class LimitExceeded(InvalidInput):
    code = "limit_exceeded"


class UnknownBoard(InvalidInput):
    code = "unknown_board"

    def __init__(self, board: str, known: list[str]):
        super().__init__(
            f"unknown board {board!r} (configured: {', '.join(sorted(known)) or 'none'})",
            {"board": board},
        )


class BadWindow(InvalidInput):
    code = "bad_window"


class BadPeriod(InvalidInput):
    code = "bad_period"


class BatchRejected(InvalidInput):
    """A write batch with at least one bad event; nothing of it was written.

    ``details`` is a list of ``{"index", "field", "code", "message"}``, one per problem; an
    ``out_of_bounds`` problem adds ``member``, ``value``, ``bound`` (``min_value`` or
    ``max_value``) and ``limit`` (that bound's value).
    """

    code = "invalid_events"

    def __init__(self, problems: list[dict[str, Any]]):
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(
            f"batch rejected, nothing written: event {first['index']}: {first['message']}{more}",
            problems,
        )


class NotFound(SeasonsError):
    code = "not_found"


class NotRanked(NotFound):
    code = "not_ranked"


class Conflict(SeasonsError):
    code = "conflict"


class LockLost(Conflict):
    """A job's lock expired or was taken by another worker while this one still worked: the
    run stops (its steps are recorded; the next run resumes from them)."""

    code = "lock_lost"

    def __init__(self, name: str):
        super().__init__(
            f"lost the lock {name!r} (expired or taken over); stopping this run", {"lock": name}
        )
        self.name = name


class BackendUnavailable(SeasonsError):
    """Redis cannot do the work now (unreachable, full, a replica); the operation may be
    retried. Raised for redis-py's errors by the clients of :mod:`seasons.connection`."""

    code = "backend_unavailable"


class BackendUnreachable(BackendUnavailable):
    """Redis could not be reached or did not answer in time (connection refused or lost, a
    timeout, LOADING, a cluster with no master for the slot), after redis-py's own retries:
    a command in flight may or may not have run."""


class NotReplicated(BackendUnavailable):
    """A write was applied on the master, but fewer replicas than ``redis.wait_replicas``
    acknowledged it within ``redis.wait_timeout_ms``: it is not acknowledged, since a
    failover now could lose it. Resend the same batch (same batch id): it answers the
    original result and waits for the replicas again."""


class BackendFull(BackendUnavailable):
    """Redis refuses writes: it is at ``maxmemory`` with the ``noeviction`` policy."""

    code = "backend_full"


class BackendReadOnly(BackendUnavailable):
    """Redis refuses writes: the server is a read-only replica (``READONLY``)."""

    code = "backend_read_only"


class EvictionPolicy(SeasonsError):
    """Redis may evict keys (``maxmemory-policy`` is not ``noeviction``) and
    ``redis.allow_eviction`` is not set: Seasons would lose data without a word."""

    code = "eviction_policy"


class ArchiveError(SeasonsError):
    """An archive file or manifest that does not check out."""

    code = "archive_invalid"


class ArchiveExists(ArchiveError):
    """An archive file or manifest exists with other content: archives are write-once."""

    code = "archive_exists"


class DataLoss(SeasonsError):
    """Redis lost Seasons' data (its namespace marker is gone while archives exist): the
    worker is in safe mode until an operator restores or acknowledges."""

    code = "data_loss"


class ArchiveRejected(ArchiveError, InvalidInput):
    """An archive file given to ``seasons restore`` that does not check out (manifest, lines,
    season): the operator's input, so a bad-input status; nothing was written.

    ``details`` names the file and, for bad lines, lists ``{"line", "problem"}``."""

    code = "archive_rejected"


class InvalidMember(InvalidInput):
    """A member id given to a read or an erasure breaks the member rule (see
    :func:`seasons.events.check_member`); ``details`` is ``{"member": ...}``."""

    code = "invalid_member"


class InvalidBatchId(InvalidInput):
    """A batch id (``batch_id=``, the ``Idempotency-Key`` header, ``--batch-id``) that is
    not 1-128 bytes of UTF-8 without control characters."""

    code = "invalid_batch_id"


class UnknownAction(InvalidInput):
    """An audit read's ``action`` filter that names no action of the audit trail
    (:data:`seasons.audit.ACTIONS`)."""

    code = "unknown_action"


class BadCursor(InvalidInput):
    """A paging cursor (``after``) that is not a stream id (``<ms>-<seq>``)."""

    code = "bad_cursor"


class BatchIdReused(Conflict):
    """A batch id that a board applied in the last 48 hours came with other events: the
    original result would not describe them, so the batch is refused and nothing written."""

    code = "batch_id_reused"


class UnsupportedRedis(SeasonsError):
    """The Redis server is older than Seasons needs
    (:data:`seasons.redis_health.MIN_REDIS`), or does not say which version it is: its
    scripts would fail on it. ``details`` is ``{"redis_version", "minimum"}``."""

    code = "unsupported_redis"


class NoResult(NotFound):
    """The member has no result in the season's results (it was not ranked on the board's
    archive). ``details`` is ``{"board", "season", "member"}``."""

    code = "no_result"


class NoReward(NotFound):
    """A claim of a member who gets no reward: no result, or a result whose reward is null.
    ``details`` is ``{"board", "season", "member"}``."""

    code = "no_reward"


class RewardsNotReady(Conflict):
    """The season's results are not computed (yet) on this board: the season is not closed,
    or its close has not reached its results step. ``details`` is ``{"board", "season"}``."""

    code = "rewards_not_ready"


class ProvisionalRewards(Conflict):
    """A claim on the provisional results of a snapshot (``S@<ts>``): they show what the
    rewards would be now and are never claimable. ``details`` is ``{"board", "season"}``."""

    code = "provisional"


class ClaimsLogUnavailable(SeasonsError):
    """A claim recorded in Redis could not be appended to its season's claims log
    (:mod:`seasons.claimlog`: ``archive.dir`` unwritable, the disk full), so it is not
    answered: the claim stands in Redis, and a claim sent again with the same claim id
    appends it and answers. ``details`` is ``{"file", "claim_id"}``."""

    code = "claims_log_unavailable"


class HeldNotFound(NotFound):
    """No held event with that id on the board (never held, or dropped after retention).
    ``details`` is ``{"board", "event_id"}``."""

    code = "held_not_found"


class HeldDecided(Conflict):
    """A held event decided the other way already (approve of a rejected one, reject of an
    approved one). ``details`` is ``{"board", "event_id", "state"}``."""

    code = "held_decided"


class HeldRefused(Conflict):
    """A held event that can no longer be applied as a backfill would apply it (a problem
    other than those below); nothing was changed and it stays held. ``details`` is
    ``{"board", "event_id", "problems"}``, the write path's problems."""

    code = "held_refused"


class SeasonClosed(Conflict):
    """A change to a season that is closing or archived: a clear of its boards, or the
    approval of a held event of its days (which stays held)."""

    code = "season_closed"


class DayFolded(Conflict):
    """A change to a day folded into an all-time base already: a clear taking it out, or the
    approval of a held event of a ``set`` board's folded day (which stays held)."""

    code = "day_folded"


class HeldTooLate(Conflict):
    """Approving a held event whose day is past retention: no write can reach it any more
    (it stays held until dropped)."""

    code = "late_event"


class UnknownState(InvalidInput):
    """A moderation state that is not visible, hidden or banned."""

    code = "unknown_state"


class UnknownMode(InvalidInput):
    """A moderation mode that is not shadow or open."""

    code = "unknown_mode"


class NoLeague(InvalidInput):
    """A league read or claim of a board without ``[boards.<b>.league]``."""

    code = "no_league"


class NotInLeague(NotFound):
    """A member without a cohort in a league period (never joined, or still waiting)."""

    code = "not_in_league"


class UnknownCohort(NotFound):
    """No cohort with that id in a league period."""

    code = "unknown_cohort"
