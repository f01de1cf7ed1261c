"""API housekeeping: forgetting stored idempotent responses after their retention."""

from __future__ import annotations

from datetime import timedelta

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.loop import IDLE, MORE, Loop, Tick
from deckyard.workspaces.store import idempotency_delete_expired, idempotency_expired

BATCH = 500


async def idempotency_prune(db: Database, settings: Settings, clock: Clock) -> int:
    """Delete up to one batch of expired idempotency records; reads first, writes only if due."""
    cutoff = clock.now() - timedelta(seconds=settings.idempotency_retention_seconds)
    async with db.read_connection() as conn:
        keys = await idempotency_expired(conn, cutoff, BATCH)
    if not keys:
        return 0
    await db.write(lambda conn: idempotency_delete_expired(conn, keys, cutoff))
    return len(keys)


class ApiMaintenance:
    """Runs the API's housekeeping loop."""

    def __init__(self, db: Database, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self._loops: list[Loop] = []

    @property
    def loops(self) -> list[Loop]:
        """The housekeeping loop, once started."""
        return self._loops

    async def _tick(self) -> Tick:
        n = await idempotency_prune(self.db, self.settings, self.clock)
        return MORE if n >= BATCH else IDLE

    def start(self) -> None:
        """Start pruning at the job-prune cadence."""
        s = self.settings
        loop = Loop.every(
            "idempotency-prune", self._tick, s, s.job_prune_interval_seconds, clock=self.clock
        )
        loop.start()
        self._loops = [loop]

    async def stop(self) -> None:
        """Stop the loop."""
        for loop in self._loops:
            await loop.stop()
