"""A render that asks for no picture (`capture` false, what `POST /v1/validate` sends).

On SQLite and PostgreSQL against the HTTP-level renderer double: the renderer's success without
an artefact commits the diagnostics, and the same answer to a render that asked for a picture is
still a lost result.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from deckyard.db import Database
from deckyard.render.control.models import AttemptState, RequestStatus
from deckyard.render.control.requests import (
    document_object_key,
    documents_by_reference,
    documents_forget,
)
from deckyard.render.control.store import NewRequest, request_captures, request_insert
from tests.integration.render.fake_renderer import FakeRenderer
from tests.integration.render.test_control import Plane, make_plane


async def request(p: Plane, *, capture: bool) -> int:
    now = p.clock.now()
    render_input: dict[str, object] = {"document": "<p>check</p>", "width": 100, "height": 50}
    if not capture:
        render_input["capture"] = False
    async with p.db.write_transaction() as conn:
        req, _ = await request_insert(
            p.db,
            conn,
            NewRequest(
                kind="screenshot",
                workspace_id="ws",
                input=render_input,
                input_hash=f"check-{capture}-{p.clock.now().timestamp()}",
                max_attempts=1,
                deadline_at=now + timedelta(seconds=60),
            ),
            now,
        )
    return req.id


async def finish(p: Plane, req: int) -> None:
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].set_all("succeeded")
    await p.coordinator.receipts_once()
    await p.settle_results()


async def test_a_render_without_a_picture_commits_its_diagnostics_and_stores_nothing(
    db: Database, tmp_path: Path
) -> None:
    p = make_plane(db, tmp_path, FakeRenderer("http://r1"))
    try:
        req = await request(p, capture=False)
        async with db.read_connection() as conn:
            assert await request_captures(conn, req) is False
        await finish(p, req)
        done = await p.get(req)
        assert done.status is RequestStatus.SUCCEEDED, done.error_message
        assert done.artifact_key is None
        assert done.result is not None
        assert done.result["artifact_key"] is None
        assert done.result["diagnostics"]["console_errors"] == []
        assert not any(c.endswith("/artifact") for c in p.renderers[0].calls)
        assert not (tmp_path / "artifacts").exists() or not any(
            path.is_file() for path in (tmp_path / "artifacts").rglob("*")
        )
    finally:
        await p.coordinator.client.aclose()


async def test_success_without_an_artefact_for_a_picture_is_still_a_lost_result(
    db: Database, tmp_path: Path
) -> None:
    renderer = FakeRenderer("http://r1")
    p = make_plane(db, tmp_path, renderer)
    try:
        req = await request(p, capture=True)
        async with db.read_connection() as conn:
            assert await request_captures(conn, req) is True
        await p.coordinator.probe_once()
        await p.coordinator.dispatch_once()
        # The renderer drops the picture it was asked for (a bug, or a wrong version).
        (key,) = renderer.bodies
        renderer.bodies[key]["pages"][0]["capture"] = False
        renderer.set_all("succeeded")
        await p.coordinator.receipts_once()
        await p.settle_results()
        done = await p.get(req)
        # Not a success: the attempt is lost, and so is the request (its one attempt spent).
        assert done.status is RequestStatus.FAILED
        assert done.error_code == "RENDER_RESULT_LOST"
        assert done.result is None and done.artifact_key is None
        (attempt,) = await p.attempts(req)
        assert attempt.status is AttemptState.LOST
        assert attempt.error_code == "RENDER_RESULT_LOST"
        assert "pages not committed" in (attempt.error_message or "")
    finally:
        await p.coordinator.client.aclose()


async def test_a_missing_request_has_no_capture_flag(db: Database, tmp_path: Path) -> None:
    async with db.read_connection() as conn:
        assert await request_captures(conn, 987654) is None


async def test_a_watched_attempt_just_posted_is_not_polled_until_it_is_older(
    db: Database, tmp_path: Path
) -> None:
    renderer = FakeRenderer("http://r1")
    p = make_plane(db, tmp_path, renderer)
    poller = p.coordinator.receipts
    try:
        await request(p, capture=True)
        await p.coordinator.probe_once()
        await p.coordinator.dispatch_once()
        poller.watched = lambda _name: True  # as if its change long-poll were open
        poller.fresh_seconds = 1.0
        renderer.calls.clear()
        assert await poller.pass_once()
        assert "GET /v1/attempts" not in renderer.calls
        assert poller.stats.skipped == 1
        p.clock.advance(1.5)
        assert await poller.pass_once()
        assert renderer.calls.count("GET /v1/attempts") == 1  # old enough: polled, renewed

        poller.watched = lambda _name: False  # not watched: polled however new
        await request(p, capture=False)
        await p.coordinator.dispatch_once()
        renderer.calls.clear()
        assert await poller.pass_once()
        assert renderer.calls.count("GET /v1/attempts") == 1
    finally:
        await p.coordinator.client.aclose()


async def test_a_finished_check_forgets_its_document_unless_another_request_names_it(
    db: Database, tmp_path: Path
) -> None:
    p = make_plane(db, tmp_path, FakeRenderer("http://r1"))
    try:
        shared = await documents_by_reference(p.store, {"document": "<p>shared</p>"})
        alone = await documents_by_reference(p.store, {"document": "<p>alone</p>"})
        now = p.clock.now()
        async with db.write_transaction() as conn:
            await request_insert(
                db,
                conn,
                NewRequest(
                    kind="screenshot",
                    workspace_id="ws",
                    input={**shared, "width": 100, "height": 50},
                    input_hash="shared",
                    max_attempts=1,
                    deadline_at=now + timedelta(seconds=60),
                ),
                now,
            )
        keys = [shared["document_key"], alone["document_key"]]
        deleted = await documents_forget(db, p.store, keys)
        assert deleted == [document_object_key(alone["document_key"])]
        assert await p.store.keys() == [document_object_key(shared["document_key"])]
        assert await documents_forget(db, p.store, []) == []
    finally:
        await p.coordinator.client.aclose()
