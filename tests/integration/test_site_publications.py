"""Publications on SQLite and PostgreSQL: going live is idempotent and monotonic, the pointer
switch is what `/sites/...` serves, and ended publications' files can be purged while the
live one's are kept (and named as referenced for the store sweeper)."""

from __future__ import annotations

import asyncio
import hashlib
from types import SimpleNamespace
from typing import Any

from fastapi import FastAPI

from deckyard.decks.compile.documents import compile_deck
from deckyard.decks.jobs.site_jobs import SiteJobs, store_prefix
from deckyard.decks.store import deck_get, deck_source
from deckyard.decks.store_sites import publication_keys_referenced
from deckyard.outputs.site_build import build_site
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import json_deck


async def built_site(app: FastAPI, deck_id: int, task_id: int, marker: str) -> dict[str, Any]:
    """A site ZIP of the deck, titled with `marker`, put in the store as a build would."""
    service = app.state.decks
    async with app.state.db.read_connection() as conn:
        row = await deck_get(conn, deck_id, "alice")
        assert row is not None
        source = await deck_source(conn, row)
    data = build_site(marker, compile_deck(source, service.limits), version=f"{deck_id}.{task_id}")
    key = f"decks/alice/{deck_id}/site-job-{task_id}.zip"
    await app.state.render.store.put(key, data)
    return {
        "artifact_key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "deck_version": row.version,
        "site_version": f"{deck_id}.{task_id}",
    }


async def go_live(app: FastAPI, deck_id: int, task_id: int, build: dict[str, Any]) -> Any:
    service = app.state.decks
    jobs = SiteJobs(app.state.db, service.settings, app.state.render.store, service.clock)
    events: list[Any] = []

    async def emit(kind: str, data: Any) -> None:
        events.append((kind, data))

    ctx = SimpleNamespace(
        payload={"deck_id": deck_id, "task_id": task_id, "visibility": "public", "build": build},
        job=SimpleNamespace(workspace_id="alice"),
        emit=emit,
    )
    return await jobs.go_live(ctx)  # type: ignore[arg-type]


async def test_go_live_switch_resume_and_purge(db_url: str) -> None:
    async with running_app(db_url, site_purge_grace_seconds=0) as (app, client):
        alice = await make_token(app, "alice")
        deck_id = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()["id"]
        store, base = app.state.render.store, f"/sites/alice/{deck_id}/"

        first = await go_live(app, deck_id, 1, await built_site(app, deck_id, 1, "First"))
        assert first["status"] == "live"
        first_files = (await client.get(base + "manifest.json")).json()["files"]
        first_files = [f["path"] for f in first_files]
        served = await client.get(base)
        assert served.status_code == 200 and "First" in served.text
        assert served.headers["x-deckyard-publication"] == str(first["publication_id"])

        # A retried job finishes the same publication; nothing new is made.
        again = await go_live(app, deck_id, 1, await built_site(app, deck_id, 1, "First"))
        assert again["publication_id"] == first["publication_id"]

        page_name = (await client.get(f"/v1/decks/{deck_id}", headers=alice)).json()["pages"][0]
        edited = await client.put(
            f"/v1/decks/{deck_id}/pages/{page_name['page']}",
            json={"source": "# Edited\n", "skip_visual_verification": True},
            headers=alice,
        )
        assert edited.status_code == 201, edited.text
        third = await go_live(app, deck_id, 3, await built_site(app, deck_id, 3, "Third"))
        late = await go_live(app, deck_id, 2, await built_site(app, deck_id, 2, "Second"))
        assert (third["status"], late["status"]) == ("live", "superseded")
        assert "Third" in (await client.get(base)).text

        # A page the previous index named (its hashed name) is still served, from its own
        # publication, while that one's files are kept: a reader mid-switch gets no 404.
        first_pages = [p for p in first_files if p.startswith("pages/")]
        old_page = await client.get(base + first_pages[0])
        assert old_page.status_code == 200
        assert old_page.headers["x-deckyard-publication"] == str(first["publication_id"])
        assert old_page.headers["cache-control"] == "public, max-age=31536000, immutable"
        listed = (await client.get(f"/v1/decks/{deck_id}/publications", headers=alice)).json()
        assert [(p["task_id"], p["status"]) for p in listed] == [
            (2, "superseded"),
            (3, "live"),
            (1, "superseded"),
        ]

        # Every file of an unpurged publication is referenced; a stray prefix is not.
        keys = [k for k in await store.keys() if k.startswith("sites/")]
        stray = store_prefix("alice", deck_id, 99) + "index.html"
        async with app.state.db.read_connection() as conn:
            referenced = await publication_keys_referenced(conn, [*keys, stray, "other/x"])
        assert keys and referenced == set(keys)

        # Purge deletes the ended publications' files, never the live one's.
        purged = await app.state.decks.sites.purge_ended(10)
        assert purged == 2
        left = {k for k in await store.keys() if k.startswith("sites/")}
        assert left and all(k.startswith(store_prefix("alice", deck_id, 3)) for k in left)
        assert await app.state.decks.sites.purge_ended(10) == 0
        assert (await client.get(base + first_pages[0])).status_code == 404
        assert "Third" in (await client.get(base)).text
        listed = (await client.get(f"/v1/decks/{deck_id}/publications", headers=alice)).json()
        assert [p["files_deleted"] for p in listed] == [True, False, True]

        # Unpublish: the site answers 404 at once; its files go at the next purge.
        assert (await client.delete(f"/v1/decks/{deck_id}/site", headers=alice)).status_code == 204
        gone = await client.get(base)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "SITE_NOT_FOUND"
        # The retention prune loop's tick does the purge.
        retention = app.state.node.retention
        await retention.prune_tick()
        assert retention.stats.publications == 1
        assert not [k for k in await store.keys() if k.startswith("sites/")]


async def test_concurrent_go_lives_leave_the_latest_publish_live(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        deck_id = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()["id"]
        builds = [await built_site(app, deck_id, t, f"Edition {t}") for t in range(1, 7)]
        await asyncio.gather(
            *(go_live(app, deck_id, t, b) for t, b in zip(range(1, 7), builds, strict=True))
        )
        listed = (await client.get(f"/v1/decks/{deck_id}/publications", headers=alice)).json()
        live = [p for p in listed if p["status"] == "live"]
        assert len(live) == 1 and live[0]["task_id"] == 6, listed
        assert {p["status"] for p in listed if p["task_id"] != 6} == {"superseded"}
        served = await client.get(f"/sites/alice/{deck_id}/")
        assert "Edition 6" in served.text
        assert served.headers["x-deckyard-publication"] == str(live[0]["id"])
