"""The jobs API on jobs that ended (issue 30): retry against a held dedupe key, cancelling a
finished job, and system jobs (the model catalog sync) shown to admins and started by them."""

from __future__ import annotations

from fastapi import FastAPI

from deckyard.api.auth import TokenRole, token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.jobs import JobContext, Runtime
from tests.helpers.ai import ai_app
from tests.helpers.api import make_token, running_app
from tests.helpers.fake_openai import Reply


async def role_token(app: FastAPI, workspace: str, role: TokenRole) -> dict[str, str]:
    token = await token_create(app.state.db, workspace, SYSTEM_CLOCK.now(), role=role)
    return {"authorization": f"Bearer {token}"}


async def test_retry_while_the_dedupe_key_is_held_is_a_409_naming_the_holder(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        body = {"kind": "k", "dedupe_key": "dk1"}
        first = (await client.post("/v1/queues/q/jobs", json=body, headers=alice)).json()
        cancelled = await client.post(f"/v1/jobs/{first['id']}/cancel", headers=alice)
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        second = (await client.post("/v1/queues/q/jobs", json=body, headers=alice)).json()
        assert second["id"] != first["id"]

        refused = await client.post(f"/v1/jobs/{first['id']}/retry", headers=alice)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "DEDUPE_CONFLICT" and error["job_id"] == second["id"]
        assert str(second["id"]) in error["message"]
        job = (await client.get(f"/v1/jobs/{first['id']}", headers=alice)).json()
        assert job["status"] == "cancelled"

        await client.post(f"/v1/jobs/{second['id']}/cancel", headers=alice)
        again = await client.post(f"/v1/jobs/{first['id']}/retry", headers=alice)
        assert again.status_code == 200 and again.json()["status"] == "pending"


async def test_cancelling_a_finished_job_is_a_409_saying_how_it_ended(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime

        @rt.handler("quick", queue="quick")
        async def quick(ctx: JobContext) -> str:
            return "done"

        rt.worker(["quick"])
        job = await rt.enqueue("quick", workspace_id="alice")
        assert (await rt.wait(job.id, timeout=10)).status == "succeeded"
        refused = await client.post(f"/v1/jobs/{job.id}/cancel", headers=alice)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "JOB_FINISHED" and error["status"] == "succeeded"
        assert "succeeded" in error["message"]
        after = await rt.get(job.id)
        assert after is not None and after.status == "succeeded" and after.result == "done"
        assert after.cancel_requested_at is None

        parked = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        first = await client.post(f"/v1/jobs/{parked.id}/cancel", headers=alice)
        again = await client.post(f"/v1/jobs/{parked.id}/cancel", headers=alice)
        assert first.status_code == again.status_code == 200  # cancelling twice is no error
        assert again.json()["status"] == "cancelled"


async def test_system_jobs_are_shown_to_admins_only(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        admin = await make_token(app, "alice")
        editor = await role_token(app, "alice", TokenRole.EDITOR)
        rt: Runtime = app.state.runtime
        system = await rt.enqueue("k", queue="parked", run_at=3600)
        mine = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")

        shown = await client.get(f"/v1/jobs/{system.id}", headers=admin)
        assert shown.status_code == 200 and shown.json()["id"] == system.id
        assert (await client.get(f"/v1/jobs/{system.id}", headers=editor)).status_code == 404
        listed = (await client.get("/v1/jobs?system=true", headers=admin)).json()["jobs"]
        assert [j["id"] for j in listed] == [system.id]
        default = (await client.get("/v1/jobs", headers=admin)).json()["jobs"]
        assert [j["id"] for j in default] == [mine.id]
        forbidden = await client.get("/v1/jobs?system=true", headers=editor)
        assert forbidden.status_code == 403
        assert forbidden.json()["error"]["code"] == "ROLE_FORBIDDEN"


async def test_an_admin_starts_a_catalog_sync_and_sees_it_fail(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        admin = await make_token(app, "alice")
        editor = await role_token(app, "alice", TokenRole.EDITOR)
        rt: Runtime = app.state.runtime

        refused = await client.post("/v1/ai/models/sync", headers=editor)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "ROLE_FORBIDDEN"

        fake.models_script.append(Reply(status=500, body={"error": {"message": "down"}}))
        started = await client.post("/v1/ai/models/sync", headers=admin)
        assert started.status_code == 202, started.text
        job_id = started.json()["id"]
        assert started.json()["kind"] == "ai.catalog_sync"
        assert started.headers["location"] == f"/v1/jobs/{job_id}"
        assert (await rt.wait(job_id, timeout=30)).status == "failed"

        seen = await client.get(f"/v1/jobs/{job_id}", headers=admin)
        assert seen.status_code == 200, seen.text
        assert seen.json()["status"] == "failed"
        assert seen.json()["error_code"] == "AI_PROVIDER_ERROR"
        assert (await client.get(f"/v1/jobs/{job_id}", headers=editor)).status_code == 404

        ok = await client.post("/v1/ai/models/sync", headers=admin)
        assert (await rt.wait(ok.json()["id"], timeout=30)).status == "succeeded"
        models = (await client.get("/v1/ai/models", headers=admin)).json()
        assert [m["id"] for m in models] == ["fake-image", "fake-text"]
