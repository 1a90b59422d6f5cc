"""Result and input models; ``model_dump_json()`` of a result is its HTTP JSON (the read
script's answer), ``model_dump(mode="json")`` that JSON parsed; scores stay floats in Python."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, WithJsonSchema

MetaValue = str | int | float | bool | None

# Below this, every integral double is written as the integer it is; from it on, a double
# is written as pydantic writes a float (1e+16), as every float is.
_INTEGER_TEXT = 1e16


def score_json(x: float) -> int | float:
    """A score as JSON writes it: an integral value below 10^16 as an integer (``637``, not
    ``637.0``; ``0`` for -0), any other in the shortest digits that read back as the same
    double, in decimal notation from 10^-5 (``637.5``, ``0.30000000000000004``) and as
    ``d.ddde±x`` outside (``1e+20``, ``1.5e-7``), which is how pydantic writes a float. The
    read scripts write the same text (``json_score`` in ``seasons/lua/lib/json.lua``)."""
    if x.is_integer() and abs(x) < _INTEGER_TEXT:
        return int(x)
    return x


# Every score, gap and percentile of a read's result: a float in Python, written in JSON as
# :func:`score_json` says, so that a result's ``model_dump_json()`` has the text of the read
# script's answer (the HTTP body) and the CLI's ``--json``.
Score = Annotated[
    float,
    PlainSerializer(score_json, return_type=Any, when_used="json"),
    WithJsonSchema({"type": "number"}),
]

# The parts of a composite board's score (``boards.<name>.composite``), most significant first;
# absent (None, left out of the JSON) on other boards and where a score does not split.
Parts = Annotated[
    dict[str, int] | None,
    Field(
        exclude_if=lambda v: v is None,
        description="The score split into the board's composite parts (boards.<name>."
        "composite), most significant first; absent on boards without parts",
    ),
]


class Event(BaseModel):
    """One score event as apps send it (validated as a batch by :mod:`seasons.events`)."""

    model_config = ConfigDict(extra="forbid")

    board: str
    member: str
    value: float | int
    ts: str | float | int | None = Field(
        default=None, description="RFC 3339 with offset, or epoch seconds; default now"
    )
    event_id: str | None = Field(
        default=None, description="1-128 bytes; makes the write idempotent"
    )
    metadata: dict[str, MetaValue] | None = None


# A hidden or banned member's own view in open mode (docs/boards.md#hidden-and-banned-members):
# true on its entry; absent (False, left out of the JSON) on every other one, so the JSON of
# visible members is as it always was.
Hidden = Annotated[
    bool,
    Field(
        exclude_if=lambda v: not v,
        description="true on a hidden or banned member's own entry when its moderation mode "
        "is open; absent otherwise",
    ),
]


class Standing(BaseModel):
    """Where an event's member stands after its batch was applied (a write asked for it)."""

    index: int = Field(description="The event's position in the batch")
    board: str
    member: str
    window: str
    period: str | None = Field(
        description="The period of the event's day on that window; null for a day in no "
        "season (between explicit seasons)"
    )
    rank: int | None = Field(description="By the board's ties rule; null when not on the board")
    score: Score | None = Field(description="null when not on the board (trimmed away)")
    hidden: Hidden = False


class HeldRef(BaseModel):
    """An event of a batch that a per-member limit held (docs/writes.md#held-events)."""

    index: int = Field(description="The event's position in the batch")
    event_id: str = Field(
        description="Its event id, or for an event sent without one <batch_id>#<index>: what "
        "the held routes name it by"
    )
    reason: str = Field(description="member_rate or max_period_gain")


