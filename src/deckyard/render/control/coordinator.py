"""The coordinator: probe renderers, admit and dispatch attempts, poll receipts, recover leases.

Four loops on `Loop`, each silent while there is nothing to do, each woken by its own bus
channel (`models.WAKE_*`) so that a state change wakes only the loop it gives work to:

- `render.probe` asks every renderer for its capabilities over HTTP and writes a renderer row only
  when something about it changed (a new epoch also reconciles that renderer's attempts at once);
  while a renderer drains it comes back every `render_drain_poll_seconds` to release it once
  none of its attempts holds a slot (`drain.py`);
- `render.dispatch` wakes on new, requeued or cancelled requests and on freed slots, admits
  due ones under the admission lock and posts them to their renderers;
- `render.receipts` polls live attempts in batches, renews leases from real receipts, stops
  cancelled or overdue requests and commits results; while a renderer runs our attempts, one
  long-poll of its `GET /v1/changes` pokes this loop the moment an attempt ends there, so a
  result is fetched without waiting for the next timed poll, and while every such renderer is
  watched the timed poll slows to `render_receipt_watched_poll_seconds` (leases, deadlines);
  it wakes on cancels, on the dispatch's poke after a post, and on its timer;
- `render.recovery` wakes when an attempt takes a lease, sleeps until the nearest lease expiry
  and then releases what expired.

Admission (`admit_due` for slots under the caps, and `requests.queue_check` for new requests)
runs under `acquire_admission_lock`, so no two processes decide at once: the caps and the queue
limits hold across every node sharing the database, not just within one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard import tracing
from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.loop import ACTIVE, IDLE, MORE, Loop, Tick
from deckyard.render.control.client import (
    Rejection,
    RendererClient,
    RendererSource,
    RendererSources,
)
from deckyard.render.control.drain import Draining, drive_drains, probed
from deckyard.render.control.models import (
    WAKE_ATTEMPTS,
    WAKE_DISPATCH,
    WAKE_STOP,
    AttemptState,
    RenderAttempt,
    Renderer,
    RendererState,
    RenderRequest,
    RequestStatus,
)
from deckyard.render.control.receipts import PageCommitter, ReceiptPoller
from deckyard.render.control.requests import DocumentsHeld, document_keys, documents_by_value
from deckyard.render.control.store import (
    RendererChangedConcurrently,
    RendererSeen,
    attempt_end,
    attempts_active,
    attempts_reconcile_epoch,
    attempts_recover_expired,
    lease_next_expiry,
    occupancy_snapshot,
    pages_pending,
    renderer_differs,
    renderer_drain,
    renderer_list,
    renderer_upsert_if_changed,
    request_admit,
    request_finish,
    request_next_due,
    requests_due,
)
from deckyard.render.protocol import Receipt, RenderErrorCode


@dataclass(frozen=True)
class Admitted:
    """An attempt just admitted, with the renderer it must be posted to."""

    attempt: RenderAttempt
    request: RenderRequest
    renderer: Renderer
    pages: list[int]
    """The request's pages still pending: the ones this attempt renders."""


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
    """Give due pending requests attempts on free slots while the caps allow (the global
    cap, and each workspace's `workspace_slot_cap`).

    Only renderers named in `reachable` (those this process can post to) get attempts.
    Requests past their deadline fail with `RENDER_DEADLINE_EXCEEDED` instead. Call inside a
    write transaction; it takes the admission lock itself.
    """
    await db.acquire_admission_lock(conn)
    due = await requests_due(conn, now, settings.render_global_cap * 4)
    if not due:
        return []
    occ = await occupancy_snapshot(conn)
    renderers = [r for r in await renderer_list(conn) if r.admits and r.name in reachable]
    cap = workspace_slot_cap(settings, renderers)
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
        if occ.by_workspace[request.workspace_id] >= cap:
            continue
        choice = free_slots(renderers, occ.taken)
        if choice is None:
            break
        renderer, free = choice
        pages = await pages_pending(conn, request.id)
        width = min(
            len(free),
            len(pages),
            settings.render_global_cap - occ.total,
            cap - occ.by_workspace[request.workspace_id],
        )
        slot, extra = free[0], free[1:width]
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


