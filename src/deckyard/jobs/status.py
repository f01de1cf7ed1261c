"""The lifecycle vocabulary shared by jobs, tasks and render requests; job error and event codes.

Jobs, tasks and render requests live the same five-state life (pending, running, then one of
three ends), so they share one enum, one ACTIVE/TERMINAL split and one way of writing it as SQL
for partial indexes and `index_where` clauses. A state machine whose values differ (render
attempts) keeps its own enum.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Lifecycle(StrEnum):
    """Where a job, task or render request is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_active(self) -> bool:
        """True while it may still run (pending or running)."""
        return self in (Lifecycle.PENDING, Lifecycle.RUNNING)

    @property
    def is_terminal(self) -> bool:
        """True once it can never change again."""
        return not self.is_active


JobStatus = Lifecycle
"""A job's status: the shared lifecycle."""

ACTIVE: tuple[str, ...] = (Lifecycle.PENDING.value, Lifecycle.RUNNING.value)
"""Status values that may still run, for `status.in_(ACTIVE)`."""
TERMINAL: tuple[str, ...] = (
    Lifecycle.SUCCEEDED.value,
    Lifecycle.FAILED.value,
    Lifecycle.CANCELLED.value,
)
"""Status values that never change again."""


def status_in(values: Iterable[str], column: str = "status") -> str:
    """A SQL predicate on a status column for partial indexes and `index_where` clauses.

    One value gives `status = 'pending'`; several give `status IN ('pending', 'running')`, the
    exact text the migrations wrote, so the metadata and the migrated schema agree.
    """
    quoted = [f"'{Lifecycle(v).value}'" for v in values]
    if len(quoted) == 1:
        return f"{column} = {quoted[0]}"
    return f"{column} IN ({', '.join(quoted)})"


ACTIVE_PREDICATE = status_in(ACTIVE)
"""`status IN ('pending', 'running')`."""


class JobErrorCode(StrEnum):
    """Why a job failed (or was not retried)."""

    LEASE_EXPIRED = "LEASE_EXPIRED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    TIMEOUT = "JOB_TIMEOUT"
    HANDLER_ERROR = "HANDLER_ERROR"
    NO_HANDLER = "NO_HANDLER"
    CANCELLED = "CANCELLED"
    LEASE_LOST = "LEASE_LOST"


class EventType(StrEnum):
    """Kinds of job events the runtime itself writes; handlers may emit any other type."""

    ENQUEUED = "enqueued"
    STARTED = "started"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RETRY_SCHEDULED = "retry_scheduled"
    CANCEL_REQUESTED = "cancel_requested"
    CANCELLED = "cancelled"
    RECOVERED = "recovered"
    CAS_LOST = "cas_lost"
