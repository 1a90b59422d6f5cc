"""Every Redis key Seasons uses is built here, and only here.

All keys of one board share the hash tag ``{<board>}`` so that each multi-key script and
ZUNIONSTORE stays in one cluster slot. The public keys are the sorted sets of every window
(day, week, month, season, alltime: ``<ns>:{<board>}:<window>:<period id>``; alltime's one
period is ``all``), the archive sorted sets and the metadata hash; apps may read them
directly.
"""

from __future__ import annotations

from datetime import date
from typing import NamedTuple

from seasons.vocabulary import WINDOWS


class Keys:
    """Key names for one namespace."""

    def __init__(self, namespace: str):
        self.ns = namespace

    def _board(self, board: str) -> str:
        return f"{self.ns}:{{{board}}}"

    # Public: one sorted set per board per period, scores as docs/contract.md#boards-and-scores
    # defines them.
    def day(self, board: str, day: date | str) -> str:
        return f"{self._board(board)}:day:{_iso(day)}"

    def week(self, board: str, first_day: date | str) -> str:
        return f"{self._board(board)}:week:{_iso(first_day)}"

    def season(self, board: str, season_id: str) -> str:
        return f"{self._board(board)}:season:{season_id}"

    def window(self, board: str, window: str, period_id: str) -> str:
        """The live key of ``window``'s period ``period_id`` (any window of
        ``seasons.windows.SPECS``: day, week, month, season, alltime)."""
        return f"{self._board(board)}:{window}:{period_id}"

    # The base of an all-time board, no TTL: every closed day folded in once, in order, up to
    # the day in the board's state hash under STATE_FOLDED + window. The all-time board is
    # the base combined with the days after that one (what its repair recomputes from, once
    # the day keys have expired).
    def base(self, board: str, window: str) -> str:
        return f"{self._board(board)}:base:{window}"

    # ties = "earliest": beside each board sorted set of a window (or an archive: window
    # "archive"), member -> the time (epoch seconds of the event's ts) it reached its score
    # there, so that equal scores rank first-reached first while the board keeps plain
    # scores. Same TTL as its board.
    def reached(self, board: str, window: str, period_id: str) -> str:
        return f"{self._board(board)}:reached:{window}:{period_id}"

    # ties = "dense": beside each board sorted set of a window (or an archive: window
    # "archive"), one member per distinct score of the board: member = Redis's text of the
    # score (what ZSCORE answers; -0 as "0", one score with 0), score = that score. A dense
    # rank is then one ZCOUNT and the k-th distinct score one ZRANGE. Same TTL as its board
    # (none for an archive's).
    def distinct(self, board: str, window: str, period_id: str) -> str:
        return f"{self._board(board)}:distinct:{window}:{period_id}"

    # Hidden and banned members (seasons.moderation, docs/fair-play.md): hash member -> JSON
    # {"state": "hidden" | "banned", "mode", "reason", "at", "actor"}; a visible member has no
    # field. No TTL. The write script reads it (one EXISTS per call when it is absent).
    def moderation(self, board: str) -> str:
        return f"{self._board(board)}:moderation"

    # The follow-ups of moderation calls not yet done (seasons.moderation): hash call id ->
    # JSON {"call", "member", "at", "actor", "reason", "request_id", "before", "after"}
    # (the board's old and new moderation records), written by moderate.lua with the change
    # and deleted once its events, audit entry and amendment are done; one left by a crash
    # is finished later (Moderator.recover). No TTL.
    def moderation_pending(self, board: str) -> str:
        return f"{self._board(board)}:moderation_pending"

    # The twin of a board key holding member entries of a live period (a window's key, a
    # base, a reach set; TWIN_KINDS): where the entries of hidden and banned members live, so
    # that the public key holds visible members only. The same name with "hidden:" after the
    # board's "{<board>}:" (same hash tag, same slot); parse() gives it kind "hidden" and ident
    # "<kind>:<ident>" of the public key. Same EXPIREAT as its public key.
    def hidden(self, key: str) -> str:
        parsed = self.parse(key)
        if parsed is None or parsed.board is None or parsed.kind not in TWIN_KINDS:
            raise ValueError(f"{key!r} is no key of a kind that has a twin")
        return f"{self._board(parsed.board)}:{HIDDEN}:{parsed.kind}:{parsed.ident}"

    def twin_of(self, key: str) -> str:
        """The twin of the public key ``key`` (:meth:`hidden`)."""
        return self.hidden(key)

    def public_of(self, twin: str) -> str:
        """The public key whose twin is ``twin``; ValueError for a key that is no twin."""
        parsed = self.parse(twin)
        if parsed is None or parsed.board is None or parsed.kind != HIDDEN:
            raise ValueError(f"{twin!r} is no twin key")
        return f"{self._board(parsed.board)}:{parsed.ident}"

    # Public: final standings of an archived season (or a snapshot ``S@<ts>``), no TTL.
    def archive(self, board: str, season_id: str) -> str:
        return f"{self._board(board)}:archive:{season_id}"

    # Public: member -> metadata JSON, shared by every live and archived key of the board.
    # No TTL: the sweep job removes members that are on no live or archived key.
    def meta(self, board: str) -> str:
        return f"{self._board(board)}:meta"

    # Idempotency: sorted set event_id -> epoch seconds it was applied; entries older than
    # 48 hours are dropped by each write, and the key expires 48 hours after the last one.
    def events(self, board: str) -> str:
        return f"{self._board(board)}:events"

    # Write batches (retries): sorted set batch id -> epoch seconds it was applied, and hash
    # batch id -> its original result, so a resent batch answers what it first did. Entries
    # older than 48 hours are dropped by each write; both keys expire 48 hours after the last.
    def batches(self, board: str) -> str:
        return f"{self._board(board)}:batches"

    def batch_results(self, board: str) -> str:
        return f"{self._board(board)}:batch_results"

    # Held events (boards.<b>.member_rate, max_period_gain; docs/writes.md#held-events): hash
    # event id -> JSON record of the event held (its state: held, approved, rejected); sorted
    # set event id -> arrival of the events still held (review pages, retention); sorted set
    # event id -> when an approve or reject decided it (the record kept 48 hours more, so a
    # second decision answers the first). Expired entries are dropped by each write; the keys
    # expire retention + 1 day after the last event held.
    def held(self, board: str) -> str:
        return f"{self._board(board)}:held"

    def held_order(self, board: str) -> str:
        return f"{self._board(board)}:held_order"

    def held_done(self, board: str) -> str:
        return f"{self._board(board)}:held_done"

    # boards.<b>.member_rate: hash member -> events accepted in the interval of `per` seconds
    # starting at epoch second `start` (aligned to the epoch); EXPIREAT a minute past its end.
    def rate(self, board: str, start: int) -> str:
        return f"{self._board(board)}:rate:{start}"

    # Board state, no TTL (job state): closed days ("closed:<YYYY-MM-DD>") and season
    # states ("season:<id>" -> closing | archived) that the write script checks; for a board
    # keeping alltime, the last day folded into its base ("folded:alltime") and the first
    # day that expired before it was folded ("gap:alltime"), if one did; while a clear
    # runs, the marker of its deletion ("clearing:<run id>").
    def state(self, board: str) -> str:
        return f"{self._board(board)}:state"

    # A season's results (rewards), no TTL, computed by the season close from the archive
    # (or by a snapshot, for ``S@<ts>``): member -> JSON {"rank", "score", "reward"} of each
    # ranked member (reward null below every tier), and "" -> JSON of the results' summary.
    def results(self, board: str, season_id: str) -> str:
        return f"{self._board(board)}:results:{season_id}"

    # Claims of a season's rewards, no TTL: member -> JSON {"claimed_at", ...} of the first
    # claim; written once per member (HSETNX), never by the close.
    def claims(self, board: str, season_id: str) -> str:
        return f"{self._board(board)}:claims:{season_id}"

    # Results amended after a late ban (seasons.amend, docs/fair-play.md), no TTL: version
    # n >= 2 of a season's results, as the results hash (member -> JSON {"rank", "score",
    # "reward"}, "" -> its summary, written last); version 1 is ``results`` itself.
    def amended(self, board: str, season_id: str, version: int) -> str:
        return f"{self._board(board)}:amended:{season_id}:{version}"

    # The best result of each member over every version of an amended season (member -> JSON
    # {"rank", "score", "reward", "version"}), no TTL: what reads and claims answer once the
    # season has a version 2. Merged after each version (monotone: never worse).
    def best(self, board: str, season_id: str) -> str:
        return f"{self._board(board)}:best:{season_id}"

    # Upgrade claims of an amended season, no TTL: member -> JSON of its latest upgrade claim
    # {"claimed_at", "reward", "rank", "claim_id", "upgrade": true} (seasons/lua/claim.lua).
    def upgrades(self, board: str, season_id: str) -> str:
        return f"{self._board(board)}:upgrades:{season_id}"

    # Leagues (boards.<b>.league, seasons.leagues, docs/leagues.md). The league's state hash,
    # no TTL: "first" (the first period any member joined) and "first_start" (its start,
    # epoch seconds), "closed:<P>" -> JSON counts of period P's outcome once written (events
    # of P+1 then join at once), "close:<P>" -> the close's progress, "waiting:<P>" -> how
    # many members of P waited for P-1's close so far (dropped when P-1 closes). Member ->
    # tier, no TTL, written only by a close from its outcome (a member without one is in the
    # lowest tier).
    def league_state(self, board: str) -> str:
        return f"{self._board(board)}:league:state"

    def league_tier(self, board: str) -> str:
        return f"{self._board(board)}:league:tier"

    # Period P of a league, each with P's EXPIREAT (its end + retention): `part` is
    #   joined   sorted set member -> cohort x COHORT_SPAN + its place in the cohort (from 0):
    #            one cohort is one ZRANGEBYSCORE, in join order; or -n for the n-th member
    #            whose join waits for P-1's close (seasons.leagues.COHORT_SPAN)
    #   cohorts  hash cohort id (1, 2, ...) -> JSON {"tier", "group"}; a new id is HLEN + 1
    #   open     hash JSON [tier, group] -> the id of that pair's cohort being filled
    #   counts   hash members:<tier> / cohorts:<tier> -> the joins and cohorts of the tier
    #   outcome  hash member -> JSON of its outcome (seasons.leagues.Outcome), written once
    #   done     set of the cohort ids whose outcome is written (the close's checkpoints)
    #   claims   hash member -> JSON {"claimed_at", "reward", "rank", "claim_id"} of its
    #            claim of its cohort reward, written once (seasons/lua/league_claim.lua)
    def league(self, board: str, period: str, part: str) -> str:
        return f"{self._board(board)}:league:{period}:{part}"

    # Public: the lifecycle stream (XADD, bounded MAXLEN): each event once, its stable id in
    # its fields; apps read it with consumer groups.
    def lifecycle(self) -> str:
        return f"{self.ns}:lifecycle"

    # The stable ids already in the lifecycle stream (sorted set: id -> epoch ms), trimmed
    # with it. Its hash tag is the stream's whole key name, so both are in one cluster slot
    # and one script can check and append; it does not start with "<ns>:", so parse() and
    # the sweep leave it alone.
    def lifecycle_ids(self) -> str:
        return f"{{{self.lifecycle()}}}:ids"

    # The audit trail (seasons.audit): a stream (XADD, bounded MAXLEN, no TTL) of the admin
    # actions, one entry each, naming a member only by its salted hash. No route deletes it.
    def audit(self) -> str:
        return f"{self.ns}:audit"

    # Beside the audit stream, in its slot (hash tag: the stream's whole name, as for
    # lifecycle_ids), no TTL: the salt of the members' hashes (a string written once, SET
    # NX); hash -> member id of every member named in the stream (forget deletes its field);
    # the once-ids of the entries appended (sorted set: id -> epoch ms), trimmed with it.
    def audit_salt(self) -> str:
        return f"{{{self.audit()}}}:salt"

    def audit_members(self) -> str:
        return f"{{{self.audit()}}}:members"

    def audit_ids(self) -> str:
        return f"{{{self.audit()}}}:ids"

    # Webhook delivery state of one configured hook (hash, no TTL): attempts and the next
    # try of each pending stream entry, the last failure; the stream's consumer group
    # "hook:<name>" holds what is delivered (XACK) and what is pending.
    def hook(self, name: str) -> str:
        return f"{self.ns}:hook:{name}"

    # Worker keys (no board, so no hash tag): job locks, job state, heartbeat.
    def lock(self, name: str) -> str:
        return f"{self.ns}:lock:{name}"

    def job_state(self, name: str) -> str:
        return f"{self.ns}:job:{name}"

    def heartbeat(self) -> str:
        return f"{self.ns}:heartbeat"

    # Namespace marker, no TTL: written once when Seasons first finds its namespace empty. Its
    # absence while archives or job history exist means Redis lost Seasons' data.
    def marker(self) -> str:
        return f"{self.ns}:marker"

    # Safe mode, no TTL: what the worker found when it detected data loss (JSON); closes and
    # archives stop while it exists. `seasons restore --all` or an acknowledgement clears it.
    def safe_mode(self) -> str:
        return f"{self.ns}:safe_mode"

    # Scratch keys of the worker and operator tools (restore, export), in the board's slot so a
    # script can RENAME them into place; always created with a short TTL.
    def tmp(self, board: str, name: str) -> str:
        return f"{self._board(board)}:tmp:{name}"

    def pattern(self) -> str:
        """SCAN pattern for every key of the namespace (the sweep, operator tools)."""
        return f"{self.ns}:*"

    def parse(self, key: str) -> ParsedKey | None:
        """What a key of this namespace is: the inverse of the builders above (None if the
        key is not one of ours). Board keys give their board, kind and id; worker keys
        (``lock``, ``job``, ``heartbeat``) give no board."""
        prefix = self.ns + ":"
        if not key.startswith(prefix):
            return None
        rest = key[len(prefix) :]
        if rest.startswith("{"):
            end = rest.find("}:")
            if end < 1:
                return None
            board, tail = rest[1:end], rest[end + 2 :]
            kind, _, ident = tail.partition(":")
            return ParsedKey(board, kind, ident)
        kind, _, ident = rest.partition(":")
        return ParsedKey(None, kind, ident)

    def board_pattern(self, board: str) -> str:
        """SCAN pattern for every key of a board (operator tools only, never in a script)."""
        return f"{self._board(board)}:*".replace("{", "\\{").replace("}", "\\}")


