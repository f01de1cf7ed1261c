"""Issue 29, item 6: `POST /v1/validate` cannot call a page valid whose image is missing,
whatever its alt text (an empty alt used to drop the image, and the check with it)."""

from __future__ import annotations

from deckyard.decks.errors import CompileErrorCode
from tests.helpers.api import make_token, running_app


async def test_a_missing_image_with_empty_alt_fails_validation(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        page = "# Hi\n\n![](assets/nothere.png)\n"
        for request in (
            client.post("/v1/validate", headers=alice, json={"kind": "md", "source": page}),
            client.post(
                "/v1/validate",
                headers={**alice, "content-type": "text/markdown"},
                content=page.encode(),
            ),
        ):
            r = await request
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["valid"] is False
            codes = [d["code"] for d in out["result"]["diagnostics"]]
            assert CompileErrorCode.MISSING_ASSET.value in codes