class WriteResult(BaseModel):
    """What a write batch did. A resend of the same batch id answers the original result."""

    applied: int = Field(description="Events this batch applied")
    duplicates: int = Field(description="Events whose event_id was applied already")
    # Absent from sums of several batches (an import's total, the demo data set).
    batch_id: str | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="The batch's id (the Idempotency-Key, or generated): resend with it",
    )
    standings: list[Standing] | None = Field(
        default=None,
        exclude_if=lambda v: v is None,
        description="With return=standing: one per event, in batch order, read after the "
        "batch was applied (on a resend: when resent); absent otherwise",
    )
    # Absent (0, None) when the batch held nothing, so a board without limits answers as
    # it always did.
    held: int = Field(
        default=0,
        exclude_if=lambda v: v == 0,
        description="Events held by a per-member limit (applied nowhere, kept for review); "
        "absent when none",
    )
    held_events: list[HeldRef] | None = Field(
        default=None,
        exclude_if=lambda v: not v,
        description="One per held event, in batch order; absent when none",
    )
    # Absent (0) when the batch had no event of a banned member (docs/fair-play.md).
    banned: int = Field(
        default=0,
        exclude_if=lambda v: v == 0,
        description="Events of banned members: acknowledged, their ids seen, applied "
        "nowhere; absent when none",
    )


class Entry(BaseModel):
    rank: int
    member: str
    score: Score
    parts: Parts = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    hidden: Hidden = False


class EntryDetail(Entry):
    """One member's entry with where it stands on the whole board (a read of one member)."""

    percentile: Score = Field(
        description="100 x (ranked members with a strictly worse score) / (ranked members), "
        "0..100: the share of the board this member is ahead of (0 for the last, or alone)"
    )
    gap_up: Score | None = Field(
        description="How much the score must improve to reach the nearest strictly better "
        "score on the board (|better - score|); null when no score is better (first, or "
        "tied for first)"
    )
    total: int = Field(description="Ranked members on the board")


class Page(BaseModel):
    board: str
    window: str
    period: str
    total: int
    entries: list[Entry]


class HistoryPoint(BaseModel):
    period: str
    rank: int | None
    score: Score | None
    parts: Parts = None
    hidden: Hidden = False


class History(BaseModel):
    board: str
    window: str
    member: str
    history: list[HistoryPoint]


class ClimbTarget(BaseModel):
    rank: int = Field(description="The rank asked for")
    score: Score | None = Field(
        description="The score at that position in the board's order; null when the board "
        "has fewer members"
    )
    parts: Parts = None
    gap: Score = Field(
        description="How much the member's score must change to reach that score (its "
        "absolute difference); 0 when the member's rank is that rank or better, or the board "
        "has fewer members"
    )


class Climb(BaseModel):
    """What a member needs to reach some ranks of a board."""

    board: str
    window: str
    period: str
    member: str
    rank: int
    score: Score
    parts: Parts = None
    targets: list[ClimbTarget]
    hidden: Hidden = False


# --- rewards of a season (results computed by the close, claims) ------------------------------


class RewardTier(BaseModel):
    """One reward tier of a season's results, with how many members it granted and claimed."""

    tier: str = Field(description="The tier as configured: its ranks or top percent")
    reward: str
    count: int = Field(description="Members of the results in this tier (granted)")
    claimed: int = Field(
        description="Claims of this tier's reward (tiers giving the same reward show the "
        "claims of that reward each)"
    )


class RewardsSummary(BaseModel):
    """A season's results on one board: when computed, its tiers and their claims."""

    season: str
    board: str
    provisional: bool = Field(description="Results of a snapshot S@<ts>: never claimable")
    computed_at: str = Field(description="When the results were computed, ISO 8601 UTC")
    total: int = Field(description="Members with a result (ranked on the archive)")
    version: int = Field(
        1, description="The version of the results: 1 as the close wrote them, n >= 2 amended"
    )
    granted: int = Field(description="Members with a reward (the sum of the tiers' counts)")
    claimed: int = Field(description="Rewards claimed")
    tiers: list[RewardTier]


