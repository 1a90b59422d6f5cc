"""Schemathesis over the app's own OpenAPI schema: requests generated from it (valid ones and
deliberately broken ones) never get a 5xx, and every response has a documented status, the
documented content type, and a body that matches its schema.

One test per operation, run against a real redis-server with a seeded data set. Requests carry
the admin token (accepted for writes too), so writes and admin calls are exercised beyond the
401/403 gate; the demo reset stays refused (409) in this namespace. Examples per operation are
few enough to keep the file under a minute on two cores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from http_support import ADMIN_TOKEN, SETTINGS, START, WRITE_TOKEN, seed
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from seasons import Seasons
from seasons.clock import ManualClock
from seasons.config import Settings
from seasons.http.app import create_app

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
EXAMPLES = 12  # per operation and mode


def _operations() -> list[tuple[GenerationMode, str, str]]:
    """(mode, method, path) to run, from the schema of an app that never connects: every
    operation with valid data; those that take input with invalid data too."""
    app = create_app(Settings(**SETTINGS))
    out = []
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            out.append((GenerationMode.POSITIVE, method.upper(), path))
            if op.get("parameters") or op.get("requestBody"):
                out.append((GenerationMode.NEGATIVE, method.upper(), path))
    return out


@pytest.fixture
def api_schema(settings_factory: Callable[..., Settings], tmp_path: Path) -> Iterator[Any]:
    settings = settings_factory(
        **SETTINGS,
        api={"write_token": WRITE_TOKEN, "admin_token": ADMIN_TOKEN},
        archive={"dir": str(tmp_path / "archive")},
    )
    clock = ManualClock(START)
    with Seasons(settings, clock=clock) as app:
        seed(app, days=4, players=15)
        app.client.set(app.keys.heartbeat(), "fuzz", ex=600)  # a worker "runs": /readyz is 200
        yield schemathesis.openapi.from_asgi("/openapi.json", create_app(settings, app=app))


@pytest.mark.parametrize(("mode", "method", "path"), _operations())
def test_api_conforms_to_its_schema(
    api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def run(case: Any) -> None:
        case.call_and_validate(headers=AUTH, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:  # e.g. a lone string path parameter: every value of it is valid
        pytest.skip(f"schemathesis finds no invalid input for {method} {path}")
