"""`Runtime`: the public face of the durable job runtime, usable without the HTTP server."""

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
from deckyard.jobs.context import JobContext
from deckyard.jobs.loop import ACTIVE, IDLE, MORE, Loop, Tick
from deckyard.jobs.metrics import RuntimeMetrics
from deckyard.jobs.models import Job, JobEvent
from deckyard.jobs.periodic import Periodic, periodic_enqueue_tick
from deckyard.jobs.policy import RecoveryPolicy, RetryPolicy
from deckyard.jobs.prune import job_prune
from deckyard.jobs.queue import (
    WAKE_EVENTS,
    NewJob,
    event_insert_many,
    events_after,
    job_active_descendants,
    job_cancel,
    job_depths,
    job_get,
    job_insert,
    job_insert_many,
    job_list,
    job_retry,
)
from deckyard.jobs.recovery import lease_next_expiry, recover_expired
from deckyard.jobs.worker import Worker

log = logging.getLogger(__name__)

HandlerFn = Callable[[JobContext], Awaitable[Any]]
CancelHook = Callable[[AsyncConnection, list[int], datetime], Awaitable[None]]
When = datetime | timedelta | float | None


class JobNotFound(LookupError):
    """No job has that id."""


class JobStateError(Exception):
    """The job is not in a state that allows the operation."""


