"""The durable job runtime: one `jobs` table for every queue, usable on its own as a library."""

from deckyard.jobs.context import JobContext, JobError
from deckyard.jobs.loop import Loop, Tick
from deckyard.jobs.models import Job, JobEvent
from deckyard.jobs.policy import RecoveryPolicy, RetryPolicy
from deckyard.jobs.recovery import recover_expired
from deckyard.jobs.runtime import EnqueueSpec, JobNotFound, JobStateError, Runtime
from deckyard.jobs.status import EventType, JobErrorCode, JobStatus
from deckyard.jobs.worker import Worker

__all__ = [
    "EnqueueSpec",
    "EventType",
    "Job",
    "JobContext",
    "JobError",
    "JobErrorCode",
    "JobEvent",
    "JobNotFound",
    "JobStateError",
    "JobStatus",
    "Loop",
    "RecoveryPolicy",
    "RetryPolicy",
    "Runtime",
    "Tick",
    "Worker",
    "recover_expired",
]
