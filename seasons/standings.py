"""Standings: the members of a board in rank order, as archive lines (docs/contract.md#archives).

One module reads them from Redis, orders and ranks them by the board's tie rule
(:mod:`seasons.ties`), writes them as lines and parses them back; archives and their export
(:mod:`seasons.archives`), results (:mod:`seasons.results`) and restore (:mod:`seasons.restore`)
all use it:

- :meth:`Standings.rows`: (rank, member, score, metadata) of a sorted set that does not change
  meanwhile (an archive, a scratch copy), best first;
- :func:`line`: one archive line, ``{"rank","member","score","metadata"}`` and on a board with
  reward tiers ``"reward"``, exactly as files hold it;
- :func:`read_rows`: the lines of a file Seasons wrote (archives, exports);
- :func:`read_checked`: the lines of a file to restore, each checked like an event and against
  the lines before it, bounded whatever the file holds.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

from seasons import shards, ties
from seasons.config.settings import BoardSettings, Settings
from seasons.connection import RedisClient
from seasons.errors import ArchiveError, ArchiveRejected
from seasons.events import check_member, check_metadata, check_value
from seasons.files import open_regular
from seasons.keys import Keys
from seasons.manifest import sha256_read

CHUNK = 1000  # rows per ZRANGE / HMGET / HSET: well under a millisecond of Redis each
Row = tuple[int, str, float, dict[str, Any]]  # rank, member, score, metadata

FIELDS = ("rank", "member", "score", "metadata")
OPTIONAL = ("reward",)  # on boards with reward tiers (seasons.results): a text or null
SHOWN_PROBLEMS = 5  # in the message; details list up to KEPT_PROBLEMS
KEPT_PROBLEMS = 100
STOP_AFTER = 1000  # bad lines: the file is clearly bad, reading it further only costs
# Bytes of one line. The longest entry Seasons writes is about 1.3 KiB (a 128-byte member,
# 1 KiB of metadata, a reward); this leaves room for escapes and spaces a hand-made file
# may hold, and bounds what one line costs to read.
MAX_LINE = 64 * 1024
LineReward = tuple[bool, str | None]  # (the line has a "reward", its value)
NO_REWARD: LineReward = (False, None)


def line(
    rank: int, member: str, score: float, metadata: dict[str, Any], *reward: str | None
) -> str:
    """One archive line, exactly as written to files; with a ``reward`` (a text or None) on
    a board with reward tiers."""
    row: dict[str, Any] = {"rank": rank, "member": member, "score": score, "metadata": metadata}
    if reward:
        row["reward"] = reward[0]
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def read_rows(
    path: Path, *, gz: bool | None = None, rewards: dict[str, str | None] | None = None
) -> list[Row]:
    """The lines of an archive or export file (.jsonl.gz or .jsonl; ``gz`` overrides what the
    name says). ``rewards``, if given, receives the ``reward`` of each line that has one."""
    opener: Any = gzip.open if (path.name.endswith(".gz") if gz is None else gz) else open
    rows: list[Row] = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, text in enumerate(f, start=1):
                d = json.loads(text)
                rank, member, score, meta = d["rank"], d["member"], d["score"], d["metadata"]
                if (
                    not isinstance(rank, int) or not isinstance(member, str)
                    or isinstance(score, bool) or not isinstance(score, int | float)
                    or not math.isfinite(score) or not isinstance(meta, dict)
                ):  # fmt: skip
                    raise ValueError(f"line {n} is not a rank/member/score/metadata row")
                if "reward" in d:
                    reward = d["reward"]
                    if reward is not None and not isinstance(reward, str):
                        raise ValueError(f"line {n}: reward {reward!r} is not text or null")
                    if rewards is not None:
                        rewards[member] = reward
                rows.append((rank, member, float(score), meta))
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(
            f"{path} is not a valid archive file: {exc}", {"file": str(path)}
        ) from exc
    return rows


class Standings:
    """The standings of one namespace's boards, read from Redis in rank order."""

    def __init__(self, client: RedisClient, settings: Settings, keys: Keys):
        self.client = client
        self.settings = settings
        self.keys = keys

    def rows(
        self, board: str, key: str, reached: str | None = None, *, with_metadata: bool = True
    ) -> Iterator[Row]:
        """(rank, member, score, metadata) of every member of ``key``, best first (metadata
        ``{}`` without reading it when not ``with_metadata``).

        Read in chunks: only for keys that do not change meanwhile (archives, scratch copies).
        A board whose tie rule keeps reach sets (earliest) is read in its order, with
        ``reached``, the key's reach set (by default the archive's of an archive key).
        """
        cfg = self.settings.boards[board]
        rule = ties.of(cfg)
        if rule.reach_set:
            yield from self._reached_rows(board, key, reached, with_metadata)
            return
        prev_score: float | None = None
        prev_rank = 0
        # Walked from the best entry, so a dense rank is one more at each new score.
        for start, chunk in self._chunks(key, cfg.order == "desc"):
            members = [m for m, _ in chunk]
            metas = (
                shards.metadata(self.client, self.keys, board, cfg, members)
                if with_metadata
                else [None] * len(members)
            )
            for i, ((member, score), raw) in enumerate(zip(chunk, metas, strict=True)):
                rank = rule.rank(prev_rank, start + i + 1, score == prev_score)
                prev_score, prev_rank = score, rank
                yield rank, member, float(score), json.loads(raw) if raw else {}

    def _chunks(self, key: str, desc: bool) -> Iterator[tuple[int, list[tuple[str, float]]]]:
        """The sorted set ``key`` best first, CHUNK (member, score) pairs at a time, each
        with the position of its first."""
        start = 0
        while True:
            # redis-py types a reply as any of its forms: with scores, (member, score) pairs.
            chunk = cast(
                list[tuple[str, float]],
                self.client.zrange(key, start, start + CHUNK - 1, desc=desc, withscores=True),
            )
            if not chunk:
                return
            yield start, chunk
            start += len(chunk)

    def _reached_rows(
        self, board: str, key: str, reached: str | None, with_metadata: bool = True
    ) -> Iterator[Row]:
        """The rows of a board ranked by reach times (earliest): by score, then reach time
        ascending (a member without one last), then member bytes ascending; ranks are
        positions. A run of equal scores is held back until the score changes (it may go on
        in the next chunk), so the rows held are one chunk plus the longest run of equal
        scores."""
        if reached is None:
            parsed = self.keys.parse(key)
            if parsed is None or parsed.kind != "archive":
                raise ValueError(f"the reach set of {key} must be given")
            reached = self.keys.reached(board, "archive", parsed.ident)
        desc = self.settings.boards[board].order == "desc"
        meta_key = self.keys.meta(board)
        position = 0
        run: list[tuple[str, float, float]] = []  # (member, score, reach) of one score

        def flush() -> Iterator[Row]:
            nonlocal position
            run.sort(key=lambda x: (x[2], _utf8(x[0])))
            for i in range(0, len(run), CHUNK):
                part = run[i : i + CHUNK]
                metas = (
                    self.client.hmget(meta_key, [m for m, _, _ in part])
                    if with_metadata
                    else [None] * len(part)
                )
                for (member, score, _), raw in zip(part, metas, strict=True):
                    position += 1
                    yield position, member, float(score), json.loads(raw) if raw else {}
            run.clear()

        for _, chunk in self._chunks(key, desc):
            times = cast(list[float | None], self.client.zmscore(reached, [m for m, _ in chunk]))
            for (member, score), t in zip(chunk, times, strict=True):
                if run and score != run[0][1]:
                    yield from flush()
                run.append((member, score, math.inf if t is None else float(t)))
        yield from flush()


