"""A hypothesis state machine: random interleavings of job operations against a simple model.

No job finishes twice, attempts never exceed the bound, no running job lacks an owner or a
lease, and terminal states never change.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from sqlalchemy import delete, select

from deckyard.clock import FakeClock
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.jobs import RecoveryPolicy, recover_expired
from deckyard.jobs.models import Job
from deckyard.jobs.schema import JOB_COLUMNS, job_events, jobs
from deckyard.jobs.store import (
    NewJob,
    job_claim,
    job_enqueue,
    job_fail,
    jobs_complete,
    lease_extend,
)
from deckyard.jobs.store_admin import jobs_cancel

LEASE = 10.0
OWNERS = ("a", "b")


class JobMachine(RuleBasedStateMachine):
    loop: asyncio.AbstractEventLoop
    db: Database

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.held: dict[str, dict[int, Job]] = {o: {} for o in OWNERS}
        self.succeeded: set[int] = set()
        self.terminal: dict[int, str] = {}
        self.job_ids: list[int] = []
        self.run(self._reset())

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    async def _reset(self) -> None:
        async with self.db.write_transaction() as conn:
            await conn.execute(delete(job_events))
            await conn.execute(delete(jobs))

    @initialize()
    def start(self) -> None:
        pass

    @rule(max_attempts=st.integers(1, 3), deadline=st.none() | st.floats(1, 60))
    def enqueue(self, max_attempts: int, deadline: float | None) -> None:
        now = self.clock.now()
        new = NewJob(
            kind="k",
            queue="q",
            payload={},
            max_attempts=max_attempts,
            run_at=now,
            deadline_at=now + timedelta(seconds=deadline) if deadline else None,
        )

        async def go() -> Job:
            async with self.db.write_transaction() as conn:
                job, _ = await job_enqueue(self.db, conn, new, now)
            return job

        self.job_ids.append(self.run(go()).id)

    @rule(owner=st.sampled_from(OWNERS), n=st.integers(1, 3))
    def claim(self, owner: str, n: int) -> None:
        async def go() -> list[Job]:
            async with self.db.write_transaction() as conn:
                return await job_claim(conn, ["q"], n, owner, self.clock.now(), LEASE)

        for job in self.run(go()):
            assert job.attempt <= job.max_attempts
            self.held[owner][job.id] = job

    @rule(owner=st.sampled_from(OWNERS))
    def heartbeat(self, owner: str) -> None:
        held = [(j.id, j.attempt) for j in self.held[owner].values()]
        if not held:
            return

        async def go() -> None:
            async with self.db.write_transaction() as conn:
                await lease_extend(conn, owner, held, self.clock.now(), LEASE)

        self.run(go())

    @rule(owner=st.sampled_from(OWNERS), pick=st.integers(0, 10))
    def finish(self, owner: str, pick: int) -> None:
        if not self.held[owner]:
            return
        job = list(self.held[owner].values())[pick % len(self.held[owner])]
        del self.held[owner][job.id]

        async def go() -> dict[int, str]:
            async with self.db.write_transaction() as conn:
                return await jobs_complete(
                    conn, owner, [(job.id, job.attempt, {"by": owner})], self.clock.now()
                )

        if self.run(go()).get(job.id) == "succeeded":
            assert job.id not in self.succeeded, "a job finished twice"
            self.succeeded.add(job.id)

    @rule(owner=st.sampled_from(OWNERS), pick=st.integers(0, 10), retry=st.booleans())
    def fail(self, owner: str, pick: int, retry: bool) -> None:
        if not self.held[owner]:
            return
        job = list(self.held[owner].values())[pick % len(self.held[owner])]
        del self.held[owner][job.id]
        now = self.clock.now()
        retry_at = now if retry and job.attempt < job.max_attempts else None

        async def go() -> None:
            async with self.db.write_transaction() as conn:
                await job_fail(conn, owner, job, now, code="X", message="x", retry_at=retry_at)

        self.run(go())

    @rule(pick=st.integers(0, 50))
    def cancel(self, pick: int) -> None:
        if not self.job_ids:
            return
        job_id = self.job_ids[pick % len(self.job_ids)]

        async def go() -> None:
            async with self.db.write_transaction() as conn:
                await jobs_cancel(self.db, conn, [job_id], self.clock.now())

        self.run(go())

    @rule(seconds=st.floats(0.5, 30))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def recover(self) -> None:
        self.run(recover_expired(self.db, RecoveryPolicy(backoff=0), self.clock.now()))

    @invariant()
    def consistent(self) -> None:
        async def rows() -> list[Job]:
            async with self.db.read_connection() as conn:
                return [Job.from_row(r) for r in await conn.execute(select(*JOB_COLUMNS))]

        for job in self.run(rows()):
            assert job.attempt <= job.max_attempts, job
            if job.status == "running":
                assert job.lease_owner is not None and job.lease_expires_at is not None, job
            if job.status == "succeeded":
                assert job.id in self.succeeded and job.result is not None
            if job.id in self.terminal:
                assert job.status == self.terminal[job.id], "a terminal state changed"
            elif job.is_terminal:
                self.terminal[job.id] = job.status


def test_job_state_machine(db_url: str) -> None:
    loop = asyncio.new_event_loop()
    db = Database(db_url)
    try:
        loop.run_until_complete(upgrade(db))
        JobMachine.loop = loop
        JobMachine.db = db
        machine = JobMachine.TestCase
        machine.settings = settings(
            max_examples=120,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        machine().runTest()
    finally:
        loop.run_until_complete(db.dispose())
        loop.close()
