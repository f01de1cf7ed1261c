"""Dashboard pages and the live row stream, rendered in process on both databases."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from deckyard.api import dashboard
from deckyard.api.auth import SESSION_COOKIE, TokenRole, token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.jobs import EnqueueSpec, JobContext, Runtime
from deckyard.tasks import TaskExecutor
from deckyard.tasks.executor import Stage, StageContext, TaskKind
from tests.helpers.api import make_token, running_app
from tests.helpers.eventually import eventually


@asynccontextmanager
async def signed_in(db_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A running app whose client carries alice's session cookie."""
    async with running_app(db_url) as (app, client):
        token = (await make_token(app, "alice"))["authorization"].split()[1]
        client.cookies.set(SESSION_COOKIE, token)
        yield app, client


def sse(text: str) -> list[tuple[str, Any]]:
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            out.append((fields.get("event", "message"), json.loads(fields["data"])))
    return out


async def test_overview_shows_queue_depths_and_loops(db_url: str) -> None:
    async with signed_in(db_url) as (app, client):
        rt: Runtime = app.state.runtime
        for _ in range(3):
            await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        page = await client.get("/")
        assert page.status_code == 200
        assert 'data-testid="total-pending">3<' in page.text
        assert ">parked<" in page.text
        for loop in rt.loops:
            assert f"<code>{loop.name}</code>" in page.text
        assert "Ready" in page.text


async def test_jobs_page_filters_pages_and_hides_other_workspaces(db_url: str) -> None:
    async with signed_in(db_url) as (app, client):
        rt: Runtime = app.state.runtime
        mine = [
            (await rt.enqueue("pdf", queue="parked", run_at=3600, workspace_id="alice")).id
            for _ in range(dashboard.PAGE_SIZE + 2)
        ]
        other = await rt.enqueue("png", queue="other", run_at=3600, workspace_id="alice")
        theirs = await rt.enqueue("pdf", queue="parked", run_at=3600, workspace_id="bob")
        first = (await client.get("/ui/jobs")).text
        assert f'id="job-{other.id}"' in first
        assert f'id="job-{theirs.id}"' not in first
        assert f'id="job-{mine[0]}"' not in first
        assert "Older" in first
        by_queue = (await client.get("/ui/jobs?queue=parked")).text
        assert f'id="job-{other.id}"' not in by_queue
        older = (await client.get(f"/ui/jobs?queue=parked&before={mine[2]}")).text
        assert [f'id="job-{i}"' in older for i in mine[:3]] == [True, True, False]
        assert "Newest" in older
        by_kind = (await client.get("/ui/jobs?kind=png&status=pending")).text
        assert by_kind.count('<tr id="job-') == 1
        none = (await client.get("/ui/jobs?status=failed")).text
        assert "No jobs match these filters" in none


async def test_job_page_shows_timeline_actions_and_artifact(db_url: str) -> None:
    async with signed_in(db_url) as (app, client):
        rt: Runtime = app.state.runtime
        parked = await rt.enqueue("k", {"n": 1}, queue="parked", run_at=3600, workspace_id="alice")
        page = (await client.get(f"/ui/jobs/{parked.id}")).text
        assert f'data-action="/v1/jobs/{parked.id}/cancel"' in page
        assert "No events yet." in page
        await rt.cancel(parked.id)
        page = (await client.get(f"/ui/jobs/{parked.id}")).text
        assert f'data-action="/v1/jobs/{parked.id}/retry"' in page
        assert "/cancel" not in page
        assert 'class="tl tl-cancelled"' in page

        @rt.handler("snap", queue="snaps")
        async def snap(ctx: JobContext) -> dict[str, Any]:
            return {"content_type": "image/png", "size": 1234, "sha256": "ab" * 32}

        rt.worker(["snaps"])
        done = await rt.wait((await rt.enqueue("snap", workspace_id="alice")).id, timeout=10)
        page = (await client.get(f"/ui/jobs/{done.id}")).text
        assert f'<img src="/v1/jobs/{done.id}/artifact"' in page
        assert "1,234 bytes" in page
        assert "succeeded" in page
        theirs = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="bob")
        missing = await client.get(f"/ui/jobs/{theirs.id}")
        assert missing.status_code == 404
        assert "no job" in missing.text.lower()


