"""The ``seasons`` command line.

Each module of this package registers its commands on :data:`cli` when it is imported;
adding a module of commands is one line in the import below.
"""

from __future__ import annotations

from seasons.cli import (  # command modules: importing one registers its commands
    audit,  # noqa: F401
    events,  # noqa: F401
    held,  # noqa: F401
    info,  # noqa: F401
    leagues,  # noqa: F401
    moderation,  # noqa: F401
    ops,  # noqa: F401
    reads,  # noqa: F401
    rewards,  # noqa: F401
    serve,  # noqa: F401
    writes,  # noqa: F401
)
from seasons.cli.common import CliState, cli

__all__ = ["CliState", "cli", "main"]


def main() -> None:
    """Entry point of the ``seasons`` console script."""
    cli.main(prog_name="seasons")