@dataclass(frozen=True)
class Handler:
    """A registered handler for one kind."""

    kind: str
    fn: HandlerFn
    queue: str
    max_attempts: int
    timeout: float | None
    retry: RetryPolicy


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
        self._loops: list[Loop] = []
        self._periodic_next: dict[str, datetime] = {}
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
        return self._loops + [loop for w in self.workers for loop in w.loops]

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
        s = self.settings
        self._loops = [
            Loop.configured(
                "recovery",
                self._recovery_tick,
                s,
                poll_interval=s.job_poll_interval_seconds,
                idle_ceiling=s.job_idle_poll_ceiling_seconds,
                clock=self.clock,
            ),
            Loop.configured(
                "prune",
                self._prune_tick,
                s,
                poll_interval=s.job_prune_interval_seconds,
                idle_ceiling=s.job_prune_interval_seconds,
                clock=self.clock,
            ),
        ]
        if self.periodics:
            now = self.clock.now()
            self._periodic_next = {p.name: p.next_tick(now) for p in self.periodics}
            self._loops.append(
                Loop.configured(
                    "periodic",
                    self._periodic_tick,
                    s,
                    poll_interval=s.job_periodic_check_seconds,
                    idle_ceiling=s.job_idle_poll_ceiling_seconds,
                    clock=self.clock,
                )
            )
        for loop in self._loops:
            loop.start()
        for w in self.workers:
            w.start()
        self.started = True
        log.info("job runtime started with loops: %s", ", ".join(lp.name for lp in self.loops))

    async def stop(self, grace: float | None = None) -> None:
        """Stop workers gracefully (see `Worker.stop`), then every loop; close the database."""
        if self.started:
            wait = self.settings.job_stop_grace_seconds if grace is None else grace
            await asyncio.gather(*(w.stop(wait) for w in self.workers))
            for loop in self._loops:
                await loop.stop()
            self.started = False
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

    # --- loops --------------------------------------------------------------------------------

    async def _recovery_tick(self) -> Tick:
        now = self.clock.now()
        nearest, unleased = await lease_next_expiry(self.db)
        if nearest is None and not unleased:
            return IDLE
        if unleased or (nearest is not None and nearest <= now):
            outcome = await recover_expired(self.db, self.recovery_policy, now)
            for name, ids in outcome.items():
                self.metrics.recoveries[name] += len(ids)
            return MORE if any(outcome.values()) else ACTIVE
        assert nearest is not None
        return Tick(due_in=(nearest - now).total_seconds())

    async def _prune_tick(self) -> Tick:
        s = self.settings
        n = await job_prune(
            self.db, self.clock.now(), s.job_retention_seconds, s.job_prune_batch_size
        )
        self.metrics.pruned += n
        return MORE if n >= s.job_prune_batch_size else IDLE

    async def _periodic_tick(self) -> Tick:
        now = self.clock.now()
        due_in = self.settings.job_idle_poll_ceiling_seconds
        for p in self.periodics:
            tick = self._periodic_next[p.name]
            if tick <= now:
                latest = p.previous_tick(now) if p.next_tick(tick) <= now else tick
                if await periodic_enqueue_tick(self.db, p, latest, now):
                    self.metrics.periodic_enqueued += 1
                self._periodic_next[p.name] = tick = p.next_tick(latest)
            due_in = min(due_in, (tick - now).total_seconds())
        return Tick(due_in=due_in)

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
        if conn is not None:
            job, _ = await job_insert(self.db, conn, self._new_job(spec, now), now)
            return job
        async with self.db.write_transaction() as tx:
            job, _ = await job_insert(self.db, tx, self._new_job(spec, now), now)
        return job

    async def enqueue_many(self, specs: Iterable[EnqueueSpec]) -> list[Job]:
        """Enqueue many jobs in one transaction; returns them in order."""
        now = self.clock.now()
        items = [self._new_job(s, now) for s in specs]
        async with self.db.write_transaction() as conn:
            return await job_insert_many(self.db, conn, items, now)

    async def depths(self) -> dict[str, dict[str, int]]:
        """Active job counts per queue and status."""
        async with self.db.read_connection() as conn:
            return await job_depths(conn)

    async def get(self, job_id: int) -> Job | None:
        """One job, or None."""
        async with self.db.read_connection() as conn:
            return await job_get(conn, job_id)

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
        async with self.db.write_transaction() as conn:
            if await job_get(conn, job_id) is None:
                raise JobNotFound(job_id)
            ids = [job_id, *await job_active_descendants(conn, job_id)]
            _, requested = await job_cancel(self.db, conn, ids, now)
            for hook in self.cancel_hooks:
                await hook(conn, ids, now)
        for w in self.workers:
            for i in requested:
                w.stop_job(i, "cancel")
        job = await self.get(job_id)
        assert job is not None
        return job

    async def retry(self, job_id: int) -> Job:
        """Run a failed or cancelled job again with a fresh attempt budget."""
        async with self.db.write_transaction() as conn:
            job = await job_get(conn, job_id)
            if job is None:
                raise JobNotFound(job_id)
            if not await job_retry(self.db, conn, job_id, self.clock.now()):
                raise JobStateError(
                    f"job {job_id} is {job.status}; only failed or cancelled jobs can be retried"
                )
        job = await self.get(job_id)
        assert job is not None
        return job

    async def emit(self, job_id: int, event_type: str, data: Any = None) -> None:
        """Append an event to a job's log."""
        async with self.db.write_transaction() as conn:
            await event_insert_many(self.db, conn, [(job_id, event_type, data)], self.clock.now())

    async def events(
        self, job_id: int, *, after_id: int = 0, follow: bool = True
    ) -> AsyncIterator[JobEvent]:
        """A job's events; with `follow`, keeps waiting for new ones until the job ends.

        Waiting is on the event wakeup (in process or NOTIFY), never a fast poll; the job's
        status is read before its events, so the last events are never missed.
        """
        sub = self.db.bus.subscribe(WAKE_EVENTS)
        try:
            while True:
                async with self.db.read_connection() as conn:
                    job = await job_get(conn, job_id)
                    batch = await events_after(conn, job_id, after_id)
                for ev in batch:
                    after_id = ev.id
                    yield ev
                if batch:
                    continue
                if job is None or job.is_terminal or not follow:
                    return
                await sub.wait(self.settings.job_idle_poll_ceiling_seconds)
        finally:
            sub.close()

    async def wait(self, job_id: int, timeout: float | None = None) -> Job:
        """Wait until the job is terminal and return it; woken by its events, never polling fast."""
        sub = self.db.bus.subscribe(WAKE_EVENTS)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    job = await self.get(job_id)
                    if job is None:
                        raise JobNotFound(job_id)
                    if job.is_terminal:
                        return job
                    await sub.wait(self.settings.job_idle_poll_ceiling_seconds)
        finally:
            sub.close()