def rejected(file: Path, problem: str) -> ArchiveRejected:
    """A restore's refusal of ``file``."""
    return ArchiveRejected(
        f"{file}: {problem}; nothing restored", {"file": str(file), "problem": problem}
    )


def open_verified(file: Path, sha256: str, *, inside: Path | None) -> IO[bytes]:
    """``file`` opened (a regular file, within ``inside`` when given), its bytes hashed and
    found equal to its manifest's ``sha256``, and rewound: the lines then read are the bytes
    hashed. A restore's refusal (:func:`rejected`) naming what is wrong otherwise."""
    try:
        data = open_regular(file, inside=inside)
    except FileNotFoundError:
        raise rejected(file, "the archive file does not exist") from None
    except OSError as exc:
        raise rejected(file, f"is unreadable: {exc.strerror or exc}") from None
    except ArchiveError as exc:
        raise rejected(file, exc.details["problem"]) from None
    digest = sha256_read(data)
    if digest != sha256:
        data.close()
        raise rejected(
            file, f"does not match its manifest (sha256 {digest}, manifest says "
            f"{sha256}): the file was changed after it was written",
        )  # fmt: skip
    data.seek(0)
    return data


def lines_rejected(file: Path, problems: list[tuple[int, str]]) -> ArchiveRejected:
    """A restore's refusal of ``file`` for ``problems`` (line number, problem) found past
    :func:`read_checked`: ranks and rewards at the close, the lines of a claims log."""
    lines = len({n for n, _ in problems})
    shown = "; ".join(f"line {n}: {p}" for n, p in problems[:SHOWN_PROBLEMS])
    rest = len(problems) - SHOWN_PROBLEMS
    more = f" (and {rest} more)" if rest > 0 else ""
    return ArchiveRejected(
        f"{file}: {len(problems)} problems on {lines} lines, nothing restored: {shown}{more}",
        {
            "file": str(file), "lines": lines, "problems": len(problems),
            "first": [{"line": n, "problem": p} for n, p in problems[:KEPT_PROBLEMS]],
        },
    )  # fmt: skip


