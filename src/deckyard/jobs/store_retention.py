"""Which artefact keys the `jobs` table still points at (a job's `result.artifact_key`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.jobs.schema import job_events, jobs


async def job_artifact_keys_referenced(conn: AsyncConnection, keys: Sequence[str]) -> set[str]:
    """Those of `keys` that some job's result names as its `artifact_key`.

    The JSON path is read by the database (`->>` on PostgreSQL, `json_extract` on SQLite); the
    scan covers the jobs the retention keeps, which is what bounds it.
    """
    key = jobs.c.result["artifact_key"].as_string()
    rows = await conn.execute(select(key).where(key.in_(list(keys))))
    return {str(r[0]) for r in rows}


async def job_counts(conn: AsyncConnection) -> dict[str, int]:
    """Row counts of `jobs` and `job_events` (for the storage footprint)."""
    out = {}
    for table in (jobs, job_events):
        out[table.name] = int(
            (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        )
    return out
