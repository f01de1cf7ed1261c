"""Admission: queue limits for new requests, and slots for pending ones under the caps.

Both run under `acquire_admission_lock`, so no two processes decide at once: the caps and the
queue limits hold across every node sharing the database, not just within one.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.models import RenderAttempt, Renderer, RenderRequest
from deckyard.render.control.status import ControlErrorCode, RendererState, RequestStatus
from deckyard.render.control.store import (
    occupancy_snapshot,
    renderer_list,
    request_admit,
    request_finish,
    requests_due,
)
from deckyard.render.control.store_pages import pages_pending
from deckyard.render.protocol import RenderErrorCode


class RenderQueueFull(Exception):
    """Too many render requests are queued (globally or for the workspace); try again later."""

    code = ControlErrorCode.QUEUE_FULL

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def queue_check(settings: Settings, workspace_id: str, total: int, mine: int) -> None:
    """Refuse a new screenshot with `RenderQueueFull` when a queue limit is reached.

    `total` and `mine` count active screenshot jobs (everyone's, this workspace's), read in the
    submitting transaction under the admission lock. This is the one queue limit: a job that
    got in opens its render request without a second check.
    """
    retry = settings.render_retry_after_seconds
    if total >= settings.render_queue_limit:
        raise RenderQueueFull(
            f"{total} screenshots are queued (limit {settings.render_queue_limit})", retry
        )
    if mine >= settings.render_workspace_queue_limit:
        raise RenderQueueFull(
            f"workspace {workspace_id} has {mine} screenshots queued "
            f"(limit {settings.render_workspace_queue_limit})",
            retry,
        )


@dataclass(frozen=True)
class Admitted:
    """An attempt just admitted, with the renderer it must be posted to."""

    attempt: RenderAttempt
    request: RenderRequest
    renderer: Renderer
    pages: list[int] | None = None
    """For a deck request: the pages still pending, the ones this attempt renders."""


def attempt_timeout(settings: Settings, request: RenderRequest, now: datetime) -> float:
    """min(per-attempt timeout, the request's remaining time, the renderer's maximum)."""
    remaining = (request.deadline_at - now).total_seconds()
    return max(
        0.1,
        min(
            settings.render_attempt_timeout_seconds,
            remaining,
            settings.renderer_max_timeout_seconds,
        ),
    )


async def admit_due(
    db: Database,
    conn: AsyncConnection,
    settings: Settings,
    now: datetime,
    reachable: set[str],
) -> list[Admitted]:
    """Give due pending requests attempts on free slots while the caps allow.

    Only renderers named in `reachable` (those this process can post to) get attempts.
    Requests past their deadline fail with `RENDER_DEADLINE_EXCEEDED` instead. Call inside a
    write transaction; it takes the admission lock itself.
    """
    await db.acquire_admission_lock(conn)
    due = await requests_due(conn, now, settings.render_global_cap * 4)
    if not due:
        return []
    occ = await occupancy_snapshot(conn)
    renderers = [
        w
        for w in await renderer_list(conn)
        if w.state is RendererState.UP
        and w.epoch is not None
        and w.slots > 0
        and w.name in reachable
    ]
    admitted: list[Admitted] = []
    for request in due:
        if request.deadline_at <= now:
            await request_finish(
                db,
                conn,
                request.id,
                RequestStatus.FAILED,
                now,
                code=RenderErrorCode.DEADLINE_EXCEEDED.value,
                message=f"the deadline passed before attempt {request.attempts + 1} could start",
                from_status=[RequestStatus.PENDING.value],
            )
            continue
        if occ.total >= settings.render_global_cap:
            break
        if occ.by_workspace[request.workspace_id] >= settings.render_workspace_cap:
            continue
        choice = free_slots(renderers, occ.taken)
        if choice is None:
            break
        renderer, free = choice
        slot, extra = free[0], []
        pages: list[int] | None = None
        if request.is_deck:
            pages = await pages_pending(conn, request.id)
            width = min(
                len(free),
                len(pages),
                settings.render_global_cap - occ.total,
                settings.render_workspace_cap - occ.by_workspace[request.workspace_id],
            )
            extra = free[1:width]
        assert renderer.epoch is not None
        attempt = await request_admit(
            db,
            conn,
            request,
            renderer_row_id=renderer.id,
            epoch=renderer.epoch,
            slot=slot,
            attempt_key=f"dy{request.id}-{request.attempts + 1}-{secrets.token_hex(4)}",
            timeout_seconds=attempt_timeout(settings, request, now),
            lease_seconds=settings.render_lease_seconds,
            now=now,
            extra_slots=extra,
        )
        if attempt is None:
            continue
        held = attempt.slots
        occ.total += len(held)
        occ.by_workspace[request.workspace_id] += len(held)
        occ.taken.setdefault((renderer.id, renderer.epoch), set()).update(held)
        admitted.append(Admitted(attempt, request, renderer, pages))
    return admitted


def free_slot(
    renderers: list[Renderer], taken: dict[tuple[int, str], set[int]]
) -> tuple[Renderer, int] | None:
    """The least busy renderer's lowest free slot, or None when every slot is held."""
    choice = free_slots(renderers, taken)
    return None if choice is None else (choice[0], choice[1][0])


def free_slots(
    renderers: list[Renderer], taken: dict[tuple[int, str], set[int]]
) -> tuple[Renderer, list[int]] | None:
    """The least busy renderer and its free slots (lowest first), or None when all are held."""
    best: tuple[int, Renderer, list[int]] | None = None
    for renderer in renderers:
        assert renderer.epoch is not None
        held = taken.get((renderer.id, renderer.epoch), set())
        free = [s for s in range(renderer.slots) if s not in held]
        if free and (best is None or len(held) < best[0]):
            best = (len(held), renderer, free)
    return None if best is None else (best[1], best[2])
