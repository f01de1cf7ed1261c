"""The external-worker protocol in process: claim (long poll), heartbeat, complete, fail, 409s."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI

from deckyard.api.app import create_app
from deckyard.api.auth import TokenRole, token_create
from deckyard.clock import SYSTEM_CLOCK, FakeClock
from deckyard.jobs import Runtime
from deckyard.node import Node
from tests.helpers.api import make_token, running_app
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings


async def worker_token(app: FastAPI, workspace: str) -> dict[str, str]:
    token = await token_create(app.state.db, workspace, SYSTEM_CLOCK.now(), role=TokenRole.WORKER)
    return {"authorization": f"Bearer {token}"}


async def test_claim_heartbeat_complete_and_scoping(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        agent = await worker_token(app, "alice")
        bob_agent = await worker_token(app, "bob")
        rt: Runtime = app.state.runtime

        # a worker token only works queues
        assert (await client.get("/v1/decks", headers=agent)).status_code == 403
        refused = await client.post("/v1/queues/q/jobs", json={"kind": "k"}, headers=agent)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "ROLE_FORBIDDEN"

        # nothing due: 204 after the wait
        empty = await client.post("/v1/queues/q/claim", json={"wait_seconds": 0}, headers=agent)
        assert empty.status_code == 204

        # a long poll is woken by the enqueue
        poll = asyncio.create_task(
            client.post(
                "/v1/queues/q/claim", json={"worker": "a1", "wait_seconds": 20}, headers=agent
            )
        )
        await asyncio.sleep(0)
        made = await client.post(
            "/v1/queues/q/jobs", json={"kind": "thumb", "payload": {"n": 1}}, headers=alice
        )
        assert made.status_code == 201, made.text
        job_id = made.json()["id"]
        assert made.json()["queue"] == "ext.q"
        got = await asyncio.wait_for(poll, 15)
        assert got.status_code == 200, got.text
        claim = got.json()
        assert claim["job"]["id"] == job_id and claim["job"]["attempt"] == 1
        token = claim["token"]
        assert token.startswith("1.ext:a1:")

        # another workspace sees nothing and cannot touch the job
        other = await client.post("/v1/queues/q/claim", json={}, headers=bob_agent)
        assert other.status_code == 204
        r = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": token}, headers=bob_agent
        )
        assert r.status_code == 404

        beat = await client.post(
            f"/v1/claims/{job_id}/heartbeat", json={"token": token}, headers=agent
        )
        assert beat.status_code == 200 and beat.json()["cancel_requested"] is False
        forged = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": "1.ext:a1:0000"}, headers=agent
        )
        assert forged.status_code == 409 and forged.json()["error"]["code"] == "LEASE_LOST"
        bad = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": "nonsense"}, headers=agent
        )
        assert bad.status_code == 422

        done = await client.post(
            f"/v1/claims/{job_id}/complete",
            json={"token": token, "result": {"ok": 1}},
            headers=agent,
        )
        assert done.status_code == 200 and done.json()["status"] == "succeeded"
        # completing again with the token that succeeded is idempotent: the job as it is
        again = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": token}, headers=agent
        )
        assert again.status_code == 200, again.text
        assert again.json()["status"] == "succeeded" and again.json()["result"] == {"ok": 1}
        stranger = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": "1.ext:a1:0000"}, headers=agent
        )
        assert stranger.status_code == 409 and stranger.json()["error"]["code"] == "LEASE_LOST"
        job = await rt.get(job_id)
        assert job is not None and job.result == {"ok": 1}
        types = [e.type async for e in rt.events(job_id, follow=False)]
        assert types.count("succeeded") == 1 and "started" in types


async def test_late_completion_after_recovery_is_refused(db_url: str) -> None:
    async with running_app(db_url, external_lease_seconds=0.5) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        made = await client.post(
            "/v1/queues/q/jobs", json={"kind": "k", "max_attempts": 3}, headers=alice
        )
        job_id = made.json()["id"]
        first = (
            await client.post("/v1/queues/q/claim", json={"worker": "slow"}, headers=alice)
        ).json()

        async def requeued() -> bool:
            job = await rt.get(job_id)
            return job is not None and job.status == "pending" and job.attempt == 1

        await eventually(requeued, timeout=20)
        late = await client.post(
            f"/v1/claims/{job_id}/complete",
            json={"token": first["token"], "result": 1},
            headers=alice,
        )
        assert late.status_code == 409, late.text
        assert late.json()["error"]["status"] == "pending"
        beat = await client.post(
            f"/v1/claims/{job_id}/heartbeat", json={"token": first["token"]}, headers=alice
        )
        assert beat.status_code == 409
        job = await rt.get(job_id)
        assert job is not None and job.status == "pending" and job.result is None

        second = await client.post("/v1/queues/q/claim", json={"wait_seconds": 10}, headers=alice)
        assert second.status_code == 200 and second.json()["job"]["attempt"] == 2
        ok = await client.post(
            f"/v1/claims/{job_id}/complete",
            json={"token": second.json()["token"], "result": 2},
            headers=alice,
        )
        assert ok.status_code == 200 and ok.json()["result"] == 2


async def test_fail_retries_by_policy_and_cancel_reaches_the_heartbeat(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post(
            "/v1/queues/q/jobs", json={"kind": "k", "max_attempts": 2}, headers=alice
        )
        job_id = made.json()["id"]

        async def claim() -> Any:
            r = await client.post("/v1/queues/q/claim", json={"wait_seconds": 10}, headers=alice)
            assert r.status_code == 200, r.text
            return r.json()

        c1 = await claim()
        f1 = await client.post(
            f"/v1/claims/{job_id}/fail",
            json={"token": c1["token"], "error_code": "FLAKY", "message": "try again"},
            headers=alice,
        )
        assert f1.status_code == 200 and f1.json()["status"] == "pending"
        c2 = await claim()
        assert c2["job"]["attempt"] == 2
        f2 = await client.post(
            f"/v1/claims/{job_id}/fail",
            json={"token": c2["token"], "error_code": "FLAKY"},
            headers=alice,
        )
        assert f2.json()["status"] == "failed" and f2.json()["error_code"] == "FLAKY"

        made = await client.post("/v1/queues/q/jobs", json={"kind": "k"}, headers=alice)
        job_id = made.json()["id"]
        c = await claim()
        assert (await client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)).status_code in (
            200,
            202,
        )
        beat = await client.post(
            f"/v1/claims/{job_id}/heartbeat", json={"token": c["token"]}, headers=alice
        )
        assert beat.json()["cancel_requested"] is True
        end = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": c["token"]}, headers=alice
        )
        assert end.status_code == 200 and end.json()["status"] == "cancelled"

        bad = await client.post("/v1/queues/Bad Name/jobs", json={"kind": "k"}, headers=alice)
        assert bad.status_code == 422 and "error" in bad.json()
        bad = await client.post("/v1/queues/q/jobs", json={"kind": "k", "extra": 1}, headers=alice)
        assert bad.status_code == 422


@asynccontextmanager
async def app_on(
    db_url: str, clock: FakeClock, **over: Any
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app with every component on `clock` (its loops still wait in real time)."""
    settings = fast_settings(database_url=db_url, **over)
    app = create_app(settings, node=Node(settings, clock=clock))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://deckyard.test") as c:
            yield app, c


