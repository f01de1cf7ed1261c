"""Exactly once: 2 000 jobs, real worker processes, one SIGKILLed mid-run and restarted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from deckyard.db import Database
from deckyard.jobs import EnqueueSpec, Runtime
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings
from tests.helpers.worker_proc import side, side_md

pytestmark = [pytest.mark.processes, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
N_JOBS = 2000


def _spawn(url: str, concurrency: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.worker_proc", url, str(concurrency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    if proc.stdout:
        proc.stdout.close()


async def _counts(db: Database) -> tuple[int, int, int, int]:
    from deckyard.jobs.schema import jobs

    async with db.read_connection() as conn:
        done = (
            await conn.execute(select(func.count()).where(jobs.c.status == "succeeded"))
        ).scalar_one()
        rows = (await conn.execute(select(func.count()).select_from(side))).scalar_one()
        distinct = (
            await conn.execute(select(func.count(func.distinct(side.c.job_id))))
        ).scalar_one()
        max_attempt = (await conn.execute(select(func.max(jobs.c.attempt)))).scalar_one()
    return done, rows, distinct, max_attempt


async def test_exactly_once_across_a_sigkill(db: Database) -> None:
    async with db.engine.begin() as conn:
        await conn.run_sync(side_md.create_all)
    rt = Runtime(db, settings=fast_settings(), migrate=False)
    await rt.enqueue_many([EnqueueSpec("side", queue="crash", max_attempts=3)] * N_JOBS)
    url = db.url.render_as_string(hide_password=False)
    two_processes = db.supports_listen_notify  # a SQLite file belongs to one process
    procs = [_spawn(url, 20)]
    if two_processes:
        procs.append(_spawn(url, 20))
    try:

        async def progressed() -> bool:
            return (await _counts(db))[0] >= N_JOBS // 5

        await eventually(progressed, timeout=60, every=0.05, what="workers making progress")
        victim = procs.pop(0)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(10)
        assert victim.stdout is not None
        victim.stdout.close()
        done_at_kill = (await _counts(db))[0]
        assert done_at_kill < N_JOBS, "the kill came too late to prove anything"
        procs.append(_spawn(url, 20))

        async def all_done() -> bool:
            return (await _counts(db))[0] >= N_JOBS

        await eventually(all_done, timeout=120, every=0.1, what=f"all {N_JOBS} jobs done")
    finally:
        for p in procs:
            _stop(p)
    done, rows, distinct, max_attempt = await _counts(db)
    assert (done, rows, distinct) == (N_JOBS, N_JOBS, N_JOBS)
    assert max_attempt <= 3