def read_checked(
    data: IO[bytes], file: Path, cfg: BoardSettings, count: int, *, check_ranks: bool = True
) -> tuple[list[Row], list[LineReward]]:
    """The rows of the gzip ``data`` (the file ``file``), each checked like an event and
    against the lines before it, and each line's ``reward``; raises :class:`ArchiveRejected`
    listing the problems (line numbers from 1). Ranks are checked against line numbers unless
    not ``check_ranks`` (a file with gaps: :meth:`seasons.restore_checks.Checker.check` checks
    them as they stood at the close).

    Bounded whatever the file holds: a line is read up to :data:`MAX_LINE` bytes (a longer
    one is a problem, not read further), reading stops at the first line past the manifest's
    ``count`` and after :data:`STOP_AFTER` bad lines, so at most ``(count + 1) * MAX_LINE``
    bytes are decompressed; the first :data:`KEPT_PROBLEMS` problems are kept, the others
    only counted."""
    problems: list[tuple[int, str]] = []
    found = 0  # problems in all
    bad_lines = 0
    stopped: str | None = None
    rows: list[Row] = []
    rewards: list[LineReward] = []
    seen: dict[str, int] = {}
    prev: tuple[str, float, int] | None = None  # member, score, expected rank of the last row
    try:
        with gzip.GzipFile(fileobj=data, mode="rb") as f:
            for n in itertools.count(1):
                raw = f.readline(MAX_LINE + 1)
                if not raw:
                    break
                if n > count:
                    mine = [f"is past the end: its manifest says {count} members"]
                    stopped = "the file is longer than its manifest says"
                elif len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                    mine = [f"is longer than {MAX_LINE} bytes"]
                    stopped = "the line is too long to be an entry"
                else:
                    row, reward, mine = _parse(raw)
                    prev = _check_row(row, mine, n, prev, seen, cfg, check_ranks)
                    if row is not None and not mine:
                        rows.append(row)
                        rewards.append(reward)
                if mine:
                    problems += [(n, m) for m in mine][: KEPT_PROBLEMS - len(problems)]
                    found += len(mine)
                    bad_lines += 1
                    if bad_lines >= STOP_AFTER:
                        stopped = f"{STOP_AFTER} bad lines"
                if stopped:
                    stopped = f"reading stopped at line {n}: {stopped}"
                    break
    except (OSError, EOFError, zlib.error) as exc:
        raise rejected(file, f"is not a readable gzip file: {exc}") from None
    if problems:
        shown = "; ".join(f"line {n}: {p}" for n, p in problems[:SHOWN_PROBLEMS])
        rest = found - SHOWN_PROBLEMS
        more = f" (and {rest} more)" if rest > 0 else ""
        end = f" ({stopped})" if stopped else ""
        raise ArchiveRejected(
            f"{file}: {found} problems on {bad_lines} lines{end}, nothing restored: "
            f"{shown}{more}",
            {
                "file": str(file), "lines": bad_lines, "problems": found, "stopped": stopped,
                "first": [{"line": n, "problem": p} for n, p in problems],
            },
        )  # fmt: skip
    return rows, rewards


