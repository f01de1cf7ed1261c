"""A worker: claims jobs into free slots, runs handlers, heartbeats, and settles in batches.

Three loops per worker, all on `Loop`: `claim` (wakes on enqueue and on a freed slot), `beat`
(one UPDATE per interval for every lease it holds; silent with nothing running) and `settle`
(finishes queued up while a previous flush ran are committed together: a group commit).

Prefetch: while its jobs are short, a claim takes jobs beyond the free slots (enough to cover
two claim round trips at the current completion rate, `job_prefetch` to `job_prefetch_max`);
they wait in a local buffer (their leases heartbeated with the running ones) and a freed slot
starts the next one at once, without a round trip. On stop the buffer is handed back with
the attempt the claim counted (`jobs_unclaim`); after a crash, recovery takes them like any
expired lease.

Slots: a handler that waits for children gives its slot back for the wait
(`JobContext.slot_released`, kept in `slots.py`); the worker claims into the freed slot, and the
waiter takes a slot back, before any claimed job starts, once its wait is over.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard import tracing
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs.actor import acting_as
from deckyard.jobs.context import JobContext, JobError, OnSuccess, set_current_job
from deckyard.jobs.metrics import RuntimeMetrics
from deckyard.jobs.models import Job
from deckyard.jobs.policy import RetryPolicy
from deckyard.jobs.slots import Slots, SlotStats
from deckyard.jobs.status import EventType, JobErrorCode, JobStatus
from deckyard.jobs.store import (
    WAKE_CANCEL,
    WAKE_JOBS,
    NewJob,
    events_append,
    job_claim,
    job_enqueue_claimed,
    job_fail,
    job_hand_off,
    job_next_due,
    jobs_cancel_requested,
    jobs_complete,
    jobs_fail_overdue,
    jobs_release,
    jobs_settle_claim,
    jobs_unclaim,
    lease_extend,
    wake_channel,
)
from deckyard.loop import ACTIVE, IDLE, MORE, Loop, Tick

log = logging.getLogger(__name__)
StopReason = Literal["cancel", "lease_lost", "shutdown"]
HandlerFn = Callable[[JobContext], Awaitable[Any]]


@dataclass(frozen=True)
class Handler:
    """A registered handler for one kind."""

    kind: str
    fn: HandlerFn
    queue: str
    max_attempts: int
    timeout: float | None
    retry: RetryPolicy


class WorkerHost(Protocol):
    """What a worker needs from its runtime (`Runtime` is one): a protocol, so no import cycle."""

    db: Database
    settings: Settings
    clock: Clock
    metrics: RuntimeMetrics
    handlers: dict[str, Handler]
    default_retry: RetryPolicy

    async def emit(self, job_id: int, event_type: str, data: Any = None) -> None:
        """Append an event to a job's log."""


@dataclass
class Outcome:
    """How one attempt ended, waiting to be settled."""

    job: Job
    kind: Literal["success", "failure", "release", "unclaim"]
    result: Any = None
    code: str = ""
    message: str = ""
    retryable: bool = False
    retry_after: float | None = None
    hooks: list[OnSuccess] = field(default_factory=list)


@dataclass
class Running:
    """A job attempt in progress in this worker."""

    job: Job
    ctx: JobContext
    task: asyncio.Task[None] | None = None
    reason: StopReason | None = None


