"""Settings on pydantic-settings' own sources: precedence, the environment given as a mapping,
the TOML file read once, messages that name the key as written, secrets kept out of them,
and ``month_weights``."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from seasons.cli import CliState, cli
from seasons.config import ConfigError, Settings, load_settings
from seasons.config.settings import MAX_WEIGHT, BoardSettings

Load = Callable[..., Settings]


@pytest.fixture
def toml_file(tmp_path: Path) -> Path:
    return tmp_path / "seasons.toml"


@pytest.fixture
def load(toml_file: Path) -> Load:
    """``load(toml, environ, **overrides)``: settings from exactly this file and mapping."""

    def _load(
        toml: str = "", environ: dict[str, str] | None = None, **overrides: object
    ) -> Settings:
        toml_file.write_text(toml)
        return load_settings(environ=environ or {}, path=toml_file, **overrides)

    return _load


def problems(load: Load, toml: str = "", environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(toml, environ)
    assert str(info.value).startswith("invalid configuration:")
    return info.value.problems


def only_problem(load: Load, toml: str = "", environ: dict[str, str] | None = None) -> str:
    (problem,) = problems(load, toml, environ)
    return problem


@pytest.fixture
def no_process_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No SEASONS_* variable of the developer's and no ./seasons.toml in the working directory."""
    for name in list(os.environ):
        if name.upper().startswith("SEASONS_"):
            monkeypatch.delenv(name)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)


# -- sources and precedence ----------------------------------------------------------------


def test_overrides_over_environment_over_file_over_defaults(load: Load) -> None:
    toml = """
timezone = "Europe/Paris"
week_start = "sunday"
late_grace = "PT2H"
[redis]
url = "redis://file:6379/0"
wait_replicas = 1
socket_timeout = 7
"""
    environ = {
        "SEASONS_TIMEZONE": "Asia/Tokyo",
        "SEASONS_WEEK_START": "tuesday",
        "SEASONS_REDIS__WAIT_REPLICAS": "2",
    }
    s = load(toml, environ, timezone="America/New_York", redis={"socket_timeout": 3})
    assert s.timezone == "America/New_York"  # override over environment and file
    assert s.week_start == "tuesday"  # environment over file
    assert s.late_grace == timedelta(hours=2)  # file over default
    assert s.retention == timedelta(days=35)  # default
    # Tables merge key by key across the three sources.
    assert s.redis.url == "redis://file:6379/0"
    assert s.redis.wait_replicas == 2
    assert s.redis.socket_timeout == 3
    assert s.redis.wait_timeout_ms == 1000


def test_given_environment_replaces_the_process_environment(
    load: Load, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEASONS_TIMEZONE", "Asia/Tokyo")
    monkeypatch.setenv("SEASONS_BOGUS", "1")  # would be refused if it were read
    assert load().timezone == "UTC"
    assert load(environ={"SEASONS_TIMEZONE": "Europe/Paris"}).timezone == "Europe/Paris"


@pytest.mark.usefixtures("no_process_settings")
def test_settings_alone_read_the_process_environment_and_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Path("seasons.toml").write_text('timezone = "Europe/Paris"\nlate_grace = "PT3H"\n')
    monkeypatch.setenv("SEASONS_LATE_GRACE", "PT2H")
    s = Settings()
    assert s.timezone == "Europe/Paris" and s.late_grace == timedelta(hours=2)
    assert Settings(late_grace=timedelta(hours=4)).late_grace == timedelta(hours=4)
    # load_settings with its own sources leaves nothing behind for the next Settings().
    with pytest.raises(ConfigError):
        load_settings(environ={"SEASONS_LATE_GRACE": "soon"})
    assert load_settings(environ={}).late_grace == timedelta(hours=3)
    assert Settings().late_grace == timedelta(hours=2)


@pytest.mark.usefixtures("no_process_settings")
def test_load_settings_defaults_to_process_environment_and_named_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    named = tmp_path / "named.toml"
    named.write_text('namespace = "named"\n')
    monkeypatch.setenv("SEASONS_CONFIG", str(named))
    monkeypatch.setenv("SEASONS_TIMEZONE", "Asia/Tokyo")
    monkeypatch.setenv("SEASONS_FAULT_AT", "rollup")  # a worker hook, not a setting
    s = load_settings()
    assert (s.namespace, s.timezone) == ("named", "Asia/Tokyo")


def test_concurrent_loads_keep_their_own_sources(load: Load, toml_file: Path) -> None:
    toml_file.write_text("")
    zones = ["UTC", "Europe/Paris", "Asia/Tokyo", "America/New_York"] * 10

    def one(zone: str) -> str:
        return load_settings(environ={"SEASONS_TIMEZONE": zone}, path=toml_file).timezone

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(one, zones)) == zones


