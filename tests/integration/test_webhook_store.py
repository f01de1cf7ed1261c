"""Webhook storage on SQLite and PostgreSQL: the outbox is written in the caller's transaction,
once per event and endpoint; the job relay announces finished jobs once, across restarts;
another workspace's endpoints and deliveries are not found."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.api.auth import token_create
from deckyard.clock import SYSTEM_CLOCK, FakeClock
from deckyard.db import Database
from deckyard.jobs import JobStatus, Runtime
from deckyard.loop import IDLE
from deckyard.tasks import TaskExecutor
from deckyard.tasks.executor import TaskKind
from deckyard.webhooks import WEBHOOK_QUEUE, DeliveryStatus, announce
from deckyard.webhooks.events import task_finished
from deckyard.webhooks.relay import JobRelay
from deckyard.webhooks.service import WebhookError, WebhookService
from deckyard.webhooks.store import attempt_record, delivery_list
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings

SETTINGS = fast_settings(webhook_relay_lag_seconds=2.0)


async def public_resolver(host: str, port: int) -> list[str]:
    """Every name is a public address (no DNS in tests)."""
    return ["93.184.216.34"]


@dataclass
class Hooks:
    db: Database
    runtime: Runtime
    service: WebhookService


@pytest.fixture
async def hooks(db: Database) -> Hooks:
    runtime = Runtime(db, settings=SETTINGS, migrate=False)
    service = WebhookService(db, runtime, SETTINGS, SYSTEM_CLOCK, resolver=public_resolver)
    for workspace in ("alice", "bob"):
        await token_create(db, workspace, SYSTEM_CLOCK.now())
    return Hooks(db, runtime, service)


async def delivery_jobs(runtime: Runtime, workspace: str) -> list[int]:
    jobs = await runtime.list(workspace_id=workspace, queue=WEBHOOK_QUEUE)
    return sorted(int(j.payload["delivery_id"]) for j in jobs if "delivery_id" in j.payload)


async def all_deliveries(h: Hooks, workspace: str, endpoint_id: int) -> list[tuple[str, str]]:
    found = await h.service.deliveries(workspace, endpoint_id, limit=200)
    return sorted((d.event_type, d.event_id) for d in found)


async def test_announce_writes_the_outbox_in_the_callers_transaction(hooks: Hooks) -> None:
    h = hooks
    url = "https://hooks.example.com/in"
    wanted = (await h.service.create("alice", url, ["task.finished"], None)).endpoint
    jobs_only = (await h.service.create("alice", url, ["job.finished"], None)).endpoint
    disabled = (await h.service.create("alice", url, ["task.finished"], None)).endpoint
    await h.service.update("alice", disabled.id, {"enabled": False})
    bobs = (await h.service.create("bob", url, ["task.finished"], None)).endpoint
    row = {"id": 7, "kind": "publish", "status": "succeeded", "workspace_id": "alice"}
    event = task_finished(row, SYSTEM_CLOCK.now())

    class Boom(Exception):
        pass

    async def then_fail(conn: AsyncConnection) -> None:
        assert await announce(h.runtime, conn, event) == 1
        raise Boom

    with pytest.raises(Boom):
        await h.db.write(then_fail)
    assert await all_deliveries(h, "alice", wanted.id) == []
    assert await delivery_jobs(h.runtime, "alice") == []

    made = await h.db.write(lambda conn: announce(h.runtime, conn, event))
    again = await h.db.write(lambda conn: announce(h.runtime, conn, event))
    assert (made, again) == (1, 0)
    assert await all_deliveries(h, "alice", wanted.id) == [("task.finished", "task.finished:7")]
    for other, workspace in ((jobs_only, "alice"), (disabled, "alice"), (bobs, "bob")):
        assert await all_deliveries(h, workspace, other.id) == []
    delivery = (await h.service.deliveries("alice", wanted.id))[0]
    assert delivery.status is DeliveryStatus.PENDING
    assert delivery.payload["data"]["task"]["url"] == "/v1/tasks/7"
    assert await delivery_jobs(h.runtime, "alice") == [delivery.id]
    assert await delivery_jobs(h.runtime, "bob") == []


async def test_attempts_are_numbered_and_other_workspaces_see_nothing(hooks: Hooks) -> None:
    h = hooks
    made = await h.service.create("alice", "https://hooks.example.com/a", ["job.finished"], None)
    endpoint = made.endpoint
    pinged = await h.service.ping("alice", endpoint.id)
    now = SYSTEM_CLOCK.now()

    async def attempt(conn: AsyncConnection, code: int, outcome: DeliveryStatus) -> int | None:
        return await attempt_record(
            conn,
            pinged.id,
            job_id=None,
            started_at=now,
            duration_ms=3,
            status_code=code,
            error=None if code == 200 else f"HTTP {code}",
            outcome=outcome,
            now=now,
        )

    assert await h.db.write(lambda c: attempt(c, 500, DeliveryStatus.PENDING)) == 1
    assert await h.db.write(lambda c: attempt(c, 200, DeliveryStatus.SUCCEEDED)) == 2
    delivery, attempts = await h.service.delivery("alice", endpoint.id, pinged.id)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == (
        DeliveryStatus.SUCCEEDED,
        2,
        200,
    )
    assert [(a.number, a.status_code, a.error) for a in attempts] == [
        (1, 500, "HTTP 500"),
        (2, 200, None),
    ]
    assert delivery.delivered_at is not None

    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: h.service.endpoint("bob", endpoint.id),
        lambda: h.service.delivery("bob", endpoint.id, pinged.id),
        lambda: h.service.deliveries("bob", endpoint.id),
        lambda: h.service.update("bob", endpoint.id, {"enabled": False}),
        lambda: h.service.rotate_secret("bob", endpoint.id),
        lambda: h.service.redeliver("bob", endpoint.id, pinged.id),
        lambda: h.service.ping("bob", endpoint.id),
        lambda: h.service.delete("bob", endpoint.id),
    ]
    for call in calls:
        with pytest.raises(WebhookError) as refused:
            await call()
        assert refused.value.status == 404
    assert await h.service.endpoints("bob") == []
    async with h.db.read_connection() as conn:
        assert (
            await delivery_list(conn, "bob", endpoint.id, status=None, before_id=None, limit=10)
            == []
        )
    assert (await h.service.endpoint("alice", endpoint.id)).enabled


async def test_the_relay_announces_each_finished_job_once(hooks: Hooks) -> None:
    h = hooks
    url = "https://hooks.example.com/jobs"
    events = ["job.finished", "render.finished"]
    alice = (await h.service.create("alice", url, events, None)).endpoint
    bob = (await h.service.create("bob", url, ["task.finished"], None)).endpoint

    async def cancelled(kind: str, workspace: str, queue: str = "nowhere") -> int:
        job = await h.runtime.enqueue(kind, {}, queue=queue, workspace_id=workspace)
        done = await h.runtime.cancel(job.id)
        assert done.status is JobStatus.CANCELLED
        return job.id

    shot = await cancelled("page.screenshot", "alice")
    # a job of the retired `screenshot` kind (failed by migration 0018) is no render any more
    retired = await cancelled("screenshot", "alice")
    await cancelled("build", "bob")
    await cancelled("webhook.deliver", "alice", WEBHOOK_QUEUE)  # deliveries are never announced
    relay = JobRelay(h.db, h.runtime, SETTINGS, SYSTEM_CLOCK)
    await relay.tick()
    found = await all_deliveries(h, "alice", alice.id)
    assert [t for t, _ in found] == ["job.finished", "job.finished", "render.finished"]
    assert [e for t, e in found if t == "render.finished" and f":{shot}:" in e] == [found[2][1]]
    assert sum(f":{shot}:" in e for _, e in found) == 2
    assert [t for t, e in found if f":{retired}:" in e] == ["job.finished"]
    render = next(
        d for d in await h.service.deliveries("alice", alice.id) if "render" in d.event_type
    )
    assert render.payload["data"]["job"]["status"] == "cancelled"
    assert "artifact_url" not in render.payload["data"]
    assert await all_deliveries(h, "bob", bob.id) == []

    # A second sweep, and a relay that starts afresh (a restart, another node), add nothing;
    # the fresh one goes on from the newest job event delivered.
    await relay.tick()
    later = await cancelled("page.validate", "alice")
    restarted = JobRelay(h.db, h.runtime, SETTINGS, SYSTEM_CLOCK)
    await restarted.tick()
    await restarted.tick()
    found = await all_deliveries(h, "alice", alice.id)
    assert len(found) == 4
    assert sum(f"job.finished:{later}:" in event_id for _, event_id in found) == 1
    assert len(await delivery_jobs(h.runtime, "alice")) == 4


async def test_a_finished_task_is_announced_with_its_commit(hooks: Hooks) -> None:
    h = hooks
    endpoint = (
        await h.service.create("alice", "https://hooks.example.com/t", ["task.finished"], None)
    ).endpoint
    executor = TaskExecutor(h.db, h.runtime, SETTINGS)
    executor.register(TaskKind("noop"))
    try:
        task_id = await executor.create("noop", {}, workspace_id="alice")

        async def finished() -> bool:
            row = await executor.get(task_id)
            return row is not None and row["status"] == "succeeded"

        await eventually(finished, what="the task to succeed")
    finally:
        await executor.stop()
    deliveries = await h.service.deliveries("alice", endpoint.id)
    assert [d.event_id for d in deliveries] == [f"task.finished:{task_id}"]
    task = deliveries[0].payload["data"]["task"]
    assert (task["id"], task["status"], task["kind"]) == (task_id, "succeeded", "noop")


async def test_settled_deliveries_are_pruned_after_the_retention(hooks: Hooks) -> None:
    h = hooks
    endpoint = (
        await h.service.create("alice", "https://hooks.example.com/p", ["job.finished"], None)
    ).endpoint
    done = await h.service.ping("alice", endpoint.id)
    waiting = await h.service.ping("alice", endpoint.id)
    now = SYSTEM_CLOCK.now()

    async def delivered(conn: AsyncConnection) -> int | None:
        return await attempt_record(
            conn,
            done.id,
            job_id=None,
            started_at=now,
            duration_ms=1,
            status_code=204,
            error=None,
            outcome=DeliveryStatus.SUCCEEDED,
            now=now,
        )

    await h.db.write(delivered)
    kept = WebhookService(h.db, h.runtime, SETTINGS, SYSTEM_CLOCK)
    assert (await kept.prune_tick(), kept.pruned) == (IDLE, 0)  # younger than the retention
    later = FakeClock(now + timedelta(seconds=SETTINGS.webhook_delivery_retention_seconds + 1))
    pruner = WebhookService(h.db, h.runtime, SETTINGS, later)
    await pruner.prune_tick()
    assert pruner.pruned == 1
    left = await h.service.deliveries("alice", endpoint.id)
    assert [d.id for d in left] == [waiting.id]  # a pending one stays, however old