async def test_row_stream_sends_changed_and_new_rows(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard, "STREAM_SECONDS", 0.3)
    async with signed_in(db_url) as (app, client):
        rt: Runtime = app.state.runtime
        old = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        await rt.cancel(old.id)
        new = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="bob")
        resp = await client.get(f"/ui/jobs/stream?watch={old.id}&newest={old.id}")
        events = sse(resp.text)
        rows = [(e, d["id"], d["status"]) for e, d in events if e == "row"]
        assert rows == [("row", old.id, "cancelled"), ("row", new.id, "pending")]
        assert f'id="job-{new.id}"' in events[1][1]["html"]
        assert events[-1][0] == "bye"
        watched_only = sse((await client.get(f"/ui/jobs/stream?watch={old.id}")).text)
        assert [e for e, _ in watched_only] == ["row", "bye"]


async def test_tasks_pages_show_stages_with_the_current_one(db_url: str) -> None:
    async with signed_in(db_url) as (app, client):
        ex: TaskExecutor = app.state.tasks

        async def quick(ctx: StageContext) -> list[EnqueueSpec]:
            return []

        async def parked(ctx: StageContext) -> list[EnqueueSpec]:
            return [EnqueueSpec("k", queue="parked", run_at=3600)]

        ex.register(TaskKind("publish-ish", [Stage("validate", quick), Stage("render", parked)]))
        task_id = await ex.create("publish-ish", {"deck": 7}, workspace_id="alice")

        async def at_render() -> bool:
            row = await ex.get(task_id)
            return row is not None and row["stage"] == 1 and row["status"] == "running"

        await eventually(at_render)
        listing = (await client.get("/ui/tasks")).text
        assert f'href="/ui/tasks/{task_id}"' in listing
        page = (await client.get(f"/ui/tasks/{task_id}")).text
        assert 'class="step step-done"' in page
        assert 'class="step step-current step-running" aria-current="step"' in page
        stages = page[page.index('data-testid="stages"') :]
        assert stages.index('class="step-name">validate<') < stages.index(
            'class="step-name">render<'
        )
        assert f'data-action="/v1/tasks/{task_id}/cancel"' in page
        assert "created" in page
        other = await ex.create("publish-ish", {}, workspace_id="bob")
        assert (await client.get(f"/ui/tasks/{other}")).status_code == 404


async def test_static_files_are_served_and_nothing_else(db_url: str) -> None:
    async with running_app(db_url) as (_app, client):
        css = await client.get("/ui/static/app.css")
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")
        assert (await client.get("/ui/static/app.js")).status_code == 200
        assert (await client.get("/ui/static/..%2Fdashboard.py")).status_code == 404
        form = await client.get("/ui/sign-in")
        assert 'action="/ui/session"' in form.text


async def test_a_viewer_is_shown_no_cancel_or_retry(db_url: str) -> None:
    """The API refuses a viewer's cancel and retry (403); the pages do not offer them."""
    async with running_app(db_url) as (app, client):
        viewer = await token_create(
            app.state.db, "alice", SYSTEM_CLOCK.now(), role=TokenRole.VIEWER
        )
        client.cookies.set(SESSION_COOKIE, viewer)
        rt: Runtime = app.state.runtime
        ex: TaskExecutor = app.state.tasks
        parked = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        cancelled = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id="alice")
        await rt.cancel(cancelled.id)

        async def parks(ctx: StageContext) -> list[EnqueueSpec]:
            return [EnqueueSpec("k", queue="parked", run_at=3600)]

        ex.register(TaskKind("parks", [Stage("park", parks)]))
        task_id = await ex.create("parks", {}, workspace_id="alice")
        active = (await client.get(f"/ui/jobs/{parked.id}")).text
        ended = (await client.get(f"/ui/jobs/{cancelled.id}")).text
        task = (await client.get(f"/ui/tasks/{task_id}")).text
        assert "pending" in active and "cancelled" in ended
        for page in (active, ended, task):
            assert "data-action=" not in page
        refused = await client.post(
            f"/v1/jobs/{cancelled.id}/retry", headers={"authorization": f"Bearer {viewer}"}
        )
        assert refused.status_code == 403
