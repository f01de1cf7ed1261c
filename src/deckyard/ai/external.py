"""Workers outside the process, in any language, over HTTP: claim, heartbeat, complete, fail.

An external queue `name` is stored as the job queue `ext.name`, which no in-process worker
serves, and every claim is restricted to the caller's workspace. A claim answers the job and a
fencing token made of the lease owner (unique per claim) and the attempt; heartbeat, complete
and fail must present it, and each is the runtime's own guarded statement (`lease_extend`,
`jobs_complete`, `job_fail`): once the lease has expired (recovered or not) the token is
dead, the call answers 409, and nothing changes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from deckyard.ai.errors import EXTERNAL_QUEUE_PREFIX
from deckyard.config import Settings
from deckyard.jobs import EventType, Job, JobStatus, Runtime
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


def stored_queue(name: str) -> str:
    """The job queue behind external queue `name`."""
    return f"{EXTERNAL_QUEUE_PREFIX}.{name}"


class TokenRefused(Exception):
    """The fencing token does not hold the job's lease (expired, recovered, or never did)."""

    def __init__(self, job: Job, message: str) -> None:
        super().__init__(message)
        self.job = job


class NotExternal(LookupError):
    """No external job of the caller's workspace has that id."""


@dataclass(frozen=True)
class FencingToken:
    """Lease owner and attempt: what a finish must match."""

    owner: str
    attempt: int

    def encode(self) -> str:
        """The wire form, `<attempt>.<owner>`."""
        return f"{self.attempt}.{self.owner}"

    @classmethod
    def decode(cls, text: str) -> FencingToken | None:
        """Parse the wire form; None when malformed."""
        attempt, sep, owner = text.partition(".")
        if not sep or not attempt.isdigit() or not owner:
            return None
        return cls(owner, int(attempt))


@dataclass(frozen=True)
class Claimed:
    """A claimed job and the token that fences it."""

    job: Job
    token: FencingToken


@dataclass(frozen=True)
class Heartbeat:
    """A heartbeat's answer."""

    job: Job
    cancel_requested: bool


