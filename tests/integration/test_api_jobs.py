"""The jobs API: auth, workspace isolation, cancel, SSE with resume, idempotency, bad input."""

from __future__ import annotations

import asyncio
import json

from deckyard.clock import SYSTEM_CLOCK
from deckyard.jobs import JobContext, Runtime
from deckyard.render.control.models import RendererState
from deckyard.render.control.store import RendererSeen, renderer_list, renderer_upsert_if_changed
from tests.helpers.api import ROOMY_LEASE, make_token, running_app
from tests.helpers.eventually import eventually


def sse_events(text: str) -> list[dict[str, str]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(": ")
            fields[key] = value
        if "data" in fields:
            events.append(fields)
    return events


async def test_token_required(db_url: str) -> None:
    async with running_app(db_url) as (_app, client):
        assert (await client.get("/v1/jobs")).status_code == 401
        bad = await client.get("/v1/jobs", headers={"authorization": "Bearer dy_nope"})
        assert bad.status_code == 401
        assert bad.json()["error"]["code"] == "UNAUTHENTICATED"


async def test_workspaces_are_isolated(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        rt: Runtime = app.state.runtime
        job = await rt.enqueue("k", {"x": 1}, queue="parked", run_at=3600, workspace_id="alice")
        assert (await client.get(f"/v1/jobs/{job.id}", headers=alice)).status_code == 200
        for method, path in [
            ("GET", f"/v1/jobs/{job.id}"),
            ("POST", f"/v1/jobs/{job.id}/cancel"),
            ("POST", f"/v1/jobs/{job.id}/retry"),
            ("GET", f"/v1/jobs/{job.id}/events"),
        ]:
            r = await client.request(method, path, headers=bob)
            assert r.status_code == 404, (method, path, r.text)
        assert (await client.get("/v1/jobs", headers=bob)).json()["jobs"] == []
        listed = (await client.get("/v1/jobs", headers=alice)).json()["jobs"]
        assert [j["id"] for j in listed] == [job.id]
        assert (await rt.get(job.id)).status == "pending"  # type: ignore[union-attr]


async def test_cancel_and_events_with_resume(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        job = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        cancelled = await client.post(f"/v1/jobs/{job.id}/cancel", headers=alice)
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "cancelled"
        stream = await client.get(f"/v1/jobs/{job.id}/events", headers=alice)
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = sse_events(stream.text)
        assert [e["event"] for e in events] == ["cancelled"]
        resumed = await client.get(
            f"/v1/jobs/{job.id}/events", headers={**alice, "last-event-id": events[-1]["id"]}
        )
        assert sse_events(resumed.text) == []


async def test_events_stream_follows_a_running_job(db_url: str) -> None:
    # a roomy lease: the job waits while the stream is read, and a short test lease lost under
    # a loaded machine's starved heartbeat showed as `cas_lost`/`recovered` in the stream
    async with running_app(db_url, **ROOMY_LEASE) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        go = asyncio.Event()

        @rt.handler("steps", queue="live")
        async def steps(ctx: JobContext) -> str:
            await go.wait()
            await ctx.emit("progress", {"pct": 50})
            return "done"

        rt.worker(["live"])
        job = await rt.enqueue("steps", workspace_id="alice")
        reader = asyncio.create_task(client.get(f"/v1/jobs/{job.id}/events", headers=alice))

        async def running() -> bool:
            found = await rt.get(job.id)
            return found is not None and found.status == "running"

        await eventually(running)
        go.set()
        events = sse_events((await asyncio.wait_for(reader, 10)).text)
        assert [e["event"] for e in events] == ["started", "progress", "succeeded"]
        assert json.loads(events[1]["data"])["data"] == {"pct": 50}


async def test_idempotency_replays_and_refuses_a_different_body(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        job = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        other = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        headers = {**alice, "idempotency-key": "cancel-1"}
        first = await client.post(f"/v1/jobs/{job.id}/cancel", headers=headers)
        again = await client.post(f"/v1/jobs/{job.id}/cancel", headers=headers)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        assert again.headers.get("idempotent-replayed") == "true"
        mismatch = await client.post(f"/v1/jobs/{other.id}/cancel", headers=headers)
        assert mismatch.status_code == 422
        assert mismatch.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
        assert (await rt.get(other.id)).status == "pending"  # type: ignore[union-attr]
        bob = await make_token(app, "bob")
        theirs = await client.post(
            f"/v1/jobs/{other.id}/cancel", headers={**bob, "idempotency-key": "cancel-1"}
        )
        assert theirs.status_code == 404  # keys are per workspace; bob cannot see the job


async def test_bad_input_names_the_field_and_big_bodies_get_413(db_url: str) -> None:
    async with running_app(db_url, api_max_body_bytes=2048) as (app, client):
        alice = await make_token(app, "alice")
        bad = await client.get("/v1/jobs?limit=0", headers=alice)
        assert bad.status_code == 422
        assert bad.json()["error"]["field"] == "limit"
        wrong = await client.get("/v1/jobs?status=sleeping", headers=alice)
        assert wrong.status_code == 422
        assert wrong.json()["error"]["field"] == "status"
        big = await client.post("/v1/jobs/1/cancel", headers=alice, content=b"x" * 5000)
        assert big.status_code == 413
        missing = await client.get("/v1/jobs/999999", headers=alice)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "NOT_FOUND"


OPS_TOKEN = "ops-token-0123456789"
OPS = {"authorization": f"Bearer {OPS_TOKEN}"}


async def test_readyz_reports_loops_and_queues(db_url: str) -> None:
    async with running_app(db_url, readyz_token=OPS_TOKEN) as (app, client):
        rt: Runtime = app.state.runtime
        await rt.enqueue("k", queue="parked", run_at=3600)
        await asyncio.sleep(0.2)
        ready = await client.get("/readyz", headers=OPS)
        assert ready.status_code == 200
        body = ready.json()
        names = {lp["name"] for lp in body["checks"]["loops"]["loops"]}
        assert {"recovery", "prune"} <= names
        assert all(lp["alive"] for lp in body["checks"]["loops"]["loops"])
        assert body["checks"]["queues"]["depths"]["parked"] == {"pending": 1}
        await rt.maintenance.loops[0].stop()
        dead = await client.get("/readyz")
        assert dead.status_code == 503
        assert (await client.get("/healthz")).status_code == 200


async def test_readyz_shows_details_only_with_the_token(db_url: str) -> None:
    async with running_app(db_url, readyz_token=OPS_TOKEN) as (app, client):
        public = await client.get("/readyz")
        assert public.status_code == 200
        body = public.json()
        assert body["status"] == "ready"
        # no renderer (`renderers=0`): said, though it does not make the node unready
        others = dict(body["checks"])
        assert others.pop("renderers") == {"ok": False}
        assert others and all(c == {"ok": True} for c in others.values())
        text = public.text
        assert app.state.db.display_name not in text and "127.0.0.1" not in text
        assert app.state.render.store.url not in text
        wrong = await client.get("/readyz", headers={"authorization": "Bearer nope"})
        assert wrong.json() == body
        detailed = (await client.get("/readyz", headers=OPS)).json()
        assert detailed["checks"]["database"]["url"] == app.state.db.display_name
        await app.state.runtime.maintenance.loops[0].stop()
        dead = await client.get("/readyz")
        assert dead.status_code == 503
        assert dead.json()["checks"]["loops"] == {"ok": False}
    async with running_app(db_url, readyz_public_details=True) as (app, client):
        shown = (await client.get("/readyz")).json()
        assert shown["checks"]["database"]["url"] == app.state.db.display_name


async def test_readyz_says_when_no_renderer_is_up_without_being_unready(db_url: str) -> None:
    async with running_app(db_url, readyz_public_details=True, renderers=0) as (app, client):
        ready = await client.get("/readyz")
        assert (ready.status_code, ready.json()["status"]) == (200, "ready")
        check = ready.json()["checks"]["renderers"]
        assert check["ok"] is False and check["up"] == 0 and check["configured"] == 0
        assert "no renderer is configured" in check["error"]
        # another node's renderer, registered in the shared database, serves this API-only node
        async with app.state.db.write_transaction() as conn:
            seen = RendererSeen("r1", "http://r1", RendererState.UP, "host:1", "e1", slots=2)
            await renderer_upsert_if_changed(conn, None, seen, SYSTEM_CLOCK.now())
        check = (await client.get("/readyz")).json()["checks"]["renderers"]
        assert check["ok"] is True and check["up"] == 1 and "error" not in check
        async with app.state.db.write_transaction() as conn:
            [known] = await renderer_list(conn)
            down = RendererSeen("r1", "http://r1", RendererState.DOWN, error="refused")
            await renderer_upsert_if_changed(conn, known, down, SYSTEM_CLOCK.now())
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        check = ready.json()["checks"]["renderers"]
        assert check["ok"] is False and check["error"].startswith("no renderer is up")


async def test_metrics_parse_and_move_with_work(db_url: str) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    async with running_app(db_url) as (app, client):
        rt: Runtime = app.state.runtime

        @rt.handler("m", queue="metered")
        async def m(ctx: JobContext) -> None:
            return None

        rt.worker(["metered"])
        before = samples((await client.get("/metrics")).text)
        job = await rt.enqueue("m")
        await rt.wait(job.id, timeout=10)
        response = await client.get("/metrics")
        assert response.headers["content-type"].startswith("text/plain")
        after = samples(response.text)
        key = ("deckyard_jobs", (("queue", "metered"), ("status", "succeeded")))
        assert before.get(key, 0) == 0
        assert after[key] == 1
        assert after[("deckyard_job_claims_total", ())] >= 1
        assert after[("deckyard_job_completions_total", (("outcome", "succeeded"),))] >= 1
        assert after[("deckyard_loop_alive", (("loop", "recovery"),))] == 1


async def test_old_idempotency_records_are_pruned(db_url: str) -> None:
    from datetime import timedelta

    from sqlalchemy import func, select, update

    from deckyard.api.maintenance import idempotency_prune
    from deckyard.clock import SYSTEM_CLOCK
    from deckyard.workspaces.schema import idempotency_keys

    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        for i in range(3):
            job = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
            r = await client.post(
                f"/v1/jobs/{job.id}/cancel", headers={**alice, "idempotency-key": f"k{i}"}
            )
            assert r.status_code == 200
        db = app.state.db
        old = SYSTEM_CLOCK.now() - timedelta(days=3)
        async with db.write_transaction() as conn:
            await conn.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.key != "k2")
                .values(created_at=old)
            )
        assert await idempotency_prune(db, app.state.settings, SYSTEM_CLOCK) == 2
        assert await idempotency_prune(db, app.state.settings, SYSTEM_CLOCK) == 0
        async with db.read_connection() as conn:
            left = (await conn.execute(select(func.count()).select_from(idempotency_keys))).scalar()
        assert left == 1


async def test_readyz_follows_the_database_going_and_coming_back(db_url: str) -> None:
    import os
    from pathlib import Path

    import psycopg
    from sqlalchemy.engine import make_url

    from tests.conftest import PG_URL
    from tests.helpers.eventually import eventually

    async with running_app(db_url, readyz_public_details=True) as (_app, client):
        assert (await client.get("/readyz")).status_code == 200
        if db_url.startswith("sqlite"):
            path = Path(make_url(db_url).database or "")
            os.rename(path, path.with_suffix(".away"))
            try:
                gone = await client.get("/readyz")
                assert gone.status_code == 503
                assert "gone" in gone.json()["checks"]["database"]["error"]
            finally:
                os.rename(path.with_suffix(".away"), path)
        else:
            name = make_url(PG_URL).database
            admin = make_url(PG_URL).set(database="postgres").render_as_string(False)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                try:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = %s AND pid <> pg_backend_pid()",
                        (name,),
                    )
                    gone = await client.get("/readyz")
                    assert gone.status_code == 503
                    assert gone.json()["checks"]["database"]["ok"] is False
                finally:
                    conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')

        async def ready_again() -> bool:
            return (await client.get("/readyz")).status_code == 200

        await eventually(ready_again, timeout=20, every=0.2)
