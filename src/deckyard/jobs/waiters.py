"""Waiting for jobs to end, and following their events: one shared reader each per runtime.

Every job event wakes the one `jobs.events` channel. Anything that re-read its own job on each
wake made N concurrent readers cost N reads per event, so a deck of N pages (N waiters, O(N)
events) or N event streams cost O(N^2) reads. Waiters share a `db.SharedWaiters` (the status of
every waited job in one statement per wake); event streams share `EventFollowers` (the followed
jobs' statuses, then their events, in two statements per wake).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from deckyard.db import Database, Follower, SharedFollowers, SharedWaiters
from deckyard.jobs.models import Job, JobEvent
from deckyard.jobs.status import TERMINAL
from deckyard.jobs.store import (
    WAKE_EVENTS,
    events_after_many,
    jobs_get_terminal,
    jobs_status,
)


def terminal_waiters(db: Database, recheck_seconds: float) -> SharedWaiters[Job]:
    """Waiters for jobs to end (`Runtime.wait`): one read of the waited jobs per event."""
    return SharedWaiters(db, WAKE_EVENTS, jobs_get_terminal, recheck_seconds, "jobs.waiters")


class EventFollowers(SharedFollowers["_Follower", JobEvent]):
    """Event streams of jobs (`Runtime.events(follow=True)`): one shared reader for all of them.

    The same O(N^2) as waiters had: N followers that each re-read their own job and its events
    on every `jobs.events` wake cost 2N reads per event (and each job read decoded the whole
    payload, a page's HTML). Here one task per runtime reads, per wake, the
    status of every followed job and then the events after the oldest cursor among them, in
    two statements, and hands each follower the events past its own cursor.
    """

    def __init__(self, db: Database, recheck_seconds: float, batch: int = 1000) -> None:
        super().__init__(db, (WAKE_EVENTS,), recheck_seconds, "jobs.followers")
        self.batch = batch

    def follow(self, job_id: int, after_id: int) -> AsyncIterator[JobEvent]:
        """The job's events after `after_id`, as they come, until the job has ended."""
        return self._stream(_Follower(job_id, after_id))

    async def _read_once(self, followers: list[_Follower]) -> bool:
        """One read for `followers`; True when the batch was full (read again at once)."""
        ids = sorted({f.job_id for f in followers})
        after = min(f.after_id for f in followers)
        async with self.db.read_connection() as conn:
            # Status first: a job that is terminal here has all its events in the read after.
            statuses = await jobs_status(conn, ids)
            batch = await events_after_many(conn, ids, after, self.batch)
        full = len(batch) == self.batch
        if full:
            # Every event of a followed job up to the batch's last id is in it: each cursor may
            # move there, so a follower whose job has none of those events cannot pin the read.
            for follower in followers:
                follower.reach = batch[-1].id
        by_job: dict[int, list[JobEvent]] = {}
        for ev in batch:
            by_job.setdefault(ev.job_id, []).append(ev)
        for follower in followers:
            for ev in by_job.get(follower.job_id, ()):
                if ev.id > follower.after_id:
                    follower.after_id = ev.id
                    follower.inbox.put_nowait(ev)
            follower.after_id = max(follower.after_id, follower.reach)
            status = statuses.get(follower.job_id)
            if not full and (status is None or status in TERMINAL):
                self._end(follower)
        return full


@dataclass(eq=False)
class _Follower(Follower[JobEvent]):
    job_id: int
    after_id: int
    reach: int = 0
