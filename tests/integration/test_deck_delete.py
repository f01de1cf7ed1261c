"""Deleting a deck deletes the screenshot artefacts its page versions point at."""

from __future__ import annotations

from deckyard.decks.store import deck_get, page_version_set_screenshot
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import counts, json_deck


async def test_deck_delete_takes_its_screenshots_and_rows(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        deck = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()
        keep = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()
        store = app.state.render.store
        pointers = {}
        for made, key in ((deck, "shots/a.png"), (keep, "shots/b.png")):
            await store.put(key, b"png")
            pointers[made["id"]] = {
                "job_id": 1,
                "artifact_key": key,
                "content_type": "image/png",
                "size": 3,
                "sha256": "0" * 64,
                "width": 1920,
                "height": 1080,
                "format": "png",
            }
            async with app.state.db.write_transaction() as conn:
                row = await deck_get(conn, made["id"], "alice")
                assert row is not None
                await page_version_set_screenshot(conn, row.pages[0].id, pointers[made["id"]])
        gone = await client.delete(f"/v1/decks/{deck['id']}", headers=alice)
        assert gone.status_code == 204, gone.text
        assert await store.get("shots/a.png") is None
        assert await store.get("shots/b.png") == b"png"
        assert await counts(app) == (1, 0, 1, 1)
        assert (await client.get(f"/v1/decks/{keep['id']}", headers=alice)).status_code == 200