def make_owner() -> str:
    """A lease owner id unique to this worker: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    """Runs jobs from `queues` with at most `concurrency` of them holding a slot at once."""

    def __init__(self, runtime: WorkerHost, queues: Sequence[str], concurrency: int) -> None:
        self.runtime = runtime
        self.queues = list(queues)
        self.concurrency = concurrency
        self.owner = make_owner()
        self.running: dict[int, Running] = {}
        """Every job this worker runs and heartbeats, suspended ones included."""
        self.slots = Slots(
            concurrency,
            runtime.settings.job_max_suspended,
            lambda: len(self.running),
            self._slot_freed,
            self._is_ending,
        )
        self.buffer: deque[Job] = deque()
        """Claimed jobs waiting for a slot (prefetch)."""
        self._avg_run = 0.0
        """Moving average of this worker's handler run times, seconds: gates prefetch."""
        self._avg_claim = 0.0
        """Moving average of this worker's claim round trips, seconds: sizes prefetch."""
        self._last_plain = True
        """Whether the last claim tick's batch held plain successes only (a cheap settle)."""
        self._outcomes: list[Outcome] = []
        self._stopping = False
        self._maybe_more = False
        self._last_beat: float | None = None
        self._outcomes_since = 0.0
        s = runtime.settings
        bus = runtime.db.bus
        self._cancel_sub = bus.subscribe(WAKE_CANCEL)
        self._beat_sub = bus.subscribe(WAKE_CANCEL)
        self._queue_channels = {wake_channel(q) for q in self.queues}
        self._jobs_sub = bus.subscribe(WAKE_JOBS, *sorted(self._queue_channels))
        name = f"worker[{','.join(self.queues)}]"
        self.claim_loop = Loop.configured(
            f"{name}.claim",
            self._claim_tick,
            s,
            subscription=self._jobs_sub,
            poll_interval=s.job_poll_interval_seconds,
            idle_ceiling=s.job_claim_idle_ceiling_seconds,
            clock=runtime.clock,
        )
        self.beat_loop = Loop.configured(
            f"{name}.heartbeat",
            self._beat_tick,
            s,
            subscription=self._beat_sub,
            poll_interval=s.job_heartbeat_interval_seconds,
            idle_ceiling=s.job_idle_poll_ceiling_seconds,
            clock=runtime.clock,
        )
        self.settle_loop = Loop.configured(
            f"{name}.settle",
            self._settle_tick,
            s,
            poll_interval=s.job_poll_interval_seconds,
            idle_ceiling=s.job_idle_poll_ceiling_seconds,
            clock=runtime.clock,
        )

    @property
    def loops(self) -> list[Loop]:
        """This worker's loops."""
        return [self.claim_loop, self.beat_loop, self.settle_loop]

    def start(self) -> None:
        """Start claiming."""
        for loop in self.loops:
            loop.start()

    async def stop(self, grace: float) -> None:
        """Stop claiming, let running jobs finish for `grace` seconds, then hand the rest back."""
        self._stopping = True
        await self.claim_loop.stop()
        self._hand_back_buffer()
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for job_id in list(self.running):
            self.stop_job(job_id, "shutdown")
        remaining = [r.task for r in self.running.values() if r.task is not None]
        if remaining:
            await asyncio.gather(*remaining, return_exceptions=True)
        await self.settle_loop.stop()
        while self._outcomes:
            await self._settle_tick()
        await self.beat_loop.stop()
        for sub in (self._cancel_sub, self._beat_sub, self._jobs_sub):
            sub.close()

    def stop_job(self, job_id: int, reason: StopReason) -> None:
        """Cancel a running handler's task, remembering why."""
        running = self.running.get(job_id)
        if running is None or running.reason is not None or running.task is None:
            return
        running.reason = reason
        running.ctx.cancelled.set()
        running.task.cancel()

    @property
    def occupied(self) -> int:
        """Running jobs that hold a slot (at most `concurrency`)."""
        return self.slots.occupied

    @property
    def suspended(self) -> set[int]:
        """Running jobs waiting without a slot."""
        return self.slots.suspended

    @property
    def stats(self) -> SlotStats:
        """This worker's slot figures."""
        return self.slots.stats

    def _is_ending(self, job_id: int) -> bool:
        running = self.running.get(job_id)
        task = running.task if running is not None else None
        return task is None or task.done() or task.cancelling() > 0

    def _slot_freed(self) -> None:
        self._fill_slots()
        self.claim_loop.poke()

    def has_free_slot(self) -> bool:
        """True when a job handed over now would start at once (nothing claimed waits)."""
        return (
            self.claim_loop.alive
            and not self._stopping
            and not self.buffer
            and self.slots.free() > 0
        )

    async def take_enqueued(self, new: NewJob, now: datetime) -> Job:
        """Insert `new` claimed by this worker and start it: the in-process hand-off."""
        rt = self.runtime
        self.slots.reserved += 1
        try:
            lease = rt.settings.job_lease_seconds
            if rt.db.has_db_thread or rt.settings.job_one_hop:
                job = await job_hand_off(rt.db, new, now, self.owner, lease)
            else:
                job = await rt.db.write(
                    lambda conn: job_enqueue_claimed(rt.db, conn, new, now, self.owner, lease)
                )
        finally:
            self.slots.reserved -= 1
        rt.metrics.claims += 1
        rt.metrics.claim_latency.observe(0.0)
        if self._stopping:
            self._queue_outcome(Outcome(job, "unclaim"))
        else:
            self._start(job)
            self.beat_loop.poke()
        return job

    def _hand_back_buffer(self) -> None:
        while self.buffer:
            self._queue_outcome(Outcome(self.buffer.popleft(), "unclaim"))

    def _prefetch(self) -> int:
        """How many jobs to buffer beyond the free slots: cover two claim round trips.

        At `concurrency / avg_run` completions a second, a round trip of `avg_claim` seconds
        empties `concurrency * avg_claim / avg_run` buffered jobs; twice that keeps slots busy
        while one claim is in flight, within [`job_prefetch`, `job_prefetch_max`]. Only while
        the worker's batches are plain successes: settling hooks costs statements per job, so
        a bigger batch would lengthen the very round trip it is meant to cover (and hold the
        SQLite writer lock, and so the heartbeat, for longer); nor while round trips are slow
        next to the lease.
        """
        s = self.runtime.settings
        if s.job_prefetch == 0 or self._avg_run > s.job_prefetch_max_job_seconds:
            return 0
        slow = self._avg_claim * 8 > s.job_lease_seconds
        if s.job_prefetch_max <= s.job_prefetch or not self._last_plain or slow:
            return s.job_prefetch
        need = 2 * self.concurrency * self._avg_claim / max(self._avg_run, 1e-5)
        return max(s.job_prefetch, min(math.ceil(need), s.job_prefetch_max))

    def _fill_slots(self) -> None:
        self.slots.grant()
        while self.buffer and self.slots.free() > 0 and not self._stopping:
            self._start(self.buffer.popleft())

    # --- claim --------------------------------------------------------------------------------

    async def _claim_tick(self) -> Tick:
        rt = self.runtime
        now = rt.clock.now()
        self._fill_slots()
        prefetch = self._prefetch()
        free = (
            self.concurrency
            + prefetch
            - self.slots.occupied
            - self.slots.resuming
            - len(self.buffer)
            - self.slots.reserved
        )
        if prefetch and len(self.buffer) * 2 > prefetch and not self._stopping:
            # Low water: more than half the prefetch is still buffered, so the slots are covered
            # for a round trip. Claim (and settle) once it has drained to half, or once the
            # oldest outcome has waited a round trip, in one bigger batch rather than one small
            # transaction per finished job. A finished job pokes this loop.
            waited = rt.clock.monotonic() - self._outcomes_since if self._outcomes else 0.0
            if waited < self._avg_claim:
                poll = rt.settings.job_poll_interval_seconds
                later = self._avg_claim - waited if self._outcomes else poll
                return Tick(active=True, due_in=later)
        can_claim = not self._stopping and free > 0
        idle = IDLE
        if self._jobs_sub.take_hits() & self._queue_channels:
            self._maybe_more = True  # new work on our queues: claim without looking first
        if can_claim and not self._maybe_more:
            async with rt.db.read_connection() as conn:
                due = await job_next_due(conn, self.queues)
            if due is None or due > now:
                can_claim = False
                idle = IDLE if due is None else Tick(due_in=(due - now).total_seconds())
        if not can_claim and not self._outcomes:
            return idle
        free = free if can_claim else 0
        lease = rt.settings.job_lease_seconds
        batch, self._outcomes = self._outcomes, []

        async def settle_and_claim(conn: AsyncConnection) -> tuple[dict[int, str], list[Job]]:
            events: list[tuple[int, str, Any]] = []
            settled = await self._settle_in(conn, batch, now, events) if batch else {}
            claimed = (
                await job_claim(conn, self.queues, free, self.owner, now, lease) if free else []
            )
            overdue = [j for j in claimed if j.deadline_at is not None and j.deadline_at <= now]
            if overdue:
                await jobs_fail_overdue(conn, overdue, now)
            events += [
                (j.id, EventType.STARTED.value, {"attempt": j.attempt})
                for j in claimed
                if j not in overdue
            ]
            events += [
                (j.id, EventType.FAILED.value, {"error_code": "DEADLINE_EXCEEDED"}) for j in overdue
            ]
            await events_append(rt.db, conn, events, now)
            return settled, claimed

        began = rt.clock.monotonic()
        if batch:
            self._last_plain = self._plain(batch)
        try:
            if self._one_hop(batch):
                done = [(o.job.id, o.job.attempt, o.result) for o in batch]
                settled, claimed = await jobs_settle_claim(
                    rt.db, self.owner, done, self.queues, free, now, lease
                )
            else:
                settled, claimed = await rt.db.write(settle_and_claim)
        except BaseException:
            self._outcomes[:0] = batch
            raise
        if free:
            self._avg_claim += (rt.clock.monotonic() - began - self._avg_claim) * 0.2
        self._account(batch, settled)
        self._maybe_more = bool(free) and len(claimed) == free
        runnable = [j for j in claimed if j.deadline_at is None or j.deadline_at > now]
        rt.metrics.claims += len(runnable)
        for job in runnable:
            rt.metrics.claim_latency.observe(max((now - job.run_at).total_seconds(), 0.0))
            self.buffer.append(job)
        if self._stopping:
            self._hand_back_buffer()
        self._fill_slots()
        if runnable:
            self.beat_loop.poke()
        return ACTIVE if claimed else idle

    @staticmethod
    def _plain(batch: list[Outcome]) -> bool:
        """True when the batch holds plain successes only (no hook, no failure or release)."""
        return all(o.kind == "success" and not o.hooks for o in batch)

    def _one_hop(self, batch: list[Outcome]) -> bool:
        """True when `jobs_settle_claim` can record the whole batch: plain successes only."""
        return self._one_hop_on() and self._plain(batch)

    def _one_hop_on(self) -> bool:
        s, db = self.runtime.settings, self.runtime.db
        return s.job_one_hop if db.supports_writable_ctes else s.job_one_hop_sqlite

    def _start(self, job: Job) -> None:
        ctx = JobContext(
            job=job, clock=self.runtime.clock, emitter=self.runtime.emit, slots=self.slots
        )
        running = Running(job=job, ctx=ctx)
        self.running[job.id] = running
        self.slots.started()
        running.task = asyncio.create_task(self._execute(running), name=f"job:{job.id}")

    def _queue_outcome(self, outcome: Outcome) -> None:
        if not self._outcomes:
            self._outcomes_since = self.runtime.clock.monotonic()
        self._outcomes.append(outcome)
        self.settle_loop.poke()

    async def _execute(self, running: Running) -> None:
        job, ctx = running.job, running.ctx
        outcome: Outcome | None = None
        began = self.runtime.clock.monotonic()
        set_current_job(ctx)
        try:
            outcome = await self._call_handler(job, ctx)
        except asyncio.CancelledError:
            if running.reason == "cancel":
                outcome = Outcome(
                    job,
                    "failure",
                    code=JobErrorCode.CANCELLED.value,
                    message="cancelled while running",
                )
            elif running.reason == "lease_lost":
                log.warning("job %d attempt %d: lease lost; result discarded", job.id, job.attempt)
                self.runtime.metrics.lost_cas += 1
            else:
                outcome = Outcome(job, "release")
        finally:
            self.running.pop(job.id, None)
            self.slots.ended(job.id)
            took = self.runtime.clock.monotonic() - began
            self._avg_run += (took - self._avg_run) * 0.2
            if outcome is not None:
                self._queue_outcome(outcome)
            self._fill_slots()
            self.claim_loop.poke()

    async def _call_handler(self, job: Job, ctx: JobContext) -> Outcome:
        handler = self.runtime.handlers.get(job.kind)
        if handler is None:
            return Outcome(
                job,
                "failure",
                code=JobErrorCode.NO_HANDLER.value,
                message=f"no handler registered for kind {job.kind!r}",
            )
        timeout = handler.timeout
        remaining = ctx.remaining()
        by_deadline = remaining is not None and (timeout is None or remaining <= timeout)
        if by_deadline:
            timeout = max(remaining or 0.0, 0.0)
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                with acting_as(job.actor_token_id), tracing.job_span(job):
                    result = await handler.fn(ctx)
        except TimeoutError:
            if not scope.expired():
                raise
            if by_deadline:
                return Outcome(
                    job,
                    "failure",
                    code=JobErrorCode.DEADLINE_EXCEEDED.value,
                    message="the job's deadline passed while it ran",
                )
            return Outcome(
                job,
                "failure",
                code=JobErrorCode.TIMEOUT.value,
                retryable=True,
                message=f"handler exceeded its {handler.timeout}s timeout",
            )
        except JobError as exc:
            return Outcome(
                job,
                "failure",
                code=exc.code,
                message=str(exc),
                retryable=exc.retryable,
                retry_after=exc.retry_after,
            )
        except Exception as exc:
            log.warning(
                "job %d (%s) attempt %d failed", job.id, job.kind, job.attempt, exc_info=True
            )
            return Outcome(
                job,
                "failure",
                code=JobErrorCode.HANDLER_ERROR.value,
                message=f"{type(exc).__name__}: {exc}",
                retryable=True,
            )
        return Outcome(job, "success", result=result, hooks=list(ctx.on_success_hooks))

    # --- heartbeat ----------------------------------------------------------------------------

    async def _beat_tick(self) -> Tick:
        rt = self.runtime
        interval = rt.settings.job_heartbeat_interval_seconds
        cancel_woken = await self._cancel_sub.wait(0)
        if not self.running and not self.buffer:
            self._last_beat = None
            return IDLE
        mono = rt.clock.monotonic()
        if self._last_beat is None:
            self._last_beat = mono
        elif mono - self._last_beat >= interval * 0.98:
            held = [(r.job.id, r.job.attempt) for r in self.running.values()]
            held += [(j.id, j.attempt) for j in self.buffer]
            lease = rt.settings.job_lease_seconds
            beat = await rt.db.write(
                lambda conn: lease_extend(conn, self.owner, held, rt.clock.now(), lease)
            )
            rt.metrics.heartbeats += 1
            self._last_beat = mono
            for job_id, _ in held:
                if job_id not in beat.extended:
                    self.stop_job(job_id, "lease_lost")
            self._drop_buffered({i for i, _ in held} - beat.extended, beat.cancel_requested)
            for job_id in beat.cancel_requested:
                self.stop_job(job_id, "cancel")
        elif cancel_woken:
            async with rt.db.read_connection() as conn:
                asked = await jobs_cancel_requested(
                    conn, [*self.running, *(j.id for j in self.buffer)]
                )
            self._drop_buffered(set(), asked)
            for job_id in asked:
                self.stop_job(job_id, "cancel")
        return Tick(due_in=max(interval - (rt.clock.monotonic() - self._last_beat), 0.0))

    def _drop_buffered(self, lost: set[int], cancelled: set[int]) -> None:
        """Take buffered jobs out: lost leases silently, cancel requests as cancelled failures."""
        if not self.buffer or not (lost or cancelled):
            return
        keep: deque[Job] = deque()
        for job in self.buffer:
            if job.id in lost:
                log.warning("job %d attempt %d: lease lost while buffered", job.id, job.attempt)
                self.runtime.metrics.lost_cas += 1
            elif job.id in cancelled:
                self._queue_outcome(
                    Outcome(
                        job,
                        "failure",
                        code=JobErrorCode.CANCELLED.value,
                        message="cancelled before it started",
                    )
                )
            else:
                keep.append(job)
        self.buffer = keep

    # --- settle -------------------------------------------------------------------------------

    async def _settle_tick(self) -> Tick:
        """Settle what the claim loop did not: it normally settles inside its own claim."""
        if not self._outcomes:
            return IDLE
        waited = self.runtime.clock.monotonic() - self._outcomes_since
        grace = self.runtime.settings.job_poll_interval_seconds
        if self.claim_loop.alive and not self._stopping and waited < grace:
            return Tick(due_in=grace - waited)
        batch, self._outcomes = self._outcomes, []

        async def settle(conn: AsyncConnection) -> dict[int, str]:
            events: list[tuple[int, str, Any]] = []
            now = self.runtime.clock.now()
            statuses = await self._settle_in(conn, batch, now, events)
            await events_append(self.runtime.db, conn, events, now)
            return statuses

        try:
            if self._one_hop(batch):
                done = [(o.job.id, o.job.attempt, o.result) for o in batch]
                statuses, _ = await jobs_settle_claim(
                    self.runtime.db, self.owner, done, self.queues, 0, self.runtime.clock.now(), 0
                )
            else:
                statuses = await self.runtime.db.write(settle)
        except BaseException:
            self._outcomes[:0] = batch
            raise
        self._account(batch, statuses)
        return MORE if self._outcomes else ACTIVE

    async def _settle_in(
        self,
        conn: AsyncConnection,
        batch: list[Outcome],
        now: datetime,
        events: list[tuple[int, str, Any]],
    ) -> dict[int, str]:
        """Record a batch of outcomes in the caller's transaction; their events go to `events`.

        Touches nothing but `conn`, `events` and the returned statuses: `Database.write` may run
        it again after a conflict.
        """
        db = self.runtime.db
        statuses: dict[int, str] = {}
        plain = [o for o in batch if o.kind == "success" and not o.hooks]
        if plain:
            statuses.update(
                await jobs_complete(
                    conn, self.owner, [(o.job.id, o.job.attempt, o.result) for o in plain], now
                )
            )
        failures = [o for o in batch if o.kind == "failure"]
        for o in (o for o in batch if o.kind == "success" and o.hooks):
            failed = await self._complete_with_hooks(conn, o, now, statuses)
            if failed is not None:
                failures.append(failed)
        for o in failures:
            retry_at = self._retry_at(o, now)
            status = await job_fail(
                conn, self.owner, o.job, now, code=o.code, message=o.message, retry_at=retry_at
            )
            if status is not None:
                statuses[o.job.id] = status
                if status == JobStatus.PENDING.value:
                    db.notify(conn, WAKE_JOBS)
        released = [(o.job.id, o.job.attempt) for o in batch if o.kind == "release"]
        for job_id in await jobs_release(conn, self.owner, released, now):
            statuses[job_id] = "released"
            db.notify(conn, WAKE_JOBS)
        unclaimed = [(o.job.id, o.job.attempt) for o in batch if o.kind == "unclaim"]
        for job_id in await jobs_unclaim(conn, self.owner, unclaimed, now):
            statuses[job_id] = "released"
            db.notify(conn, WAKE_JOBS)
        events.extend(self._event_for(o, statuses.get(o.job.id)) for o in batch)
        return statuses

    def _account(self, batch: list[Outcome], statuses: dict[int, str]) -> None:
        metrics = self.runtime.metrics
        for o in batch:
            status = statuses.get(o.job.id)
            if status is None or (o.kind == "success" and status != JobStatus.SUCCEEDED.value):
                metrics.lost_cas += 1
                log.warning(
                    "job %d attempt %d: finish refused (%s); result discarded",
                    o.job.id,
                    o.job.attempt,
                    status or "lease lost",
                )
            metrics.completions[status or "lost"] += 1
            if status == JobStatus.PENDING.value:
                metrics.retries += 1

    async def _complete_with_hooks(
        self, conn: Any, o: Outcome, now: Any, statuses: dict[int, str]
    ) -> Outcome | None:
        """Run a success's hooks, then its finish CAS, in one savepoint.

        The hooks run first so that they may fill in the job's result (a version number they
        chose under a row lock); a lost CAS rolls their writes back. A hook that raises
        `JobError` fails the job with its code.
        """
        savepoint = await conn.begin_nested()
        try:
            for hook in o.hooks:
                await hook(conn)
        except Exception as exc:
            await savepoint.rollback()
            if isinstance(exc, JobError):
                return Outcome(
                    o.job, "failure", code=exc.code, message=str(exc), retryable=exc.retryable
                )
            log.warning("job %d: on_success hook failed", o.job.id, exc_info=True)
            return Outcome(
                o.job,
                "failure",
                code=JobErrorCode.HANDLER_ERROR.value,
                message=f"on_success: {type(exc).__name__}: {exc}",
                retryable=True,
            )
        done = await jobs_complete(conn, self.owner, [(o.job.id, o.job.attempt, o.result)], now)
        if done.get(o.job.id) != JobStatus.SUCCEEDED.value:
            await savepoint.rollback()
        else:
            await savepoint.commit()
        statuses.update(done)
        return None

    def _retry_at(self, o: Outcome, now: Any) -> Any:
        if not o.retryable:
            return None
        handler = self.runtime.handlers.get(o.job.kind)
        policy = handler.retry if handler is not None else self.runtime.default_retry
        if not policy.should_retry(o.code, o.job.attempt, o.job.max_attempts):
            return None
        delay = max(policy.backoff(o.job.attempt), o.retry_after or 0.0)
        retry_at = now + timedelta(seconds=delay)
        if o.job.deadline_at is not None and retry_at >= o.job.deadline_at:
            return None
        return retry_at

    @staticmethod
    def _event_for(o: Outcome, status: str | None) -> tuple[int, str, Any]:
        data: dict[str, Any] = {"attempt": o.job.attempt}
        if o.code:
            data["error_code"] = o.code
            data["message"] = o.message[:500]
        if status is None:
            return (o.job.id, EventType.CAS_LOST.value, data)
        if status == JobStatus.PENDING.value:
            return (o.job.id, EventType.RETRY_SCHEDULED.value, data)
        if status == "released":
            return (o.job.id, "released", data)
        if o.kind == "success" and status != JobStatus.SUCCEEDED.value:
            data["discarded_result"] = True
        return (o.job.id, status, data)
