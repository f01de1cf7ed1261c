"""Multi-stage tasks (e.g. publish a deck) and the loop that resumes stale ones."""

from deckyard.tasks.executor import (
    Stage,
    StageContext,
    TaskAlreadyRunning,
    TaskExecutor,
    TaskKind,
)
from deckyard.tasks.reconciliation import find_stale_resumable_tasks, reconcile_once
from deckyard.tasks.status import TaskStatus

__all__ = [
    "Stage",
    "StageContext",
    "TaskAlreadyRunning",
    "TaskExecutor",
    "TaskKind",
    "TaskStatus",
    "find_stale_resumable_tasks",
    "reconcile_once",
]
