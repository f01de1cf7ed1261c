"""Retention on both databases: pruned rows take their artefacts, the sweep deletes only what no
row refers to, asset bytes are stored once by content hash, and an idle retention writes nothing.
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import FastAPI
from sqlalchemy import insert, update

from deckyard.decks.retention import Retention
from deckyard.decks.store import deck_get, page_version_set_screenshot
from deckyard.jobs import Runtime
from deckyard.jobs.schema import jobs
from deckyard.render.control.schema import render_requests
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import PNG_1PX, json_deck

QUIET = {  # the loops stay out of the way: the test drives retention itself
    "retention_prune_interval_seconds": 3600.0,
    "artifact_sweep_interval_seconds": 3600.0,
    "artifact_sweep_grace_seconds": 0.001,
}


def retention_of(app: FastAPI) -> Retention:
    r: Retention = app.state.node.retention
    return r


def pointer(key: str) -> dict[str, object]:
    return {
        "job_id": 1,
        "artifact_key": key,
        "content_type": "image/png",
        "size": 3,
        "sha256": "0" * 64,
        "width": 1920,
        "height": 1080,
        "format": "png",
    }


async def test_the_sweep_keeps_what_rows_refer_to(db_url: str) -> None:
    async with running_app(db_url, instrument_sql=True, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        retention = retention_of(app)
        store = retention.store
        deck = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()
        rt: Runtime = app.state.runtime
        job = await rt.enqueue("missing.kind", {}, queue="nobody")
        now = app.state.node.clock.now()
        async with app.state.db.write_transaction() as conn:
            row = await deck_get(conn, deck["id"], "alice")
            assert row is not None
            await page_version_set_screenshot(conn, row.pages[0].id, pointer("shots/version.png"))
            await conn.execute(
                insert(render_requests).values(
                    kind="screenshot",
                    workspace_id="alice",
                    input={},
                    input_hash="x",
                    status="succeeded",
                    attempts=1,
                    max_attempts=1,
                    deadline_at=now,
                    retry_after=now,
                    artifact_key="renders/request.png",
                    created_at=now,
                    updated_at=now,
                    finished_at=now,
                )
            )
            await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id)
                .values(result={"artifact_key": "decks/job.zip"})
            )
        for key in ("shots/version.png", "renders/request.png", "decks/job.zip", "orphan.png"):
            await store.put(key, b"png")
        await store.put(".tmp-abandoned", b"half")

        assert await retention.sweeper.referenced(
            ["shots/version.png", "renders/request.png", "decks/job.zip", "orphan.png"]
        ) == {"shots/version.png", "renders/request.png", "decks/job.zip"}
        await retention.sweeper.sweep()
        assert sorted(await store.keys()) == [
            "decks/job.zip",
            "renders/request.png",
            "shots/version.png",
        ]

        # nothing left to do: a prune and a sweep read, and write nothing
        assert app.state.db.counter is not None
        app.state.db.counter.reset()
        assert await retention.prune_once() == (0, 0)
        await retention.sweeper.sweep()
        assert app.state.db.counter.total("writes") == 0
        assert app.state.db.counter.total("reads") > 0


async def test_prune_takes_old_requests_their_artefacts_and_old_tasks(db_url: str) -> None:
    async with running_app(
        db_url, render_retention_seconds=60.0, task_retention_seconds=60.0, **QUIET
    ) as (app, client):
        retention = retention_of(app)
        store = retention.store
        now = app.state.node.clock.now()
        old = now - timedelta(seconds=120)
        start = await retention.footprint()
        async with app.state.db.write_transaction() as conn:
            for i, (finished, status) in enumerate(
                [(old, "succeeded"), (old, "failed"), (now, "succeeded"), (None, "pending")]
            ):
                await conn.execute(
                    insert(render_requests).values(
                        kind="screenshot",
                        workspace_id="alice",
                        input={},
                        input_hash=str(i),
                        status=status,
                        attempts=1,
                        max_attempts=1,
                        deadline_at=now,
                        retry_after=now,
                        artifact_key=f"renders/{i}.png",
                        created_at=old,
                        updated_at=old,
                        finished_at=finished,
                    )
                )
        for i in range(4):
            await store.put(f"renders/{i}.png", b"png")
        assert await retention.prune_once() == (2, 0)
        assert sorted(await store.keys()) == ["renders/2.png", "renders/3.png"]
        after = await retention.footprint()
        assert after.rows["render_requests"] == start.rows["render_requests"] + 2


async def test_assets_are_stored_once_by_content_hash(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        retention = retention_of(app)
        decks = [
            (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()["id"]
            for _ in range(2)
        ]
        for deck in decks:
            put = await client.put(
                f"/v1/decks/{deck}/assets/logo.png", content=PNG_1PX, headers=alice
            )
            assert put.status_code in (200, 201), put.text
        assert (await retention.footprint()).asset_blobs == 1
        gone = await client.delete(f"/v1/decks/{decks[0]}/assets/logo.png", headers=alice)
        assert gone.status_code == 204, gone.text
        await retention.sweeper.sweep()
        assert (await retention.footprint()).asset_blobs == 1
        got = await client.get(f"/v1/decks/{decks[1]}/assets/logo.png", headers=alice)
        assert got.status_code == 200 and got.content == PNG_1PX
        gone = await client.delete(f"/v1/decks/{decks[1]}/assets/logo.png", headers=alice)
        assert gone.status_code == 204, gone.text
        await retention.sweeper.sweep()
        assert (await retention.footprint()).asset_blobs == 0
