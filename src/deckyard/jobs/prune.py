"""Pruning finished jobs and their events after the retention period, in bounded batches."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select

from deckyard.db import Database
from deckyard.jobs.schema import job_events, jobs
from deckyard.jobs.status import TERMINAL


async def job_prune(db: Database, now: datetime, retention: float, batch: int) -> int:
    """Delete up to `batch` jobs that finished more than `retention` seconds ago; returns count.

    Reads first; writes only when there is something to delete.
    """
    cutoff = now - timedelta(seconds=retention)
    async with db.read_connection() as conn:
        ids = [
            r.id
            for r in await conn.execute(
                select(jobs.c.id)
                .where(jobs.c.status.in_(TERMINAL), jobs.c.finished_at < cutoff)
                .order_by(jobs.c.finished_at)
                .limit(batch)
            )
        ]
    if not ids:
        return 0
    async with db.write_transaction() as conn:
        await conn.execute(delete(job_events).where(job_events.c.job_id.in_(ids)))
        result = await conn.execute(
            delete(jobs).where(jobs.c.id.in_(ids), jobs.c.status.in_(TERMINAL))
        )
    return int(result.rowcount)
