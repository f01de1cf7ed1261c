"""Job routes: list, get, cancel, retry, and events as Server-Sent Events.

A job belongs to the workspace that caused it. System jobs (no workspace: the cron's, such as
the model catalog sync) are shown to admin tokens only: by id, and listed with `?system=true`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, Field

from deckyard.api.auth import Principal, TokenRole, current_principal
from deckyard.api.errors import ApiError
from deckyard.api.params import BeforeId, RowId, bounded_id
from deckyard.jobs import DedupeConflict, Job, JobStateError, JobStatus, Runtime

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
Caller = Annotated[Principal, Depends(current_principal)]
StatusName = Literal["pending", "running", "succeeded", "failed", "cancelled"]


class JobOut(BaseModel):
    """A job as the API shows it."""

    id: int
    queue: str
    kind: str
    status: str
    payload: Any
    result: Any
    error_code: str | None
    error_message: str | None
    attempt: int
    max_attempts: int
    priority: int
    parent_id: int | None
    run_at: datetime
    deadline_at: datetime | None
    cancel_requested_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    actor_token_id: int | None = Field(
        None, description="The token whose request caused this job (None: the system)."
    )

    @classmethod
    def of(cls, job: Job) -> JobOut:
        """The API view of a job."""
        return cls(
            id=job.id,
            queue=job.queue,
            kind=job.kind,
            status=job.status.value,
            payload=job.payload,
            result=job.result,
            error_code=job.error_code,
            error_message=job.error_message,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            priority=job.priority,
            parent_id=job.parent_id,
            run_at=job.run_at,
            deadline_at=job.deadline_at,
            cancel_requested_at=job.cancel_requested_at,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            actor_token_id=job.actor_token_id,
        )


class JobList(BaseModel):
    """A page of jobs, newest first; pass `next_before` as `before` for the next page."""

    jobs: list[JobOut]
    next_before: int | None


def runtime_of(request: Request) -> Runtime:
    """The app's job runtime."""
    rt: Runtime = request.app.state.runtime
    return rt


async def owned_job(
    request: Request, principal: Principal, job_id: int, *, payload: bool = True
) -> Job:
    """The job if it belongs to the caller's workspace, or is a system job and the caller an
    admin; 404 otherwise (never 403). Without `payload`, for a caller that answers with
    something else, the payload is not read."""
    job = await runtime_of(request).get(job_id, payload=payload)
    if job is None or not visible(principal, job):
        raise ApiError(404, "NOT_FOUND", f"no job {job_id}")
    return job


def visible(principal: Principal, job: Job) -> bool:
    """Whether the caller may see the job: its workspace's, or a system job to an admin."""
    if job.workspace_id is None:
        return principal.role is TokenRole.ADMIN
    return job.workspace_id == principal.workspace_id


async def job_of_caller(request: Request, principal: Caller, job_id: RowId) -> Job:
    """Dependency form of `owned_job`, resolved before a streaming response starts."""
    return await owned_job(request, principal, job_id, payload=False)


@router.get("", response_model=JobList)
async def list_jobs(
    request: Request,
    principal: Caller,
    status: Annotated[StatusName | None, Query()] = None,
    queue: Annotated[str | None, Query(max_length=64)] = None,
    kind: Annotated[str | None, Query(max_length=128)] = None,
    before: BeforeId = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    system: Annotated[
        bool, Query(description="List system jobs (no workspace; admin tokens only) instead.")
    ] = False,
) -> JobList:
    """Jobs of the caller's workspace (or, with `system`, the system's), newest first."""
    if system and principal.role is not TokenRole.ADMIN:
        raise ApiError(
            403, "ROLE_FORBIDDEN", f"system jobs need an admin token, not {principal.role}"
        )
    jobs = await runtime_of(request).list(
        workspace_id=None if system else principal.workspace_id,
        system=system,
        status=status,
        queue=queue,
        kind=kind,
        before_id=before,
        limit=limit,
    )
    return JobList(
        jobs=[JobOut.of(j) for j in jobs],
        next_before=jobs[-1].id if len(jobs) == limit else None,
    )


@router.get("/{job_id:int}", response_model=JobOut)
async def get_job(request: Request, principal: Caller, job_id: RowId) -> JobOut:
    """One job."""
    return JobOut.of(await owned_job(request, principal, job_id))


def nothing_to_cancel(code: str, noun: str, row_id: int, status: str) -> ApiError:
    """409 `code`: the `noun` (`job`, `render`) ended as `status` before a cancel could reach
    it; the answer names it by `{noun}_id`, with its `status`."""
    return ApiError(
        409,
        code,
        f"{noun} {row_id} already ended {status}; there is nothing to cancel",
        extra={f"{noun}_id": row_id, "status": status},
    )


def finished(job: Job) -> ApiError:
    """409: the job ended (succeeded or failed) before a cancel could reach it."""
    return nothing_to_cancel("JOB_FINISHED", "job", job.id, job.status.value)


@router.post(
    "/{job_id:int}/cancel",
    response_model=JobOut,
    responses={409: {"description": "JOB_FINISHED: the job already succeeded or failed."}},
)
async def cancel_job(request: Request, principal: Caller, job_id: RowId) -> JobOut:
    """Cancel a job and its active children; cancelling a cancelled job answers it unchanged."""
    job = await owned_job(request, principal, job_id, payload=False)
    if job.is_terminal and job.status is not JobStatus.CANCELLED:
        raise finished(job)
    after = await runtime_of(request).cancel(job_id)
    ended_first = after.is_terminal and after.cancel_requested_at is None
    if ended_first and after.status is not JobStatus.CANCELLED:
        raise finished(after)
    return JobOut.of(after)


@router.post(
    "/{job_id:int}/retry",
    response_model=JobOut,
    responses={
        409: {
            "description": "JOB_NOT_RETRYABLE: the job is active or succeeded; DEDUPE_CONFLICT: "
            "another active job (`job_id`) holds its dedupe key."
        }
    },
)
async def retry_job(request: Request, principal: Caller, job_id: RowId) -> JobOut:
    """Run a failed or cancelled job again."""
    await owned_job(request, principal, job_id, payload=False)
    try:
        return JobOut.of(await runtime_of(request).retry(job_id))
    except DedupeConflict as exc:
        raise ApiError(409, "DEDUPE_CONFLICT", str(exc), extra={"job_id": exc.holder}) from None
    except JobStateError as exc:
        raise ApiError(409, "JOB_NOT_RETRYABLE", str(exc)) from None


@router.get("/{job_id:int}/events", response_class=EventSourceResponse)
async def job_events(
    request: Request,
    job: Annotated[Job, Depends(job_of_caller)],
    last_event_id: Annotated[str | None, Header()] = None,
) -> AsyncIterator[ServerSentEvent]:
    """The job's events as SSE, following new ones until the job ends.

    Resume with the `Last-Event-ID` header: only later events are sent.
    """
    after = bounded_id(last_event_id) or 0
    async for ev in runtime_of(request).events(job.id, after_id=after):
        yield ServerSentEvent(id=str(ev.id), event=ev.type, data=ev.to_dict())
