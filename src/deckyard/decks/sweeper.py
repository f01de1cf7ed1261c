"""The artefact sweep: delete store objects (and asset blobs) that no row refers to.

Rows are the truth and the store follows them. Every writer stores its object before the row
that points at it commits (`render/control/receipts.py`, `decks/jobs/deck_jobs.py`), and every
deleter removes the row before the object, so a crash can leave an object no row names, never a
row naming a missing object. The sweep removes those leftovers, and the artefacts of rows that
retention pruned (a job, a render request, a deck's versions).

Which rows count is the `REFERRERS` list: render requests' results and inputs (their documents
by key, `render/control/requests.py`), jobs' results, page
versions' screenshot pointers, and publications (every key under the `store_prefix` of a
publication whose files are not deleted). An object is deleted only when it is
older than `artifact_sweep_grace_seconds` (a write in progress, or one whose row has not
committed yet, is younger) and no referrer names it at the time of the check, which runs after
the listing. Each step checks and deletes at most `artifact_sweep_batch_size` objects; a sweep
that finds nothing to delete reads the store and a few rows and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.artifacts import ArtifactStore, StoredObject
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.store_assets import asset_blobs_delete, asset_blobs_unreferenced
from deckyard.decks.store_pages import page_version_artifact_keys_referenced
from deckyard.decks.store_sites import publication_keys_referenced
from deckyard.jobs import job_artifact_keys_referenced
from deckyard.render.control.store_retention import (
    render_artifact_keys_referenced,
    render_document_keys_referenced,
)

log = logging.getLogger(__name__)

Referrer = Callable[[AsyncConnection, Sequence[str]], Awaitable[set[str]]]
"""Which of the given keys some table still points at (a read on the caller's connection)."""

REFERRERS: tuple[Referrer, ...] = (
    render_artifact_keys_referenced,
    render_document_keys_referenced,
    job_artifact_keys_referenced,
    page_version_artifact_keys_referenced,
    publication_keys_referenced,
)
_CHECK_CHUNK = 500


@dataclass
class SweepStats:
    """What the sweep did since start, for metrics and tests."""

    sweeps: int = 0
    objects_deleted: int = 0
    bytes_deleted: int = 0
    blobs_deleted: int = 0


@dataclass(frozen=True)
class SweepStep:
    """One bounded step: objects checked and deleted, and whether candidates remain after it."""

    checked: int
    deleted: int
    more: bool


class ArtifactSweeper:
    """Deletes unreferenced store objects and asset blobs in bounded steps."""

    def __init__(
        self,
        db: Database,
        store: ArtifactStore,
        settings: Settings,
        clock: Clock,
        referrers: Sequence[Referrer] = REFERRERS,
    ) -> None:
        self.db = db
        self.store = store
        self.settings = settings
        self.clock = clock
        self.referrers = list(referrers)
        self.stats = SweepStats()
        self._after = ""

    async def referenced(self, keys: Sequence[str]) -> set[str]:
        """Those of `keys` that some row still points at (reads only)."""
        found: set[str] = set()
        keys = list(keys)
        async with self.db.read_connection() as conn:
            for start in range(0, len(keys), _CHECK_CHUNK):
                chunk = keys[start : start + _CHECK_CHUNK]
                for referrer in self.referrers:
                    found |= await referrer(conn, chunk)
        return found

    async def delete_unreferenced(self, keys: Sequence[str]) -> int:
        """Delete those of `keys` no row points at (a pruned row's artefacts); how many."""
        keys = sorted(set(keys))
        if not keys:
            return 0
        keep = await self.referenced(keys)
        deleted = 0
        for key in keys:
            if key not in keep and await self.store.delete(key):
                deleted += 1
        return deleted

    def _candidates(self, listing: list[StoredObject], cutoff: datetime) -> list[StoredObject]:
        return [o for o in listing if o.modified is not None and o.modified < cutoff]

    async def step(self) -> SweepStep:
        """Check the next batch of old objects (after the previous step's last key); delete the
        unreferenced ones."""
        now = self.clock.now()
        cutoff = now - timedelta(seconds=self.settings.artifact_sweep_grace_seconds)
        batch = self.settings.artifact_sweep_batch_size
        listing = await self.store.listing()
        candidates = [o for o in self._candidates(listing, cutoff) if o.key > self._after]
        chosen = candidates[:batch]
        more = len(candidates) > batch
        self._after = chosen[-1].key if more else ""
        if not chosen:
            return SweepStep(0, 0, False)
        keep = await self.referenced([o.key for o in chosen])
        deleted = 0
        for obj in chosen:
            if obj.key not in keep and await self.store.delete(obj.key):
                deleted += 1
                self.stats.bytes_deleted += obj.size
        self.stats.objects_deleted += deleted
        if deleted:
            log.info("sweep: deleted %d unreferenced artefact(s)", deleted)
        return SweepStep(len(chosen), deleted, more)

    async def sweep_blobs(self) -> int:
        """Delete one batch of asset blobs no asset refers to; writes only when there are some."""
        cutoff = self.clock.now() - timedelta(seconds=self.settings.artifact_sweep_grace_seconds)
        async with self.db.read_connection() as conn:
            digests = await asset_blobs_unreferenced(
                conn, cutoff, self.settings.artifact_sweep_batch_size
            )
        if not digests:
            return 0
        n = await self.db.write(lambda conn: asset_blobs_delete(conn, digests, cutoff))
        self.stats.blobs_deleted += n
        return n

    async def sweep(self) -> SweepStats:
        """A whole sweep, step after step until nothing is left (the CLI, tests and benches)."""
        while (await self.step()).more:
            pass
        while await self.sweep_blobs() >= self.settings.artifact_sweep_batch_size:
            pass
        self.stats.sweeps += 1
        return self.stats
