"""The soak (``python -m bench --only soak``) for 20 seconds, and its model and comparison.

The short run has the real processes and faults of the long one (a worker SIGKILLed, Redis
paused and restarted from its AOF, a server SIGKILLed), and yesterday closes and its season
is archived while they go on; lost and doubled events must be 0 and every board and archive
must equal the soak's model. The model and the counting of lost and doubled events are
checked here against boards worked out by hand, so that a soak that passes means something.
"""

from __future__ import annotations

import sys
from datetime import UTC, date, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import soak  # noqa: E402

CAL = soak.Calendar(today=date(2030, 1, 2), late_grace=60.0)  # a Wednesday
NS = soak.NS


def at(day: date, hour: int) -> float:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC).timestamp()


def test_soak_under_faults_loses_and_doubles_nothing() -> None:
    opts = soak.Options(seconds=20, writers=3, readers=1, fault_every=3, close_after=5)
    result = soak.soak(opts)
    report = soak.section(opts, result).render()
    assert result.lost == 0, report
    assert result.doubled == 0, report
    assert result.mismatches == [], report
    assert result.problems == [], report
    assert result.archives_verified == len(soak.BOARDS), report
    assert result.acknowledged > 0, report
    assert sum(result.faults.values()) >= 3, report
    # The close fell inside the run: late batches for yesterday were refused.
    assert result.batches["refused"] + result.batches["refused after doubt"] > 0, report


def test_model_boards_by_hand() -> None:
    y, t = CAL.yesterday, CAL.today
    events = [
        {"board": "hits", "member": "a", "value": 1, "ts": at(y, 10)},
        {"board": "hits", "member": "a", "value": 1, "ts": at(t, 1)},
        {"board": "hits", "member": "b", "value": 1, "ts": at(t, 2)},
        {"board": "best", "member": "a", "value": 7, "ts": at(y, 3)},
        {"board": "best", "member": "a", "value": 5, "ts": at(t, 3)},
        {"board": "best", "member": "a", "value": 2, "ts": at(t, 4)},
    ]
    week = "2029-12-30"  # yesterday (Tuesday) is the week's third day: week_start sunday
    assert CAL.week_of(y).isoformat() == week == CAL.week_of(t).isoformat()
    assert soak.expected_boards(events, CAL) == {
        f"{NS}:{{hits}}:day:2030-01-01": {"a": 1.0},
        f"{NS}:{{hits}}:day:2030-01-02": {"a": 1.0, "b": 1.0},
        f"{NS}:{{hits}}:week:{week}": {"a": 2.0, "b": 1.0},
        f"{NS}:{{hits}}:season:past": {"a": 1.0},
        f"{NS}:{{hits}}:season:live": {"a": 1.0, "b": 1.0},
        f"{NS}:{{best}}:day:2030-01-01": {"a": 7.0},
        f"{NS}:{{best}}:day:2030-01-02": {"a": 5.0},
        f"{NS}:{{best}}:week:{week}": {"a": 7.0},
        f"{NS}:{{best}}:season:past": {"a": 7.0},
        f"{NS}:{{best}}:season:live": {"a": 5.0},
    }


def test_lost_and_doubled_events_are_counted_and_shown() -> None:
    day = f"{NS}:{{hits}}:day:2030-01-02"
    expected = {day: {"a": 3.0, "b": 1.0}, f"{NS}:{{points}}:day:2030-01-02": {"a": 40.0}}
    assert soak.lost_and_doubled(expected, expected) == (0, 0)
    assert soak.differences(expected, expected) == []
    actual = {day: {"a": 2.0, "b": 1.0, "c": 2.0}, f"{NS}:{{points}}:day:2030-01-02": {"a": 41.0}}
    assert soak.lost_and_doubled(expected, actual) == (1, 2)
    shown = soak.differences(expected, actual)
    assert len(shown) == 2
    assert shown[0].startswith(f"{day}: 2 members differ")
