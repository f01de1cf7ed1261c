"""Draining renderers, from the control plane's side: the row a probe writes, and the calls
that tell a renderer to drain and release it once nothing of ours is left there.

A drain lives in the renderer's row (`draining_since`, state `draining`), so every node sharing
the database stops admitting to it as soon as the row says so (`Renderer.admits`), whoever
began it: `POST /v1/renderers/{id}/drain` on any node (`Coordinator.drain`), or SIGTERM to the
renderer, which its capabilities then report. Each node's probe keeps the row in step:

- a drain holds for the epoch it began in; the renderer's replacement (a new epoch under the
  same name) is `up` again, and its predecessor's attempts are reconciled without counting
  against their requests;
- a draining renderer that stops answering is `drained` (its exit), not `down`;
- a node that reaches a draining renderer tells it to drain (when the drain began here) and,
  once none of its attempts holds a slot in the database (every result committed or handed
  back), releases it (`{"release": true}`), so it exits without waiting for its own bounds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from deckyard.db import Database
from deckyard.render.control.client import RendererClient, RendererSource, RendererStatus
from deckyard.render.control.models import Renderer, RendererState
from deckyard.render.control.store import RendererSeen, occupancy_snapshot

log = logging.getLogger(__name__)


def probed(
    source: RendererSource,
    before: Renderer | None,
    status: RendererStatus | None,
    now: datetime,
) -> RendererSeen:
    """What the row of `source` should say after a probe that got `status` (None: no answer).

    `before` is the row as read before the probe. Its drain carries over while the epoch is
    the same; a renderer that reports draining which the row does not know yet starts at `now`.
    """
    same_epoch = before is not None and (status is None or status.epoch == before.epoch)
    since = before.draining_since if before is not None and same_epoch else None
    if status is None:
        state = RendererState.DOWN if since is None else RendererState.DRAINED
        return RendererSeen(
            source.name, source.url, state, error="unreachable", draining_since=since
        )
    if status.draining and since is None:
        since = now
    return RendererSeen(
        source.name,
        source.url,
        RendererState.UP if since is None else RendererState.DRAINING,
        renderer_id=status.renderer_id,
        epoch=status.epoch,
        slots=status.slots,
        draining_since=since,
    )


@dataclass(frozen=True)
class Draining:
    """A renderer whose row drains and which answered this probe."""

    source: RendererSource
    renderer: Renderer
    status: RendererStatus


async def drive_drains(db: Database, client: RendererClient, draining: list[Draining]) -> int:
    """Tell each draining renderer to drain (if it does not yet), and release those where no
    attempt holds a slot any more; returns how many were released.

    The occupancy is read after the rows said draining: an admission that read a row before
    the drain committed had to commit first (both hold the admission lock), so it is seen.
    """
    async with db.read_connection() as conn:
        occ = await occupancy_snapshot(conn)
    released = 0
    for item in draining:
        held = occ.taken.get((item.renderer.id, item.renderer.epoch or ""), set())
        if item.status.draining and held:
            continue
        source = item.source
        if await client.drain(source.url, source.secret, release=not held) and not held:
            released += 1
            log.info("renderer %s drained: nothing of ours left there; released", source.name)
    return released
