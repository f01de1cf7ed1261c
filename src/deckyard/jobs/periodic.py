"""Periodic jobs from cron expressions, enqueued once per tick across any number of nodes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from croniter import croniter
from sqlalchemy import update

from deckyard.db import Database
from deckyard.jobs.queue import NewJob, job_insert
from deckyard.jobs.schema import periodic_ticks


@dataclass(frozen=True)
class Periodic:
    """A cron schedule that enqueues `kind` on `queue` once per tick."""

    name: str
    cron: str
    kind: str
    queue: str
    payload: Any
    max_attempts: int

    def __post_init__(self) -> None:
        if not croniter.is_valid(self.cron):
            raise ValueError(f"periodic job {self.name!r}: invalid cron expression {self.cron!r}")

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after `after` (aware UTC)."""
        value: datetime = croniter(self.cron, after).get_next(datetime)
        return value

    def previous_tick(self, at: datetime) -> datetime:
        """The latest tick at or before `at`."""
        value: datetime = croniter(self.cron, at).get_prev(datetime)
        return value


async def periodic_enqueue_tick(
    db: Database, periodic: Periodic, tick: datetime, now: datetime
) -> bool:
    """Enqueue `periodic` for `tick` unless some node already did; True when this call did.

    The `job_periodic` row is a compare-and-set on the last enqueued tick: only one writer can
    move it forward, and the job is inserted in the same transaction.
    """
    async with db.write_transaction() as conn:
        moved = await conn.execute(
            update(periodic_ticks)
            .where(periodic_ticks.c.name == periodic.name, periodic_ticks.c.last_tick_at < tick)
            .values(last_tick_at=tick)
        )
        if moved.rowcount == 0:
            inserted = await conn.execute(
                db.insert_ignoring_conflicts(periodic_ticks, index_elements=["name"])
                .values(name=periodic.name, last_tick_at=tick)
                .returning(periodic_ticks.c.name)
            )
            if inserted.first() is None:
                return False
        await job_insert(
            db,
            conn,
            NewJob(
                kind=periodic.kind,
                queue=periodic.queue,
                payload=periodic.payload,
                max_attempts=periodic.max_attempts,
                run_at=tick,
                dedupe_key=f"periodic:{periodic.name}:{tick.isoformat()}",
            ),
            now,
        )
    return True