def workspace_slot_cap(settings: Settings, renderers: list[Renderer]) -> int:
    """The most slots one workspace's attempts may hold: its share of the usable renderers'
    slots (at least one), and never more than `render_workspace_cap`.

    The share keeps slots for other workspaces while one workspace's pages hold theirs for a
    whole page budget each (a page that never settles, say): its further requests wait and
    others' are admitted. Counted against the renderers usable now, so a fleet that shrinks
    shrinks every workspace's share with it.
    """
    total = sum(r.slots for r in renderers)
    share = max(1, math.floor(total * settings.render_workspace_slot_share + 1e-9))
    return min(settings.render_workspace_cap, share)


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


log = logging.getLogger(__name__)


def attempt_body(item: Admitted, now: datetime) -> dict[str, Any]:
    """An attempt's body: its pending pages, as many in parallel as it holds slots.

    Each page gets the attempt's per-page timeout; the whole attempt ends at the request's
    deadline (the control plane also stops it then). The one page of a request that is not a
    deck's names its workspace as the tenant, so the renderer may give its tab to the
    workspace's next render without a reset.
    """
    request = item.request
    if request.is_deck:
        pages = request.input["pages"]
    else:
        pages = [{**tracing.unstamped(request.input), "tenant": request.workspace_id}]
    return {
        "attempt_id": item.attempt.attempt_key,
        "parallel": len(item.attempt.slots),
        "deadline_seconds": max(0.1, (item.request.deadline_at - now).total_seconds()),
        "pages": [
            {**pages[i], "index": i, "timeout_seconds": item.attempt.timeout_seconds}
            for i in item.pages or []
        ],
    }


