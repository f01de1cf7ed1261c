"""A bounded schemathesis run against `deckyard serve`: no 500, every refusal in the error shape.

Issue 14. Without a renderer or an AI provider some routes answer 503 on purpose (rule Q0);
those are allowed, in the error shape. Bounded to a few examples per operation so it stays
well under two minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.processes, pytest.mark.slow]
AUTH: dict[str, str] = {}
EXAMPLES = 6
CALLS: list[str] = []


@schemathesis.serializer("application/zip", "text/markdown")
def raw_body(_ctx: Any, value: Any) -> bytes:
    """ZIP and Markdown bodies go as raw bytes (a generated string is sent as UTF-8)."""
    return value if isinstance(value, bytes) else str(value).encode()


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The served schema of a fresh Lite server (no renderer), with a token for its calls."""
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    env = clean_env(tmp, DECKYARD_RENDERERS="0")
    AUTH["authorization"] = f"Bearer {create_token(env, tmp, 'fuzz')}"
    server = Server([], env, tmp)
    try:
        server.wait_ready(60)
        yield schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    finally:
        server.stop()


def check(case: Any) -> None:
    """One generated call: never a 500; every refusal under /v1 in the error shape."""
    CALLS.append(f"{case.method} {case.path}")
    response = case.call(headers=AUTH, timeout=30)
    assert response.status_code != 500, (case.method, case.path, response.text[:500])
    if response.status_code >= 400 and case.path.startswith("/v1/"):
        kind = (response.headers.get("content-type") or [""])[0]
        assert kind.startswith("application/json"), (case.method, case.path, kind)
        body = response.json()
        assert isinstance(body, dict) and "error" in body, (case.method, case.path, body)


def test_api_never_answers_500(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 20
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            phases=[Phase.explicit, Phase.generate],
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            check(case)

        run()
    assert len(set(CALLS)) == len(operations), "every operation was called"
    assert len(CALLS) >= 2 * len(operations), len(CALLS)
