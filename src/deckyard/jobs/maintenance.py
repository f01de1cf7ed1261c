"""The runtime's maintenance loops: recovery (expired leases, pending jobs past their deadline),
pruning finished jobs, and periodic (cron) jobs.

Each loop reads first and writes only when there is something to do, so an idle runtime costs a
few reads a minute and no writes. Writes go through `Database.write`, which retries a transaction
that lost a lock race.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from croniter import croniter

from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs.metrics import RuntimeMetrics
from deckyard.jobs.policy import RecoveryPolicy
from deckyard.jobs.store import NewJob
from deckyard.jobs.store_admin import (
    jobs_expired,
    jobs_fail_pending_overdue,
    jobs_prunable,
    jobs_prune,
    jobs_recover_expired,
    periodic_tick_claim,
    recovery_next_due,
)
from deckyard.loop import ACTIVE, IDLE, MORE, Loop, Tick

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Periodic:
    """A cron schedule that enqueues `kind` on `queue` once per tick."""

    name: str
    cron: str
    kind: str
    queue: str
    payload: Any
    max_attempts: int

    def __post_init__(self) -> None:
        if not croniter.is_valid(self.cron):
            raise ValueError(f"periodic job {self.name!r}: invalid cron expression {self.cron!r}")

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after `after` (aware UTC)."""
        value: datetime = croniter(self.cron, after).get_next(datetime)
        return value

    def previous_tick(self, at: datetime) -> datetime:
        """The latest tick strictly before `at` (croniter's `get_prev`)."""
        value: datetime = croniter(self.cron, at).get_prev(datetime)
        return value

    def due_tick(self, scheduled: datetime, now: datetime) -> datetime | None:
        """Which tick to enqueue now when `scheduled` was the next one; None before it is due.

        After a pause that skipped ticks only the latest one runs: missed ticks are not made up.
        """
        if scheduled > now:
            return None
        return self.latest_tick(now) if self.next_tick(scheduled) <= now else scheduled

    def latest_tick(self, at: datetime) -> datetime:
        """The latest tick at or before `at`: `at` itself when it falls exactly on a tick.

        `previous_tick` alone would name the tick before, and the loop would enqueue `at` again
        on its next pass: two jobs for one pause.
        """
        previous = self.previous_tick(at)
        following = self.next_tick(previous)
        return following if following <= at else previous

    def job(self, tick: datetime) -> NewJob:
        """The job one tick enqueues; its dedupe key names the tick."""
        return NewJob(
            kind=self.kind,
            queue=self.queue,
            payload=self.payload,
            max_attempts=self.max_attempts,
            run_at=tick,
            dedupe_key=f"periodic:{self.name}:{tick.isoformat()}",
        )


async def recover_expired(
    db: Database, policy: RecoveryPolicy, now: datetime
) -> dict[str, list[int]]:
    """Requeue or fail every running job whose lease expired (or that has none).

    The one recovery policy for every queue: attempts left → pending after `policy.backoff`;
    attempts spent → failed (LEASE_EXPIRED); a cancel request or a passed deadline decides
    first. Reads first and writes only when something expired. Returns the ids per outcome.
    """
    async with db.read_connection() as conn:
        ids = await jobs_expired(conn, now, policy.batch_size)
    if not ids:
        return {}
    outcome = await db.write(lambda conn: jobs_recover_expired(db, conn, ids, policy.backoff, now))
    for name, job_ids in outcome.items():
        if job_ids:
            log.warning("recovered %d expired job(s) as %s: %s", len(job_ids), name, job_ids[:20])
    return outcome


async def prune_finished(db: Database, now: datetime, retention: float, batch: int) -> int:
    """Delete up to `batch` jobs that finished more than `retention` seconds ago; returns count."""
    async with db.read_connection() as conn:
        ids = await jobs_prunable(conn, now - timedelta(seconds=retention), batch)
    if not ids:
        return 0
    return await db.write(lambda conn: jobs_prune(conn, ids))


async def periodic_enqueue_tick(
    db: Database, periodic: Periodic, tick: datetime, now: datetime
) -> bool:
    """Enqueue `periodic` for `tick` unless some node already did; True when this call did."""
    return await db.write(
        lambda conn: periodic_tick_claim(db, conn, periodic.name, tick, periodic.job(tick), now)
    )


