"""The board a viewer sees first: ``api.default_board`` if set (it must name a configured
board), else the first board ordered high-first, else the first board; GET /v1/boards names it
and the web page opens on it (tests/test_web_page.py)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from seasons import catalog
from seasons.cli import CliState, cli
from seasons.config import ConfigError, Settings, load_settings

NOW = datetime(2035, 6, 13, 12, tzinfo=UTC)
DESC = {"aggregate": "sum"}
ASC = {"aggregate": "min", "order": "asc"}


def expected_default(boards: dict[str, dict[str, Any]], configured: str = "") -> str | None:
    """The rule, written out plainly."""
    if configured:
        return configured
    names = sorted(boards)
    for name in names:
        if boards[name].get("order", "desc") == "desc":
            return name
    return names[0] if names else None


@pytest.mark.parametrize(
    ("boards", "configured"),
    [
        ({"alpha_laps": ASC, "kills": DESC, "zeta": DESC}, ""),  # not the first by name
        ({"alpha_laps": ASC, "kills": DESC, "zeta": DESC}, "zeta"),  # named in config
        ({"laps": ASC, "best_time": ASC}, ""),  # no high-first board: the first
        ({"laps": ASC, "kills": DESC}, "laps"),  # config wins over the rule
        ({}, ""),
    ],
)
def test_boards_list_names_the_default_board(
    settings_factory: Callable[..., Settings], boards: dict[str, Any], configured: str
) -> None:
    settings = settings_factory(boards=boards, api={"default_board": configured})
    listed = catalog.boards(settings, NOW)
    assert listed.default_board == expected_default(boards, configured)
    assert listed.model_dump(mode="json")["default_board"] == expected_default(boards, configured)


def test_a_default_board_that_is_not_configured_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "seasons.toml"
    toml.write_text('[boards.kills]\n[boards.laps]\norder = "asc"\naggregate = "min"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(environ={"SEASONS_API__DEFAULT_BOARD": "kils"}, path=toml)
    text = str(info.value)
    assert "api.default_board" in text and "'kils'" in text and "kills, laps" in text


def test_the_cli_refuses_an_unknown_default_board_with_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.upper().startswith("SEASONS_"):
            monkeypatch.delenv(name)
    toml = tmp_path / "seasons.toml"
    toml.write_text('[boards.kills]\n[api]\ndefault_board = "nope"\n')
    result = CliRunner().invoke(cli, ["--config", str(toml), "config"], obj=CliState())
    assert result.exit_code == 2, result.output
    assert "api.default_board 'nope' is not a configured board" in result.stderr
    assert "Traceback" not in result.output
