"""Migration contract: both databases go empty -> head -> base -> head and behave the same."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, inspect, update
from sqlalchemy.exc import IntegrityError

import deckyard.migrations.models  # noqa: F401  (registers every table on the metadata)
from deckyard.db import Database, metadata
from deckyard.db.migrate import current_revision, downgrade_to, head_revision, upgrade
from deckyard.jobs.schema import jobs

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
