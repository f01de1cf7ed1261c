"""The external-worker protocol: workers outside the process, in any language, over HTTP, claim,
heartbeat, complete and fail jobs of the job runtime.

An external queue `name` is stored as the job queue `ext.name`, which no in-process worker
serves, and every claim is restricted to the caller's workspace. A claim answers the job and a
fencing token made of the lease owner (unique per claim) and the attempt; heartbeat, complete
and fail must present it, and each is the runtime's own guarded operation (`Runtime.fenced`):
once the lease has expired (recovered or not) the token is dead, the call answers 409, and
nothing changes. A lease never runs past the job's deadline; once it passed, the token's
calls answer 409 `DEADLINE_EXCEEDED` instead (a result is refused, not recorded).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from deckyard.config import Settings
from deckyard.jobs import Job, JobErrorCode, JobStatus, Runtime

EXTERNAL_QUEUE_PREFIX = "ext"
"""External queues are stored as `ext.<name>`; a claim is scoped to the caller's workspace."""


def stored_queue(name: str) -> str:
    """The job queue behind external queue `name`."""
    return f"{EXTERNAL_QUEUE_PREFIX}.{name}"


class TokenRefused(Exception):
    """The fencing token does not hold the job's lease (expired, recovered, or never did)."""

    def __init__(self, job: Job, message: str) -> None:
        super().__init__(message)
        self.job = job


class DeadlinePassed(Exception):
    """The job's deadline passed while the token held it: its heartbeat, result or failure
    comes too late (the job ends, or has ended, failed `DEADLINE_EXCEEDED`)."""

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
        return self.settings.external_lease_seconds

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
        sub = rt.fenced.subscribe(queues[0])
        until = rt.clock.monotonic() + max(wait, 0.0)
        try:
            while True:
                now = rt.clock.now()
                due = await rt.fenced.next_due(queues, workspace_id)
                if due is not None and due <= now:
                    job = await rt.fenced.claim(queues, workspace_id, owner, self.lease)
                    if job is not None:
                        return Claimed(job, FencingToken(owner, job.attempt))
                    continue
                left = until - rt.clock.monotonic()
                if left <= 0:
                    return None
                if due is not None:
                    left = min(left, (due - now).total_seconds())
                await sub.wait(min(left, self.settings.job_idle_poll_ceiling_seconds))
        finally:
            sub.close()

    async def _own(self, workspace_id: str, job_id: int) -> Job:
        """The caller's external job (a job's workspace and queue never change)."""
        job = await self.runtime.get(job_id)
        if (
            job is None
            or job.workspace_id != workspace_id
            or not job.queue.startswith(f"{EXTERNAL_QUEUE_PREFIX}.")
        ):
            raise NotExternal(job_id)
        return job

    async def _fresh(self, job_id: int) -> Job:
        fresh = await self.runtime.get(job_id)
        assert fresh is not None
        return fresh

    def _refusal(self, job: Job, token: FencingToken, what: str) -> Exception:
        """Why the token's call changed nothing: its job's deadline passed, or the lease is lost."""
        ours = job.attempt == token.attempt and job.lease_owner == token.owner
        overdue = job.deadline_at is not None and job.deadline_at <= self.runtime.clock.now()
        ended_by_deadline = job.status is JobStatus.RUNNING or (
            job.error_code == JobErrorCode.DEADLINE_EXCEEDED
        )
        if ours and overdue and ended_by_deadline:
            assert job.deadline_at is not None
            return DeadlinePassed(
                job, f"the job's deadline passed at {job.deadline_at.isoformat()}; {what}"
            )
        return TokenRefused(job, f"the lease expired or was taken over; {what}")

    async def heartbeat(self, workspace_id: str, job_id: int, token: FencingToken) -> Heartbeat:
        """Extend the lease (never past the job's deadline); tells the worker when the job's
        cancel was requested."""
        await self._own(workspace_id, job_id)
        beat = await self.runtime.fenced.extend(token.owner, job_id, token.attempt, self.lease)
        if not beat.held:
            raise self._refusal(await self._fresh(job_id), token, "stop working on it")
        return Heartbeat(await self._fresh(job_id), beat.cancel_requested)

    async def complete(
        self, workspace_id: str, job_id: int, token: FencingToken, result: Any
    ) -> Job:
        """Record success by compare-and-set; refused once the lease was lost or the deadline
        passed. Completing again with the token that succeeded answers the job as it is."""
        await self._own(workspace_id, job_id)
        status = await self.runtime.fenced.complete(token.owner, job_id, token.attempt, result)
        fresh = await self._fresh(job_id)
        if status is None:
            ours = fresh.attempt == token.attempt and fresh.lease_owner == token.owner
            if ours and fresh.status is JobStatus.SUCCEEDED:
                return fresh
            raise self._refusal(fresh, token, "result discarded")
        if status == JobStatus.FAILED.value:
            raise self._refusal(fresh, token, "result refused; the job failed")
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
        await self._own(workspace_id, job_id)
        status = await self.runtime.fenced.fail(
            token.owner,
            job_id,
            token.attempt,
            code=code,
            message=message,
            retryable=retryable,
            retry_after=retry_after,
        )
        if status is None:
            raise self._refusal(await self._fresh(job_id), token, "failure discarded")
        return await self._fresh(job_id)