class MemberReward(BaseModel):
    """One member's result in a season and the state of its claim."""

    season: str
    board: str
    member: str
    rank: int
    score: Score
    reward: str | None = Field(description="null below every tier")
    claimed: bool
    claimed_at: str | None = Field(description="The first claim's time, ISO 8601 UTC")
    provisional: bool
    void: bool = Field(
        default=False,
        description="Hidden or banned now on an amended season: its claim is kept, flagged",
    )


class RewardsPage(BaseModel):
    """A page of a season's results in rank order, with their summary."""

    season: str
    board: str
    offset: int
    limit: int
    total: int = Field(description="Members with a result")
    version: int = Field(
        1, description="The version listed: 1 as the close wrote them, n >= 2 amended"
    )
    summary: RewardsSummary
    entries: list[MemberReward]


class Claim(BaseModel):
    """A claimed reward. Every claim of the same reward answers the same reward and time;
    ``already_claimed`` is false for the one claim that recorded it."""

    season: str
    board: str
    member: str
    rank: int
    score: Score
    reward: str
    claimed_at: str = Field(description="The first claim's time, ISO 8601 UTC")
    already_claimed: bool
    upgrade: bool = Field(
        default=False,
        description="The better reward of an amended season, claimed after a first claim",
    )
    void: bool = Field(
        default=False, description="Hidden or banned now: the claim is kept, flagged void"
    )


class AuditEntry(BaseModel):
    """One entry of the audit trail (seasons.audit): an admin action that was done."""

    stream_id: str = Field(description="Its id in the <ns>:audit stream; the paging cursor")
    at: str = Field(description="When it was done (ISO 8601 UTC)")
    actor: str = Field(
        description="Who did it: an admin token's name (admin for api.admin_token), local "
        "(a loopback client without a token), cli:<user>, or the Python API's actor="
    )
    action: str = Field(description="forget, clear, restore, ...")
    member: str | None = Field(
        description="The member it concerned; null when it names none, or once the member "
        "was forgotten (member_hash stays)"
    )
    member_hash: str | None = Field(
        description="HMAC-SHA256 of the member id with the namespace's audit salt (hex)"
    )
    boards: list[str] = Field(description="The boards it concerned")
    reason: str | None = Field(description="The reason the actor gave, if any")
    before: Any = Field(description="The state it changed, as JSON (null: none recorded)")
    after: Any = Field(description="What it did or left, as JSON")
    request_id: str | None = Field(description="The admin request's X-Request-ID, if over HTTP")


class AuditPage(BaseModel):
    """Audit entries, newest first; ``next`` is the ``after`` of the next page (null: none)."""

    entries: list[AuditEntry]
    next: str | None = Field(
        description="Pass as after= for the entries older than these; null at the end"
    )


class HeldEvent(BaseModel):
    """An event a per-member limit held, as stored for review (docs/writes.md#held-events)."""

    event_id: str = Field(description="Its event id, or <batch_id>#<index> when it had none")
    state: str = Field(description="held, approved or rejected")
    generated: bool = Field(description="Whether event_id was generated (the event had none)")
    batch_id: str
    index: int = Field(description="The event's position in its batch")
    member: str
    value: Score
    ts: float = Field(description="The event's time, epoch seconds (approve applies it then)")
    day: str = Field(description="The local day of ts, YYYY-MM-DD")
    metadata: dict[str, Any] | None = Field(description="The metadata sent with it, or null")
    metadata_merge: bool = Field(
        description="Whether the metadata holds nulls (fields it deletes when merged)"
    )
    reason: str = Field(description="member_rate or max_period_gain")
    window: str = Field(description="The window whose board `score` is on")
    score: Score | None = Field(
        description="The member's score on that board of the event's period before the event, "
        "null when it had none"
    )
    limit: Score = Field(description="member_rate.events or max_period_gain.value then")
    arrived_at: float = Field(description="When its batch arrived, epoch seconds")
    decided_at: float | None = Field(
        default=None, description="When it was approved or rejected, epoch seconds"
    )