async def test_deadline_stops_heartbeats_and_refuses_a_late_result(db_url: str) -> None:
    clock = FakeClock()
    async with app_on(db_url, clock, external_lease_seconds=60) as (app, client):
        alice = await make_token(app, "alice")
        agent = await worker_token(app, "alice")
        rt: Runtime = app.state.runtime
        body = {"kind": "k", "deadline_seconds": 30, "max_attempts": 3}
        made = (await client.post("/v1/queues/q/jobs", json=body, headers=alice)).json()
        job_id = made["id"]
        deadline = made["deadline_at"]
        claim = await client.post("/v1/queues/q/claim", json={"worker": "w"}, headers=agent)
        assert claim.status_code == 200, claim.text
        token = claim.json()["token"]
        assert claim.json()["lease_expires_at"] == deadline  # 60 s lease, 30 s to the deadline

        clock.advance(10)
        beat = await client.post(
            f"/v1/claims/{job_id}/heartbeat", json={"token": token}, headers=agent
        )
        assert beat.status_code == 200 and beat.json()["lease_expires_at"] == deadline

        clock.advance(25)  # past the deadline, whether or not recovery ran yet
        late_beat = await client.post(
            f"/v1/claims/{job_id}/heartbeat", json={"token": token}, headers=agent
        )
        assert late_beat.status_code == 409, late_beat.text
        assert late_beat.json()["error"]["code"] == "DEADLINE_EXCEEDED"
        late = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": token, "result": 1}, headers=agent
        )
        assert late.status_code == 409, late.text
        error = late.json()["error"]
        assert error["code"] == "DEADLINE_EXCEEDED" and error["job_id"] == job_id
        assert "deadline" in error["message"]

        async def ended() -> Any:
            job = await rt.get(job_id)
            return job if job is not None and job.status == "failed" else None

        job = await eventually(ended, timeout=10)
        assert job.error_code == "DEADLINE_EXCEEDED" and job.result is None
        assert job.lease_expires_at is None and job.attempt == 1
        again = await client.post(
            f"/v1/claims/{job_id}/complete", json={"token": token, "result": 1}, headers=agent
        )
        assert again.status_code == 409 and again.json()["error"]["code"] == "DEADLINE_EXCEEDED"
        failing = await client.post(
            f"/v1/claims/{job_id}/fail", json={"token": token, "error_code": "X"}, headers=agent
        )
        assert failing.status_code == 409
        assert failing.json()["error"]["code"] == "DEADLINE_EXCEEDED"
        assert (await rt.get(job_id)).error_code == "DEADLINE_EXCEEDED"  # type: ignore[union-attr]


async def test_unclaimed_job_fails_at_its_deadline(db_url: str) -> None:
    """Nobody polls the queue: the maintenance loop ends the job at its deadline."""
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        body = {"kind": "k", "deadline_seconds": 0.3}
        made = await client.post("/v1/queues/nobody/jobs", json=body, headers=alice)
        job_id = made.json()["id"]
        done = await rt.wait(job_id, timeout=10)
        assert done.status == "failed" and done.error_code == "DEADLINE_EXCEEDED"
        assert done.attempt == 0
        shown = (await client.get(f"/v1/jobs/{job_id}", headers=alice)).json()
        assert shown["status"] == "failed" and shown["error_code"] == "DEADLINE_EXCEEDED"
