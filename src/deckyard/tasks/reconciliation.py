"""Finding tasks that stopped making progress, and dispatching them again (seed 003).

Staleness is judged by a task's newest execution event (or, with none, its creation), never by
`updated_at`: a stage that waits on long jobs does not touch the task row, and that blind spot is
exactly what the old system tripped over.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Protocol

from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.tasks.store import tasks_stale

log = logging.getLogger(__name__)


class Dispatcher(Protocol):
    """What reconciliation drives (`TaskExecutor` is one): a protocol, so no import cycle."""

    db: Database
    settings: Settings
    clock: Clock
    reconcile_failures: int
    reconcile_dispatched: int

    def in_flight(self) -> set[int]:
        """Task ids this process is driving now."""
        ...

    def dispatch(self, task_id: int) -> object:
        """Start driving `task_id`; raises when that is not possible."""
        ...


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
    async with db.read_connection() as conn:
        ids = await tasks_stale(conn, thresholds, now, limit)
    skip = exclude or set()
    return [i for i in ids if i not in skip]


async def reconcile_once(executor: Dispatcher) -> list[int]:
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
