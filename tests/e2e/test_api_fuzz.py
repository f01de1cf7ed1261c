"""A bounded schemathesis run against `deckyard serve`: no 500, every answer as documented.

Issue 14. Each generated call must not answer 500, must answer a refusal under `/v1` in the
error shape, and must pass schemathesis' conformance checks: a status code the operation
documents, a documented content type, and a body that matches the documented schema. Without
a renderer or an AI provider some routes answer 503 on purpose (rule Q0); those are documented,
in the error shape. Bounded to a few examples per operation so it stays well under two minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.processes, pytest.mark.slow]
AUTH: dict[str, str] = {}
EXAMPLES = 6
CALLS: list[str] = []
SEEDS: dict[str, Any] = {}
OWN_TOKEN: dict[str, int] = {}
FAILURES: list[str] = []
SUCCEEDED: set[str] = set()
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]


def conformance(case: Any, response: Any) -> list[str]:
    """What schemathesis' conformance checks find wrong with one answer (documented status
    code, content type, body schema)."""
    try:
        case.validate_response(response, checks=CHECKS, headers=AUTH)
    except FailureGroup as group:
        return [
            f"{case.method} {case.path} -> {response.status_code}: {type(f).__name__}: {f}"[:900]
            for f in group.exceptions
        ]
    return []


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
        seed(server.url)
        yield schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    finally:
        server.stop()


def seed(url: str) -> None:
    """Things for generated calls to find: a deck with a page, a job, a spare token.

    Every other call that names a deck, page or job names these instead of a generated id, so
    success answers are checked against the schema too, not only 404s; a token revoke never
    names the fuzzer's own token, or every later call would answer 401, and no DELETE or
    rename names the seeded objects.
    """
    with httpx.Client(base_url=url, headers=AUTH, timeout=30) as client:
        [own] = client.get("/v1/tokens").json()
        OWN_TOKEN["id"] = own["id"]
        spare = client.post("/v1/tokens", json={"label": "spare"}).json()
        deck = client.post(
            "/v1/decks/markdown",
            content=b"# One\n\n---\n\n# Two\n",
            headers={"content-type": "text/markdown"},
        )
        assert deck.status_code == 201, deck.text
        deck_id = deck.json()["id"]
        page = client.get(f"/v1/decks/{deck_id}").json()["pages"][0]["page"]
        job = client.post(f"/v1/decks/{deck_id}/pages/{page}/validate")
        assert job.status_code == 202, job.text
    SEEDS.update(deck_id=deck_id, page=page, job_id=job.json()["id"], number=1)
    OWN_TOKEN["spare"] = spare["id"]


def aim(case: Any) -> None:
    """Point every other generated call at the seeded objects (see `seed`)."""
    params = case.path_parameters or {}
    if params.get("token_id") == OWN_TOKEN["id"]:
        params["token_id"] = OWN_TOKEN["spare"]
    if case.method == "DELETE" and params.get("deck_id") == SEEDS["deck_id"]:
        params["deck_id"] = SEEDS["deck_id"] + 10**6
    if len(CALLS) % 2 and case.method != "DELETE" and not case.path.endswith("/rename"):
        for name in set(params) & set(SEEDS):
            params[name] = SEEDS[name]


def check(case: Any) -> None:
    """One generated call: never a 500; every refusal under /v1 in the error shape; every
    answer as documented (status code, content type, body schema)."""
    CALLS.append(f"{case.method} {case.path}")
    aim(case)
    response = case.call(headers=AUTH, timeout=30)
    if response.status_code < 300:
        SUCCEEDED.add(f"{case.method} {case.path}")
    FAILURES.extend(conformance(case, response))
    assert response.status_code != 500, (case.method, case.path, response.text[:500])
    if response.status_code >= 400 and case.path.startswith("/v1/"):
        kind = (response.headers.get("content-type") or [""])[0]
        assert kind.startswith("application/json"), (case.method, case.path, kind)
        body = response.json()
        assert isinstance(body, dict) and "error" in body, (case.method, case.path, body)


def test_no_answer_is_a_500_or_undocumented(api_schema: Any) -> None:
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
    assert not FAILURES, "\n\n".join(FAILURES)
    # success bodies were checked too, not only refusals (the seeded deck, page and job)
    assert len(SUCCEEDED) >= 25, sorted(SUCCEEDED)
    assert len(set(CALLS)) == len(operations), "every operation was called"
    assert len(CALLS) >= 2 * len(operations), len(CALLS)
