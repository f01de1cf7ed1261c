"""A node whose artefact store is S3 (moto's server on loopback): retention and the sweep delete
there, and a lost S3 is a 503 `ARTIFACT_STORE_UNAVAILABLE` that stores nothing, after which the
same node serves again without a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import update

from deckyard.decks.sweeper import ArtifactSweeper
from deckyard.jobs import Runtime
from deckyard.jobs.schema import jobs
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import PNG_1PX
from tests.helpers.s3 import PREFIX, S3Server, s3_server, s3_settings
from tests.integration.test_hostile_input import assert_error_shape
from tests.integration.test_retention import QUIET, request_row, retention_of

CODE = "ARTIFACT_STORE_UNAVAILABLE"


@pytest.fixture
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


async def test_retention_and_the_sweep_delete_on_s3(db_url: str, s3: S3Server) -> None:
    bucket = s3.create_bucket()
    over = {**QUIET, **s3_settings(s3, bucket), "render_retention_seconds": 60.0}
    async with running_app(db_url, **over) as (app, client):
        admin = await make_token(app, "alice")
        retention = await retention_of(app)
        store = retention.store
        rt: Runtime = app.state.runtime
        job = await rt.enqueue("missing.kind", {}, queue="nobody")
        now = app.state.node.clock.now()
        old = now - timedelta(seconds=120)
        async with app.state.db.write_transaction() as conn:
            await conn.execute(
                request_row(now, input_hash="old", artifact_key="renders/old.png", finished_at=old)
            )
            await conn.execute(request_row(now, input_hash="new", artifact_key="renders/new.png"))
            await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id)
                .values(result={"artifact_key": "decks/job.zip"})
            )
        for key in ("renders/old.png", "renders/new.png", "decks/job.zip", "orphan.png"):
            await store.put(key, b"png")

        # retention prunes the old request and deletes its artefact from the bucket
        assert await retention.prune_once() == (1, 0)
        assert await store.keys() == ["decks/job.zip", "orphan.png", "renders/new.png"]

        # the sweep's grace reads S3's write times: a young orphan stays
        patient = app.state.settings.model_copy(update={"artifact_sweep_grace_seconds": 3600.0})
        sweeper = ArtifactSweeper(app.state.db, store, patient, app.state.node.clock)
        assert (await sweeper.step()).deleted == 0

        # an admin's sweep deletes the orphan, and only it
        swept = await client.post("/v1/storage/sweep", headers=admin)
        assert swept.status_code == 200, swept.text
        assert swept.json()["objects_deleted"] == 1
        assert swept.json()["storage"]["store_objects"] == 2

        # S3 lost: the sweep answers 503 and deletes nothing; S3 back: it goes on
        await store.put("orphan-2.png", b"png")
        s3.stop()
        lost = await client.post("/v1/storage/sweep", headers=admin)
        assert_error_shape(lost, 503, CODE)
        s3.start()
        assert s3.object_keys(bucket) == [
            f"{PREFIX}/decks/job.zip",
            f"{PREFIX}/orphan-2.png",
            f"{PREFIX}/renders/new.png",
        ]
        swept = await client.post("/v1/storage/sweep", headers=admin)
        assert swept.status_code == 200, swept.text
        assert swept.json()["objects_deleted"] == 1
    assert s3.object_keys(bucket) == [f"{PREFIX}/decks/job.zip", f"{PREFIX}/renders/new.png"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_lost_s3_is_a_503_that_stores_nothing_and_the_node_recovers(
    db_url: str, s3: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = s3.create_bucket()
    async with running_app(db_url, **QUIET, **s3_settings(s3, bucket)) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        job = await rt.enqueue("missing.kind", {}, queue="nobody", workspace_id="alice")
        result = {"artifact_key": "renders/alice/shot.png", "content_type": "image/png"}
        async with app.state.db.write_transaction() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == job.id).values(result=result))
        await app.state.render.store.put("renders/alice/shot.png", PNG_1PX)
        artifact = f"/v1/jobs/{job.id}/artifact"
        assert (await client.get(artifact, headers=alice)).content == PNG_1PX
        listed = (await client.get("/v1/jobs", headers=alice)).json()
        renders = (await client.get("/v1/renders", headers=alice)).json()
        assert renders == {"renders": [], "next_before": None}
        shot = {"html": "<h1>while S3 is away</h1>", "width": 200, "height": 100}

        s3.stop()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="deckyard.api.errors"):
            read = await client.get(artifact, headers=alice)
            write = await client.post("/v1/screenshots", json=shot, headers=alice)
        for answer in (read, write):
            error = assert_error_shape(answer, 503, CODE)
            assert answer.headers["retry-after"] == "1"
            assert "artefact store" in error["message"]
        # nothing half-done: no render (and no job) for the refused screenshot
        assert (await client.get("/v1/renders", headers=alice)).json() == renders
        assert (await client.get("/v1/jobs", headers=alice)).json() == listed
        lines = [r for r in caplog.records if "artefact store unavailable" in r.getMessage()]
        assert len(lines) == 2, [r.getMessage() for r in caplog.records]
        assert all(r.exc_info is None and "\n" not in r.getMessage() for r in lines)

        s3.start()
        assert (await client.get(artifact, headers=alice)).content == PNG_1PX
        made = await client.post("/v1/screenshots", json=shot, headers=alice)
        assert made.status_code == 202, made.text
        assert made.headers["location"] == f"/v1/renders/{made.json()['id']}"
    stored = s3.object_keys(bucket)
    assert [k for k in stored if ".tmp-" in k] == []
    assert f"{PREFIX}/renders/alice/shot.png" in stored
    assert len(stored) == 2, stored  # the shot and the one document of the accepted screenshot
