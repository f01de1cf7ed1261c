"""Job states and error codes."""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """Where a job is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_active(self) -> bool:
        """True while the job may still run."""
        return self in (JobStatus.PENDING, JobStatus.RUNNING)


ACTIVE = (JobStatus.PENDING.value, JobStatus.RUNNING.value)
TERMINAL = (JobStatus.SUCCEEDED.value, JobStatus.FAILED.value, JobStatus.CANCELLED.value)


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
