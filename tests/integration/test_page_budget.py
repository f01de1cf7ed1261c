"""A page that never settles is a content failure, not an outage (issue 30 item 6).

With a real supervised renderer: a page whose script never ends spends its page budget once,
ends `RENDER_PAGE_BUDGET_EXCEEDED` (content, not retried), is refused at the write gate with
422 and fails `/v1/validate` with 200 `valid=false`. It used to be retried as infrastructure
(3 attempts of 60 s, a renderer slot held for 180 s) and answered 503 "retry when the renderer
is up", a retry that could never pass. The budget is kept at 3 s so the test runs in seconds.
"""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from deckyard.render.control.schema import render_attempts
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import counts

pytestmark = [pytest.mark.chromium, pytest.mark.processes]
BUDGET = 3.0
NEVER_ENDS = "<h1>Loop</h1><script>for (;;) {}</script>"
CODE = "RENDER_PAGE_BUDGET_EXCEEDED"


async def attempt_codes(app: FastAPI) -> list[str | None]:
    """The error code of every render attempt so far, oldest first."""
    async with app.state.db.read_connection() as conn:
        rows = await conn.execute(select(render_attempts.c.error_code).order_by("id"))
        return [row.error_code for row in rows]


async def test_a_page_that_never_settles_fails_once_as_content(db_url: str) -> None:
    async with running_app(
        db_url,
        renderers=1,
        render_attempt_timeout_seconds=BUDGET,
        render_request_deadline_seconds=60.0,
    ) as (app, client):
        alice = await make_token(app, "alice")
        body = {
            "manifest": {"title": "T"},
            "pages": [{"name": "01-a", "kind": "md", "text": "# A"}],
        }
        made = await client.post("/v1/decks", json=body, headers=alice)
        assert made.status_code == 201, made.text
        deck_id = made.json()["id"]
        before = await counts(app)

        put = await client.put(
            f"/v1/decks/{deck_id}/pages/01-a",
            json={"source": NEVER_ENDS, "kind": "html"},
            headers=alice,
        )

        assert put.status_code == 422, put.text
        error = put.json()["error"]
        assert error["code"] == "VALIDATION_FAILED"
        assert error["validation"]["status"] == "failed"
        assert error["validation"]["error_code"] == CODE
        assert error["validation"]["retryable"] is False
        assert await counts(app) == before
        assert await attempt_codes(app) == [CODE]

        checked = await client.post(
            "/v1/validate", json={"kind": "html", "source": NEVER_ENDS}, headers=alice
        )

        assert checked.status_code == 200, checked.text
        assert checked.json()["valid"] is False
        assert checked.json()["status"] == "failed"
        assert checked.json()["error_code"] == CODE
