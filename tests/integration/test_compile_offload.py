"""Decks compiled in worker processes answer exactly as decks compiled in process.

Every compile here goes to the worker processes (`deck_compile_process_min_bytes=0`): a page
that does not compile, a deck with a problem and a refused source keep their codes, pages and
fields across the process boundary (the domain's exceptions are pickled by state), and nothing
is answered 500.
"""

from __future__ import annotations

import pytest

from tests.helpers.api import make_token, running_app

pytestmark = pytest.mark.processes
MISSING = "<img src='assets/missing.png'>"


async def test_compiles_in_worker_processes_keep_their_answers(db_url: str) -> None:
    async with running_app(db_url, deck_compile_process_min_bytes=0) as (app, client):
        alice = await make_token(app, "alice")

        body = {
            "manifest": {"title": "T"},
            "pages": [
                {"name": "01-a", "kind": "md", "text": "# A"},
                {"name": "02-b", "kind": "html", "text": MISSING},
            ],
        }
        made = await client.post("/v1/decks", json=body, headers=alice)
        assert made.status_code == 201, made.text
        assert [(p["code"], p["page"]) for p in made.json()["problems"]] == [
            ("COMPILE_MISSING_ASSET", "02-b")
        ]
        assert [p["compiled"] for p in made.json()["pages"]] == [True, False]

        checked = await client.post(
            "/v1/validate", json={"kind": "html", "source": MISSING}, headers=alice
        )
        assert checked.status_code == 200, checked.text
        assert checked.json()["valid"] is False
        assert checked.json()["result"]["stages"]["compile"]["status"] == "failed"
        assert {d["code"] for d in checked.json()["result"]["diagnostics"]} == {
            "COMPILE_MISSING_ASSET"
        }

        refused = await client.post(
            "/v1/decks/markdown",
            content=b"# \xff\xfe not UTF-8",
            headers={**alice, "content-type": "text/markdown"},
        )
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "DECK_NOT_UTF8"

        assert app.state.decks.offload.calls_in_processes >= 3
