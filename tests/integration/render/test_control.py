"""The render control plane on SQLite and PostgreSQL, against an HTTP-level renderer double.

Time is a `FakeClock` and the coordinator's passes are called one at a time, so leases expire
exactly when a test says; the drills run the same code against real renderer processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, event, insert, update
from sqlalchemy.exc import IntegrityError

from deckyard.artifacts import ArtifactStore
from deckyard.clock import FakeClock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.jobs import Runtime
from deckyard.jobs.schema import jobs
from deckyard.render.control.client import RendererSource, RendererSources
from deckyard.render.control.coordinator import Coordinator
from deckyard.render.control.models import (
    AttemptState,
    RenderRequest,
    RequestStatus,
    ScreenshotSpec,
)
from deckyard.render.control.requests import RenderQueueFull, request_waiters, wait_for_terminal
from deckyard.render.control.schema import render_attempts, render_requests, renderers
from deckyard.render.control.service import RenderService
from deckyard.render.control.store import (
    NewRequest,
    ResultRefused,
    attempts_active,
    attempts_of_request,
    page_commit,
    pages_of_request,
    renders_queued,
    request_get,
    request_insert,
    request_retry,
)
from deckyard.render.protocol import ChangesAnswer
from tests.integration.render.fake_renderer import FakeFleet, FakeRenderer

SECRET = "integration-secret-0123456789"


def settings(**over: Any) -> Settings:
    base: dict[str, Any] = {
        "render_lease_seconds": 6.0,
        "render_receipt_poll_seconds": 0.05,
        "render_idle_poll_ceiling_seconds": 0.2,
        "render_probe_interval_seconds": 0.1,
        "render_unknown_reconcile_after_seconds": 2.0,
        "render_retry_after_seconds": 1.0,
        "render_max_attempts": 3,
        "render_request_deadline_seconds": 60.0,
        "render_global_cap": 16,
        "render_workspace_cap": 4,
        "render_workspace_slot_share": 1.0,
        "loop_error_backoff_seconds": 0.05,
    }
    return Settings.load(**{**base, **over})


@dataclass
class Plane:
    db: Database
    clock: FakeClock
    coordinator: Coordinator
    store: ArtifactStore
    renderers: list[FakeRenderer]
    settings: Settings

    async def request(self, workspace: str = "ws", n: int = 0, deadline: float = 60) -> int:
        now = self.clock.now()
        async with self.db.write_transaction() as conn:
            req, _ = await request_insert(
                self.db,
                conn,
                NewRequest(
                    kind="screenshot",
                    workspace_id=workspace,
                    input={"document": f"<p>{n}</p>", "width": 100, "height": 50},
                    input_hash=f"h{workspace}{n}",
                    max_attempts=self.settings.render_max_attempts,
                    deadline_at=now + timedelta(seconds=deadline),
                    dedupe_key=f"{workspace}:{n}",
                ),
                now,
            )
        return req.id

    async def get(self, request_id: int) -> RenderRequest:
        async with self.db.read_connection() as conn:
            req = await request_get(conn, request_id)
        assert req is not None
        return req

    async def active(self) -> list[Any]:
        async with self.db.read_connection() as conn:
            return await attempts_active(conn)

    async def attempts(self, request_id: int) -> list[Any]:
        async with self.db.read_connection() as conn:
            return await attempts_of_request(conn, request_id)

    async def settle_results(self) -> None:
        await self.coordinator.receipts.stop()

    async def end_all(self, status: str) -> None:
        """Post what is due, let the renderer end every attempt `status`, and commit that."""
        await self.coordinator.probe_once()
        await self.coordinator.dispatch_once()
        self.renderers[0].set_all(status)
        await self.coordinator.receipts_once()
        await self.settle_results()


def make_plane(db: Database, tmp_path: Path, *renderers: FakeRenderer, **over: Any) -> Plane:
    s = settings(**over)
    clock = FakeClock()
    sources = RendererSources()
    for r in renderers:
        sources.put(RendererSource(r.url, r.url, SECRET))
    store = ArtifactStore(str(tmp_path / "artifacts"))
    fleet = FakeFleet(*renderers)
    coordinator = Coordinator(db, s, sources, store, clock, transport=fleet.transport)
    return Plane(db, clock, coordinator, store, list(renderers), s)


@pytest.fixture
async def plane(db: Database, tmp_path: Path) -> AsyncIterator[Plane]:
    p = make_plane(db, tmp_path, FakeRenderer("http://r1", slots=2))
    yield p
    await p.coordinator.client.aclose()


class Statements:
    """Records every SQL statement sent on a database's engine."""

    def __init__(self, db: Database) -> None:
        self.sql: list[str] = []
        event.listen(db.engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, sql: str, *args: Any) -> None:
        self.sql.append(" ".join(sql.split()).upper())

    def writes(self, table: str = "") -> list[str]:
        return [
            s
            for s in self.sql
            if s.startswith(("INSERT", "UPDATE", "DELETE")) and table.upper() in s
        ]