class Maintenance:
    """The recovery, prune and periodic loops of one runtime (`start()`/`stop()`)."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        clock: Clock,
        metrics: RuntimeMetrics,
        recovery: RecoveryPolicy,
        periodics: Sequence[Periodic],
    ) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.recovery = recovery
        self.periodics = periodics
        self.loops: list[Loop] = []
        self._periodic_next: dict[str, datetime] = {}

    def start(self) -> None:
        """Start recovery and pruning, and the periodic loop when there are periodic jobs."""
        s = self.settings
        self.loops = [
            Loop.configured(
                "recovery",
                self.recovery_tick,
                s,
                poll_interval=s.job_poll_interval_seconds,
                idle_ceiling=s.job_idle_poll_ceiling_seconds,
                clock=self.clock,
            ),
            Loop.every("prune", self.prune_tick, s, s.job_prune_interval_seconds, clock=self.clock),
        ]
        if self.periodics:
            now = self.clock.now()
            self._periodic_next = {p.name: p.next_tick(now) for p in self.periodics}
            self.loops.append(
                Loop.configured(
                    "periodic",
                    self.periodic_tick,
                    s,
                    poll_interval=s.job_periodic_check_seconds,
                    idle_ceiling=s.job_idle_poll_ceiling_seconds,
                    clock=self.clock,
                )
            )
        for loop in self.loops:
            loop.start()

    async def stop(self) -> None:
        """Stop every loop after its current tick."""
        for loop in self.loops:
            await loop.stop()

    async def recovery_tick(self) -> Tick:
        """Recover expired leases and fail pending jobs past their deadline, when one is due.

        Otherwise sleep until the nearest lease expiry or pending deadline (the loop's idle
        ceiling bounds the wait, so a job enqueued meanwhile is seen): one read, no write.
        """
        now = self.clock.now()
        async with self.db.read_connection() as conn:
            due = await recovery_next_due(conn)
        more = False
        active = False
        if due.pending_deadline is not None and due.pending_deadline <= now:
            batch = self.recovery.batch_size
            failed = await self.db.write(
                lambda conn: jobs_fail_pending_overdue(self.db, conn, now, batch)
            )
            if failed:
                log.info(
                    "failed %d pending job(s) past their deadline: %s", len(failed), failed[:20]
                )
            self.metrics.recoveries["deadline_pending"] += len(failed)
            active, more = True, len(failed) >= batch
        if due.unleased or (due.lease_expiry is not None and due.lease_expiry <= now):
            outcome = await recover_expired(self.db, self.recovery, now)
            for name, ids in outcome.items():
                self.metrics.recoveries[name] += len(ids)
            active, more = True, more or any(outcome.values())
        if active:
            return MORE if more else ACTIVE
        upcoming = [t for t in (due.lease_expiry, due.pending_deadline) if t is not None]
        if not upcoming:
            return IDLE
        return Tick(due_in=(min(upcoming) - now).total_seconds())

    async def prune_tick(self) -> Tick:
        """Prune one batch; again while batches come back full.

        On a single-process database the next batch waits as long as this one took, so claims
        get the one writer in between (bench/queue_scale: with 1,000,000 ended jobs, batches of
        500 back to back held SQLite 150 ms at a time and a probe's claims waited 183 ms at p50).
        """
        s = self.settings
        began = time.perf_counter()
        n = await prune_finished(
            self.db, self.clock.now(), s.job_retention_seconds, s.job_prune_batch_size
        )
        self.metrics.pruned += n
        if n < s.job_prune_batch_size:
            return IDLE
        if self.db.is_single_process:
            return Tick(active=True, due_in=time.perf_counter() - began)
        return MORE

    async def periodic_tick(self) -> Tick:
        """Enqueue every periodic job whose tick came; due again at the nearest next tick."""
        now = self.clock.now()
        due_in = self.settings.job_idle_poll_ceiling_seconds
        for p in self.periodics:
            tick = self._periodic_next[p.name]
            latest = p.due_tick(tick, now)
            if latest is not None:
                if await periodic_enqueue_tick(self.db, p, latest, now):
                    self.metrics.periodic_enqueued += 1
                self._periodic_next[p.name] = tick = p.next_tick(latest)
            due_in = min(due_in, (tick - now).total_seconds())
        return Tick(due_in=due_in)
