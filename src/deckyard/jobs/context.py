"""What a handler receives: the job, its cancel signal, its deadline, `emit`, and slot lending."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.jobs.models import Job

OnSuccess = Callable[[AsyncConnection], Awaitable[Any]]
Emit = Callable[[int, str, Any], Awaitable[None]]
"""`emit(job_id, event_type, data)`: append an event to a job's log (`Runtime.emit`)."""
T = TypeVar("T")


class SlotLender(Protocol):
    """What lends a job's worker slot out while it waits (a worker's `Slots`)."""

    def released(self, job_id: int) -> AbstractAsyncContextManager[bool]:
        """Hold no slot for `job_id` inside the block; yields whether it was given back."""


@dataclass
class JobContext:
    """A handler's view of its job attempt."""

    job: Job
    clock: Clock
    emitter: Emit
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    on_success_hooks: list[OnSuccess] = field(default_factory=list)
    slots: SlotLender | None = None

    @property
    def id(self) -> int:
        """The job id."""
        return self.job.id

    @property
    def attempt(self) -> int:
        """Which execution this is, from 1."""
        return self.job.attempt

    @property
    def payload(self) -> Any:
        """The job's payload."""
        return self.job.payload

    @property
    def deadline_at(self) -> datetime | None:
        """When the whole job must be over, across attempts."""
        return self.job.deadline_at

    def remaining(self) -> float | None:
        """Seconds left before the job's deadline, or None without one."""
        if self.job.deadline_at is None:
            return None
        return (self.job.deadline_at - self.clock.now()).total_seconds()

    async def emit(self, event_type: str, data: Any = None) -> None:
        """Append an event to the job's log (seen by `events()` and SSE streams)."""
        await self.emitter(self.job.id, event_type, data)

    def on_success(self, fn: OnSuccess) -> None:
        """Run `fn(conn)` inside the transaction that records this attempt's success.

        `fn` runs just before the finish compare-and-set, in the same savepoint: if the CAS is
        lost (lease expired, job cancelled, deadline passed) its writes are rolled back, so they
        happen exactly once per successful job. It may update the result dict the handler
        returned (that is what gets stored); a `JobError` it raises fails the job with its code.
        """
        self.on_success_hooks.append(fn)

    def slot_released(self) -> AbstractAsyncContextManager[bool]:
        """Give this job's worker slot back while the block awaits; take one back after it.

        For a wait that does no work (children, a render request): the worker runs other jobs
        in the slot meanwhile, so parents cannot starve their own children. The lease is
        still held and heartbeated, and a cancel or deadline ends the wait as before. Leaving
        the block normally (or by an exception other than `CancelledError`) waits for a free
        slot before the handler continues. Yields False, and keeps the slot, when the worker
        already has `job_max_suspended` jobs waiting without one, or outside a worker.
        """
        if self.slots is None:
            return contextlib.nullcontext(False)
        return self.slots.released(self.job.id)

    async def wait_released(self, awaitable: Awaitable[T]) -> T:
        """`await awaitable` inside `slot_released()`."""
        async with self.slot_released():
            return await awaitable


_CURRENT: ContextVar[JobContext | None] = ContextVar("deckyard_job", default=None)


def current_job() -> JobContext | None:
    """The context of the job whose handler runs this code (in its task or tasks it made)."""
    return _CURRENT.get()


def set_current_job(ctx: JobContext) -> None:
    """Make `ctx` the current job of the running task (the worker does, as a handler starts)."""
    _CURRENT.set(ctx)


def slot_released() -> AbstractAsyncContextManager[bool]:
    """`current_job().slot_released()`, or a no-op outside a job handler (an API request)."""
    ctx = current_job()
    return contextlib.nullcontext(False) if ctx is None else ctx.slot_released()


class JobError(Exception):
    """An error a handler raises to choose the job's error code and whether to retry.

    `retry_after` is the least delay before the next attempt (a server's `Retry-After`): the
    retry waits for the longer of it and the queue's backoff.
    """

    def __init__(
        self,
        code: str,
        message: str = "",
        *,
        retryable: bool = True,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message or code)
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after
