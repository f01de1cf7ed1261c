"""What other tables' retention asks of `jobs`: the artefact keys a job's result still points
at, what an active job's payload still names, which jobs are still active, and the row counts."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.jobs.schema import job_events, jobs
from deckyard.jobs.status import ACTIVE


async def job_artifact_keys_referenced(conn: AsyncConnection, keys: Sequence[str]) -> set[str]:
    """Those of `keys` that some job's result names as its `artifact_key`.

    The JSON path is read by the database (`->>` on PostgreSQL, `json_extract` on SQLite); the
    scan covers the jobs the retention keeps, which is what bounds it.
    """
    key = jobs.c.result["artifact_key"].as_string()
    rows = await conn.execute(select(key).where(key.in_(list(keys))))
    return {str(r[0]) for r in rows}


async def jobs_still_active(conn: AsyncConnection, job_ids: Sequence[int]) -> set[int]:
    """Those of `job_ids` whose job is still active (a missing job is not)."""
    if not job_ids:
        return set()
    rows = await conn.execute(
        select(jobs.c.id).where(jobs.c.id.in_(list(job_ids)), jobs.c.status.in_(ACTIVE))
    )
    return {int(r.id) for r in rows}


async def job_counts(conn: AsyncConnection) -> dict[str, int]:
    """Row counts of `jobs` and `job_events` (for the storage footprint)."""
    out = {}
    for table in (jobs, job_events):
        out[table.name] = int(
            (await conn.execute(select(func.count()).select_from(table))).scalar_one()
        )
    return out
