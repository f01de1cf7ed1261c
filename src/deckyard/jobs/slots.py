"""A worker's slots: which of its running jobs occupy one, and lending a slot while a job waits.

A parent that waits for its children (or for a render request) does no work, yet held its slot
for the whole wait, so a worker full of waiting parents could not run the children they waited
for. `Slots.released(job_id)` takes the job out of the count while the caller awaits something
and gives it a slot back before it continues: the worker claims other jobs into the freed slot
meanwhile. The job stays running as far as the database is concerned: its lease is still held
and renewed by the worker's batched heartbeat, so lease fencing, the finish CAS, cancel and
recovery after a crash are exactly as for any running job.

At most `max_suspended` jobs of a worker wait without a slot; past that a wait keeps its slot
(as every wait did before), so the leases one worker holds stay bounded.

Taking the slot back queues behind nobody but earlier resumers: a resumer is granted a slot
before the worker starts any job it has claimed (`Worker._fill_slots`). A wait that ends by
`CancelledError` while the job's own task is being cancelled (cancel, lost lease, shutdown,
timeout, deadline) does not queue for a slot at all: its handler is ending, and it stays counted
as suspended until its task is over, so a cancel is as prompt as before and occupancy never goes
above `concurrency`. (A task the handler made and cancelled itself is not the job ending: its
wait takes the slot back like any other.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass


@dataclass
class SlotStats:
    """A worker's slot figures since it was made (high-water marks and a counter)."""

    suspensions: int = 0
    """Waits that gave their slot back."""
    most_occupied: int = 0
    """The most jobs that ever held a slot at once; never above `concurrency`."""
    most_suspended: int = 0
    """The most jobs that ever waited without a slot at once."""


class Slots:
    """The occupancy of one worker's `concurrency` slots by its running jobs.

    `running()` counts the jobs the worker runs (each holds a lease); the ones in `suspended`
    hold no slot. `freed()` is called whenever a slot may have become free, so the worker
    can start a claimed job or claim one. `ending(job_id)` says whether the job's handler is
    being stopped (its task cancelled); without it every `CancelledError` counts as that.
    """

    def __init__(
        self,
        concurrency: int,
        max_suspended: int,
        running: Callable[[], int],
        freed: Callable[[], None],
        ending: Callable[[int], bool] | None = None,
    ) -> None:
        self.concurrency = concurrency
        self.max_suspended = max_suspended
        self._running = running
        self._freed = freed
        self._ending = ending or (lambda _job_id: True)
        self.suspended: set[int] = set()
        self.reserved = 0
        """Slots promised to in-process hand-offs in flight (`Worker.take_enqueued`)."""
        self.stats = SlotStats()
        self._depth: dict[int, int] = {}
        self._resuming: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def occupied(self) -> int:
        """Running jobs that hold a slot."""
        return self._running() - len(self.suspended)

    @property
    def resuming(self) -> int:
        """Suspended jobs whose wait is over, queued for a slot."""
        return len(self._resuming)

    def free(self) -> int:
        """Slots a newly started job could take now (resumers and hand-offs come first)."""
        return self.concurrency - self.occupied - self.reserved - len(self._resuming)

    def _room(self) -> bool:
        return self.occupied + self.reserved < self.concurrency

    def started(self) -> None:
        """Record that a job was started into a slot."""
        self.stats.most_occupied = max(self.stats.most_occupied, self.occupied)

    def grant(self) -> None:
        """Give free slots to queued resumers, oldest first."""
        while self._resuming and self._room():
            job_id, future = self._resuming.popleft()
            self.suspended.discard(job_id)
            self.started()
            if not future.done():
                future.set_result(None)

    def ended(self, job_id: int) -> None:
        """Forget a job whose handler is over (it may have ended while suspended)."""
        self.suspended.discard(job_id)
        self._depth.pop(job_id, None)

    @contextlib.asynccontextmanager
    async def released(self, job_id: int) -> AsyncIterator[bool]:
        """Hold no slot for `job_id` inside the block; yields whether the slot was given back.

        Re-entrant and safe under `asyncio.gather`: concurrent waits of one job release its
        slot once, and the last of them to end takes it back.
        """
        depth = self._depth.get(job_id, 0)
        if depth == 0:
            if len(self.suspended) >= self.max_suspended:
                yield False
                return
            self.suspended.add(job_id)
            self.stats.suspensions += 1
            self.stats.most_suspended = max(self.stats.most_suspended, len(self.suspended))
            self._freed()
        self._depth[job_id] = depth + 1
        ending = False
        try:
            yield True
        except asyncio.CancelledError:
            ending = self._ending(job_id)
            raise
        finally:
            left = self._depth.get(job_id, 1) - 1
            if left > 0:
                self._depth[job_id] = left
            else:
                self._depth.pop(job_id, None)
                if not ending:
                    await self._take_back(job_id)

    async def _take_back(self, job_id: int) -> None:
        """Wait for a slot for `job_id`; a cancel while waiting leaves it suspended (ending)."""
        if job_id not in self.suspended:
            return
        if not self._resuming and self._room():
            self.suspended.discard(job_id)
            self.started()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._resuming.append((job_id, future))
        try:
            await future
        except asyncio.CancelledError:
            # Cancelling the task cancels `future` too: whether it is still queued tells.
            if (job_id, future) in self._resuming:
                self._resuming.remove((job_id, future))
            else:  # granted just before the cancel: hand the slot on, it is ending
                self.suspended.add(job_id)
                self._freed()
            raise