# --- schema -----------------------------------------------------------------------------------


async def test_slot_index_rejects_a_second_active_attempt(db: Database) -> None:
    now = FakeClock().now()
    async with db.write_transaction() as conn:
        renderer = (
            await conn.execute(
                insert(renderers)
                .values(
                    name="w", url="http://w", slots=2, state="up", created_at=now, updated_at=now
                )
                .returning(renderers.c.id)
            )
        ).scalar_one()
        req = (
            await conn.execute(
                insert(render_requests)
                .values(
                    kind="screenshot",
                    workspace_id="ws",
                    input={},
                    input_hash="h",
                    status="running",
                    attempts=1,
                    max_attempts=3,
                    deadline_at=now,
                    retry_after=now,
                    created_at=now,
                    updated_at=now,
                )
                .returning(render_requests.c.id)
            )
        ).scalar_one()

    def attempt(key: str, epoch: str = "e1", slot: int = 0, active: int = 1) -> dict[str, Any]:
        return dict(
            request_id=req,
            attempt_key=key,
            workspace_id="ws",
            renderer_id=renderer,
            renderer_epoch=epoch,
            slot=slot,
            active_occupancy=active,
            status="running",
            timeout_seconds=5.0,
            lease_expires_at=now,
            created_at=now,
            updated_at=now,
        )

    async with db.write_transaction() as conn:
        await conn.execute(insert(render_attempts).values(attempt("a")))
    with pytest.raises(IntegrityError):
        async with db.write_transaction() as conn:
            await conn.execute(insert(render_attempts).values(attempt("b")))
    async with db.write_transaction() as conn:
        await conn.execute(insert(render_attempts).values(attempt("c", active=0)))
        await conn.execute(insert(render_attempts).values(attempt("d", slot=1)))
        await conn.execute(insert(render_attempts).values(attempt("e", epoch="e2")))
        await conn.execute(
            update(render_attempts)
            .where(render_attempts.c.attempt_key == "a")
            .values(active_occupancy=0)
        )
        await conn.execute(insert(render_attempts).values(attempt("f")))


# --- admission --------------------------------------------------------------------------------


async def test_admission_respects_global_and_workspace_caps(db: Database, tmp_path: Path) -> None:
    p = make_plane(
        db,
        tmp_path,
        FakeRenderer("http://r1", slots=10),
        render_global_cap=3,
        render_workspace_cap=2,
    )
    a = [await p.request("a", n) for n in range(3)]
    b = [await p.request("b", n) for n in range(3)]
    await p.coordinator.probe_once()
    for _ in range(3):
        await p.coordinator.dispatch_once()
    active = await p.active()
    by_ws = {w: sum(1 for x in active if x.workspace_id == w) for w in ("a", "b")}
    assert len(active) == 3
    assert by_ws == {"a": 2, "b": 1}
    assert len({(x.renderer_row_id, x.slot) for x in active}) == 3
    assert {(await p.get(i)).status for i in a[2:] + b[1:]} == {RequestStatus.PENDING}
    await p.coordinator.client.aclose()


