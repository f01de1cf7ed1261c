"""Finding tasks that stopped making progress, and dispatching them again (seed 003).

Staleness is judged by a task's newest execution event (or, with none, its creation), never by
`updated_at`: a stage that waits on long jobs does not touch the task row, and that blind spot is
exactly what the old system tripped over.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import and_, func, or_, select

from deckyard.db import Database
from deckyard.tasks.schema import task_events, tasks
from deckyard.tasks.status import RESUMABLE

if TYPE_CHECKING:
    from deckyard.tasks.executor import TaskExecutor

log = logging.getLogger(__name__)


async def find_stale_resumable_tasks(
    db: Database,
    thresholds: dict[str, float],
    now: datetime,
    *,
    exclude: set[int] | None = None,
    limit: int = 100,
) -> list[int]:
    """Ids of resumable tasks whose newest activity is older than their status's threshold.

    Read only. A status without a threshold is never stale; tasks in `exclude` (those this
    process is driving) are left out.
    """
    newest = (
        select(task_events.c.task_id, func.max(task_events.c.created_at).label("last"))
        .group_by(task_events.c.task_id)
        .subquery()
    )
    activity = func.coalesce(newest.c.last, tasks.c.created_at)
    per_status = [
        and_(tasks.c.status == status, activity < now - timedelta(seconds=seconds))
        for status, seconds in thresholds.items()
        if status in RESUMABLE
    ]
    if not per_status:
        return []
    stmt = (
        select(tasks.c.id)
        .select_from(tasks.outerjoin(newest, newest.c.task_id == tasks.c.id))
        .where(tasks.c.status.in_(RESUMABLE), or_(*per_status))
        .order_by(tasks.c.id)
        .limit(limit)
    )
    async with db.read_connection() as conn:
        ids = [int(r.id) for r in await conn.execute(stmt)]
    skip = exclude or set()
    return [i for i in ids if i not in skip]


async def reconcile_once(executor: TaskExecutor) -> list[int]:
    """Dispatch every stale task once; one failure is logged and never blocks the rest.

    Returns the ids dispatched. A task a manual start claimed in the meantime is skipped: the
    executor's claim is atomic, so exactly one of them drives it.
    """
    stale = await find_stale_resumable_tasks(
        executor.db,
        executor.settings.reconciliation_thresholds_seconds,
        executor.clock.now(),
        exclude=executor.in_flight(),
    )
    dispatched = []
    for task_id in stale:
        try:
            executor.dispatch(task_id)
        except Exception:
            executor.reconcile_failures += 1
            log.exception("reconciliation: could not dispatch task %d; going on", task_id)
            continue
        dispatched.append(task_id)
        executor.reconcile_dispatched += 1
    if dispatched:
        log.info("reconciliation: resumed %d stale task(s): %s", len(dispatched), dispatched)
    return dispatched