def _check_row(
    row: Row | None, mine: list[str], n: int, prev: tuple[str, float, int] | None,
    seen: dict[str, int], cfg: BoardSettings, check_ranks: bool,
) -> tuple[str, float, int] | None:  # fmt: skip
    """Checks line ``n``'s row against the lines before (adds to ``mine``); returns what the
    next line is checked against."""
    if row is None:
        return None
    _, member, score, _ = row
    if member in seen:
        mine.append(f"member {member!r} is already on line {seen[member]}")
    else:
        seen[member] = n
    expected = n
    if prev is not None:
        expected = _against(row, prev, n, cfg, mine)
    elif n > 1 and not ties.of(cfg).positions and type(row[0]) is int:
        # After a bad line the ties before are unknown: a shared or dense
        # rank is only known to be at most the line's number.
        expected = row[0] if 1 <= row[0] <= n else n
    if check_ranks and type(row[0]) is int and row[0] >= 1 and row[0] != expected:
        mine.append(f"rank {row[0]} should be {expected} (ties={cfg.ties!r})")
    return member, score, expected


def _against(
    row: Row, prev: tuple[str, float, int], n: int, cfg: BoardSettings, problems: list[str]
) -> int:
    """The rank line ``n`` should have after the line before; adds order problems."""
    _, member, score, _ = row
    p_member, p_score, p_rank = prev
    desc = cfg.order == "desc"
    if (score > p_score) if desc else (score < p_score):
        problems.append(
            f"score {score} is {'above' if desc else 'below'} the line before's ({p_score}): "
            f"lines are in rank order, {'high' if desc else 'low'} scores first"
        )
        return n
    rule = ties.of(cfg)
    rank = rule.rank(p_rank, n, score == p_score)
    if score != p_score or not rule.member_order:
        # Equal scores of the other rules stand in any order: they share a rank, or stand
        # in the order they were reached, which the file alone gives.
        return rank
    # Redis orders equal scores by member bytes (reversed on a high-first board, read with
    # REV): another order would give the members other ranks once loaded.
    here, there = _utf8(member), _utf8(p_member)
    if (here > there) if desc else (here < there):
        problems.append(
            f"member {member!r} ties with {p_member!r} on the line before but comes "
            f"before it in Redis's order of equal scores (ties={cfg.ties!r})"
        )
    return rank


def _parse(raw: bytes) -> tuple[Row | None, LineReward, list[str]]:
    """(row, its reward, problems): the row is None when the line is not an entry at all."""
    try:
        d = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, NO_REWARD, ["is not valid UTF-8"]
    except ValueError as exc:
        return None, NO_REWARD, [f"is not JSON ({exc})"]
    if not isinstance(d, dict):
        return None, NO_REWARD, [f"is a JSON {type(d).__name__}, not an object"]
    if not set(FIELDS) <= set(d) <= set(FIELDS + OPTIONAL):
        missing = ", ".join(k for k in FIELDS if k not in d) or "none"
        extra = ", ".join(sorted(k for k in d if k not in FIELDS + OPTIONAL)) or "none"
        fields = f"{', '.join(FIELDS)}, and may have {', '.join(OPTIONAL)}"
        return (
            None,
            NO_REWARD,
            [f"needs exactly the fields {fields} (missing: {missing}; unknown: {extra})"],
        )
    reward = d.get("reward")
    if reward is not None and (not isinstance(reward, str) or not reward):
        return None, NO_REWARD, [f"reward {reward!r} is not a non-empty text or null"]
    rank, member, score, meta = (d[k] for k in FIELDS)
    if why := check_member(member):  # the write path's rule: restore is a way in
        return None, NO_REWARD, [why]
    if why := check_value(score):
        return None, NO_REWARD, [why.replace("value", "score", 1)]
    problems = []
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        problems.append(f"rank {rank!r} is not a positive integer")
    _, why = check_metadata(meta)
    if why:
        problems.append(why)
    elif any(v is None for v in meta.values()):
        problems.append("metadata holds a null (an archive stores no deleted fields)")
    row: Row = (rank, member, float(score), dict(meta) if isinstance(meta, dict) else {})
    return row, ("reward" in d, reward), problems


def _utf8(member: str | bytes) -> bytes:
    return member if isinstance(member, bytes) else member.encode("utf-8", "surrogatepass")
