"""Migration contract: both databases go empty -> head -> base -> head and behave the same."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import (
    Integer,
    String,
    column,
    delete,
    func,
    insert,
    inspect,
    select,
    table,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.expression import TableClause

import deckyard.migrations.models  # noqa: F401  (registers every table on the metadata)
from deckyard.db import Database, UTCDateTime, metadata
from deckyard.db.migrate import current_revision, downgrade_to, head_revision, upgrade
from deckyard.decks.schema import decks, page_versions, pages
from deckyard.jobs.schema import jobs
from deckyard.render.control.schema import (
    render_attempts,
    render_pages,
    render_requests,
    renderers,
)
from deckyard.workspaces.schema import workspaces

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _job(**over: object) -> dict[str, object]:
    row: dict[str, object] = dict(
        queue="q",
        kind="k",
        payload={},
        status="pending",
        priority=0,
        run_at=NOW,
        attempt=0,
        max_attempts=3,
        created_at=NOW,
        updated_at=NOW,
    )
    row.update(over)
    return row


async def _tables(db: Database) -> dict[str, set[str]]:
    async with db.engine.connect() as conn:
        return await conn.run_sync(
            lambda c: {
                t: {col["name"] for col in inspect(c).get_columns(t)}
                for t in inspect(c).get_table_names()
                if t != "alembic_version"
            }
        )


async def test_head_matches_the_models(db_url: str) -> None:
    db = Database(db_url)
    try:
        await upgrade(db)
        assert await current_revision(db) == head_revision()
        expected = {t.name: {c.name for c in t.columns} for t in metadata.sorted_tables}
        assert await _tables(db) == expected
    finally:
        await db.dispose()


async def test_partial_unique_dedupe_index_behaves(db_url: str) -> None:
    db = Database(db_url)
    try:
        await upgrade(db)
        async with db.write_transaction() as conn:
            first = (
                await conn.execute(insert(jobs).values(_job(dedupe_key="x")).returning(jobs.c.id))
            ).scalar_one()
            await conn.execute(insert(jobs).values(_job(dedupe_key=None)))
            await conn.execute(insert(jobs).values(_job(dedupe_key=None)))
            await conn.execute(insert(jobs).values(_job(dedupe_key="x", queue="other")))
        with pytest.raises(IntegrityError):
            async with db.write_transaction() as conn:
                await conn.execute(insert(jobs).values(_job(dedupe_key="x")))
        with pytest.raises(IntegrityError):
            async with db.write_transaction() as conn:
                await conn.execute(insert(jobs).values(_job(dedupe_key="x", status="running")))
        async with db.write_transaction() as conn:
            await conn.execute(update(jobs).where(jobs.c.id == first).values(status="succeeded"))
            await conn.execute(insert(jobs).values(_job(dedupe_key="x")))
    finally:
        await db.dispose()


async def test_downgrade_to_base_and_back(db_url: str) -> None:
    db = Database(db_url)
    try:
        await upgrade(db)
        await downgrade_to(db_url, "base")
        assert await _tables(db) == {}
        await upgrade(db)
        assert set(await _tables(db)) == {t.name for t in metadata.sorted_tables}
    finally:
        await db.dispose()


async def test_page_version_ids_are_not_handed_out_again_after_upgrading(db_url: str) -> None:
    db = Database(db_url)
    try:
        await upgrade(db, "0011")
        async with db.write_transaction() as conn:
            await conn.execute(insert(workspaces).values(id="w", name="w", created_at=NOW))
            deck = (
                await conn.execute(
                    insert(decks)
                    .values(
                        workspace_id="w",
                        title="T",
                        manifest={"title": "T"},
                        theme_css="",
                        version=1,
                        created_at=NOW,
                        updated_at=NOW,
                    )
                    .returning(decks.c.id)
                )
            ).scalar_one()
            ids = []
            for name in ("a", "b"):
                page = (
                    await conn.execute(
                        insert(pages)
                        .values(deck_id=deck, name=name, position=0, created_at=NOW)
                        .returning(pages.c.id)
                    )
                ).scalar_one()
                for number in (1, 2):
                    version = {"kind": "md", "source": "# x", "skipped_visual_verification": False}
                    ids.append(
                        (
                            await conn.execute(
                                insert(page_versions)
                                .values(page_id=page, number=number, created_at=NOW, **version)
                                .returning(page_versions.c.id)
                            )
                        ).scalar_one()
                    )
        await upgrade(db)
        async with db.write_transaction() as conn:
            kept = (await conn.execute(select(page_versions.c.id))).scalars().all()
            assert sorted(kept) == sorted(ids)
            await conn.execute(delete(pages).where(pages.c.id == page))
            left = (await conn.execute(select(func.count()).select_from(page_versions))).scalar()
            assert left == 2
            first = (await conn.execute(select(pages.c.id).where(pages.c.name == "a"))).scalar()
            again = (
                await conn.execute(
                    insert(page_versions)
                    .values(page_id=first, number=3, created_at=NOW, **version)
                    .returning(page_versions.c.id)
                )
            ).scalar_one()
        assert again > max(ids)
    finally:
        await db.dispose()


def _old_renderers() -> tuple[TableClause, TableClause]:
    """`render_workers` and `render_attempts` as they were before 0017 (the columns it renames)."""
    workers = table(
        "render_workers",
        column("id", Integer),
        column("name", String),
        column("url", String),
        column("slots", Integer),
        column("state", String),
        column("created_at", UTCDateTime),
        column("updated_at", UTCDateTime),
    )
    attempts = table("render_attempts", column("id", Integer), column("worker_id", Integer))
    return workers, attempts


async def test_renaming_render_workers_keeps_renderers_and_their_attempts(db_url: str) -> None:
    db = Database(db_url)
    try:
        await upgrade(db, "0016")
        workers, _ = _old_renderers()
        async with db.write_transaction() as conn:
            renderer = (
                await conn.execute(
                    insert(workers)
                    .values(
                        name="r",
                        url="http://r",
                        slots=2,
                        state="up",
                        created_at=NOW,
                        updated_at=NOW,
                    )
                    .returning(workers.c.id)
                )
            ).scalar_one()
            request = (
                await conn.execute(
                    insert(render_requests)
                    .values(
                        kind="screenshot",
                        workspace_id="w",
                        input={},
                        input_hash="h",
                        status="running",
                        attempts=1,
                        max_attempts=3,
                        deadline_at=NOW,
                        retry_after=NOW,
                        created_at=NOW,
                        updated_at=NOW,
                    )
                    .returning(render_requests.c.id)
                )
            ).scalar_one()
            await conn.execute(
                text(
                    "INSERT INTO render_attempts (request_id, attempt_key, workspace_id, "
                    "worker_id, worker_epoch, slot, active_occupancy, status, timeout_seconds, "
                    "lease_expires_at, created_at, updated_at) SELECT :request, 'k', 'w', "
                    ":renderer, 'e1', 0, 1, 'running', 5.0, created_at, created_at, created_at "
                    "FROM render_requests WHERE id = :request"
                ),
                {"request": request, "renderer": renderer},
            )

        await upgrade(db)
        async with db.write_transaction() as conn:
            assert (await conn.execute(select(renderers.c.id, renderers.c.name))).all() == [
                (renderer, "r")
            ]
            held = (
                await conn.execute(select(render_attempts.c.renderer_id, render_attempts.c.slot))
            ).all()
            assert held == [(renderer, 0)]
        # The foreign key follows the table: an attempt on no renderer is refused.
        with pytest.raises(IntegrityError):
            async with db.write_transaction() as conn:
                await conn.execute(
                    update(render_attempts).values(renderer_id=renderer + 1, attempt_key="k2")
                )
        # The slot index holds under the new column names.
        with pytest.raises(IntegrityError):
            async with db.write_transaction() as conn:
                await conn.execute(
                    text(
                        "INSERT INTO render_attempts (request_id, attempt_key, workspace_id, "
                        "renderer_id, renderer_epoch, slot, active_occupancy, status, "
                        "timeout_seconds, lease_expires_at, created_at, updated_at) "
                        "SELECT request_id, 'k3', workspace_id, renderer_id, renderer_epoch, "
                        "slot, 1, status, timeout_seconds, lease_expires_at, created_at, "
                        "updated_at FROM render_attempts"
                    )
                )

        await downgrade_to(db_url, "0016")
        _, attempts = _old_renderers()
        async with db.write_transaction() as conn:
            assert (await conn.execute(select(workers.c.id, workers.c.name))).all() == [
                (renderer, "r")
            ]
            assert (await conn.execute(select(attempts.c.worker_id))).scalars().all() == [renderer]
    finally:
        await db.dispose()


async def test_active_screenshot_jobs_are_retired_and_other_jobs_left_alone(db_url: str) -> None:
    db = Database(db_url)
    try:
        await upgrade(db, "0017")
        leased = {"lease_owner": "node-1", "lease_expires_at": NOW, "started_at": NOW}
        ended = {"finished_at": NOW, "started_at": NOW}
        rows = {
            "pending shot": _job(kind="screenshot", queue="render", dedupe_key="screenshot:w:a"),
            "running shot": _job(kind="screenshot", queue="render", status="running", **leased),
            "succeeded shot": _job(
                kind="screenshot", queue="render", status="succeeded", result={"k": 1}, **ended
            ),
            "cancelled shot": _job(kind="screenshot", queue="render", status="cancelled", **ended),
            "pending page shot": _job(kind="page.screenshot", queue="decks"),
            "running export": _job(kind="deck.export", queue="decks", status="running", **leased),
            "failed other": _job(
                status="failed", error_code="BOOM", error_message="it broke", **ended
            ),
        }
        async with db.write_transaction() as conn:
            ids = {
                name: (
                    await conn.execute(insert(jobs).values(row).returning(jobs.c.id))
                ).scalar_one()
                for name, row in rows.items()
            }
            before = {r.id: r for r in (await conn.execute(select(jobs))).all()}

        await upgrade(db)
        assert await current_revision(db) == head_revision()
        async with db.write_transaction() as conn:
            after = {r.id: r for r in (await conn.execute(select(jobs))).all()}
        assert set(after) == set(before)
        for name in ("pending shot", "running shot"):
            job = after[ids[name]]
            assert job.status == "failed", name
            assert job.error_code == "JOB_KIND_RETIRED", name
            assert "/v1/renders/" in job.error_message, name
            assert (job.lease_owner, job.lease_expires_at) == (None, None), name
            assert job.finished_at is not None and job.updated_at > NOW, name
            # nothing else of the job changes
            same = ("kind", "queue", "payload", "attempt", "created_at", "result", "dedupe_key")
            assert [getattr(job, c) for c in same] == [
                getattr(before[ids[name]], c) for c in same
            ], name
        untouched = set(rows) - {"pending shot", "running shot"}
        for name in untouched:
            assert after[ids[name]] == before[ids[name]], name

        # nothing to undo: back at 0017 the retired jobs stay failed
        await downgrade_to(db_url, "0017")
        async with db.write_transaction() as conn:
            found = (await conn.execute(select(jobs.c.id, jobs.c.status))).all()
        statuses: dict[int, str] = {row.id: row.status for row in found}
        assert statuses[ids["pending shot"]] == statuses[ids["running shot"]] == "failed"
        assert statuses[ids["pending page shot"]] == "pending"
        assert statuses[ids["running export"]] == "running"
    finally:
        await db.dispose()


async def test_every_request_that_is_no_decks_gets_its_one_page(db_url: str) -> None:
    """0019: a single render is a request of one page. A succeeded request's page is committed
    with its result and artefact; any other request's is pending; a deck's pages stay as
    they were; a downgrade deletes exactly the pages 0019 made."""
    db = Database(db_url)
    try:
        await upgrade(db, "0018")

        def request(kind: str, status: str, **over: object) -> dict[str, object]:
            row: dict[str, object] = dict(
                kind=kind,
                workspace_id="ws",
                input={"document": "<p>x</p>"},
                input_hash=f"h-{kind}-{status}",
                status=status,
                attempts=0,
                max_attempts=3,
                deadline_at=NOW,
                retry_after=NOW,
                created_at=NOW,
                updated_at=NOW,
            )
            row.update(over)
            return row

        rows = {
            "succeeded": request(
                "screenshot",
                "succeeded",
                result={"artifact_key": "renders/a.png", "size": 3},
                artifact_key="renders/a.png",
                finished_at=NOW,
            ),
            "pending": request("screenshot", "pending"),
            "running": request("screenshot", "running"),
            "failed": request("screenshot", "failed", error_code="X", finished_at=NOW),
            "deck": request("deck", "running", input={"pages": [{}, {}]}),
        }
        async with db.write_transaction() as conn:
            ids = {
                name: (
                    await conn.execute(
                        insert(render_requests).values(row).returning(render_requests.c.id)
                    )
                ).scalar_one()
                for name, row in rows.items()
            }
            await conn.execute(
                insert(render_pages),
                [
                    {"request_id": ids["deck"], "page_index": i, "status": "pending"}
                    for i in range(2)
                ],
            )

        await upgrade(db)
        async with db.read_connection() as conn:
            found = (await conn.execute(select(render_pages))).all()
        pages = {(r.request_id, r.page_index): r for r in found}
        assert len(pages) == 6
        done = pages[(ids["succeeded"], 0)]
        assert (done.status, done.artifact_key) == ("committed", "renders/a.png")
        assert done.result == {"artifact_key": "renders/a.png", "size": 3}
        assert done.committed_at == NOW
        for name in ("pending", "running", "failed"):
            page = pages[(ids[name], 0)]
            assert (page.status, page.result, page.artifact_key) == ("pending", None, None), name
        assert {pages[(ids["deck"], i)].status for i in range(2)} == {"pending"}

        await downgrade_to(db_url, "0018")
        async with db.read_connection() as conn:
            left = (await conn.execute(select(render_pages.c.request_id))).all()
        assert sorted(r.request_id for r in left) == [ids["deck"], ids["deck"]]
    finally:
        await db.dispose()