@pytest.fixture
def opened(toml_file: Path) -> Iterator[list[str]]:
    """The opens of the TOML file while the test runs (an audit hook sees every open)."""
    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if active[0] and event == "open" and str(args[0]) == str(toml_file):
            seen.append(str(args[1]))

    sys.addaudithook(hook)  # audit hooks cannot be removed: this one switches itself off
    yield seen
    active[0] = False


@pytest.mark.parametrize("toml", ['timezone = "Europe/Paris"\n', 'timezone = "Nowhere/Land"\n'])
def test_the_file_is_read_once(load: Load, opened: list[str], toml: str) -> None:
    with contextlib.suppress(ConfigError):
        load(toml)
    reads = [mode for mode in opened if "r" in mode]
    assert len(reads) == 1, opened


# -- messages ------------------------------------------------------------------------------

DURATION_HINT = ("PT1H", "P30D", "seconds")

CASES = [
    # (toml, environ, the problem's start, fragments it must contain)
    ("", {"SEASONS_LATE_GRACE": "1h"}, "SEASONS_LATE_GRACE: ", ('"1h"', *DURATION_HINT)),
    ('late_grace = "1h"\n', {}, "late_grace: ", ('"1h"', *DURATION_HINT)),
    (
        "",
        {"SEASONS_WORKER__LOCK_TTL": "5 minutes"},
        "SEASONS_WORKER__LOCK_TTL (worker.lock_ttl): ",
        DURATION_HINT,
    ),
    ('timezone = "Mars/Olympus"\n', {}, "timezone: ", ("Mars/Olympus", "IANA", "Europe/Istanbul")),
    ("", {"SEASONS_TIMEZONE": "Mars/Olympus"}, "SEASONS_TIMEZONE: ", ("Mars/Olympus", "IANA")),
    ('week_start = "mon"\n', {}, "week_start: ", ("'monday'", "'sunday'")),
    ("", {"SEASONS_WEEK_START": "Funday"}, "SEASONS_WEEK_START: ", ("funday", "'monday'")),
    (
        "[boards.kills]\nweek_weights = [1, 1, 2]\n",
        {},
        "boards.kills.week_weights: ",
        ("exactly 7", "got 3"),
    ),
    (
        "[boards.kills]\nmonth_weights = [" + ", ".join(["1"] * 32) + "]\n",
        {},
        "boards.kills.month_weights: ",
        ("at most 31", "got 32"),
    ),
    (
        '[boards.kills]\nseason_weights = [1, "two"]\n',
        {},
        "boards.kills.season_weights[1]: ",
        ('"two"', "not a number"),
    ),
    (
        "",
        {"SEASONS_BOARDS__KILLS__WEEK_WEIGHTS": '[1, 1, 1, 1, 1, 1, "x"]'},
        "SEASONS_BOARDS__KILLS__WEEK_WEIGHTS (boards.kills.week_weights[6]): ",
        ("not a number",),
    ),
    (
        "",
        {"SEASONS_BOARDS__KILLS__WEEK_WEIGHTS": "1,1,1,1,1,2,2"},
        "SEASONS_BOARDS__KILLS__WEEK_WEIGHTS (boards.kills.week_weights): ",
        ("not valid JSON", "[1, 1, 1, 1, 1, 2, 2]"),
    ),
    (
        '[boards.kills]\nagregate = "sum"\n',
        {},
        "boards.kills.agregate: ",
        ("unknown setting", "aggregate", "month_weights"),
    ),
    (
        "",
        {"SEASONS_BOARDS__KILLS__AGREGATE": "sum"},
        "SEASONS_BOARDS__KILLS__AGREGATE: ",
        ("unknown setting 'boards.kills.agregate'", "aggregate"),
    ),
    ('nmespace = "x"\n', {}, "nmespace: ", ("unknown setting", "namespace")),
    ("", {"SEASONS_REDIS__URLX": "redis://x"}, "SEASONS_REDIS__URLX: ", ("unknown", "url")),
    (
        '[redis]\nurl = "http://127.0.0.1:6379/0"\n',
        {},
        "redis.url: ",
        ("redis://", "rediss://", "unix://"),
    ),
    (
        "",
        {"SEASONS_REDIS__CLUSTER": "ture"},
        "SEASONS_REDIS__CLUSTER (redis.cluster): ",
        ('"ture"', "true or false"),
    ),
    ('[redis]\ncluster = "yes please"\n', {}, "redis.cluster: ", ("true or false",)),
    ("[api]\nport = 99999\n", {}, "api.port: ", ("99999", "at most 65535")),
    ('[redis]\nwait_replicas = "two"\n', {}, "redis.wait_replicas: ", ("whole number",)),
    ('namespace = "My NS"\n', {}, "namespace: ", ('"My NS"', "a-z, 0-9, _ and -")),
    ('[boards."bad name"]\n', {}, "boards.bad name: ", ('name "bad name"', "1 to 64")),
    ('[seasons]\nanchor = "soon"\n', {}, "seasons.anchor: ", ("YYYY-MM-DD",)),
    (
        '[[seasons.list]]\nid = "s1"\nstart = "2026-01-05"\n',
        {},
        "seasons.list[0].end: ",
        ("missing",),
    ),
    ('redis = "x"\n', {}, "redis: ", ("table",)),
]