async def test_one_workspace_holds_at_most_its_share_of_the_slots(
    db: Database, tmp_path: Path
) -> None:
    """Issue 30 item 6: one workspace's pages (say, pages that never settle and hold their
    slots for a whole budget) cannot take every slot; the others' requests get the rest."""
    p = make_plane(
        db,
        tmp_path,
        FakeRenderer("http://r1", slots=3),
        FakeRenderer("http://r2", slots=1),
        render_workspace_slot_share=0.5,
    )
    a = [await p.request("a", n) for n in range(4)]
    await p.coordinator.probe_once()
    for _ in range(3):
        await p.coordinator.dispatch_once()
    active = await p.active()
    assert sorted(x.workspace_id for x in active) == ["a", "a"]
    assert [(await p.get(i)).status for i in a].count(RequestStatus.PENDING) == 2

    b = [await p.request("b", n) for n in range(3)]
    for _ in range(3):
        await p.coordinator.dispatch_once()
    active = await p.active()
    by_ws = {w: sum(1 for x in active if x.workspace_id == w) for w in ("a", "b")}
    assert by_ws == {"a": 2, "b": 2}
    assert [(await p.get(i)).status for i in b].count(RequestStatus.PENDING) == 1
    assert len({(x.renderer_row_id, x.slot) for x in active}) == 4
    await p.coordinator.client.aclose()


async def test_the_workspace_share_is_at_least_one_slot(db: Database, tmp_path: Path) -> None:
    p = make_plane(
        db, tmp_path, FakeRenderer("http://r1", slots=1), render_workspace_slot_share=0.1
    )
    first, second = await p.request("a", 0), await p.request("a", 1)
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    assert (await p.get(first)).status is RequestStatus.RUNNING
    assert (await p.get(second)).status is RequestStatus.PENDING
    await p.coordinator.client.aclose()


async def test_queue_limits_refuse_new_screenshots(db: Database, tmp_path: Path) -> None:
    s = settings(
        render_queue_limit=3,
        render_workspace_queue_limit=2,
        renderers=0,
        data_dir=tmp_path,
    )
    runtime = Runtime(db, settings=s, migrate=False)
    service = RenderService(db, runtime, s, supervise=False)

    def spec(n: int) -> ScreenshotSpec:
        return ScreenshotSpec(html=f"<p>{n}</p>")

    first = await service.submit(spec(1), workspace_id="a")
    await service.submit(spec(2), workspace_id="a")
    with pytest.raises(RenderQueueFull, match="workspace a"):
        await service.submit(spec(3), workspace_id="a")
    # joining the active request for the same input adds nothing to the queue: not refused
    assert (await service.submit(spec(1), workspace_id="a")).id == first.id
    await service.submit(spec(1), workspace_id="b")
    with pytest.raises(RenderQueueFull) as info:
        await service.submit(spec(1), workspace_id="c")
    assert info.value.code == "RENDER_QUEUE_FULL"
    assert info.value.retry_after == s.render_retry_after_seconds
    async with db.read_connection() as conn:
        assert await renders_queued(conn, "a") == (3, 2)
    assert await service.of_workspace("c") == []


async def test_a_request_a_job_opened_counts_in_the_queue_limits(
    db: Database, tmp_path: Path
) -> None:
    """A one-page request counts whatever opened it: a job's (a deck page's check) fills the
    workspace's queue like a `POST /v1/screenshots`, and is refused by it alike."""
    s = settings(
        render_queue_limit=10, render_workspace_queue_limit=2, renderers=0, data_dir=tmp_path
    )
    runtime = Runtime(db, settings=s, migrate=False)
    service = RenderService(db, runtime, s, supervise=False)
    job = await runtime.enqueue("test.parked", {}, queue="parked", workspace_id="a")
    async with db.write_transaction() as conn:  # as a worker running it would have it
        await conn.execute(update(jobs).where(jobs.c.id == job.id).values(status="running"))
    for n in range(2):
        opened = await service.submit(
            ScreenshotSpec(html=f"<p>{n}</p>"), workspace_id="a", parent_job_id=job.id
        )
        assert opened.parent_job_id == job.id
    with pytest.raises(RenderQueueFull, match="workspace a"):
        await service.submit(ScreenshotSpec(html="<p>direct</p>"), workspace_id="a")
    with pytest.raises(RenderQueueFull, match="workspace a"):
        await service.submit(
            ScreenshotSpec(html="<p>2</p>"), workspace_id="a", parent_job_id=job.id
        )
    await service.submit(ScreenshotSpec(html="<p>direct</p>"), workspace_id="b")


# --- leases, receipts, recovery ---------------------------------------------------------------


