"""External-worker routes: enqueue on a queue, claim (long poll), heartbeat, complete, fail.

A claim answers the job and its fencing `token`; heartbeat, complete and fail must send that
token and answer 409 `LEASE_LOST` once the lease has expired (whether or not the job was
recovered yet) or was taken over, changing nothing; once the job's deadline passed they answer
409 `DEADLINE_EXCEEDED` (a lease never runs past it; a result is refused). Completing again with
the token that succeeded answers 200 with the job. Queues and jobs are scoped to the token's
workspace. A `worker` token may call only the claim routes; enqueueing needs a `member` token.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from deckyard.api.auth import Principal, current_principal, queue_principal
from deckyard.api.errors import ApiError
from deckyard.api.jobs import JobOut
from deckyard.api.params import RowId
from deckyard.external.protocol import (
    Claimed,
    DeadlinePassed,
    ExternalWorkers,
    FencingToken,
    NotExternal,
    TokenRefused,
)
from deckyard.jobs import Job, JobErrorCode

router = APIRouter(prefix="/v1", tags=["external workers"])
Member = Annotated[Principal, Depends(current_principal)]
ExternalWorker = Annotated[Principal, Depends(queue_principal)]
QUEUE_NAME = r"^[a-z0-9][a-z0-9_.-]{0,59}$"
QueueName = Annotated[str, Path(pattern=QUEUE_NAME)]
KIND = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnqueueIn(_Body):
    """A job for external workers."""

    kind: str = Field(pattern=KIND)
    payload: Any = None
    max_attempts: int | None = Field(None, ge=1, le=100)
    deadline_seconds: float | None = Field(None, gt=0, le=30 * 24 * 3600)
    dedupe_key: str | None = Field(None, min_length=1, max_length=180)
    priority: int = Field(0, ge=-1000, le=1000)


class ClaimIn(_Body):
    """Who claims, and how long to wait for a job."""

    worker: str = Field("agent", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
    wait_seconds: float = Field(0.0, ge=0)


class ClaimOut(BaseModel):
    """A claimed job and the token its heartbeat and finish must carry."""

    job: JobOut
    token: str
    lease_expires_at: datetime | None
    lease_seconds: float


class TokenIn(_Body):
    """The fencing token from the claim."""

    token: str = Field(min_length=3, max_length=300)


class CompleteIn(TokenIn):
    """A success and its result."""

    result: Any = None


class FailIn(TokenIn):
    """A failure: its code, message and whether another attempt may help."""

    error_code: str = Field("EXTERNAL_ERROR", pattern=r"^[A-Z0-9_]{1,64}$")
    message: str = Field("", max_length=4000)
    retryable: bool = True
    retry_after_seconds: float | None = Field(None, ge=0, le=24 * 3600)


class HeartbeatOut(BaseModel):
    """The extended lease, and whether the job's cancel was requested (stop, then fail)."""

    lease_expires_at: datetime | None
    cancel_requested: bool


async def _unless_hung_up(request: Request, claiming: Awaitable[Claimed | None]) -> Claimed | None:
    """The claim, or None as soon as the client hangs up (a long poll must not outlive it).

    A claim cut off just after it took a job leaves that job to lease expiry and recovery.
    """
    task = asyncio.ensure_future(claiming)

    async def hung_up() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(hung_up())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


def workers(request: Request) -> ExternalWorkers:
    """The app's external-worker protocol."""
    external: ExternalWorkers = request.app.state.external
    return external


def fencing(text: str) -> FencingToken:
    """The decoded token; 422 when it is not one."""
    token = FencingToken.decode(text)
    if token is None:
        raise ApiError(422, "INVALID_TOKEN", "not a fencing token from a claim", field="token")
    return token


def refused(exc: TokenRefused) -> ApiError:
    """409: the token no longer holds the lease."""
    return ApiError(409, "LEASE_LOST", str(exc), extra=_job_extra(exc.job))


def too_late(exc: DeadlinePassed) -> ApiError:
    """409: the job's deadline passed; the worker must stop (a result is not recorded)."""
    return ApiError(409, JobErrorCode.DEADLINE_EXCEEDED.value, str(exc), extra=_job_extra(exc.job))


def _job_extra(job: Job) -> dict[str, Any]:
    deadline = job.deadline_at.isoformat() if job.deadline_at is not None else None
    return {
        "job_id": job.id,
        "status": job.status.value,
        "attempt": job.attempt,
        "deadline_at": deadline,
    }