@pytest.mark.parametrize(("toml", "environ", "start", "fragments"), CASES)
def test_a_mistake_is_a_sentence_naming_the_key(
    load: Load, toml: str, environ: dict[str, str], start: str, fragments: tuple[str, ...]
) -> None:
    problem = only_problem(load, toml, environ)
    assert problem.startswith(start), problem
    for fragment in fragments:
        assert fragment in problem, (fragment, problem)
    # None of pydantic's own wording is left.
    for raw in ("Input should", "Value error", "identifier in duration", "Extra inputs"):
        assert raw not in problem, problem


def test_every_problem_of_every_source_is_named_at_once(load: Load) -> None:
    found = problems(
        load,
        'late_grace = "1h"\n[boards.kills]\nweek_weights = [1]\n',
        {"SEASONS_BOGUS": "1", "SEASONS_TIMEZONE": "Nowhere/Land"},
    )
    starts = sorted(p.split(":", 1)[0] for p in found)
    assert starts == [
        "SEASONS_BOGUS",
        "SEASONS_TIMEZONE",
        "boards.kills.week_weights",
        "late_grace",
    ]


def test_retention_and_late_grace_are_named_in_iso_8601(load: Load) -> None:
    problem = only_problem(load, 'late_grace = "PT2H"\nretention = "PT1H"\n')
    assert "retention (PT1H)" in problem and "late_grace (PT2H)" in problem


def test_unreadable_file_is_named(load: Load, toml_file: Path) -> None:
    problem = only_problem(load, "late_grace = PT1H\n")
    assert str(toml_file) in problem and "not valid TOML" in problem and "quoted" in problem


SECRET = "hunter2-s3cret"