async def test_leases_renew_only_from_live_receipts_one_update_per_worker(
    db: Database, tmp_path: Path
) -> None:
    r1, r2 = FakeRenderer("http://r1", slots=2), FakeRenderer("http://r2", slots=2)
    p = make_plane(db, tmp_path, r1, r2)
    for n in range(4):
        await p.request("ws", n)
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    before = {a.id: a.lease_expires_at for a in await p.active()}
    assert len(before) == 4
    r1.set_all("running")
    r2.set_all("running")
    p.clock.advance(4)
    seen = Statements(db)
    await p.coordinator.receipts_once()
    renewals = seen.writes("RENDER_ATTEMPTS")
    assert len(renewals) == 2, renewals
    assert all(s.startswith("UPDATE") for s in renewals)
    after = {a.id: a.lease_expires_at for a in await p.active()}
    assert all(after[i] == p.clock.now() + timedelta(seconds=6) for i in before)

    r2.up = False
    p.clock.advance(4)
    seen.sql.clear()
    await p.coordinator.receipts_once()
    assert len(seen.writes()) == 1
    kept = {a.id: a.lease_expires_at for a in await p.active()}
    on_r2 = [a.id for a in await p.active() if kept[a.id] < p.clock.now() + timedelta(seconds=6)]
    assert len(on_r2) == 2
    assert all(kept[i] == after[i] for i in on_r2)


async def test_unreachable_renderer_keeps_lease_then_recovery_requeues(plane: Plane) -> None:
    p = plane
    req = await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    [attempt] = await p.active()
    p.renderers[0].up = False
    p.clock.advance(5.9)
    seen = Statements(p.db)
    await p.coordinator.receipts_once()
    await p.coordinator.recover_once()
    assert seen.writes() == []
    [still] = await p.active()
    assert still.lease_expires_at == attempt.lease_expires_at

    p.clock.advance(0.2)
    await p.coordinator.recover_once()
    assert await p.active() == []
    [lost] = await p.attempts(req)
    assert lost.status is AttemptState.LOST
    assert lost.error_code == "RENDER_RESULT_LOST"
    assert lost.active_occupancy == 0
    pending = await p.get(req)
    assert pending.status is RequestStatus.PENDING
    assert pending.retry_after == p.clock.now() + timedelta(seconds=1)

    p.renderers[0].up = True
    await p.coordinator.dispatch_once()
    assert await p.active() == []
    p.clock.advance(1)
    await p.coordinator.dispatch_once()
    [second] = await p.active()
    assert second.id != attempt.id
    assert (await p.get(req)).attempts == 2


async def test_recovery_fails_the_request_once_attempts_are_spent(plane: Plane) -> None:
    p = plane
    req = await p.request()
    await p.coordinator.probe_once()
    p.renderers[0].up = False
    for _ in range(3):
        await p.coordinator.dispatch_once()
        p.clock.advance(6.5)
        await p.coordinator.recover_once()
        p.clock.advance(1)
    done = await p.get(req)
    assert done.status is RequestStatus.FAILED
    assert done.error_code == "RENDER_RESULT_LOST"
    assert [a.status for a in await p.attempts(req)] == [AttemptState.LOST] * 3


async def test_epoch_change_reconciles_at_once(plane: Plane) -> None:
    p = plane
    req = await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].set_all("running")
    await p.coordinator.receipts_once()
    p.renderers[0].restart("epoch-2")
    p.clock.advance(0.5)
    await p.coordinator.probe_once()
    [lost] = await p.attempts(req)
    assert lost.status is AttemptState.LOST
    assert lost.lease_expires_at > p.clock.now()
    assert (await p.get(req)).status is RequestStatus.PENDING


async def test_unknown_receipt_is_believed_after_the_reconcile_delay(plane: Plane) -> None:
    p = plane
    req = await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].attempts.clear()
    await p.coordinator.receipts_once()
    assert len(await p.active()) == 1
    p.clock.advance(2.1)
    await p.coordinator.receipts_once()
    assert await p.active() == []
    assert (await p.attempts(req))[0].status is AttemptState.LOST


# --- results ----------------------------------------------------------------------------------


async def test_success_commits_the_result_and_stores_the_artefact(plane: Plane) -> None:
    p = plane
    req = await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].set_all("succeeded")
    await p.coordinator.receipts_once()
    await p.settle_results()
    done = await p.get(req)
    assert done.status is RequestStatus.SUCCEEDED
    assert done.result["content_type"] == "image/png"
    assert done.artifact_key is not None
    assert await p.store.get(done.artifact_key) is not None
    assert await p.active() == []


