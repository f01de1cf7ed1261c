"""`Runtime`: the public face of the durable job runtime, usable without the HTTP server.

It registers handlers, owns the workers and the maintenance loops, and answers every question
other packages ask about jobs (depths, counts, cancel flags): nothing outside `jobs` reads the
jobs tables.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.jobs.fenced import FencedLeases
from deckyard.jobs.maintenance import Maintenance, Periodic
from deckyard.jobs.metrics import RuntimeMetrics
from deckyard.jobs.models import Job, JobEvent
from deckyard.jobs.policy import RecoveryPolicy, RetryPolicy
from deckyard.jobs.status import JobStatus
from deckyard.jobs.store import (
    NewJob,
    events_after,
    events_append,
    job_enqueue,
    job_enqueue_alone,
    job_get,
    jobs_enqueue,
)
from deckyard.jobs.store_admin import (
    job_cancel_flag,
    job_list,
    job_retry,
    jobs_active_count,
    jobs_active_descendants,
    jobs_cancel,
    jobs_count,
    jobs_depth,
    jobs_finished_after,
    jobs_prune,
)
from deckyard.jobs.waiters import EventFollowers, terminal_waiters
from deckyard.jobs.worker import Handler, HandlerFn, Worker
from deckyard.loop import Loop

log = logging.getLogger(__name__)

CancelHook = Callable[[AsyncConnection, list[int], datetime], Awaitable[None]]
"""Runs inside a cancel's transaction; it may run again if that transaction is retried."""
When = datetime | timedelta | float | None


class JobNotFound(LookupError):
    """No job has that id."""


class JobStateError(Exception):
    """The job is not in a state that allows the operation."""


class DedupeConflict(JobStateError):
    """A retry was refused: another active job of the queue holds the job's dedupe key."""

    def __init__(self, job_id: int, holder: int) -> None:
        super().__init__(
            f"job {job_id} cannot run again while active job {holder} holds its dedupe key; "
            f"cancel job {holder} or wait for it to end"
        )
        self.job_id = job_id
        self.holder = holder


_RETRYABLE = (JobStatus.FAILED, JobStatus.CANCELLED)
"""The statuses a job may be retried from."""


@dataclass(frozen=True)
class EnqueueSpec:
    """One job for `enqueue_many`."""

    kind: str
    payload: Any = None
    queue: str | None = None
    dedupe_key: str | None = None
    run_at: When = None
    deadline: When = None
    priority: int = 0
    parent_id: int | None = None
    workspace_id: str | None = None
    max_attempts: int | None = None


