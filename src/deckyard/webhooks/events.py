"""The events endpoints receive, and `announce`: record one, with its delivery jobs, in the
transaction that commits what it reports.

Tasks and publications call `announce` inside the transaction of their own state change, so
an event is recorded exactly when that change commits: a crash loses neither, and a rollback
sends nothing. Finished jobs are announced by the relay (`relay.py`), which reads them after
the fact: a job's finish is one statement on the queue's hot path.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.jobs import Job, JobStatus, Runtime
from deckyard.webhooks.models import (
    RENDER_JOB_KINDS,
    WEBHOOK_QUEUE,
    WebhookEvent,
    WebhookEventType,
    WebhookJobKind,
)
from deckyard.webhooks.store import deliveries_insert, endpoints_enabled


def _stamp(at: datetime) -> str:
    """A finish time as microseconds since the epoch: tells two ends of one job apart."""
    return str(round(at.timestamp() * 1_000_000))


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _job(job: Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "queue": job.queue,
        "status": job.status.value,
        "error_code": job.error_code,
        "error_message": job.error_message,
        "parent_id": job.parent_id,
        "created_at": _iso(job.created_at),
        "finished_at": _iso(job.finished_at),
        "url": f"/v1/jobs/{job.id}",
    }


def job_events(job: Job) -> list[WebhookEvent]:
    """What one finished job announces: `job.finished`, and `render.finished` for a render."""
    if job.workspace_id is None or job.finished_at is None:
        return []
    at, stamp = job.finished_at, _stamp(job.finished_at)
    found = [
        WebhookEvent(
            WebhookEventType.JOB_FINISHED,
            job.workspace_id,
            f"job.finished:{job.id}:{stamp}",
            at,
            {"job": _job(job)},
        )
    ]
    if job.kind in RENDER_JOB_KINDS:
        data: dict[str, Any] = {"job": _job(job)}
        if job.status is JobStatus.SUCCEEDED:
            data["artifact_url"] = f"/v1/jobs/{job.id}/artifact"
        found.append(
            WebhookEvent(
                WebhookEventType.RENDER_FINISHED,
                job.workspace_id,
                f"render.finished:{job.id}:{stamp}",
                at,
                data,
            )
        )
    return found


RENDER_EVENT_ID_PREFIX = "render.finished:render-"
"""How the ids of a render request's events start (a job's are `render.finished:{job id}:`)."""


def render_events(render: Any) -> list[WebhookEvent]:
    """What one finished render request no job opened announces: `render.finished`.

    `render` is the control plane's `RenderRequest` (this package sits below it, so it is read
    by attribute): id, kind, workspace_id, status, error_code, error_message, created_at,
    finished_at, result.
    """
    if render.finished_at is None:
        return []
    at, stamp = render.finished_at, _stamp(render.finished_at)
    status = getattr(render.status, "value", render.status)
    data: dict[str, Any] = {
        "render": {
            "id": render.id,
            "kind": render.kind,
            "status": status,
            "error_code": render.error_code,
            "error_message": render.error_message,
            "created_at": _iso(render.created_at),
            "finished_at": _iso(render.finished_at),
            "url": f"/v1/renders/{render.id}",
        }
    }
    if status == JobStatus.SUCCEEDED.value:
        data["artifact_url"] = f"/v1/renders/{render.id}/artifact"
    return [
        WebhookEvent(
            WebhookEventType.RENDER_FINISHED,
            render.workspace_id,
            f"{RENDER_EVENT_ID_PREFIX}{render.id}:{stamp}",
            at,
            data,
        )
    ]


def task_finished(row: Mapping[str, Any], now: datetime) -> WebhookEvent | None:
    """`task.finished` for a task row that just ended (None for a task of no workspace)."""
    workspace = row.get("workspace_id")
    if workspace is None:
        return None
    task = {
        "id": row["id"],
        "kind": row["kind"],
        "status": row["status"],
        "error_code": row.get("error_code"),
        "error_message": row.get("error_message"),
        "created_at": _iso(row.get("created_at")),
        "finished_at": _iso(row.get("finished_at") or now),
        "url": f"/v1/tasks/{row['id']}",
    }
    return WebhookEvent(
        WebhookEventType.TASK_FINISHED, workspace, f"task.finished:{row['id']}", now, {"task": task}
    )


def publication_live(
    workspace_id: str,
    publication_id: int,
    deck_id: int,
    *,
    visibility: str,
    site_version: str,
    replaced: int | None,
    now: datetime,
) -> WebhookEvent:
    """`publication.live`: a publication became its deck's live site."""
    publication = {
        "id": publication_id,
        "deck_id": deck_id,
        "visibility": visibility,
        "site_version": site_version,
        "live_at": now.isoformat(),
        "url": f"/sites/{workspace_id}/{deck_id}/",
        "replaced_publication_id": replaced,
    }
    return WebhookEvent(
        WebhookEventType.PUBLICATION_LIVE,
        workspace_id,
        f"publication.live:{publication_id}",
        now,
        {"publication": publication},
    )


def ping(workspace_id: str, endpoint_id: int, now: datetime) -> WebhookEvent:
    """`webhook.ping`: a test event sent on request to one endpoint."""
    return WebhookEvent(
        WebhookEventType.PING,
        workspace_id,
        f"webhook.ping:{uuid.uuid4().hex}",
        now,
        {"endpoint_id": endpoint_id},
    )


async def enqueue_deliveries(
    runtime: Runtime, conn: AsyncConnection, workspace_id: str, delivery_ids: list[int]
) -> None:
    """One delivery job per delivery, in the caller's transaction (joined when one is active)."""
    for delivery_id in delivery_ids:
        await runtime.enqueue(
            WebhookJobKind.DELIVER.value,
            {"delivery_id": delivery_id},
            queue=WEBHOOK_QUEUE,
            dedupe_key=f"webhook:{delivery_id}",
            workspace_id=workspace_id,
            conn=conn,
        )


async def announce(runtime: Runtime, conn: AsyncConnection, event: WebhookEvent | None) -> int:
    """Record `event` for every enabled endpoint of its workspace that subscribes to it, with a
    delivery job each, in the caller's write transaction; returns how many deliveries it made.

    Nothing is written when no endpoint wants it (one indexed read of the workspace's
    endpoints); an event id an endpoint already has is not recorded twice.
    """
    if event is None:
        return 0
    endpoints = [
        e
        for e in await endpoints_enabled(conn, workspace_id=event.workspace_id)
        if e.subscribes(event)
    ]
    if not endpoints:
        return 0
    made = await deliveries_insert(runtime.db, conn, event, endpoints, runtime.clock.now())
    await enqueue_deliveries(runtime, conn, event.workspace_id, made)
    return len(made)