async def test_a_new_attempt_on_a_reused_row_id_is_still_fetched(plane: Plane) -> None:
    """Deleted rows (a validation forgets its renders) free their ids, which SQLite hands out
    again: the new attempt must not inherit the old one's "already fetched" mark."""
    p = plane
    for n in range(2):
        req = await p.request(n=n)
        await p.coordinator.probe_once()
        await p.coordinator.dispatch_once()
        p.renderers[0].set_all("succeeded")
        await p.coordinator.receipts_once()
        await p.settle_results()
        assert (await p.get(req)).status is RequestStatus.SUCCEEDED, f"render {n}"
        async with p.db.write_transaction() as conn:
            await conn.execute(delete(render_attempts))
            await conn.execute(delete(render_requests))


@pytest.mark.parametrize("spoiler", ["expired_lease", "cancelled", "deadline"])
async def test_cas_refuses_and_deletes_the_artefact(plane: Plane, spoiler: str) -> None:
    p = plane
    req = await p.request(deadline=10)
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].set_all("succeeded")
    if spoiler == "expired_lease":
        p.clock.advance(6.0)
    elif spoiler == "cancelled":
        async with p.db.write_transaction() as conn:
            await conn.execute(
                update(render_requests)
                .where(render_requests.c.id == req)
                .values(cancel_requested_at=p.clock.now())
            )
    else:
        p.clock.advance(5.0)
        async with p.db.write_transaction() as conn:
            await conn.execute(
                update(render_requests)
                .where(render_requests.c.id == req)
                .values(deadline_at=p.clock.now())
            )
    [attempt] = await p.active()
    receipts = await p.coordinator.client.receipts("http://r1", SECRET, [attempt.attempt_key])
    assert receipts is not None
    source = RendererSource("http://r1", "http://r1", SECRET)
    committer = p.coordinator.committer
    await committer.sync(attempt, receipts[0], source, set())
    assert committer.stats.committed == 0
    assert committer.stats.refused_keys == [f"{attempt.attempt_key}#p0"]
    assert await p.store.keys() == []
    assert (await p.get(req)).result is None
    [same] = await p.attempts(req)
    assert same.status is not AttemptState.SUCCEEDED
    with pytest.raises(ResultRefused):
        async with p.db.write_transaction() as conn:
            await page_commit(
                p.db,
                conn,
                attempt,
                0,
                result={},
                artifact_key="k",
                error_code=None,
                error_message=None,
                now=p.clock.now(),
            )


async def test_cancelled_request_is_stopped_and_its_slot_released(plane: Plane) -> None:
    p = plane
    req = await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    async with p.db.write_transaction() as conn:
        await conn.execute(
            update(render_requests)
            .where(render_requests.c.id == req)
            .values(cancel_requested_at=p.clock.now())
        )
    await p.coordinator.receipts_once()
    assert (await p.get(req)).status is RequestStatus.CANCELLED
    assert await p.active() == []
    assert "DELETE" in " ".join(p.renderers[0].calls)


# --- waiting and idling -----------------------------------------------------------------------


async def test_wait_for_terminal_is_woken_and_never_writes(plane: Plane) -> None:
    p = plane
    req = await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    seen = Statements(p.db)
    waiter = asyncio.create_task(wait_for_terminal(request_waiters(p.db, 30), req, 30))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    reads_while_waiting = len(seen.sql)
    await asyncio.sleep(0.3)
    assert len(seen.sql) == reads_while_waiting
    p.renderers[0].set_all("succeeded")
    await p.coordinator.receipts_once()
    await p.settle_results()
    async with asyncio.timeout(2):
        done = await waiter
    assert done.status is RequestStatus.SUCCEEDED
    writes_by_waiter = [s for s in seen.sql[reads_while_waiting:] if "RENDER_REQUESTS" in s]
    assert sum(1 for s in writes_by_waiter if s.startswith("UPDATE")) == 1


