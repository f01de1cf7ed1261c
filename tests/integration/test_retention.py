"""Retention on both databases: pruned rows take their artefacts, the sweep deletes only what no
row refers to, asset bytes are stored once by content hash, and an idle retention writes nothing.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import insert, update

from deckyard.decks.retention import Retention
from deckyard.decks.store import deck_get, page_version_set_screenshot
from deckyard.jobs import Runtime
from deckyard.jobs.schema import jobs
from deckyard.render.control.schema import render_requests
from deckyard.tasks.schema import task_events, tasks
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import PNG_1PX, json_deck
from tests.helpers.eventually import eventually

QUIET = {  # the loops stay out of the way: the test drives retention itself
    "retention_prune_interval_seconds": 3600.0,
    "artifact_sweep_interval_seconds": 3600.0,
    "artifact_sweep_grace_seconds": 0.001,
}


async def retention_of(app: FastAPI) -> Retention:
    """The app's retention, once both its loops ran their first tick (they tick at start; one
    that came after the test's rows would prune or sweep them before the test does)."""
    r: Retention = app.state.node.retention

    async def first_ticks() -> bool:
        return all(loop.stats.ticks >= 1 for loop in r.loops)

    await eventually(first_ticks, what="retention's first ticks")
    return r


def request_row(now: datetime, **over: Any) -> Any:
    """An insert of a finished screenshot render request (created, updated and finished `now`
    unless `over` says otherwise)."""
    values: dict[str, Any] = {
        "kind": "screenshot",
        "workspace_id": "alice",
        "input": {},
        "input_hash": "x",
        "status": "succeeded",
        "attempts": 1,
        "max_attempts": 1,
        "deadline_at": now,
        "retry_after": now,
        "created_at": now,
        "updated_at": now,
        "finished_at": now,
    }
    return insert(render_requests).values({**values, **over})


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
        retention = await retention_of(app)
        store = retention.store
        deck = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()
        rt: Runtime = app.state.runtime
        job = await rt.enqueue("missing.kind", {}, queue="nobody")
        now = app.state.node.clock.now()
        async with app.state.db.write_transaction() as conn:
            row = await deck_get(conn, deck["id"], "alice")
            assert row is not None
            await page_version_set_screenshot(conn, row.pages[0].id, pointer("shots/version.png"))
            await conn.execute(request_row(now, artifact_key="renders/request.png"))
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
    ) as (app, _client):
        retention = await retention_of(app)
        store = retention.store
        now = app.state.node.clock.now()
        old = now - timedelta(seconds=120)
        start = await retention.footprint()
        async with app.state.db.write_transaction() as conn:
            for i, (finished, status) in enumerate(
                [(old, "succeeded"), (old, "failed"), (now, "succeeded"), (None, "pending")]
            ):
                await conn.execute(
                    request_row(
                        now,
                        input_hash=str(i),
                        status=status,
                        artifact_key=f"renders/{i}.png",
                        created_at=old,
                        updated_at=old,
                        finished_at=finished,
                    )
                )
            for finished, status in [(old, "succeeded"), (now, "failed"), (None, "running")]:
                task = await conn.execute(
                    insert(tasks)
                    .values(
                        kind="publish",
                        status=status,
                        stage=0,
                        workspace_id="alice",
                        params={},
                        state={},
                        created_at=old,
                        updated_at=old,
                        finished_at=finished,
                    )
                    .returning(tasks.c.id)
                )
                await conn.execute(
                    insert(task_events).values(
                        task_id=task.scalar_one(), created_at=old, type="created", data={}
                    )
                )
        for i in range(4):
            await store.put(f"renders/{i}.png", b"png")
        assert await retention.prune_once() == (2, 1)
        assert sorted(await store.keys()) == ["renders/2.png", "renders/3.png"]
        after = await retention.footprint()
        assert after.rows["render_requests"] == start.rows["render_requests"] + 2
        assert after.rows["tasks"] == start.rows["tasks"] + 2
        assert after.rows["task_events"] == start.rows["task_events"] + 2
        assert await retention.prune_once() == (0, 0)


async def test_prune_keeps_an_ended_request_until_its_job_takes_the_result(db_url: str) -> None:
    async with running_app(db_url, render_retention_seconds=60.0, **QUIET) as (app, _client):
        retention = await retention_of(app)
        rt: Runtime = app.state.runtime
        waiting = await rt.enqueue("missing.kind", {}, queue="nobody")
        now = app.state.node.clock.now()
        old = now - timedelta(seconds=120)
        async with app.state.db.write_transaction() as conn:
            for i, job_id in enumerate([waiting.id, None]):
                await conn.execute(
                    request_row(
                        now,
                        input_hash=f"job-{i}",
                        parent_job_id=job_id,
                        created_at=old,
                        updated_at=old,
                        finished_at=old,
                    )
                )
        # the request without a job goes; the one whose job is still pending stays
        assert await retention.prune_once() == (1, 0)
        assert await retention.prune_once() == (0, 0)
        await rt.cancel(waiting.id)
        assert await retention.prune_once() == (1, 0)


async def test_assets_are_stored_once_by_content_hash(db_url: str) -> None:
    async with running_app(db_url, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        retention = await retention_of(app)
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


async def page_numbers(
    client: httpx.AsyncClient, headers: dict[str, str], deck: int
) -> dict[str, int]:
    got = (await client.get(f"/v1/decks/{deck}", headers=headers)).json()
    return {p["page"]: p["number"] for p in got["pages"]}


async def test_an_asset_replacement_lands_only_when_its_pages_pass(db_url: str) -> None:
    import io

    from PIL import Image

    def png(colour: tuple[int, int, int]) -> bytes:
        out = io.BytesIO()
        Image.new("RGB", (8, 8), colour).save(out, format="PNG")
        return out.getvalue()

    async with running_app(db_url, renderers=1, **QUIET) as (app, client):
        alice = await make_token(app, "alice")
        retention = await retention_of(app)
        body = json_deck("# Logo\n\n![logo](assets/logo.png)\n")
        body["pages"].append({"name": "02-plain", "kind": "md", "text": "# Plain\n"})  # type: ignore[attr-defined]
        deck = (await client.post("/v1/decks", json=body, headers=alice)).json()["id"]
        url = f"/v1/decks/{deck}/assets/logo.png"
        assert (await client.put(url, content=png((255, 0, 0)), headers=alice)).status_code == 201

        # a good replacement: the page that uses it is validated again and gets a new version
        good = png((0, 200, 0))
        put = await client.put(url, content=good, headers=alice)
        assert put.status_code == 200, put.text
        assert put.json()["sha256"] == hashlib.sha256(good).hexdigest()
        pages = await page_numbers(client, alice, deck)
        assert pages == {"01-hello": 2, "02-plain": 1}
        assert (await client.get(url, headers=alice)).content == good

        # a broken image fails the page that uses it: nothing is written, the old bytes stay
        broken = good[:40] + b"\0" * 64
        put = await client.put(url, content=broken, headers=alice)
        assert put.status_code == 422, put.text
        assert "01-hello" in put.json()["error"]["pages"]
        assert (await client.get(url, headers=alice)).content == good
        pages = await page_numbers(client, alice, deck)
        assert pages == {"01-hello": 2, "02-plain": 1}
        # the staged bytes are a blob nothing refers to: the sweep removes them
        before = (await retention.footprint()).asset_blobs
        await retention.sweeper.sweep()
        assert (await retention.footprint()).asset_blobs == before - 2  # red and broken
