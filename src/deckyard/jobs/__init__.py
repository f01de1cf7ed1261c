"""The durable job runtime: one `jobs` table for every queue, usable on its own as a library."""

from deckyard.jobs.actor import acting_as, current_actor
from deckyard.jobs.context import JobContext, JobError, current_job, slot_released
from deckyard.jobs.maintenance import Periodic, recover_expired
from deckyard.jobs.models import Job, JobEvent
from deckyard.jobs.policy import RecoveryPolicy, RetryPolicy
from deckyard.jobs.runtime import (
    DedupeConflict,
    EnqueueSpec,
    JobNotFound,
    JobStateError,
    Runtime,
)
from deckyard.jobs.status import EventType, JobErrorCode, JobStatus, Lifecycle
from deckyard.jobs.store import WAKE_EVENTS
from deckyard.jobs.store_retention import (
    job_artifact_keys_referenced,
    job_counts,
    jobs_still_active,
)
from deckyard.jobs.worker import Worker

__all__ = [
    "WAKE_EVENTS",
    "DedupeConflict",
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
    "Lifecycle",
    "Periodic",
    "RecoveryPolicy",
    "RetryPolicy",
    "Runtime",
    "Worker",
    "acting_as",
    "current_actor",
    "current_job",
    "job_artifact_keys_referenced",
    "job_counts",
    "jobs_still_active",
    "recover_expired",
    "slot_released",
]
