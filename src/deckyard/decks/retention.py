"""Retention: prune finished render requests and tasks, and run the artefact sweep.

Two loops. `retention-prune` deletes, one bounded batch per transaction, the render requests
(with their attempts) and tasks (with their events) that finished longer ago than
`render_retention_seconds` / `task_retention_seconds`, then deletes the artefacts of the pruned
requests that no other row still points at, and the files of publications that ended more than
`site_purge_grace_seconds` ago (`SiteService.purge_ended`). `artifact-sweep` runs
`ArtifactSweeper` steps, which also catches the artefacts of pruned jobs (the job runtime
prunes its own table) and of crashes.
Both read first and write nothing when there is nothing to do, so an idle node stays silent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.sites import SiteService
from deckyard.decks.store_assets import asset_blob_stats
from deckyard.decks.sweeper import ArtifactSweeper
from deckyard.jobs import job_counts, jobs_still_active
from deckyard.loop import IDLE, MORE, Loop, Tick
from deckyard.render.control.store_retention import (
    render_requests_prunable,
    render_requests_prune,
    render_retention_counts,
)
from deckyard.tasks.store import task_counts, tasks_prunable, tasks_prune

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Footprint:
    """What storage holds: rows of the pruned tables, store objects and asset blobs."""

    rows: dict[str, int]
    store_objects: int
    store_bytes: int
    asset_blobs: int
    asset_blob_bytes: int


@dataclass
class PruneStats:
    """Rows and artefacts retention removed since start."""

    render_requests: int = 0
    tasks: int = 0
    artifacts: int = 0
    publications: int = 0


class Retention:
    """The prune and sweep loops of one node (`start()`/`stop()`)."""

    def __init__(
        self, db: Database, store: ArtifactStore, settings: Settings, clock: Clock
    ) -> None:
        self.db = db
        self.store = store
        self.settings = settings
        self.clock = clock
        self.sweeper = ArtifactSweeper(db, store, settings, clock)
        self.sites = SiteService(db, store, settings, clock)
        self.stats = PruneStats()
        self.loops: list[Loop] = []

    def start(self) -> None:
        """Start the prune and sweep loops."""
        s = self.settings
        self.loops = [
            Loop.every(
                "retention-prune",
                self.prune_tick,
                s,
                s.retention_prune_interval_seconds,
                clock=self.clock,
            ),
            Loop.every(
                "artifact-sweep",
                self.sweep_tick,
                s,
                s.artifact_sweep_interval_seconds,
                clock=self.clock,
            ),
        ]
        for loop in self.loops:
            loop.start()

    async def stop(self) -> None:
        """Stop both loops after their current tick."""
        for loop in self.loops:
            await loop.stop()

    async def footprint(self) -> Footprint:
        """Row counts and store size now (reads and a store listing)."""
        async with self.db.read_connection() as conn:
            rows = {
                **await job_counts(conn),
                **await render_retention_counts(conn),
                **await task_counts(conn),
            }
            blobs, blob_bytes = await asset_blob_stats(conn)
        listing = await self.store.listing()
        return Footprint(rows, len(listing), sum(o.size for o in listing), blobs, blob_bytes)

    async def prune_once(self) -> tuple[int, int]:
        """Prune one batch of render requests and one of tasks; (requests, tasks) deleted."""
        s = self.settings
        now = self.clock.now()
        batch = s.retention_batch_size
        async with self.db.read_connection() as conn:
            ended = await render_requests_prunable(
                conn, now - timedelta(seconds=s.render_retention_seconds), batch
            )
            # a request whose job has not yet taken its result stays (the job would find it
            # gone, fail its check and render again)
            waiting = await jobs_still_active(conn, [j for _, _, j in ended if j is not None])
            requests = [(i, key) for i, key, job in ended if job not in waiting]
            task_ids = await tasks_prunable(
                conn, now - timedelta(seconds=s.task_retention_seconds), batch
            )
        if not requests and not task_ids:
            return 0, 0
        request_ids = [i for i, _ in requests]

        async def prune(conn: AsyncConnection) -> tuple[int, int]:
            r = await render_requests_prune(conn, request_ids) if request_ids else 0
            t = await tasks_prune(conn, task_ids) if task_ids else 0
            return r, t

        pruned = await self.db.write(prune)
        keys = [k for _, k in requests if k]
        self.stats.artifacts += await self.sweeper.delete_unreferenced(keys)
        self.stats.render_requests += pruned[0]
        self.stats.tasks += pruned[1]
        log.info("retention: pruned %d render request(s), %d task(s)", *pruned)
        return pruned

    async def prune_tick(self) -> Tick:
        """Prune one batch, and delete the files of one batch of ended publications; again at
        once while a batch comes back full."""
        batch = self.settings.retention_batch_size
        requests, task_count = await self.prune_once()
        publications = await self.sites.purge_ended(batch)
        self.stats.publications += publications
        if requests >= batch or task_count >= batch or publications >= batch:
            return MORE
        return Tick(active=True) if requests or task_count or publications else IDLE

    async def sweep_tick(self) -> Tick:
        """One sweep step (and a batch of orphaned asset blobs); again at once while more remain."""
        step = await self.sweeper.step()
        blobs = await self.sweeper.sweep_blobs()
        if step.more or blobs >= self.settings.artifact_sweep_batch_size:
            return MORE
        self.sweeper.stats.sweeps += 1
        return Tick(active=True) if step.deleted or blobs else IDLE
