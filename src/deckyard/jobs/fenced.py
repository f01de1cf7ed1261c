"""`FencedLeases`: job leases held by a caller outside this process, fenced by owner and attempt.

A worker elsewhere (the external-worker protocol of `deckyard.external`) claims a job of one
workspace and then presents its lease owner and attempt with every heartbeat, completion and
failure. Each is the runtime's own guarded statement: once the lease has expired (recovered or
not) the owner no longer matches, nothing changes, and the answer says so. Every write goes
through `Database.write`, so a PostgreSQL serialization failure or deadlock is retried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.db import Database, Subscription
from deckyard.jobs.models import Job
from deckyard.jobs.policy import RetryPolicy
from deckyard.jobs.status import EventType, JobErrorCode, JobStatus
from deckyard.jobs.store import (
    WAKE_JOBS,
    events_append,
    job_claim_in_workspace,
    job_fail,
    job_get,
    job_next_due_in_workspace,
    jobs_complete,
    jobs_fail_overdue,
    lease_extend,
    wake_channel,
)


@dataclass(frozen=True)
class Extended:
    """A heartbeat's outcome: whether the lease still held, and whether a cancel was asked."""

    held: bool
    cancel_requested: bool


class FencedLeases:
    """Claim, extend, complete and fail jobs by (owner, attempt), for workers out of process."""

    def __init__(self, db: Database, clock: Clock, retry: RetryPolicy) -> None:
        self.db = db
        self.clock = clock
        self.retry = retry

    def subscribe(self, queue: str) -> Subscription:
        """Wakeups for new or retried work on `queue` (close it when done)."""
        return self.db.bus.subscribe(WAKE_JOBS, wake_channel(queue))

    async def next_due(self, queues: Sequence[str], workspace_id: str) -> datetime | None:
        """When the workspace's earliest pending job on `queues` becomes due (a read)."""
        async with self.db.read_connection() as conn:
            return await job_next_due_in_workspace(conn, queues, workspace_id)

    async def claim(
        self, queues: Sequence[str], workspace_id: str, owner: str, lease: float
    ) -> Job | None:
        """Claim one due job of the workspace for `owner`; None when there was none to run.

        A job whose deadline already passed is failed (`DEADLINE_EXCEEDED`) instead of claimed.
        """
        now = self.clock.now()

        async def claim(conn: AsyncConnection) -> Job | None:
            claimed = await job_claim_in_workspace(conn, queues, workspace_id, 1, owner, now, lease)
            if not claimed:
                return None
            job = claimed[0]
            if job.deadline_at is not None and job.deadline_at <= now:
                await jobs_fail_overdue(conn, [job], now)
                data = {"error_code": JobErrorCode.DEADLINE_EXCEEDED.value}
                await events_append(self.db, conn, [(job.id, EventType.FAILED.value, data)], now)
                return None
            started = {"attempt": job.attempt, "owner": owner}
            await events_append(self.db, conn, [(job.id, EventType.STARTED.value, started)], now)
            return job

        return await self.db.write(claim)

    async def extend(self, owner: str, job_id: int, attempt: int, lease: float) -> Extended:
        """Extend the lease `owner` holds on the job's `attempt` by `lease` seconds.

        Never past the job's deadline: once that passed the lease is not held any more.
        """
        now = self.clock.now()
        beat = await self.db.write(
            lambda conn: lease_extend(
                conn, owner, [(job_id, attempt)], now, lease, to_deadline=True
            )
        )
        return Extended(job_id in beat.extended, job_id in beat.cancel_requested)

    async def complete(self, owner: str, job_id: int, attempt: int, result: Any) -> str | None:
        """Record success by compare-and-set: the new status, or None once the lease was lost.

        `cancelled` or `failed` means a cancel request or a passed deadline came first; the
        result was discarded.
        """
        now = self.clock.now()

        async def complete(conn: AsyncConnection) -> str | None:
            done = await jobs_complete(conn, owner, [(job_id, attempt, result)], now)
            status = done.get(job_id)
            if status is not None:
                data: dict[str, Any] = {"attempt": attempt}
                if status != JobStatus.SUCCEEDED.value:
                    data["discarded_result"] = True
                await events_append(self.db, conn, [(job_id, status, data)], now)
            return status

        return await self.db.write(complete)

    async def fail(
        self,
        owner: str,
        job_id: int,
        attempt: int,
        *,
        code: str,
        message: str,
        retryable: bool,
        retry_after: float | None = None,
    ) -> str | None:
        """Record a failed attempt, retried by the runtime's policy when `retryable`.

        Returns the new status (`pending` when a retry was scheduled), or None once the lease
        was lost.
        """
        now = self.clock.now()

        async def fail(conn: AsyncConnection) -> str | None:
            job = await job_get(conn, job_id)
            if job is None or job.attempt != attempt:
                return None
            retry_at = None
            if retryable and self.retry.should_retry(code, attempt, job.max_attempts):
                delay = max(self.retry.backoff(attempt), retry_after or 0.0)
                retry_at = now + timedelta(seconds=delay)
                if job.deadline_at is not None and retry_at >= job.deadline_at:
                    retry_at = None
            status = await job_fail(
                conn, owner, job, now, code=code, message=message, retry_at=retry_at
            )
            if status is None:
                return None
            data = {"attempt": attempt, "error_code": code, "message": message[:500]}
            kind = EventType.RETRY_SCHEDULED.value if status == JobStatus.PENDING else status
            await events_append(self.db, conn, [(job_id, kind, data)], now)
            if status == JobStatus.PENDING:
                self.db.notify(conn, WAKE_JOBS)
            return status

        return await self.db.write(fail)