class ExternalWorkers:
    """The protocol's operations, on the job runtime's tables and guards."""

    def __init__(self, runtime: Runtime, settings: Settings) -> None:
        self.runtime = runtime
        self.settings = settings

    @property
    def lease(self) -> float:
        """Seconds one claim or heartbeat holds the lease."""
        return self.settings.ai_external_lease_seconds

    async def enqueue(
        self,
        workspace_id: str,
        queue: str,
        kind: str,
        payload: Any,
        *,
        max_attempts: int | None = None,
        deadline_seconds: float | None = None,
        dedupe_key: str | None = None,
        priority: int = 0,
    ) -> Job:
        """Put a job on an external queue of the workspace."""
        return await self.runtime.enqueue(
            kind,
            payload,
            queue=stored_queue(queue),
            workspace_id=workspace_id,
            max_attempts=max_attempts,
            deadline=deadline_seconds,
            dedupe_key=f"{workspace_id}:{dedupe_key}" if dedupe_key else None,
            priority=priority,
        )

    async def claim(
        self, workspace_id: str, queue: str, worker: str, wait: float
    ) -> Claimed | None:
        """Claim the next due job, waiting up to `wait` seconds for one (a long poll).

        It looks (a read) before it claims (a write), and waits on the queue's wakeup, so a
        waiting agent costs no writes.
        """
        rt = self.runtime
        queues = [stored_queue(queue)]
        owner = f"ext:{worker}:{secrets.token_hex(8)}"
        sub = rt.db.bus.subscribe(WAKE_JOBS, wake_channel(queues[0]))
        until = rt.clock.monotonic() + max(wait, 0.0)
        try:
            while True:
                now = rt.clock.now()
                async with rt.db.read_connection() as conn:
                    due = await job_next_due_in_workspace(conn, queues, workspace_id)
                if due is not None and due <= now:
                    got = await self._claim_one(queues, workspace_id, owner)
                    if got is not None:
                        return got
                    continue
                left = until - rt.clock.monotonic()
                if left <= 0:
                    return None
                if due is not None:
                    left = min(left, (due - now).total_seconds())
                await sub.wait(min(left, self.settings.job_idle_poll_ceiling_seconds))
        finally:
            sub.close()

    async def _claim_one(self, queues: list[str], workspace_id: str, owner: str) -> Claimed | None:
        rt = self.runtime
        now = rt.clock.now()
        async with rt.db.write_transaction() as conn:
            claimed = await job_claim_in_workspace(
                conn, queues, workspace_id, 1, owner, now, self.lease
            )
            if not claimed:
                return None
            job = claimed[0]
            if job.deadline_at is not None and job.deadline_at <= now:
                await jobs_fail_overdue(conn, [job], now)
                data = {"error_code": "DEADLINE_EXCEEDED"}
                await events_append(rt.db, conn, [(job.id, EventType.FAILED.value, data)], now)
                return None
            started = {"attempt": job.attempt, "owner": owner}
            await events_append(rt.db, conn, [(job.id, EventType.STARTED.value, started)], now)
        return Claimed(job, FencingToken(owner, job.attempt))

    async def _own(self, conn: Any, workspace_id: str, job_id: int) -> Job:
        job = await job_get(conn, job_id)
        if (
            job is None
            or job.workspace_id != workspace_id
            or not job.queue.startswith(f"{EXTERNAL_QUEUE_PREFIX}.")
        ):
            raise NotExternal(job_id)
        return job

    async def heartbeat(self, workspace_id: str, job_id: int, token: FencingToken) -> Heartbeat:
        """Extend the lease; tells the worker when the job's cancel was requested."""
        rt = self.runtime
        now = rt.clock.now()
        async with rt.db.write_transaction() as conn:
            job = await self._own(conn, workspace_id, job_id)
            beat = await lease_extend(conn, token.owner, [(job_id, token.attempt)], now, self.lease)
        if job_id not in beat.extended:
            raise TokenRefused(job, "the lease is no longer held by this token")
        fresh = await rt.get(job_id)
        assert fresh is not None
        return Heartbeat(fresh, job_id in beat.cancel_requested)

    async def complete(
        self, workspace_id: str, job_id: int, token: FencingToken, result: Any
    ) -> Job:
        """Record success by compare-and-set; refused (409) once the lease was lost."""
        rt = self.runtime
        now = rt.clock.now()
        async with rt.db.write_transaction() as conn:
            job = await self._own(conn, workspace_id, job_id)
            done = await jobs_complete(conn, token.owner, [(job_id, token.attempt, result)], now)
            status = done.get(job_id)
            if status is None:
                raise TokenRefused(job, "the lease expired or was taken over; result discarded")
            data: dict[str, Any] = {"attempt": token.attempt}
            if status != JobStatus.SUCCEEDED.value:
                data["discarded_result"] = True
            await events_append(rt.db, conn, [(job_id, status, data)], now)
        fresh = await rt.get(job_id)
        assert fresh is not None
        return fresh

    async def fail(
        self,
        workspace_id: str,
        job_id: int,
        token: FencingToken,
        *,
        code: str,
        message: str,
        retryable: bool,
        retry_after: float | None = None,
    ) -> Job:
        """Record a failed attempt: retried by the queue's policy when `retryable`."""
        rt = self.runtime
        now = rt.clock.now()
        async with rt.db.write_transaction() as conn:
            job = await self._own(conn, workspace_id, job_id)
            policy = rt.default_retry
            retry_at = None
            if retryable and policy.should_retry(code, token.attempt, job.max_attempts):
                delay = max(policy.backoff(token.attempt), retry_after or 0.0)
                retry_at = now + timedelta(seconds=delay)
                if job.deadline_at is not None and retry_at >= job.deadline_at:
                    retry_at = None
            fenced = job if job.attempt == token.attempt else None
            status = None
            if fenced is not None:
                status = await job_fail(
                    conn, token.owner, fenced, now, code=code, message=message, retry_at=retry_at
                )
            if status is None:
                raise TokenRefused(job, "the lease expired or was taken over; failure discarded")
            data = {"attempt": token.attempt, "error_code": code, "message": message[:500]}
            kind = EventType.RETRY_SCHEDULED.value if status == JobStatus.PENDING else status
            await events_append(rt.db, conn, [(job_id, kind, data)], now)
            if status == JobStatus.PENDING:
                rt.db.notify(conn, WAKE_JOBS)
        fresh = await rt.get(job_id)
        assert fresh is not None
        return fresh
