"""Prefetch: jobs claimed ahead of a free slot are recovered after a SIGKILL, handed back on stop.

A worker process with one slot and a handler that never ends claims every `hold` job: one runs,
the rest wait in its prefetch buffer, all leased to it with attempt 1.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from deckyard.db import Database
from deckyard.jobs import EnqueueSpec, JobStatus, Runtime
from deckyard.jobs.schema import jobs
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings
from tests.helpers.worker_proc import SETTINGS, side, side_md

pytestmark = [pytest.mark.processes]
ROOT = Path(__file__).resolve().parents[3]
N_JOBS = 6


def _spawn(url: str, *extra: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.worker_proc", url, "1", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    return proc


def _end(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


async def _rows(db: Database) -> list[tuple[int, str, int, str | None]]:
    async with db.read_connection() as conn:
        rows = await conn.execute(
            select(jobs.c.id, jobs.c.status, jobs.c.attempt, jobs.c.lease_owner).order_by(jobs.c.id)
        )
        return [(r.id, r.status, r.attempt, r.lease_owner) for r in rows]


async def _side_rows(db: Database) -> int:
    async with db.read_connection() as conn:
        return int((await conn.execute(select(func.count()).select_from(side))).scalar_one())


async def _all_claimed_by_one_worker(db: Database) -> bool:
    rows = await _rows(db)
    owners = {owner for _, status, _, owner in rows if status == JobStatus.RUNNING.value}
    return len(owners) == 1 and all(s == JobStatus.RUNNING.value for _, s, _, _ in rows)


async def _hold_and_end(db: Database, sig: signal.Signals) -> list[int]:
    """Fill one worker (1 slot, prefetch buffer) with `hold` jobs, end it with `sig`."""
    async with db.engine.begin() as conn:
        await conn.run_sync(side_md.create_all)
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    made = await rt.enqueue_many([EnqueueSpec("hold", queue="hold", max_attempts=5)] * N_JOBS)
    url = db.url.render_as_string(hide_password=False)
    holder = _spawn(url, "hold")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split()[0] == b"started"
        await eventually(lambda: _all_claimed_by_one_worker(db), timeout=30)
        assert [attempt for _, _, attempt, _ in await _rows(db)] == [1] * N_JOBS
    finally:
        _end(holder, sig)
    return [j.id for j in made]


async def test_prefetched_jobs_of_a_sigkilled_worker_are_recovered(db: Database) -> None:
    await _hold_and_end(db, signal.SIGKILL)
    url = db.url.render_as_string(hide_password=False)
    lease = SETTINGS["job_lease_seconds"]
    finisher = _spawn(url)
    try:

        async def all_done() -> bool:
            return all(s == JobStatus.SUCCEEDED.value for _, s, _, _ in await _rows(db))

        # the leases lapse after one lease; recovery and a rerun need far less than a second
        # more, so the bound is loose only for a loaded machine
        await eventually(all_done, timeout=lease + 15)
    finally:
        _end(finisher, signal.SIGTERM)
    rows = await _rows(db)
    # each claim counted one attempt: the killed worker's (ran or buffered) and the rerun
    assert [(status, attempt) for _, status, attempt, _ in rows] == [("succeeded", 2)] * N_JOBS
    assert await _side_rows(db) == N_JOBS


async def test_stop_hands_the_prefetch_buffer_back_with_its_attempts(db: Database) -> None:
    ids = await _hold_and_end(db, signal.SIGTERM)
    rows = await _rows(db)
    # the running job was released (its attempt ran); the buffered ones never ran: attempt 0
    assert [(status, attempt) for _, status, attempt, _ in rows] == [("pending", 1)] + [
        ("pending", 0)
    ] * (N_JOBS - 1)
    assert [i for i, *_ in rows] == ids
    url = db.url.render_as_string(hide_password=False)
    finisher = _spawn(url)
    try:

        async def all_done() -> bool:
            return all(s == JobStatus.SUCCEEDED.value for _, s, _, _ in await _rows(db))

        await eventually(all_done, timeout=30)
    finally:
        _end(finisher, signal.SIGTERM)
    attempts = [attempt for _, _, attempt, _ in await _rows(db)]
    assert attempts == [2] + [1] * (N_JOBS - 1)
    assert await _side_rows(db) == N_JOBS
