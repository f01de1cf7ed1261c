"""The task executor: drives multi-stage tasks whose stages run as durable jobs.

A task's progress lives in the database (its stage index, the job ids each stage enqueued, and
its execution events), so driving it again after a crash continues where it was: a stage's jobs
are enqueued once (their ids are stored in the same transaction) and a stage advances by a
compare-and-set on its index. Within one process an in-flight set under a lock makes a second
start of the same task fail fast (`TaskAlreadyRunning`).

Across processes a task is driven by whoever holds its lease (`owner`, `lease_expires_at`): the
creator holds it from birth, a drive starts with a compare-and-set claim, and the `tasks.lease`
loop extends every lease this process holds in one UPDATE per heartbeat (none while it drives
nothing). The same loop, at start-up and whenever the next lease can lapse, resumes tasks whose
owner is gone (its lease lapsed, or it handed it back on a graceful stop), so a task whose driver
was killed resumes within one lease, not after reconciliation's staleness threshold.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs import EnqueueSpec, Job, JobStatus, Runtime, acting_as, current_actor
from deckyard.loop import IDLE, Loop, Tick
from deckyard.tasks.reconciliation import reconcile_once
from deckyard.tasks.status import RESUMABLE, TaskStatus
from deckyard.tasks.store import (
    task_event_insert,
    task_events_of,
    task_finish,
    task_get,
    task_insert,
    task_lease_claim,
    task_list,
    task_stage_advance,
    task_stage_lock,
    task_start,
    task_state_set,
    tasks_lease_extend,
    tasks_lease_release,
    tasks_orphaned,
)
from deckyard.webhooks import announce, task_finished

log = logging.getLogger(__name__)


def make_owner() -> str:
    """A task lease owner id unique to this executor: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class TaskAlreadyRunning(Exception):
    """This process is already driving that task."""


class StageFailed(Exception):
    """Raised by a stage's `finish` to fail the task with a code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class StageContext:
    """What a stage sees: the task's parameters and the results of earlier stages."""

    task_id: int
    workspace_id: str | None
    params: dict[str, Any]
    state: dict[str, Any]
    executor: TaskExecutor


JobsFn = Callable[[StageContext], Awaitable[list[EnqueueSpec]]]
FinishFn = Callable[[StageContext, list[Job]], Awaitable[Any]]


async def all_succeeded(ctx: StageContext, jobs: list[Job]) -> dict[str, Any]:
    """The default stage check: every job succeeded; their results become the stage's result."""
    failed = [j for j in jobs if j.status != JobStatus.SUCCEEDED]
    if failed:
        first = failed[0]
        raise StageFailed(
            first.error_code or "STAGE_FAILED",
            f"{len(failed)} of {len(jobs)} job(s) did not succeed; job {first.id}: "
            f"{first.error_message or first.status}",
        )
    return {"jobs": [j.id for j in jobs], "results": [j.result for j in jobs]}


@dataclass(frozen=True)
class Stage:
    """One stage: which jobs to run, and how to judge them when they end."""

    name: str
    jobs: JobsFn
    finish: FinishFn = all_succeeded


@dataclass(frozen=True)
class TaskKind:
    """A named sequence of stages."""

    name: str
    stages: list[Stage] = field(default_factory=list)