class Runtime:
    """Durable jobs on SQLite or PostgreSQL: handlers, workers, recovery, pruning, cron.

    ```python
    rt = Runtime("sqlite:///jobs.db")

    @rt.handler("resize", queue="images", max_attempts=5, timeout=30)
    async def resize(ctx: JobContext) -> dict:
        await ctx.emit("progress", {"pct": 50})
        return {"ok": ctx.payload["path"]}

    rt.worker(["images"], concurrency=4)
    async with rt:
        job = await rt.enqueue("resize", {"path": "a.png"})
        done = await rt.wait(job.id)
    ```
    """

    def __init__(
        self,
        database: str | Database | None = None,
        *,
        settings: Settings | None = None,
        clock: Clock = SYSTEM_CLOCK,
        migrate: bool = True,
    ) -> None:
        self.settings = settings or Settings.load()
        if isinstance(database, Database):
            self.db, self._owns_db = database, False
        else:
            self.db, self._owns_db = Database.from_settings(self.settings, url=database), True
        self.clock = clock
        self._migrate = migrate
        s = self.settings
        self.default_retry = RetryPolicy(
            max_attempts=s.job_default_max_attempts,
            base_delay=s.job_retry_base_delay_seconds,
            max_delay=s.job_retry_max_delay_seconds,
            jitter=s.job_retry_jitter,
        )
        self.recovery_policy = RecoveryPolicy(backoff=s.job_recovery_backoff_seconds)
        self.handlers: dict[str, Handler] = {}
        self.periodics: list[Periodic] = []
        self.workers: list[Worker] = []
        self.cancel_hooks: list[CancelHook] = []
        self.metrics = RuntimeMetrics()
        self.maintenance = Maintenance(
            self.db, s, clock, self.metrics, self.recovery_policy, self.periodics
        )
        self.waiters = terminal_waiters(self.db, s.job_idle_poll_ceiling_seconds)
        self.followers = EventFollowers(self.db, s.job_idle_poll_ceiling_seconds)
        self.fenced = FencedLeases(self.db, clock, self.default_retry)
        """Leases held by workers outside this process (the external-worker protocol)."""
        self.started = False

    # --- registration -------------------------------------------------------------------------

    def handler(
        self,
        kind: str,
        *,
        queue: str = "default",
        max_attempts: int | None = None,
        timeout: float | None = None,
        retry: RetryPolicy | None = None,
    ) -> Callable[[HandlerFn], HandlerFn]:
        """Register the decorated coroutine as the handler for `kind`."""

        def register(fn: HandlerFn) -> HandlerFn:
            policy = retry or self.default_retry
            self.handlers[kind] = Handler(
                kind, fn, queue, max_attempts or policy.max_attempts, timeout, policy
            )
            return fn

        return register

    def periodic(
        self,
        cron: str,
        kind: str,
        *,
        name: str | None = None,
        payload: Any = None,
        queue: str | None = None,
    ) -> Periodic:
        """Enqueue `kind` on every tick of `cron` (UTC), once per tick across all nodes."""
        handler = self.handlers.get(kind)
        p = Periodic(
            name=name or kind,
            cron=cron,
            kind=kind,
            queue=queue or (handler.queue if handler else "default"),
            payload=payload,
            max_attempts=handler.max_attempts if handler else self.default_retry.max_attempts,
        )
        self.periodics.append(p)
        return p

    def worker(self, queues: Sequence[str] | None = None, concurrency: int | None = None) -> Worker:
        """Add a worker for `queues` (default: every queue with a handler)."""
        names = list(queues) if queues else sorted({h.queue for h in self.handlers.values()})
        if not names:
            names = ["default"]
        w = Worker(self, names, concurrency or self.settings.job_concurrency)
        self.workers.append(w)
        if self.started:
            w.start()
        return w

    def on_cancel(self, hook: CancelHook) -> None:
        """Run `hook(conn, job_ids, now)` inside every cancel's transaction."""
        self.cancel_hooks.append(hook)

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def loops(self) -> list[Loop]:
        """Every loop this runtime runs, for readiness and metrics."""
        return self.maintenance.loops + [loop for w in self.workers for loop in w.loops]

    async def start(self, *, run_loops: bool = True) -> None:
        """Migrate (unless told not to), listen for wakeups, start every loop.

        With `run_loops=False` nothing runs in the background: the runtime only serves calls
        (for an instance checked before it takes traffic).
        """
        if self.started:
            return
        if not run_loops:
            if self._migrate:
                await upgrade(self.db)
            await self.db.start_listening()
            self.started = True
            return
        if self._migrate:
            await upgrade(self.db)
        await self.db.start_listening()
        self.maintenance.start()
        for w in self.workers:
            w.start()
        self.started = True
        log.info("job runtime started with loops: %s", ", ".join(lp.name for lp in self.loops))

    async def stop(self, grace: float | None = None) -> None:
        """Stop workers gracefully (see `Worker.stop`), then every loop and the waiters'
        reader; close the database."""
        if self.started:
            wait = self.settings.job_stop_grace_seconds if grace is None else grace
            await asyncio.gather(*(w.stop(wait) for w in self.workers))
            await self.maintenance.stop()
            self.started = False
        await self.waiters.close()
        if self._owns_db:
            await self.db.dispose()
        else:
            await self.db.stop_listening()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # --- jobs ---------------------------------------------------------------------------------

    def _when(self, value: When, now: datetime) -> datetime | None:
        if value is None or isinstance(value, datetime):
            return value
        if isinstance(value, timedelta):
            return now + value
        return now + timedelta(seconds=float(value))

    def _new_job(self, spec: EnqueueSpec, now: datetime) -> NewJob:
        handler = self.handlers.get(spec.kind)
        return NewJob(
            kind=spec.kind,
            queue=spec.queue or (handler.queue if handler else "default"),
            payload=spec.payload,
            max_attempts=spec.max_attempts
            or (handler.max_attempts if handler else self.default_retry.max_attempts),
            run_at=self._when(spec.run_at, now) or now,
            priority=spec.priority,
            dedupe_key=spec.dedupe_key,
            deadline_at=self._when(spec.deadline, now),
            parent_id=spec.parent_id,
            workspace_id=spec.workspace_id,
        )

    async def enqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        queue: str | None = None,
        dedupe_key: str | None = None,
        run_at: When = None,
        deadline: When = None,
        priority: int = 0,
        parent_id: int | None = None,
        workspace_id: str | None = None,
        max_attempts: int | None = None,
        conn: AsyncConnection | None = None,
    ) -> Job:
        """Enqueue one job (or return the active one with the same `dedupe_key`).

        `run_at` and `deadline` take a datetime, a timedelta or seconds from now. Pass `conn`
        to enqueue inside a write transaction you already hold.
        """
        spec = EnqueueSpec(
            kind,
            payload,
            queue,
            dedupe_key,
            run_at,
            deadline,
            priority,
            parent_id,
            workspace_id,
            max_attempts,
        )
        now = self.clock.now()
        new = self._new_job(spec, now)
        if conn is not None:
            job, _ = await job_enqueue(self.db, conn, new, now)
            return job
        taker = self._hand_off_worker(new, now)
        if taker is not None:
            return await taker.take_enqueued(new, now)
        if new.dedupe_key is None and self.settings.job_enqueue_one_hop:
            return await job_enqueue_alone(self.db, new, now)
        job, _ = await self.db.write(lambda tx: job_enqueue(self.db, tx, new, now))
        return job

    def _hand_off_worker(self, new: NewJob, now: datetime) -> Worker | None:
        """A running worker of this process that can take `new` as it is inserted, if any.

        Only a due job without dedupe key or passed deadline, of a kind with a handler here.
        """
        if (
            not self.started
            or not self.settings.job_hand_off
            or new.dedupe_key is not None
            or new.run_at > now
            or (new.deadline_at is not None and new.deadline_at <= now)
            or new.kind not in self.handlers
            or new.max_attempts < 1
        ):
            return None
        for w in self.workers:
            if new.queue in w.queues and w.has_free_slot():
                return w
        return None

    async def enqueue_many(self, specs: Iterable[EnqueueSpec]) -> list[Job]:
        """Enqueue many jobs in one transaction; returns them in order."""
        now = self.clock.now()
        items = [self._new_job(s, now) for s in specs]
        return await self.db.write(lambda conn: jobs_enqueue(self.db, conn, items, now))

    async def depths(self) -> dict[str, dict[str, int]]:
        """Active job counts per queue and status."""
        async with self.db.read_connection() as conn:
            return await jobs_depth(conn)

    async def counts(self) -> list[tuple[str, str, int]]:
        """(queue, status, count) over every job, finished ones included, for metrics."""
        async with self.db.read_connection() as conn:
            return await jobs_count(conn)

    async def finished_after(
        self,
        after: tuple[datetime, int],
        workspace_ids: Sequence[str],
        *,
        exclude_queues: Sequence[str] = (),
        limit: int = 500,
    ) -> list[Job]:
        """Jobs of these workspaces that ended after `after` (finished_at, id), oldest first.

        For followers of job ends outside the runtime (the webhook relay); payload and result
        are not read (None).
        """
        async with self.db.read_connection() as conn:
            return await jobs_finished_after(
                conn, after, workspace_ids, exclude_queues=exclude_queues, limit=limit
            )

    async def active_count(
        self, kind: str, workspace_id: str, *, conn: AsyncConnection | None = None
    ) -> tuple[int, int]:
        """Active jobs of `kind`: (everyone's, this workspace's); in `conn`'s transaction if given.

        Read under a lock the caller holds (e.g. the admission lock), it is the input of a queue
        limit that concurrent submissions cannot overshoot.
        """
        if conn is not None:
            return await jobs_active_count(conn, kind, workspace_id)
        async with self.db.read_connection() as own:
            return await jobs_active_count(own, kind, workspace_id)

    async def cancel_flag(
        self, job_id: int, conn: AsyncConnection, *, lock: bool = False
    ) -> tuple[JobStatus, bool]:
        """A job's status and whether a cancel was requested, in the caller's transaction.

        With `lock` the job's row stays locked until that transaction ends, so a cancel cannot
        slip in between this read and the caller's writes.
        """
        return await job_cancel_flag(conn, job_id, lock=lock)

    async def get(self, job_id: int, *, payload: bool = True) -> Job | None:
        """One job, or None; without `payload` the payload is not read (it is None)."""
        async with self.db.read_connection() as conn:
            return await job_get(conn, job_id, payload=payload)

    async def list(self, **filters: Any) -> list[Job]:
        """Jobs matching `queue`, `status`, `kind`, `workspace_id`, `parent_id`, newest first."""
        async with self.db.read_connection() as conn:
            return await job_list(conn, **filters)

    async def cancel(self, job_id: int) -> Job:
        """Cancel a job and its active descendants in one transaction.

        Pending jobs end `cancelled` at once; running ones get a cancel request that stops their
        handler now in this process, or at the next wakeup or heartbeat elsewhere.
        """
        now = self.clock.now()

        async def cancel_tree(conn: AsyncConnection) -> list[int]:
            if await job_get(conn, job_id) is None:
                raise JobNotFound(job_id)
            ids = [job_id, *await jobs_active_descendants(conn, job_id)]
            _, requested = await jobs_cancel(self.db, conn, ids, now)
            for hook in self.cancel_hooks:
                await hook(conn, ids, now)
            return requested

        requested = await self.db.write(cancel_tree)
        for w in self.workers:
            for i in requested:
                w.stop_job(i, "cancel")
        job = await self.get(job_id)
        assert job is not None
        return job

    async def retry(self, job_id: int) -> Job:
        """Run a failed or cancelled job again with a fresh attempt budget.

        Raises `JobStateError` when the job is active or succeeded, and `DedupeConflict` when
        another active job of its queue now holds its dedupe key.
        """

        async def retry(conn: AsyncConnection) -> None:
            for _ in range(3):
                done = await job_retry(self.db, conn, job_id, self.clock.now())
                if done.retried:
                    return
                if done.status is None:
                    raise JobNotFound(job_id)
                if done.dedupe_holder is not None:
                    raise DedupeConflict(job_id, done.dedupe_holder)
                if done.status not in _RETRYABLE:
                    raise JobStateError(
                        f"job {job_id} is {done.status}; only failed or cancelled jobs can be "
                        "retried"
                    )
            raise JobStateError(f"job {job_id} kept changing while being retried; try again")

        await self.db.write(retry)
        job = await self.get(job_id)
        assert job is not None
        return job

    async def delete_finished(self, job_ids: Sequence[int]) -> int:
        """Delete these jobs and their events now, those that finished; returns how many.

        For jobs whose record nobody keeps (a validation's renders); others wait for pruning.
        """
        return await self.db.write(lambda conn: jobs_prune(conn, job_ids))

    async def emit(self, job_id: int, event_type: str, data: Any = None) -> None:
        """Append an event to a job's log."""
        now = self.clock.now()
        await self.db.write(
            lambda conn: events_append(self.db, conn, [(job_id, event_type, data)], now)
        )

    async def events(
        self, job_id: int, *, after_id: int = 0, follow: bool = True
    ) -> AsyncIterator[JobEvent]:
        """A job's events; with `follow`, keeps waiting for new ones until the job ends.

        Waiting is on the event wakeup (in process or NOTIFY), never a fast poll; the job's
        status is read before its events, so the last events are never missed. Every follower
        of this runtime shares one reader (`EventFollowers`): two reads per wake, not two per
        follower.
        """
        if follow:
            async for ev in self.followers.follow(job_id, after_id):
                yield ev
            return
        while True:
            async with self.db.read_connection() as conn:
                batch = await events_after(conn, job_id, after_id)
            for ev in batch:
                after_id = ev.id
                yield ev
            if not batch:
                return

    async def wait(self, job_id: int, timeout: float | None = None) -> Job:
        """Wait until the job is terminal and return it; woken by its events, never polling fast.

        Every waiter of this runtime shares one reader (`terminal_waiters`), so many concurrent
        waits cost one read per event, not one per waiter.
        """
        async with asyncio.timeout(timeout):
            job = await self.waiters.wait(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job
