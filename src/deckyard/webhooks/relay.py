"""The relays: announce finished jobs (`job.finished`, `render.finished`) and finished
renders (`render.finished` of a screenshot, a render request no job opened) after the fact.

Both are one `Relay` over a `RelaySource` (what finished, and what it announces); what follows
is said of jobs and holds for renders alike.

A job's finish is recorded on the queue's hot path, on PostgreSQL by one statement that settles
a batch and claims the next; nothing can join that transaction. The finish is durable all the
same (the `jobs` row with its `finished_at`), so this loop reads the jobs of subscribed
workspaces that finished since its mark and records their deliveries, each event once per
endpoint (the deliveries' unique key makes a second relay, another node's or one after a
restart, harmless). Nothing is lost across a crash: at start the mark is the newest job event
any endpoint got, and the sweep goes on from there.

Leak, admitted: jobs commit in an order that is not quite their `finished_at` order (on
PostgreSQL the timestamp is taken before the commit; nodes' clocks differ a little). Every
sweep therefore starts `webhook_relay_lag_seconds` before the newest finish it has seen, and a
job whose commit came later than that after its `finished_at` is never announced. Sweeps read
only; they write only when there is something to deliver.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs import Runtime
from deckyard.loop import ACTIVE, IDLE, MORE, Tick
from deckyard.webhooks.events import (
    RENDER_EVENT_ID_PREFIX,
    enqueue_deliveries,
    job_events,
    render_events,
)
from deckyard.webhooks.models import (
    JOB_EVENTS,
    WEBHOOK_QUEUE,
    Endpoint,
    WebhookEvent,
    WebhookEventType,
)
from deckyard.webhooks.store import (
    deliveries_insert,
    deliveries_latest_event_at,
    endpoints_enabled,
)

log = logging.getLogger(__name__)

_JOB_EVENT_NAMES = frozenset(t.value for t in JOB_EVENTS)
Pending = list[tuple[WebhookEvent, list[Endpoint]]]
FinishedAfter = Callable[[tuple[datetime, int], Sequence[str], int], Awaitable[Sequence[Any]]]


@dataclass(frozen=True)
class RelaySource:
    """What a relay announces: rows that finished, read in (`finished_at`, `id`) order."""

    event_names: frozenset[str]
    """The event types it derives; an endpoint subscribing to none of them is not read for."""
    finished_after: FinishedAfter
    """(after, workspace ids, limit) -> the rows of those workspaces finished after `after`,
    oldest first; each has `id` and `finished_at`."""
    events: Callable[[Any], list[WebhookEvent]]
    """What one finished row announces."""
    id_prefix: str | None = None
    """The event ids this source makes start with it (`_start`'s mark); None: any id but
    `not_id_prefix`'s."""
    not_id_prefix: str | None = None


def job_source(runtime: Runtime) -> RelaySource:
    """Finished jobs (not the webhook queue's own): `job.finished` and `render.finished`."""

    async def finished_after(
        after: tuple[datetime, int], workspaces: Sequence[str], limit: int
    ) -> Sequence[Any]:
        return await runtime.finished_after(
            after, list(workspaces), exclude_queues=[WEBHOOK_QUEUE], limit=limit
        )

    return RelaySource(
        _JOB_EVENT_NAMES, finished_after, job_events, not_id_prefix=RENDER_EVENT_ID_PREFIX
    )


def render_source(finished_after: FinishedAfter) -> RelaySource:
    """Finished renders no job opened (`POST /v1/screenshots`), read by `finished_after` (the
    render control plane's, passed in by the node): `render.finished`."""
    return RelaySource(
        frozenset({WebhookEventType.RENDER_FINISHED.value}),
        finished_after,
        render_events,
        id_prefix=RENDER_EVENT_ID_PREFIX,
    )


class Relay:
    """Turns finished rows of a source into deliveries for the endpoints subscribing to them."""

    def __init__(
        self,
        db: Database,
        runtime: Runtime,
        settings: Settings,
        clock: Clock,
        source: RelaySource,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        self.source = source
        self.mark: datetime | None = None
        """The newest `finished_at` a completed sweep has read; None until the first sweep."""
        self.cursor: tuple[datetime, int] | None = None
        """Where a sweep that filled its batch goes on; None between sweeps."""
        self.known: set[tuple[int, datetime]] = set()
        """(endpoint id, events_since) of the endpoints the mark covers."""
        self.seen: dict[str, datetime] = {}
        """Event ids recorded (or wanted by no endpoint) within the lag window, not asked again."""
        self.announced = 0

    def _reset(self) -> None:
        self.mark, self.cursor = None, None
        self.known.clear()
        self.seen.clear()

    async def tick(self) -> Tick:
        """One page of one sweep: read the finished rows, record what endpoints want."""
        lag = timedelta(seconds=self.settings.webhook_relay_lag_seconds)
        async with self.db.read_connection() as conn:
            endpoints = [
                e for e in await endpoints_enabled(conn) if self.source.event_names & set(e.events)
            ]
            if not endpoints:
                self._reset()
                return IDLE
            if self.mark is None:
                await self._start(conn, endpoints)
        assert self.mark is not None
        current = {(e.id, e.events_since) for e in endpoints}
        start = self.cursor
        if start is None:
            # An endpoint created or enabled since the last sweep may have missed jobs that
            # finished before its row was visible here: this sweep starts at its start.
            fresh = [e for e in endpoints if (e.id, e.events_since) not in self.known]
            start = (min([self.mark - lag, *(e.events_since for e in fresh)]), 0)
            self.known = current
        else:
            self.known &= current
        by_workspace: dict[str, list[Endpoint]] = defaultdict(list)
        for e in endpoints:
            by_workspace[e.workspace_id].append(e)
        size = self.settings.webhook_relay_batch_size
        jobs = await self.source.finished_after(start, sorted(by_workspace), size)
        pending: Pending = []
        looked: dict[str, datetime] = {}
        for job in jobs:
            for event in self.source.events(job):
                if event.id in self.seen:
                    continue
                looked[event.id] = event.occurred_at
                targets = [e for e in by_workspace[event.workspace_id] if e.subscribes(event)]
                if targets:
                    pending.append((event, targets))
        made = await self.db.write(lambda conn: self._record(conn, pending)) if pending else 0
        self.seen.update(looked)
        self.announced += made
        if jobs:
            last = jobs[-1]
            assert last.finished_at is not None
            self.mark = max(self.mark, last.finished_at)
            if len(jobs) == size:
                self.cursor = (last.finished_at, last.id)
                return MORE
        self.cursor = None
        horizon = self.mark - lag
        self.seen = {k: at for k, at in self.seen.items() if at >= horizon}
        return ACTIVE if made else IDLE

    async def _start(self, conn: AsyncConnection, endpoints: list[Endpoint]) -> None:
        """Set the mark: the newest job event an endpoint got, else the oldest endpoint's start."""
        source = self.source
        latest = await deliveries_latest_event_at(
            conn,
            sorted(source.event_names),
            id_prefix=source.id_prefix,
            not_id_prefix=source.not_id_prefix,
        )
        self.mark = latest if latest is not None else min(e.events_since for e in endpoints)
        self.known = {(e.id, e.events_since) for e in endpoints}

    async def _record(self, conn: AsyncConnection, pending: Pending) -> int:
        made = 0
        now = self.clock.now()
        for event, targets in pending:
            ids = await deliveries_insert(self.db, conn, event, targets, now)
            await enqueue_deliveries(self.runtime, conn, event.workspace_id, ids)
            made += len(ids)
        return made


class JobRelay(Relay):
    """The relay of finished jobs."""

    def __init__(self, db: Database, runtime: Runtime, settings: Settings, clock: Clock) -> None:
        super().__init__(db, runtime, settings, clock, job_source(runtime))