class TaskExecutor:
    """Creates, drives, cancels and resumes tasks in this process."""

    def __init__(
        self, db: Database, runtime: Runtime, settings: Settings, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        self.kinds: dict[str, TaskKind] = {}
        self._in_flight: set[int] = set()
        self._lock = threading.Lock()
        self._driving: dict[int, asyncio.Task[None]] = {}
        self.reconcile_failures = 0
        self.reconcile_dispatched = 0
        self.owner = make_owner()
        self.resumed = 0
        self.leases_lost = 0
        self._loops: list[Loop] = []
        self._lease_loop: Loop | None = None
        self._last_beat: float | None = None
        self._next_scan = 0.0

    def register(self, kind: TaskKind) -> None:
        """Make a task kind available."""
        self.kinds[kind.name] = kind

    # --- in-flight claim ----------------------------------------------------------------------

    def try_claim(self, task_id: int) -> bool:
        """Atomically mark `task_id` as driven by this process; False when it already is."""
        with self._lock:
            if task_id in self._in_flight:
                return False
            self._in_flight.add(task_id)
            return True

    def release(self, task_id: int) -> None:
        """Forget that this process drives `task_id`."""
        with self._lock:
            self._in_flight.discard(task_id)

    def in_flight(self) -> set[int]:
        """Task ids this process is driving now."""
        with self._lock:
            return set(self._in_flight)

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def loops(self) -> list[Loop]:
        """The reconciliation loop, when enabled and started."""
        return self._loops

    async def start(self, *, run_loops: bool = True) -> None:
        """Resume orphaned tasks, then start the lease and reconciliation loops.

        With loops off nothing runs; with reconciliation disabled the lease loop only
        heartbeats (it resumes nobody else's task).
        """
        s = self.settings
        if not run_loops:
            return
        if s.reconciliation_enabled:
            await self.resume_orphaned()  # the pass at start-up
        self._lease_loop = Loop.configured(
            "tasks.lease",
            self._lease_tick,
            s,
            poll_interval=s.task_heartbeat_interval_seconds,
            idle_ceiling=s.task_lease_seconds,
            clock=self.clock,
        )
        self._lease_loop.start()
        self._loops = [self._lease_loop]
        if not s.reconciliation_enabled:
            return

        async def tick() -> Tick:
            await reconcile_once(self)
            return Tick(due_in=s.reconciliation_interval_seconds)

        loop = Loop.configured(
            "reconciliation",
            tick,
            s,
            poll_interval=s.reconciliation_interval_seconds,
            idle_ceiling=s.reconciliation_interval_seconds,
            clock=self.clock,
        )
        loop.start()
        self._loops.insert(0, loop)

    async def stop(self) -> None:
        """Stop the loops and stop driving tasks, handing their leases back (their jobs go on;
        the next process to look resumes them at once)."""
        for loop in self._loops:
            await loop.stop()
        self._loops = []
        self._lease_loop = None
        driven = sorted(self._driving)
        for task in list(self._driving.values()):
            task.cancel()
        await asyncio.gather(*self._driving.values(), return_exceptions=True)
        if driven:
            try:
                await self.db.write(lambda conn: tasks_lease_release(conn, self.owner, driven))
            except Exception:
                log.exception("tasks: could not hand back leases of %s; they lapse instead", driven)

    # --- leases -------------------------------------------------------------------------------

    async def _lease_tick(self) -> Tick:
        s = self.settings
        interval = s.task_heartbeat_interval_seconds
        mono = self.clock.monotonic()
        due: list[float] = []
        held = sorted(self.in_flight())
        if not held:
            self._last_beat = None
        elif self._last_beat is None:
            self._last_beat = mono  # the claim that started the drive set a fresh lease
        elif mono - self._last_beat >= interval * 0.98:
            await self._heartbeat(held)
            self._last_beat = mono
        if self._last_beat is not None:
            due.append(interval - (mono - self._last_beat))
        if s.reconciliation_enabled:
            if mono >= self._next_scan:
                await self.resume_orphaned()
            due.append(self._next_scan - self.clock.monotonic())
        if not due:
            return IDLE
        return Tick(due_in=max(min(due), 0.0))

    async def _heartbeat(self, held: list[int]) -> None:
        """Extend every lease this process holds in one UPDATE; stop drives whose lease is gone."""
        lease = self.settings.task_lease_seconds
        extended = await self.db.write(
            lambda conn: tasks_lease_extend(conn, self.owner, held, self.clock.now(), lease)
        )
        for task_id in set(held) - extended:
            drive = self._driving.get(task_id)
            if drive is not None and not drive.done():
                self.leases_lost += 1
                log.warning("task %d: lease lost (another process drives it); stopping", task_id)
                drive.cancel()

    async def resume_orphaned(self) -> list[int]:
        """Dispatch every task nobody drives (owner gone, lease lapsed); read only when none is.

        Schedules the next look for when the earliest running lease can lapse (at most one
        lease from now). A task another process claims first is left to it: the drive's claim
        is a compare-and-set.
        """
        s = self.settings
        now = self.clock.now()
        async with self.db.read_connection() as conn:
            ids, next_expiry = await tasks_orphaned(conn, now, limit=100)
        wait = s.task_lease_seconds
        if next_expiry is not None:
            wait = min(wait, max((next_expiry - now).total_seconds(), 0.0) + 0.05)
        self._next_scan = self.clock.monotonic() + wait
        mine = self.in_flight()
        dispatched = []
        for task_id in ids:
            if task_id in mine:
                continue
            try:
                self.dispatch(task_id)
            except TaskAlreadyRunning:
                continue
            dispatched.append(task_id)
        if dispatched:
            self.resumed += len(dispatched)
            log.info("tasks: resuming %d task(s) whose driver is gone: %s", len(dispatched), ids)
        return dispatched

    # --- tasks --------------------------------------------------------------------------------

    async def create(
        self, kind: str, params: dict[str, Any], *, workspace_id: str | None = None
    ) -> int:
        """Create a task and start driving it; returns its id."""
        if kind not in self.kinds:
            raise KeyError(f"unknown task kind {kind!r}")
        now = self.clock.now()
        lease = self.settings.task_lease_seconds
        actor = current_actor.get()

        async def create(conn: AsyncConnection) -> int:
            task_id = await task_insert(
                conn,
                kind,
                params,
                workspace_id,
                now,
                owner=self.owner,
                lease=lease,
                actor_token_id=actor,
            )
            await self._event(conn, task_id, "created", {"kind": kind})
            return task_id

        task_id = await self.db.write(create)
        self.dispatch(task_id)
        return task_id

    def dispatch(self, task_id: int) -> asyncio.Task[None]:
        """Drive `task_id` in the background; raises `TaskAlreadyRunning` if it already is."""
        if not self.try_claim(task_id):
            raise TaskAlreadyRunning(f"task {task_id} is already running in this process")

        async def drive() -> None:
            try:
                await self._drive(task_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("task %d: driving failed; it resumes when its lease lapses", task_id)
            finally:
                self.release(task_id)
                self._driving.pop(task_id, None)

        task = asyncio.create_task(drive(), name=f"task:{task_id}")
        self._driving[task_id] = task
        if self._lease_loop is not None:
            self._lease_loop.poke()  # its heartbeat now covers this task
        return task

    async def get(self, task_id: int) -> dict[str, Any] | None:
        """A task row as a dict, or None."""
        async with self.db.read_connection() as conn:
            return await task_get(conn, task_id)

    async def of_workspace(
        self, workspace_id: str, *, status: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """A workspace's tasks (optionally of one status), newest first."""
        async with self.db.read_connection() as conn:
            return await task_list(conn, workspace_id, status=status, limit=limit)

    async def events(self, task_id: int) -> list[dict[str, Any]]:
        """A task's execution events, oldest first."""
        async with self.db.read_connection() as conn:
            return await task_events_of(conn, task_id)

    async def cancel(self, task_id: int) -> None:
        """Cancel a task and the jobs of its current stage."""
        now = self.clock.now()

        async def cancel(conn: AsyncConnection) -> list[int]:
            row = await task_get(conn, task_id)
            if row is None or row["status"] not in RESUMABLE:
                return []
            await task_finish(conn, task_id, TaskStatus.CANCELLED, now)
            await self._event(conn, task_id, "cancelled", None)
            await self._announce(conn, task_id, now)
            return [i for ids in (row["state"] or {}).get("jobs", {}).values() for i in ids]

        for job_id in await self.db.write(cancel):
            await self.runtime.cancel(job_id)

    async def _event(self, conn: AsyncConnection, task_id: int, type_: str, data: Any) -> None:
        await task_event_insert(self.db, conn, task_id, type_, data, self.clock.now())

    async def _record(self, task_id: int, type_: str, data: Any) -> None:
        """Append one event in a transaction of its own."""
        await self.db.write(lambda conn: self._event(conn, task_id, type_, data))

    async def _finish(self, task_id: int, status: TaskStatus, **values: Any) -> None:
        now = self.clock.now()

        async def finish(conn: AsyncConnection) -> None:
            if await task_finish(conn, task_id, status, now, **values):
                await self._event(conn, task_id, status.value, values.get("error_code"))
                await self._announce(conn, task_id, now)

        await self.db.write(finish)

    async def _announce(self, conn: AsyncConnection, task_id: int, now: datetime) -> None:
        """Announce `task.finished` to webhooks in the finishing transaction."""
        row = await task_get(conn, task_id)
        if row is not None:
            await announce(self.runtime, conn, task_finished(row, now))

    async def _claim(self, task_id: int) -> bool:
        lease = self.settings.task_lease_seconds
        return await self.db.write(
            lambda conn: task_lease_claim(conn, task_id, self.owner, self.clock.now(), lease)
        )

    async def _drive(self, task_id: int) -> None:
        if not await self._claim(task_id):
            log.info("task %d: another process holds its lease; not driving it here", task_id)
            return
        while True:
            row = await self.get(task_id)
            if row is None or row["status"] not in RESUMABLE:
                return
            kind = self.kinds.get(row["kind"])
            if kind is None:
                await self._finish(
                    task_id,
                    TaskStatus.FAILED,
                    error_code="UNKNOWN_TASK_KIND",
                    error_message=f"no task kind {row['kind']!r} in this process",
                )
                return
            if row["status"] == TaskStatus.PENDING.value:
                await self.db.write(lambda conn: self._start(conn, task_id))
            index = int(row["stage"])
            if index >= len(kind.stages):
                await self._finish(task_id, TaskStatus.SUCCEEDED, result=row["state"])
                return
            await self._run_stage(task_id, row, kind.stages[index], index)

    async def _start(self, conn: AsyncConnection, task_id: int) -> None:
        await task_start(conn, task_id, self.clock.now())
        await self._event(conn, task_id, "started", None)

    async def _run_stage(self, task_id: int, row: dict[str, Any], stage: Stage, index: int) -> None:
        state: dict[str, Any] = dict(row["state"] or {})
        ctx = StageContext(task_id, row["workspace_id"], row["params"], state, self)
        job_ids: list[int] | None = state.get("jobs", {}).get(stage.name)
        if job_ids is None:
            specs = await stage.jobs(ctx)
            started = await self.db.write(
                lambda conn: self._enqueue_stage(conn, task_id, row, stage, index, specs)
            )
            if started is None:
                return
            job_ids, state = started
        finished: list[Job] = []
        for job_id in job_ids:
            job = await self.runtime.wait(job_id)
            finished.append(job)
            progress = {"stage": stage.name, "job": job_id, "status": job.status.value}
            await self._record(task_id, "stage_progress", progress)
        ctx.state = state
        try:
            outcome = await stage.finish(ctx, finished)
        except StageFailed as exc:
            await self._finish(
                task_id, TaskStatus.FAILED, error_code=exc.code, error_message=str(exc)
            )
            return
        state.setdefault("results", {})[stage.name] = outcome

        async def advance(conn: AsyncConnection) -> None:
            if await task_stage_advance(conn, task_id, index, state, self.clock.now()):
                await self._event(conn, task_id, "stage_finished", {"stage": stage.name})

        await self.db.write(advance)

    async def _enqueue_stage(
        self,
        conn: AsyncConnection,
        task_id: int,
        row: dict[str, Any],
        stage: Stage,
        index: int,
        specs: list[EnqueueSpec],
    ) -> tuple[list[int], dict[str, Any]] | None:
        """Enqueue a stage's jobs once, storing their ids; None if the task moved on meanwhile."""
        current, state = await task_stage_lock(conn, task_id)
        if current != index:
            return None
        job_ids: list[int] | None = state.get("jobs", {}).get(stage.name)
        if job_ids is not None:
            return job_ids, state
        job_ids = []
        for i, spec in enumerate(specs):
            with acting_as(row.get("actor_token_id")):
                job = await self.runtime.enqueue(
                    spec.kind,
                    spec.payload,
                    queue=spec.queue,
                    dedupe_key=f"task:{task_id}:{stage.name}:{i}",
                    deadline=spec.deadline,
                    priority=spec.priority,
                    workspace_id=row["workspace_id"],
                    max_attempts=spec.max_attempts,
                    conn=conn,
                )
            job_ids.append(job.id)
        state.setdefault("jobs", {})[stage.name] = job_ids
        await task_state_set(conn, task_id, state, self.clock.now())
        await self._event(conn, task_id, "stage_started", {"stage": stage.name, "jobs": job_ids})
        return job_ids, state
