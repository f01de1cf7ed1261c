"""Waiting for jobs to end: one shared reader for every waiter of a runtime.

Every job event wakes the one `jobs.events` channel. A waiter that re-read its own job on each
wake made N concurrent waiters cost N reads per event, so a deck of N pages (N waiters, O(N)
events) cost O(N^2) reads. Here one task per runtime reads the status of every waited job in one
statement per wake and resolves the waiters whose job ended: O(1) reads per event, one more per
finished job.
"""

from __future__ import annotations

import asyncio
import contextlib

from deckyard.db import Database
from deckyard.jobs.models import Job
from deckyard.jobs.store import WAKE_EVENTS, job_get, jobs_get_terminal


class TerminalWaiters:
    """Futures of waited jobs, resolved with the terminal job (or None when there is none)."""

    def __init__(self, db: Database, recheck_seconds: float) -> None:
        self.db = db
        self.recheck_seconds = recheck_seconds
        self._futures: dict[int, list[asyncio.Future[Job | None]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, job_id: int) -> Job | None:
        """The job once it is terminal; None when no job has that id."""
        future: asyncio.Future[Job | None] = asyncio.get_running_loop().create_future()
        self._futures.setdefault(job_id, []).append(future)
        try:
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._run(), name="jobs.waiters")
            # Registered first, then read: an end committed after this read wakes the reader.
            async with self.db.read_connection() as conn:
                job = await job_get(conn, job_id)
            if job is None or job.is_terminal:
                return job
            return await future
        finally:
            self._discard(job_id, future)

    def _discard(self, job_id: int, future: asyncio.Future[Job | None]) -> None:
        waiting = self._futures.get(job_id)
        if waiting is not None:
            with contextlib.suppress(ValueError):
                waiting.remove(future)
            if not waiting:
                del self._futures[job_id]

    def _resolve(self, job_id: int, job: Job | None) -> None:
        for future in self._futures.pop(job_id, []):
            if not future.done():
                future.set_result(job)

    async def _run(self) -> None:
        sub = self.db.bus.subscribe(WAKE_EVENTS)
        try:
            while self._futures:
                ids = list(self._futures)
                async with self.db.read_connection() as conn:
                    done, missing = await jobs_get_terminal(conn, ids)
                for job in done:
                    self._resolve(job.id, job)
                for job_id in missing:
                    self._resolve(job_id, None)
                if self._futures:
                    await sub.wait(self.recheck_seconds)
        except Exception as exc:
            # The waiters see the failure (a database error, say); none hangs on a dead reader.
            for waiting in list(self._futures.values()):
                for future in waiting:
                    if not future.done():
                        future.set_exception(exc)
        finally:
            sub.close()