@pytest.mark.parametrize(
    ("toml", "environ"),
    [
        (f'[redis]\nurl = "http://app:{SECRET}@127.0.0.1:6379/0"\n', {}),
        ("", {"SEASONS_REDIS__URL": f"http://app:{SECRET}@127.0.0.1:6379/0"}),
        (f'[redis]\npassword = ["{SECRET}"]\n', {}),
        (f'[api]\nwrite_token = ["{SECRET}"]\nadmin_token = ["{SECRET}"]\n', {}),
        ("", {"SEASONS_API": f'{{"write_token": ["{SECRET}"], "bogus": "{SECRET}"}}'}),
        ("", {"SEASONS_API": f'{{"write_token": "{SECRET}",'}),  # not JSON
        ("", {"SEASONS_BOGUS_TOKEN": SECRET}),
    ],
)
def test_secrets_are_never_repeated(load: Load, toml: str, environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        load(toml, environ)
    assert SECRET not in str(info.value)


@pytest.mark.usefixtures("no_process_settings")
def test_cli_reports_a_bad_duration_with_status_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    result = CliRunner().invoke(
        cli,
        ["--config", str(empty), "config"],
        env={"SEASONS_LATE_GRACE": "1h", "SEASONS_API__WRITE_TOKEN": SECRET},
        obj=CliState(),
    )
    assert result.exit_code == 2, result.output
    assert "SEASONS_LATE_GRACE" in result.stderr and "PT1H" in result.stderr
    assert "identifier in duration" not in result.stderr
    assert SECRET not in result.output
    assert "Traceback" not in result.output


# -- month_weights -------------------------------------------------------------------------


def reference_month_weight(weights: list[float], day: int) -> float:
    return weights[day - 1] if day <= len(weights) else 1.0


@pytest.mark.parametrize(
    "weights", [[], [2.0], [2.0, 0.0, 0.5], [float(d) for d in range(1, 32)], [0.0] * 28]
)
def test_month_weight_by_day_of_month(load: Load, weights: list[float]) -> None:
    toml = f"[boards.kills]\nmonth_weights = {weights}\n"
    board = load(toml).boards["kills"]
    assert board.month_weights == tuple(weights)
    for day in range(1, 32):
        assert board.month_weight(day) == reference_month_weight(weights, day)


def test_month_weights_from_the_environment(load: Load) -> None:
    board = load(environ={"SEASONS_BOARDS__KILLS__MONTH_WEIGHTS": "[3, 0]"}).boards["kills"]
    assert [board.month_weight(d) for d in (1, 2, 3, 31)] == [3.0, 0.0, 1.0, 1.0]


def test_month_weight_refuses_a_day_outside_a_month() -> None:
    board = BoardSettings(month_weights=(5.0,) * 31)
    for day in (0, -1, 32):
        with pytest.raises(ValueError, match="day of month"):
            board.month_weight(day)


@pytest.mark.parametrize("bad", ["-1", "inf", "nan", str(MAX_WEIGHT * 2)])
def test_month_weights_are_checked_like_the_others(load: Load, bad: str) -> None:
    # inf and nan are TOML floats.
    problem = only_problem(load, f"[boards.kills]\nmonth_weights = [1, {bad}]\n")
    assert problem.startswith("boards.kills.month_weights: weight 2 is "), problem
    fine = load(f"[boards.kills]\nmonth_weights = [1, {MAX_WEIGHT}]\n").boards["kills"]
    assert math.isfinite(fine.month_weight(2) * 2**53 * 3660)


# -- the HTTP deadlines --------------------------------------------------------------------


def test_http_deadlines_are_positive_durations(load: Load) -> None:
    api = load('[api]\nheader_timeout = "PT1S"\nbody_timeout = 2.5\n', {}).api
    assert (api.header_timeout, api.body_timeout) == (timedelta(seconds=1), timedelta(seconds=2.5))
    defaults = load("", {}).api
    assert (defaults.header_timeout, defaults.body_timeout) == (
        timedelta(seconds=10), timedelta(seconds=30),
    )  # fmt: skip
    for bad in ('"PT0S"', "0", '"-PT1S"'):
        with pytest.raises(ConfigError) as info:
            load(f"[api]\nheader_timeout = {bad}\n", {})
        assert "api.header_timeout" in str(info.value), str(info.value)
