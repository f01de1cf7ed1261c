"""Documents by reference: the request row and the renderer call carry a key, sent by value once.

On SQLite and PostgreSQL against the HTTP-level renderer double, which keeps documents by key
and refuses a key it was never sent (`RENDER_DOCUMENT_UNKNOWN`, with the missing keys).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select

from deckyard.clock import FakeClock
from deckyard.db import Database
from deckyard.decks.sweeper import ArtifactSweeper
from deckyard.render.control.models import RequestStatus
from deckyard.render.control.requests import document_object_key, documents_by_reference
from deckyard.render.control.schema import render_requests
from deckyard.render.control.store import NewRequest, request_insert
from deckyard.render.control.store_retention import render_requests_prune
from tests.integration.render.fake_renderer import FakeRenderer
from tests.integration.render.test_control import Plane, make_plane

PAGE = "<!doctype html><h1>by reference</h1>" + "<p>x</p>" * 4000


async def request(p: Plane, document: str, n: int) -> int:
    now = p.clock.now()
    render_input = await documents_by_reference(
        p.store, {"document": document, "width": 100, "height": 50}
    )
    async with p.db.write_transaction() as conn:
        req, _ = await request_insert(
            p.db,
            conn,
            NewRequest(
                kind="screenshot",
                workspace_id="ws",
                input=render_input,
                input_hash=f"h{n}",
                max_attempts=p.settings.render_max_attempts,
                deadline_at=now + timedelta(seconds=60),
                dedupe_key=f"ws:{n}",
            ),
            now,
        )
    return req.id


async def render(p: Plane, document: str, n: int) -> int:
    req = await request(p, document, n)
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].set_all("succeeded")
    await p.coordinator.receipts_once()
    await p.settle_results()
    assert (await p.get(req)).status is RequestStatus.SUCCEEDED
    return req


async def test_the_row_and_the_call_carry_the_key_and_a_known_key_is_not_sent_again(
    db: Database, tmp_path: Path
) -> None:
    renderer = FakeRenderer("http://r1", slots=2, documents=set())
    p = make_plane(db, tmp_path, renderer)
    key = hashlib.sha256(PAGE.encode()).hexdigest()
    try:
        first = await render(p, PAGE, 1)
        async with db.read_connection() as conn:
            row = (
                await conn.execute(
                    select(render_requests.c.input).where(render_requests.c.id == first)
                )
            ).scalar_one()
        assert row["document_key"] == key and "document" not in row
        assert await p.store.get(document_object_key(key)) == PAGE.encode()
        sent = [body["pages"][0] for body in renderer.bodies.values()]
        # A key the renderer was never seen to take goes by value at once: one call, no refusal.
        assert len(sent) == 1 and sent[0]["document"] == PAGE
        assert renderer.calls.count("POST /v1/deck-attempts") == 1
        assert p.coordinator.documents_sent == 1

        renderer.bodies.clear()
        await render(p, PAGE, 2)
        (again,) = [body["pages"][0] for body in renderer.bodies.values()]
        assert again["document_key"] == key and "document" not in again
        assert p.coordinator.documents_sent == 1
    finally:
        await p.coordinator.client.aclose()


async def test_a_renderer_that_dropped_a_key_refuses_it_and_then_gets_it_by_value(
    db: Database, tmp_path: Path
) -> None:
    renderer = FakeRenderer("http://r1", slots=2, documents=set())
    p = make_plane(db, tmp_path, renderer)
    try:
        await render(p, PAGE, 1)
        assert renderer.documents is not None
        renderer.documents.clear()  # its bounded cache let the document go
        renderer.bodies.clear()
        renderer.calls.clear()
        await render(p, PAGE, 2)
        assert renderer.calls.count("POST /v1/deck-attempts") == 2  # by key, refused, by value
        (again,) = [body["pages"][0] for body in renderer.bodies.values()]
        assert again["document"] == PAGE
        assert p.coordinator.documents_sent == 2
    finally:
        await p.coordinator.client.aclose()


async def test_a_renderer_under_a_new_epoch_gets_the_document_by_value_at_once(
    db: Database, tmp_path: Path
) -> None:
    renderer = FakeRenderer("http://r1", slots=2, documents=set())
    p = make_plane(db, tmp_path, renderer)
    try:
        await render(p, PAGE, 1)
        renderer.restart("epoch-2")
        assert renderer.documents is not None
        renderer.documents.clear()
        renderer.bodies.clear()
        renderer.calls.clear()
        await render(p, PAGE, 2)
        assert renderer.calls.count("POST /v1/deck-attempts") == 1
        (again,) = [body["pages"][0] for body in renderer.bodies.values()]
        assert again["document"] == PAGE
    finally:
        await p.coordinator.client.aclose()


async def test_a_document_gone_from_the_store_fails_as_infrastructure_not_content(
    db: Database, tmp_path: Path
) -> None:
    renderer = FakeRenderer("http://r1", slots=2, documents=set())
    p = make_plane(db, tmp_path, renderer)
    try:
        req = await request(p, PAGE, 1)
        await p.store.delete(document_object_key(hashlib.sha256(PAGE.encode()).hexdigest()))
        await p.coordinator.probe_once()
        await p.coordinator.dispatch_once()
        (attempt,) = await p.attempts(req)
        assert attempt.error_code == "RENDER_DOCUMENT_UNKNOWN"
        assert renderer.bodies == {}
    finally:
        await p.coordinator.client.aclose()


async def test_the_sweep_keeps_a_document_while_a_request_names_it(
    db: Database, tmp_path: Path
) -> None:
    p = make_plane(db, tmp_path, FakeRenderer("http://r1"), artifact_sweep_grace_seconds=1)
    try:
        req = await render(p, PAGE, 1)
        object_key = document_object_key(hashlib.sha256(PAGE.encode()).hexdigest())
        later = FakeClock(datetime.now(UTC) + timedelta(hours=1))
        sweeper = ArtifactSweeper(db, p.store, p.settings, later)
        await sweeper.sweep()
        assert await p.store.get(object_key) is not None
        await db.write(lambda conn: render_requests_prune(conn, [req]))
        await sweeper.sweep()
        assert await p.store.get(object_key) is None
    finally:
        await p.coordinator.client.aclose()