async def test_idle_coordinator_writes_nothing(db_url: str, tmp_path: Path) -> None:
    db = Database(db_url, instrument=True)
    await upgrade(db)
    renderer = FakeRenderer("http://r1")
    p = make_plane(db, tmp_path, renderer)
    p.coordinator.clock = p.clock
    real = Coordinator(
        db,
        p.settings,
        p.coordinator.sources,
        p.store,
        __import__("deckyard.clock").clock.SYSTEM_CLOCK,
        transport=FakeFleet(renderer).transport,
    )
    real.start()
    try:

        async def probed() -> bool:
            return any(c == "GET /v1/capabilities" for c in renderer.calls)

        async with asyncio.timeout(5):
            while not await probed():
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        assert db.counter is not None
        db.counter.reset()
        probes = renderer.calls.count("GET /v1/capabilities")
        await asyncio.sleep(2.0)
        assert renderer.calls.count("GET /v1/capabilities") >= probes + 5
        assert db.counter.total("writes") == 0, db.counter.snapshot()
        assert db.counter.total("write_transactions") == 0
        assert db.counter.total("write_begins") == 0
        assert {lp.name for lp in real.loops} <= set(db.counter.snapshot())
        assert all(lp.alive and lp.stats.errors == 0 for lp in real.loops)
    finally:
        await real.stop()
        await p.coordinator.client.aclose()
        await db.dispose()


async def test_a_one_page_request_fails_as_its_page_did_and_a_retry_renders_it_again(
    plane: Plane,
) -> None:
    """A single picture is a request of one page, committed by the page CAS like a deck's: its
    page failing for its content fails the request with that code (not retried: it would fail
    the same way), and a retry of the request clears the committed page and renders it again."""
    p = plane
    req = await p.request()
    await p.end_all("failed")
    failed = await p.get(req)
    assert (failed.status, failed.error_code, failed.attempts) == (
        RequestStatus.FAILED,
        "RENDER_PAGE_ERROR",
        1,
    )
    assert failed.error_message == "the page threw"
    assert (failed.result, failed.artifact_key) == (None, None)
    [attempt] = await p.attempts(req)
    assert (attempt.status, attempt.error_code) == (AttemptState.FAILED, "RENDER_PAGE_ERROR")
    async with p.db.read_connection() as conn:
        [page] = await pages_of_request(conn, req)
    assert (page.committed, page.error_code, page.artifact_key) == (True, "RENDER_PAGE_ERROR", None)

    async with p.db.write_transaction() as conn:
        assert await request_retry(
            p.db, conn, req, p.clock.now() + timedelta(seconds=60), p.clock.now()
        )
        [page] = await pages_of_request(conn, req)
    assert (page.committed, page.error_code, page.result) == (False, None, None)
    await p.end_all("succeeded")
    done = await p.get(req)
    assert (done.status, done.error_code) == (RequestStatus.SUCCEEDED, None)
    assert done.result["request_id"] == req
    assert done.artifact_key == done.result["artifact_key"]
    assert await p.store.keys() == [done.artifact_key]
    assert [a.status for a in await p.attempts(req)] == [
        AttemptState.FAILED,
        AttemptState.SUCCEEDED,
    ]


async def test_an_attempt_its_last_page_ended_costs_no_further_write(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit of a request's last page ends its attempt and the request: the terminal
    receipt that follows (a pass, a change answer) starts no end of its own (one write
    transaction fewer per render) and no second `render.result`."""
    p = plane
    ends: list[str] = []
    committer = p.coordinator.committer
    end = committer._end

    async def counted(attempt: Any, receipt: Any) -> None:
        ends.append(attempt.attempt_key)
        await end(attempt, receipt)

    monkeypatch.setattr(committer, "_end", counted)
    req = await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    [attempt] = await p.active()
    p.renderers[0].set_all("succeeded")
    await p.coordinator.receipts_once()
    await p.settle_results()
    assert (await p.get(req)).status is RequestStatus.SUCCEEDED
    assert committer.ended(attempt.attempt_key)
    # the same terminal receipt again, as a change answer carries it
    receipts = await p.coordinator.client.receipts("http://r1", SECRET, [attempt.attempt_key])
    assert receipts is not None
    poller = p.coordinator.receipts
    poller.expect(attempt)
    answer = ChangesAnswer(changes=1, busy=0, epoch="epoch-1", receipts=receipts, complete=True)
    source = RendererSource("http://r1", "http://r1", SECRET)
    assert poller.take_ended(source, answer)
    await p.settle_results()
    assert ends == []
    assert committer.stats.committed == 1 and committer.stats.refused == 0