class HeldPage(BaseModel):
    """A page of a board's held events, oldest arrival first."""

    board: str
    events: list[HeldEvent]
    next: str | None = Field(description="Pass as `after` for the next page; null at the end")


class HeldDecision(BaseModel):
    """What an approve or reject of a held event did. A second decision of the same kind
    answers ``repeated`` true and changes nothing."""

    board: str
    event_id: str
    action: str = Field(description="approve or reject")
    repeated: bool = Field(description="It was decided so already; nothing done now")
    applied: int = Field(description="1 when this call applied the event, else 0")
    before: HeldEvent = Field(description="The record before this call")
    after: HeldEvent = Field(description="The record after it")


class ModerationRecord(BaseModel):
    """A member's moderation state on one board (docs/fair-play.md). ``visible``: no record
    (mode, reason, at, actor null)."""

    board: str
    state: Literal["visible", "hidden", "banned"]
    mode: Literal["shadow", "open"] | None = Field(
        default=None, description="Its self-view: shadow (as if visible) or open (flagged)"
    )
    reason: str | None = None
    at: str | None = Field(default=None, description="When it was set (ISO 8601 UTC)")
    actor: str | None = Field(default=None, description="Who set it (the audit trail's actor)")


class BoardModeration(BaseModel):
    """What one moderation call did on one board."""

    board: str
    changed: bool = Field(description="False: it was so already (nothing written)")
    before: ModerationRecord
    after: ModerationRecord
    moved: int = Field(description="Keys the member's entries moved between (public <-> twin)")


class ModerationChange(BaseModel):
    """What ``Seasons.moderate`` did: one entry per board asked, in board order."""

    member: str
    state: Literal["visible", "hidden", "banned"]
    boards: list[BoardModeration]


class MemberModeration(BaseModel):
    """A member's moderation state on every board (GET .../moderation)."""

    member: str
    boards: list[ModerationRecord]


# --- leagues (docs/leagues.md) -----------------------------------------------------------------


class LeagueRow(BaseModel):
    """One member of a cohort: rank and zone null for a member without rank (no score, or
    hidden); ``tier_after`` and ``reward`` as the close decided them once the cohort is
    final, else what the live standings would give."""

    member: str
    score: Score | None
    rank: int | None
    zone: Literal["promote", "stay", "demote"] | None
    tier_after: str
    reward: str | None = None
    hidden: bool = Field(
        default=False, description="The member asking, hidden or banned in open mode"
    )


class LeagueCohort(BaseModel):
    """A cohort's standings in one period of a board's league."""

    board: str
    period: str
    window: str
    cohort: int
    tier: str
    group: str
    member: str | None = Field(default=None, description="The member asked for, if any")
    member_tier: str | None = Field(
        default=None, description="The asked member's current tier (after the close: its next)"
    )
    resets_at: str = Field(description="The period's end, ISO 8601 UTC")
    promote: int
    demote: int
    promotion_score: Score | None = Field(
        description="The score of the last member in the promotion zone (null: zone empty or "
        "not full)"
    )
    final: bool = Field(description="The close wrote this cohort's outcome")
    rows: list[LeagueRow]


class LeagueTier(BaseModel):
    tier: str
    members: int
    cohorts: int


class LeagueOverview(BaseModel):
    """Members and cohorts per tier (lowest first) in one period of a board's league."""

    board: str
    period: str
    window: str
    resets_at: str
    final: bool = Field(description="The period's close is complete")
    tiers: list[LeagueTier]


class LeagueClaim(BaseModel):
    """A claimed cohort reward; as :class:`Claim`, for a league period."""

    board: str
    period: str
    member: str
    cohort: int | None
    rank: int
    score: Score | None
    reward: str
    claimed_at: str = Field(description="The first claim's time, ISO 8601 UTC")
    already_claimed: bool