class Coordinator:
    """Runs the control plane's loops for the renderers in `sources`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        sources: RendererSources,
        store: ArtifactStore,
        clock: Clock,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.sources = sources
        self.clock = clock
        self.store = store
        self.documents_sent = 0
        """Documents sent by value because a renderer lacked, or was not known to hold, their
        key (`requests.py`)."""
        self.documents_held = DocumentsHeld()
        self.client = RendererClient(settings.render_http_timeout_seconds, clock, transport)
        self.committer = PageCommitter(db, settings, self.client, store, clock)
        self.renderer_names: dict[int, str] = {}
        self._epochs_seen: dict[str, set[str]] = {}
        self.receipts = ReceiptPoller(
            db, settings, self.client, sources, self.committer, self.renderer_names, clock
        )
        self.epoch_reconciled = 0
        self.recovered = 0
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._submitted: dict[str, int] = {}
        self.name_clashes = 0
        s = settings
        self.probe_loop = Loop.configured(
            "render.probe",
            self.probe_once,
            s,
            poll_interval=s.render_probe_interval_seconds,
            idle_ceiling=s.render_probe_interval_seconds,
            clock=clock,
        )

        def woken(
            name: str,
            tick: Callable[[], Awaitable[Tick]],
            channel: str,
            poll: float = s.render_receipt_poll_seconds,
        ) -> Loop:
            """A loop woken by its own render state changes, polling while attempts are active."""
            return Loop.configured(
                name,
                tick,
                s,
                subscription=db.bus.subscribe(channel),
                poll_interval=poll,
                idle_ceiling=max(poll, s.render_idle_poll_ceiling_seconds),
                clock=clock,
            )

        watched = min(
            s.render_receipt_watched_poll_seconds,
            s.render_lease_seconds * s.render_lease_renew_fraction / 6,
            s.render_idle_poll_ceiling_seconds,
        )
        # A new attempt reaches the receipt loop through the dispatch's own poke, once it is
        # posted (a pass woken by the admission's commit would poll the renderer before it even
        # has the attempt); the timed poll finds attempts other nodes posted.
        self.dispatch_loop = woken("render.dispatch", self.dispatch_once, WAKE_DISPATCH)
        self.receipt_loop = woken(
            "render.receipts",
            self.receipts_once,
            WAKE_STOP,
            max(s.render_receipt_poll_seconds, watched),
        )
        self.recovery_loop = woken("render.recovery", self.recover_once, WAKE_ATTEMPTS)
        self._unwatchable: set[str] = set()
        """Renderers whose last change long-poll failed: timed receipt passes at full pace."""
        self.receipts.watched = self._is_watched
        self.receipts.fresh_seconds = watched

    @property
    def loops(self) -> list[Loop]:
        """Every loop of the coordinator."""
        return [self.probe_loop, self.dispatch_loop, self.receipt_loop, self.recovery_loop]

    def start(self) -> None:
        """Start every loop."""
        for loop in self.loops:
            loop.start()

    async def stop(self) -> None:
        """Stop every loop and change long-poll, wait for result commits, close connections."""
        for loop in self.loops:
            await loop.stop()
        watchers, self._watchers = list(self._watchers.values()), {}
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        await self.receipts.stop()
        await self.client.aclose()

    # --- probe --------------------------------------------------------------------------------

    async def probe_once(self) -> Tick:
        """Probe every renderer over HTTP; write its row only when something changed; tell
        draining ones to drain and release them once nothing of ours is left there."""
        async with self.db.read_connection() as conn:
            known = {r.name: r for r in await renderer_list(conn)}
        self.renderer_names.update({r.id: r.name for r in known.values()})
        wrote = False
        draining: list[Draining] = []
        for source in self.sources.all():
            status = await self.client.capabilities(source.url, source.secret)
            before = known.get(source.name)
            seen = probed(source, before, status, self.clock.now())
            self._check_name_clash(before, seen)
            row = before
            if renderer_differs(before, seen):
                try:
                    row = await self._record_renderer(before, seen)
                except RendererChangedConcurrently:
                    self.probe_loop.poke()
                    row = None
                wrote = True
            if row is not None and status is not None and row.state is RendererState.DRAINING:
                draining.append(Draining(source, row, status))
        if draining:
            await drive_drains(self.db, self.client, draining)
        if wrote:
            self.dispatch_loop.poke()
        s = self.settings
        if draining:
            return Tick(due_in=min(s.render_drain_poll_seconds, s.render_probe_interval_seconds))
        return Tick(due_in=s.render_probe_interval_seconds)

    async def drain(self, renderer_row_id: int) -> Renderer | None:
        """Mark a renderer draining for every node (again: no change); None when there is no
        such renderer. The probe of a node that reaches it then tells the renderer."""
        async with self.db.write_transaction() as conn:
            await self.db.acquire_admission_lock(conn)
            renderer = await renderer_drain(conn, renderer_row_id, self.clock.now())
        if renderer is not None:
            self.probe_loop.poke()
        return renderer

    def _check_name_clash(self, before: Renderer | None, seen: RendererSeen) -> None:
        """Log an error when a renderer name comes back to an epoch it had left.

        A restart moves a renderer to a new epoch for good; flipping back means two processes
        answer to one name (two nodes each calling theirs the same), which loses every render.
        """
        if seen.epoch is None:
            return
        past = self._epochs_seen.setdefault(seen.name, set())
        if before is not None and before.epoch not in (None, seen.epoch) and seen.epoch in past:
            self.name_clashes += 1
            log.error(
                "renderer name %r is used by two renderers (epochs %s and %s alternate); "
                "every renderer needs a name of its own",
                seen.name,
                before.epoch,
                seen.epoch,
            )
        past.add(seen.epoch)

    async def _record_renderer(self, before: Renderer | None, seen: RendererSeen) -> Renderer:
        now = self.clock.now()
        async with self.db.write_transaction() as conn:
            if seen.draining_since is not None and (
                before is None or before.draining_since is None
            ):
                # a drain the renderer reported (SIGTERM): ordered with admissions, as on the API
                await self.db.acquire_admission_lock(conn)
            renderer = await renderer_upsert_if_changed(conn, before, seen, now)
            if seen.epoch is not None and (before is None or before.epoch != seen.epoch):
                lost = await attempts_reconcile_epoch(
                    self.db,
                    conn,
                    renderer.id,
                    seen.epoch,
                    now,
                    self.settings.render_retry_after_seconds,
                    refund=before is not None and before.draining_since is not None,
                )
                self.epoch_reconciled += len(lost)
                if lost:
                    log.warning(
                        "renderer %s restarted (epoch %s): %d attempt(s) lost",
                        seen.name,
                        seen.epoch,
                        len(lost),
                    )
        self.renderer_names[renderer.id] = renderer.name
        log.info("renderer %s is %s (epoch %s)", seen.name, seen.state, renderer.epoch)
        return renderer

    # --- dispatch -----------------------------------------------------------------------------

    async def dispatch_once(self) -> Tick:
        """Admit due requests onto free slots and post them; no write when none can start."""
        now = self.clock.now()
        async with self.db.read_connection() as conn:
            due = await request_next_due(conn)
        if due is None:
            return IDLE
        if due > now:
            return Tick(due_in=(due - now).total_seconds())
        if not await self._slot_might_be_free():
            return IDLE
        async with self.db.write_transaction() as conn:
            admitted = await admit_due(self.db, conn, self.settings, now, self.sources.names())
        for item in admitted:
            with tracing.attempt_span(item):
                await self._dispatch(item)
        if admitted:
            self.receipt_loop.poke()
            self.recovery_loop.poke()
            return MORE
        # Nothing could start (say, every due request's workspace is at its slot cap while
        # another slot is free): back off like an idle loop; a freed slot wakes it.
        return IDLE

    async def _slot_might_be_free(self) -> bool:
        """Read-only pre-check so a full or renderer-less plane does not spin write transactions.

        A slot freed later wakes this loop (`WAKE_DISPATCH`), as does a renderer coming up.
        """
        async with self.db.read_transaction() as conn:
            renderers = await renderer_list(conn)
            occ = await occupancy_snapshot(conn)
        if occ.total >= self.settings.render_global_cap:
            return False
        names = self.sources.names()
        for r in renderers:
            usable = r.admits and r.name in names
            if usable and len(occ.taken.get((r.id, r.epoch or ""), ())) < r.slots:
                return True
        return False

    async def _submit_by_value(
        self, source: RendererSource, body: dict[str, Any], refusal: Rejection
    ) -> Receipt | Rejection | None:
        """Submit `body` again with the documents the renderer lacks by value (`requests.py`);
        a document no longer stored keeps the refusal (infrastructure, retried elsewhere)."""
        full = await documents_by_value(self.store, body, list(refusal.missing))
        if full is None:
            log.warning("a render document is gone from the store: %s", refusal.missing)
            return refusal
        self.documents_sent += len(set(refusal.missing))
        return await self.client.submit(source.url, source.secret, full)

    async def _dispatch(self, item: Admitted) -> None:
        source = self.sources.get(item.renderer.name)
        if source is None:
            return
        body = attempt_body(item, self.clock.now())
        epoch = item.renderer.epoch or ""
        keys = document_keys(body)
        fresh = self.documents_held.unknown(source.name, epoch, keys)
        if fresh:
            full = await documents_by_value(self.store, body, fresh)
            if full is not None:  # else the renderer's refusal below says what is missing
                body = full
                self.documents_sent += len(fresh)
        self.receipts.expect(item.attempt)
        answer = await self.client.submit(source.url, source.secret, body)
        if isinstance(answer, Rejection) and answer.code == RenderErrorCode.DOCUMENT_UNKNOWN:
            answer = await self._submit_by_value(source, body, answer)
        if answer is not None and not isinstance(answer, Rejection):
            self.documents_held.took(source.name, epoch, keys)
            self._watch(source.name, answer)
        if answer is None or not isinstance(answer, Rejection):
            return
        busy = answer.code == RenderErrorCode.NO_FREE_SLOT.value
        if busy:  # the row is behind (its slots are busy elsewhere, or it began draining)
            self.probe_loop.poke()
        async with self.db.write_transaction() as conn:
            await attempt_end(
                self.db,
                conn,
                item.attempt,
                AttemptState.FAILED,
                code=answer.code,
                message=answer.message,
                retryable=answer.retryable,
                retry_after_seconds=self.settings.render_retry_after_seconds,
                now=self.clock.now(),
                refund=busy,
            )

    def _watch(self, name: str, receipt: Receipt) -> None:
        """Keep one change long-poll open to renderer `name` while it runs our attempts.

        A new long-poll begins from the change count the submission's answer carried, so its
        first answer waits for an ending instead of waking a receipt pass at once.
        """
        self._submitted[name] = self._submitted.get(name, 0) + 1
        self._unwatchable.discard(name)
        task = self._watchers.get(name)
        if task is None or task.done():
            seen, epoch = -1, None
            if receipt.changes is not None:
                seen, epoch = receipt.changes, receipt.epoch
            self._watchers[name] = asyncio.create_task(
                self._watch_changes(name, seen, epoch), name=f"render.changes:{name}"
            )

    async def _watch_changes(self, name: str, seen: int, epoch: str | None) -> None:
        """Commit results the renderer's change answers carry, or run a receipt pass, as soon
        as it says an attempt ended (no timed wait).

        Ends when the renderer has nothing running and nothing was posted since the call
        began, or when it does not answer: the timed receipt poll is the fallback either way.
        """
        wait = self.settings.renderer_changes_max_wait_seconds
        while True:
            source = self.sources.get(name)
            if source is None:
                return
            posted = self._submitted.get(name, 0)
            try:
                answer = await self.client.changes(source.url, source.secret, seen, wait)
            except Exception:
                log.exception("change long-poll of renderer %s failed; timed polls go on", name)
                answer = None
            if answer is None:
                self._unwatchable.add(name)
                self.receipt_loop.poke()
                return
            if epoch is None or answer.epoch != epoch:
                # Without a count to begin from, an attempt may have ended before the first call.
                self.receipt_loop.poke()
            elif answer.changes > seen and not self.receipts.take_ended(source, answer):
                self.receipt_loop.poke()
            seen, epoch = answer.changes, answer.epoch
            if answer.busy == 0 and self._submitted.get(name, 0) == posted:
                return

    # --- receipts and recovery ----------------------------------------------------------------

    async def receipts_once(self) -> Tick:
        """One receipt pass (see `ReceiptPoller`); the next one soon unless all is watched."""
        if not await self.receipts.pass_once():
            return IDLE
        if self._all_watched():
            return ACTIVE
        return Tick(active=True, due_in=self.settings.render_receipt_poll_seconds)

    def _is_watched(self, name: str) -> bool:
        """Whether a change long-poll to renderer `name` is open and has not failed."""
        task = self._watchers.get(name)
        return name not in self._unwatchable and task is not None and not task.done()

    def _all_watched(self) -> bool:
        """Whether a change long-poll is open to every renderer this process knows.

        Then any attempt ending anywhere pokes the receipt pass; otherwise (a renderer not
        watched: no post from this process yet, its long-poll failed or ended) the timed pass
        keeps its full pace, as before there were long-polls.
        """
        sources = self.sources.all()
        return bool(sources) and all(self._is_watched(source.name) for source in sources)

    async def recover_once(self) -> Tick:
        """Release slots whose lease expired; otherwise report when the next one will."""
        now = self.clock.now()
        async with self.db.read_connection() as conn:
            nearest: datetime | None = await lease_next_expiry(conn)
        if nearest is None:
            return IDLE
        if nearest > now:
            return Tick(due_in=(nearest - now).total_seconds())
        async with self.db.write_transaction() as conn:
            expired = {a.id: a for a in await attempts_active(conn) if a.lease_expires_at <= now}
            lost = await attempts_recover_expired(
                self.db, conn, now, self.settings.render_retry_after_seconds
            )
        self.recovered += len(lost)
        if lost:
            log.warning("render attempts %s: lease expired; slots released", lost)
            self.dispatch_loop.poke()
            await self._abort_lost([expired[i] for i in lost if i in expired])
        return MORE if lost else ACTIVE

    async def _abort_lost(self, attempts: list[RenderAttempt]) -> None:
        """Ask a live renderer to stop attempts whose lease expired (best effort).

        A renderer that answers late would otherwise keep rendering a lost attempt, a deck
        attempt for minutes, on slots the control plane already counts as free.
        """
        for attempt in attempts:
            name = self.renderer_names.get(attempt.renderer_row_id)
            source = self.sources.get(name) if name is not None else None
            if source is not None:
                await self.client.cancel(source.url, source.secret, attempt.attempt_key)