class ParsedKey(NamedTuple):
    board: str | None  # None for worker keys
    kind: str  # a window | base | archive | meta | events | state | hidden | tmp | lock | ...
    ident: str  # period or season id, scratch or lock name; '' when the kind has none


def _iso(day: date | str) -> str:
    return day if isinstance(day, str) else day.isoformat()


# The kinds of keys that have a twin (Keys.hidden): every window's live key, the all-time
# base, the reach sets (LIVE_TWIN_KINDS: what moderation moves), and a season's archive
# (its twin: the hidden members' entries at the close, Redis only). Distinct sets have
# none: they describe public scores only.
HIDDEN = "hidden"
LIVE_TWIN_KINDS = frozenset({*WINDOWS, "base", "reached"})
TWIN_KINDS = LIVE_TWIN_KINDS | {"archive"}

STATE_CLOSED_DAY = "closed:"
STATE_SEASON = "season:"
STATE_FOLDED = "folded:"  # + window: the last day folded into that window's base
# + window: the first day whose key expired before it was folded. The base lacks it for
# good, so the board can no longer be recomputed (it stays as the write-through left it).
STATE_GAP = "gap:"
# + season id: the version an unfinished amendment is writing (seasons.amend), until it is done
STATE_AMEND = "amend:"
STATE_AMENDED = "amended:"  # + season id: the latest version of its results (absent: 1)
STATE_CLEARING = "clearing:"  # + run id: that clear's deletion is done (jobs/clear.py)
SEASON_CLOSING = "closing"
SEASON_ARCHIVED = "archived"