LEASE_REFUSALS = (
    "`LEASE_LOST`: the token no longer holds the lease; `DEADLINE_EXCEEDED`: the job's "
    "deadline passed, stop working on it"
)


def missing(job_id: int) -> ApiError:
    """404: no external job of the caller's workspace has that id."""
    return ApiError(404, "NOT_FOUND", f"no external job {job_id}")


@router.post("/queues/{queue}/jobs", status_code=201, response_model=JobOut)
async def enqueue(
    request: Request, principal: Member, queue: QueueName, body: Annotated[EnqueueIn, Body()]
) -> JSONResponse:
    """Put a job on an external queue of the workspace (joins an active one with `dedupe_key`)."""
    job = await workers(request).enqueue(
        principal.workspace_id,
        queue,
        body.kind,
        body.payload,
        max_attempts=body.max_attempts,
        deadline_seconds=body.deadline_seconds,
        dedupe_key=body.dedupe_key,
        priority=body.priority,
    )
    return JSONResponse(
        JobOut.of(job).model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/v1/jobs/{job.id}"},
    )


@router.post(
    "/queues/{queue}/claim",
    response_model=ClaimOut,
    responses={204: {"description": "No job became due within `wait_seconds`."}},
)
async def claim(
    request: Request,
    principal: ExternalWorker,
    queue: QueueName,
    body: Annotated[ClaimIn | None, Body()] = None,
) -> Response:
    """Claim the next due job of the queue, waiting up to `wait_seconds` (long poll)."""
    ext = workers(request)
    ask = body or ClaimIn()
    wait = min(ask.wait_seconds, ext.settings.external_claim_max_wait_seconds)
    got = await _unless_hung_up(request, ext.claim(principal.workspace_id, queue, ask.worker, wait))
    if got is None:
        return Response(status_code=204)
    out = ClaimOut(
        job=JobOut.of(got.job),
        token=got.token.encode(),
        lease_expires_at=got.job.lease_expires_at,
        lease_seconds=ext.lease,
    )
    return JSONResponse(out.model_dump(mode="json"))


@router.post(
    "/claims/{job_id:int}/heartbeat",
    response_model=HeartbeatOut,
    responses={409: {"description": LEASE_REFUSALS}},
)
async def heartbeat(
    request: Request, principal: ExternalWorker, job_id: RowId, body: Annotated[TokenIn, Body()]
) -> HeartbeatOut:
    """Extend the lease of a claimed job (never past its deadline)."""
    try:
        beat = await workers(request).heartbeat(principal.workspace_id, job_id, fencing(body.token))
    except NotExternal:
        raise missing(job_id) from None
    except TokenRefused as exc:
        raise refused(exc) from None
    except DeadlinePassed as exc:
        raise too_late(exc) from None
    return HeartbeatOut(
        lease_expires_at=beat.job.lease_expires_at, cancel_requested=beat.cancel_requested
    )


@router.post(
    "/claims/{job_id:int}/complete",
    response_model=JobOut,
    responses={409: {"description": f"{LEASE_REFUSALS}; the result was not recorded."}},
)
async def complete(
    request: Request, principal: ExternalWorker, job_id: RowId, body: Annotated[CompleteIn, Body()]
) -> JobOut:
    """Finish a claimed job with its result (compare-and-set on owner, attempt and lease).

    Sent again with the token that succeeded, it answers the job as it is (idempotent).
    """
    try:
        job = await workers(request).complete(
            principal.workspace_id, job_id, fencing(body.token), body.result
        )
    except NotExternal:
        raise missing(job_id) from None
    except TokenRefused as exc:
        raise refused(exc) from None
    except DeadlinePassed as exc:
        raise too_late(exc) from None
    return JobOut.of(job)


@router.post(
    "/claims/{job_id:int}/fail",
    response_model=JobOut,
    responses={409: {"description": f"{LEASE_REFUSALS}; the failure was not recorded."}},
)
async def fail(
    request: Request, principal: ExternalWorker, job_id: RowId, body: Annotated[FailIn, Body()]
) -> JobOut:
    """Fail a claimed job's attempt; with `retryable` the queue's retry policy may run it again."""
    try:
        job = await workers(request).fail(
            principal.workspace_id,
            job_id,
            fencing(body.token),
            code=body.error_code,
            message=body.message,
            retryable=body.retryable,
            retry_after=body.retry_after_seconds,
        )
    except NotExternal:
        raise missing(job_id) from None
    except TokenRefused as exc:
        raise refused(exc) from None
    except DeadlinePassed as exc:
        raise too_late(exc) from None
    return JobOut.of(job)
