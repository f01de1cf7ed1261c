"""Tasks and reconciliation (seed 003's cases), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select

from deckyard.db import Database
from deckyard.jobs import EnqueueSpec, JobContext, Runtime
from deckyard.jobs.schema import jobs
from deckyard.tasks import (
    Stage,
    StageContext,
    TaskAlreadyRunning,
    TaskExecutor,
    TaskKind,
    find_stale_resumable_tasks,
    reconcile_once,
)
from deckyard.tasks.schema import task_events, tasks
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings

THRESHOLDS = {"pending": 60.0, "running": 60.0}


def make(db: Database, **over: Any) -> tuple[Runtime, TaskExecutor, dict[str, int]]:
    settings = fast_settings(reconciliation_thresholds_seconds=THRESHOLDS, **over)
    rt = Runtime(db, settings=settings, migrate=False)
    ex = TaskExecutor(db, rt, settings)
    runs: dict[str, int] = {"double": 0, "total": 0}

    @rt.handler("double", queue="t")
    async def double(ctx: JobContext) -> int:
        runs["double"] += 1
        return int(ctx.payload["x"]) * 2

    @rt.handler("total", queue="t")
    async def total(ctx: JobContext) -> int:
        runs["total"] += 1
        if ctx.payload.get("fail"):
            raise RuntimeError("cannot add")
        return sum(ctx.payload["values"])

    async def doubles(ctx: StageContext) -> list[EnqueueSpec]:
        return [EnqueueSpec("double", {"x": x}) for x in ctx.params["xs"]]

    async def add_up(ctx: StageContext) -> list[EnqueueSpec]:
        values = ctx.state["results"]["double"]["results"]
        return [
            EnqueueSpec(
                "total", {"values": values, "fail": ctx.params.get("fail", False)}, max_attempts=1
            )
        ]

    ex.register(TaskKind("sum-of-doubles", [Stage("double", doubles), Stage("total", add_up)]))
    rt.worker(["t"])
    return rt, ex, runs


async def _task_at_rest(ex: TaskExecutor, task_id: int) -> dict[str, Any]:
    async def done() -> bool:
        row = await ex.get(task_id)
        return row is not None and row["status"] in ("succeeded", "failed", "cancelled")

    await eventually(done)
    row = await ex.get(task_id)
    assert row is not None
    return row


async def test_a_task_runs_its_stages_as_jobs(db: Database) -> None:
    rt, ex, runs = make(db)
    async with rt:
        task_id = await ex.create("sum-of-doubles", {"xs": [1, 2, 3]}, workspace_id="w")
        row = await _task_at_rest(ex, task_id)
    assert row["status"] == "succeeded"
    assert row["result"]["results"]["total"]["results"] == [12]
    types = [e["type"] for e in await ex.events(task_id)]
    assert types[:3] == ["created", "started", "stage_started"]
    assert types.count("stage_finished") == 2 and types[-1] == "succeeded"
    assert runs == {"double": 3, "total": 1}


async def test_a_failed_stage_fails_the_task(db: Database) -> None:
    rt, ex, _ = make(db)
    async with rt:
        task_id = await ex.create("sum-of-doubles", {"xs": [1], "fail": True})
        row = await _task_at_rest(ex, task_id)
    assert row["status"] == "failed" and row["error_code"] == "HANDLER_ERROR"


async def _insert_task(
    db: Database, age: float, status: str = "running", events: tuple[float, ...] = ()
) -> int:
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    now = rt.clock.now()
    async with db.write_transaction() as conn:
        task_id = int(
            (
                await conn.execute(
                    insert(tasks)
                    .values(
                        kind="sum-of-doubles",
                        status=status,
                        stage=0,
                        params={"xs": [5]},
                        state={},
                        created_at=now - timedelta(seconds=age),
                        updated_at=now,
                    )
                    .returning(tasks.c.id)
                )
            ).scalar_one()
        )
        for ev_age in events:
            await conn.execute(
                insert(task_events).values(
                    task_id=task_id, type="x", created_at=now - timedelta(seconds=ev_age)
                )
            )
    return task_id


async def test_finds_task_with_no_activity_at_all(db: Database) -> None:
    _, ex, _ = make(db)
    stale = await _insert_task(db, age=3600)
    fresh = await _insert_task(db, age=5)
    done = await _insert_task(db, age=3600, status="succeeded")
    found = await find_stale_resumable_tasks(db, THRESHOLDS, ex.clock.now())
    assert found == [stale]
    assert fresh not in found and done not in found


async def test_excludes_task_with_recent_event(db: Database) -> None:
    _, ex, _ = make(db)
    await _insert_task(db, age=3600, events=(10,))
    assert await find_stale_resumable_tasks(db, THRESHOLDS, ex.clock.now()) == []


async def test_uses_most_recent_event_not_earliest(db: Database) -> None:
    _, ex, _ = make(db)
    recent = await _insert_task(db, age=7200, events=(7000, 5))
    old = await _insert_task(db, age=7200, events=(7000, 3000))
    found = await find_stale_resumable_tasks(db, THRESHOLDS, ex.clock.now())
    assert found == [old]
    assert recent not in found


async def test_thresholds_are_per_status_and_in_flight_is_excluded(db: Database) -> None:
    _, ex, _ = make(db)
    pending = await _insert_task(db, age=600, status="pending")
    running = await _insert_task(db, age=600, status="running")
    now = ex.clock.now()
    assert await find_stale_resumable_tasks(db, {"pending": 300, "running": 900}, now) == [pending]
    assert await find_stale_resumable_tasks(db, {"running": 300}, now, exclude={running}) == []


async def test_one_dispatch_failure_does_not_block_others(
    db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rt, ex, _runs = make(db)
    first = await _insert_task(db, age=3600)
    second = await _insert_task(db, age=3600)
    assert ex.try_claim(first)  # a manual start won the race after the scan
    monkeypatch.setattr(ex, "in_flight", lambda: set())
    async with rt:
        with caplog.at_level(logging.ERROR):
            dispatched = await reconcile_once(ex)
        assert dispatched == [second]
        assert ex.reconcile_failures == 1
        assert "could not dispatch task" in caplog.text and "TaskAlreadyRunning" in caplog.text
        row = await _task_at_rest(ex, second)
    assert row["status"] == "succeeded"


async def test_manual_start_racing_the_loop_runs_once(db: Database) -> None:
    rt, ex, runs = make(db)
    task_id = await _insert_task(db, age=3600)
    async with rt:
        manual = ex.dispatch(task_id)
        dispatched = await reconcile_once(ex)
        with pytest.raises(TaskAlreadyRunning):
            ex.dispatch(task_id)
        await manual
        row = await _task_at_rest(ex, task_id)
    assert dispatched == []
    assert row["status"] == "succeeded"
    assert runs == {"double": 1, "total": 1}


async def test_a_crashed_drive_resumes_without_redoing_jobs(db: Database) -> None:
    rt, ex, runs = make(db)
    gate = asyncio.Event()

    @rt.handler("double", queue="t")
    async def slow_double(ctx: JobContext) -> int:
        runs["double"] += 1
        await gate.wait()
        return int(ctx.payload["x"]) * 2

    async with rt:
        task_id = await ex.create("sum-of-doubles", {"xs": [4]})

        async def stage_started() -> bool:
            return "stage_started" in [e["type"] for e in await ex.events(task_id)]

        await eventually(stage_started)
        await ex.stop()  # the process driving it "crashes"; the job itself keeps running
        second = TaskExecutor(db, rt, ex.settings)
        second.register(ex.kinds["sum-of-doubles"])
        zero = {"pending": 0.0, "running": 0.0}
        stale = await find_stale_resumable_tasks(db, zero, rt.clock.now() + timedelta(seconds=1))
        assert stale == [task_id]
        second.dispatch(task_id)
        gate.set()
        row = await _task_at_rest(second, task_id)
        async with db.read_connection() as conn:
            n_jobs = (await conn.execute(select(func.count()).select_from(jobs))).scalar_one()
    assert row["status"] == "succeeded" and row["result"]["results"]["total"]["results"] == [8]
    assert runs["double"] == 1 and n_jobs == 2


async def test_a_raising_pass_is_logged_and_the_loop_goes_on(
    db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import deckyard.tasks.reconciliation as rec

    rt, ex, _ = make(db, reconciliation_interval_seconds=0.05)
    real = rec.find_stale_resumable_tasks
    calls = 0

    async def flaky(*args: Any, **kwargs: Any) -> list[int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("database hiccup")
        return await real(*args, **kwargs)

    monkeypatch.setattr(rec, "find_stale_resumable_tasks", flaky)
    async with rt:
        with caplog.at_level(logging.ERROR):
            await ex.start()
            loop = ex.loops[0]

            async def recovered() -> bool:
                return loop.stats.ticks >= 2

            await eventually(recovered)
            await ex.stop()
    assert loop.stats.errors == 1
    assert "Traceback" in caplog.text or "database hiccup" in caplog.text
    assert any(r.exc_info for r in caplog.records if "reconciliation" in r.getMessage())


async def test_task_routes_are_workspace_scoped(db_url: str) -> None:
    from tests.helpers.api import make_token, running_app

    async with running_app(db_url, reconciliation_thresholds_seconds=THRESHOLDS) as (app, client):
        ex: TaskExecutor = app.state.tasks
        rt: Runtime = app.state.runtime

        @rt.handler("double", queue="t")
        async def double(ctx: JobContext) -> int:
            return int(ctx.payload["x"]) * 2

        async def doubles(ctx: StageContext) -> list[EnqueueSpec]:
            return [EnqueueSpec("double", {"x": 1})]

        ex.register(TaskKind("one", [Stage("double", doubles)]))
        rt.worker(["t"])
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        task_id = await ex.create("one", {}, workspace_id="alice")
        await _task_at_rest(ex, task_id)
        got = await client.get(f"/v1/tasks/{task_id}", headers=alice)
        assert got.status_code == 200
        assert got.json()["status"] == "succeeded" and got.json()["stages"] == ["double"]
        events = (await client.get(f"/v1/tasks/{task_id}/events", headers=alice)).json()
        assert events[0]["type"] == "created" and events[-1]["type"] == "succeeded"
        assert (await client.get(f"/v1/tasks/{task_id}", headers=bob)).status_code == 404
        assert (await client.get("/v1/tasks", headers=bob)).json() == []
        assert [t["id"] for t in (await client.get("/v1/tasks", headers=alice)).json()] == [task_id]
