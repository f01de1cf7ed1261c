"""Render requests, the one unit of render work: open, wait, cancel, forget.

A screenshot (`POST /v1/screenshots`), a validation (`POST /v1/validate`), a deck page's check
and a deck job's whole deck (`deck_requests.py`) are each one render request; no job wraps a
render. The request carries what a job did: its own attempts and retry counter
(`max_attempts`), a deadline, a dedupe key, cancellation and queue limits; its state changes
wake `WAKE_REQUESTS`, which the waiters here and the API's event stream follow.

A request opened by a job (a deck page's check, a deck render) names it as its parent, and
cancellation reaches the request three ways, so a cancelled job never leaves a live render:

1. the cancel hook (`Runtime.on_cancel`, `cancel_hook`) cancels the job's requests in the
   cancel's own transaction;
2. opening a request locks the job row and re-reads its cancel flag in the same transaction
   (`request_to_resume`), so a cancel that committed first is seen and no request is created;
3. the observer (`observe_cancel`): when the job's handler is stopped, it re-reads the job's
   cancel flag in a short session and cancels any request the job still has, closing "cancel
   committed, request enqueued afterwards" whatever the isolation level. A stop for any other
   reason (shutdown, lost lease) leaves the request alone for the job's next attempt to join.

A render nobody keeps (a validation) is deleted once answered (`request_forget`,
`documents_forget`); its deadline is the caller's wait, so a request whose caller died ends by
itself.

Inputs go by reference: a request's row and the renderer call carry a page's `document_key` (the
SHA-256 of its HTML) instead of the document (the example deck's pages are ~780 KiB each, their
font inlined). The document itself is stored once under `render-documents/<key>.html` of the
artefact store, before the row that names it commits (the sweeper's rule: an object may lack a
row, never the reverse); the sweep keeps it while a render request's input names it
(`render_document_keys_referenced`). A renderer that does not hold a key refuses the call with
`RENDER_DOCUMENT_UNKNOWN` and its `missing` keys; `documents_by_value` then puts those
documents back into the body for one more submission, and the renderer keeps them by key.
`DocumentsHeld` remembers which keys each renderer took, so a document it was never sent goes by
value in the first submission: a new page (every validation, every first render of a deck
version) does not pay a refused call first.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard import tracing
from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database, Follower, SharedFollowers, SharedWaiters
from deckyard.jobs import JobError, JobErrorCode, JobStatus, Runtime
from deckyard.render.control.models import (
    DOCUMENT_PREFIX,
    SCREENSHOT_KIND,
    WAKE_ATTEMPTS,
    WAKE_REQUESTS,
    ControlErrorCode,
    RendererState,
    RenderRequest,
    ScreenshotSpec,
)
from deckyard.render.control.store import (
    NewRequest,
    renderer_list,
    renders_queued,
    request_active_by_dedupe,
    request_adopt,
    request_cancel_for_jobs,
    request_insert,
    request_latest_of_job,
    requests_ended,
    requests_state,
)
from deckyard.render.control.store_retention import (
    render_document_keys_referenced,
    render_requests_prune,
)
from deckyard.render.protocol import document_key

log = logging.getLogger(__name__)


class RequestNotFound(LookupError):
    """No render request has that id."""


class NoRendererUp(Exception):
    """No renderer answered its last probe, and the caller asked not to queue without one."""


class RenderQueueFull(Exception):
    """Too many render requests are queued (globally or for the workspace); try again later."""

    code = ControlErrorCode.QUEUE_FULL

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def queue_check(settings: Settings, workspace_id: str, total: int, mine: int) -> None:
    """Refuse a new one-page render with `RenderQueueFull` when a queue limit is reached.

    `total` and `mine` count active one-page requests and queued deck pages (everyone's, this
    workspace's), read in the submitting transaction under the admission lock.
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
class Opening:
    """How to open one render request for a spec."""

    workspace_id: str
    deadline_at: datetime
    dedupe: bool = True
    """Join an active request of the workspace for the same input (`{workspace}:{input hash}`)."""
    parent_job_id: int | None = None
    """The job that waits for it: cancelling the job cancels the request; a retried job takes
    back its earlier request for the same input instead of rendering again."""
    capture: bool = True
    """False: the renderer takes no picture; the result is the diagnostics only."""
    needs_renderer: bool = False
    """True: refuse (`NoRendererUp`) rather than queue while no renderer is up."""


async def open_request(
    db: Database,
    runtime: Runtime,
    settings: Settings,
    store: ArtifactStore,
    spec: ScreenshotSpec,
    opening: Opening,
    now: datetime,
) -> tuple[RenderRequest, bool]:
    """Open (or join) a one-page render request for `spec`: (request, created).

    The document is stored by its content key before the row (`documents_by_reference`): in
    the row by value, every state change rewrote the whole ~780 KiB row (SQLite rewrites a row
    with its overflow pages), and a validation's writes grew the WAL by megabytes.

    One write transaction: for a job's request, the job's cancel flag under its row lock and
    the request it may take back; the admission lock; the renderer check when asked; the queue
    limits (raises `RenderQueueFull`), counted only for a new request; the insert.
    """
    digest = spec.input_hash(capture=opening.capture)
    render_input = tracing.stamped(
        await documents_by_reference(store, spec.render_input(capture=opening.capture))
    )
    workspace = opening.workspace_id
    if opening.dedupe:
        dedupe_key: str | None = f"{workspace}:{digest}"
    elif opening.parent_job_id is not None:
        dedupe_key = f"job:{opening.parent_job_id}:{digest}"
    else:
        dedupe_key = None
    new = NewRequest(
        kind=SCREENSHOT_KIND,
        workspace_id=workspace,
        input=render_input,
        input_hash=digest,
        max_attempts=settings.render_max_attempts,
        deadline_at=opening.deadline_at,
        dedupe_key=dedupe_key,
        parent_job_id=opening.parent_job_id,
    )

    async def admit(conn: AsyncConnection) -> tuple[RenderRequest, bool]:
        parent = opening.parent_job_id
        if parent is not None:
            earlier = await request_to_resume(db, runtime, conn, parent, digest)
            if earlier is not None:
                return earlier, False
        else:
            await db.acquire_admission_lock(conn)
        if opening.needs_renderer and not any(
            r.state is RendererState.UP for r in await renderer_list(conn)
        ):
            raise NoRendererUp("no renderer is up; start one (deckyard serve --renderers 1)")
        if dedupe_key is not None:
            joined = await request_active_by_dedupe(conn, dedupe_key)
            if joined is not None:
                if parent is not None:
                    await request_adopt(conn, joined.id, parent, now)
                return joined, False
        total, mine = await renders_queued(conn, workspace)
        queue_check(settings, workspace, total, mine)
        return await request_insert(db, conn, new, now)

    return await db.write(admit)


async def request_to_resume(
    db: Database, runtime: Runtime, conn: AsyncConnection, job_id: int, digest: str
) -> RenderRequest | None:
    """The first step of opening a job's render request, inside its write transaction.

    Refuses a job whose cancel was asked or that is no longer running (the cancel flag is read
    under a row lock, so a cancel cannot slip between this and the insert), takes the admission
    lock, and returns the job's earlier request for the same input when it can still be used:
    a retried job (its first attempt lost its connection or lease after the render finished, or
    in the middle of a deck) takes the render it already has instead of rendering twice.
    """
    status, asked = await runtime.cancel_flag(job_id, conn, lock=True)
    if asked or status != JobStatus.RUNNING.value:
        raise JobError(JobErrorCode.CANCELLED.value, "cancelled", retryable=False)
    await db.acquire_admission_lock(conn)
    earlier = await request_latest_of_job(conn, job_id)
    if earlier is not None and earlier.input_hash == digest and earlier.reusable:
        return earlier
    return None


async def request_forget(db: Database, request_id: int) -> None:
    """Delete a finished request with its attempts (no-op while active)."""
    await db.write(lambda conn: render_requests_prune(conn, [request_id]))


async def documents_forget(db: Database, store: ArtifactStore, keys: Sequence[str]) -> list[str]:
    """Delete the documents of content `keys` (`document_object_key`) that no render request
    names; the object keys deleted. For a finished request's inputs that nobody keeps (a
    validation's)."""
    if not keys:
        return []
    objects = [document_object_key(key) for key in keys]
    async with db.read_connection() as conn:
        named = await render_document_keys_referenced(conn, objects)
    return [key for key in objects if key not in named and await store.delete(key)]


def request_waiters(db: Database, recheck_seconds: float) -> SharedWaiters[RenderRequest]:
    """Waiters for render requests to end (without their `input`), one read per state change.

    Every request state change wakes `WAKE_REQUESTS` at commit (in process, and through NOTIFY
    on PostgreSQL); one reader serves every waiter of the node, where each waiter re-reading its
    own request made N renders in flight cost N reads per state change.
    """
    return SharedWaiters(db, WAKE_REQUESTS, requests_ended, recheck_seconds, "render.waiters")


async def wait_for_terminal(
    waiters: SharedWaiters[RenderRequest], request_id: int, timeout: float | None
) -> RenderRequest:
    """Return the request once it is terminal (without its `input`); reads only, never writes."""
    async with asyncio.timeout(timeout):
        request = await waiters.wait(request_id)
    if request is None:
        raise RequestNotFound(request_id)
    return request


class RequestFollowers(SharedFollowers["_RequestFollower", RenderRequest]):
    """Streams of render request states (`/v1/renders/{id}/events`): one shared reader for all.

    Each stream used to re-read its own request on every wake of the request and attempt
    channels, so N streams open cost N reads a state change and O(N^2) in all (24 screenshots
    in flight: ~20 reads a screenshot, the API process's largest CPU cost). Here one task reads
    every followed request (without its `input`) in one statement per wake and hands each
    stream the state when it changed past the one the stream has, as `jobs.EventFollowers`
    does for job events.
    """

    def __init__(self, db: Database, recheck_seconds: float) -> None:
        super().__init__(db, (WAKE_REQUESTS, WAKE_ATTEMPTS), recheck_seconds, "render.followers")
        self.reads = 0
        """Reads made (for tests and benchmarks)."""

    def follow(self, request_id: int, after: datetime) -> AsyncGenerator[RenderRequest]:
        """The request each time its row changed after `after` (its `updated_at`), until it
        ended or is gone."""
        return self._stream(_RequestFollower(request_id, after))

    async def _read_once(self, followers: list[_RequestFollower]) -> bool:
        async with self.db.read_connection() as conn:
            found = await requests_state(conn, sorted({f.request_id for f in followers}))
        self.reads += 1
        for follower in followers:
            request = found.get(follower.request_id)
            if request is not None and (request.is_terminal or request.updated_at > follower.after):
                # an end is always handed over, the stream's last item
                follower.after = max(follower.after, request.updated_at)
                follower.inbox.put_nowait(request)
            if request is None or request.is_terminal:
                self._end(follower)
        return False


@dataclass(eq=False)
class _RequestFollower(Follower[RenderRequest]):
    request_id: int
    after: datetime


class JobCancels:
    """Cancellation of the requests jobs opened: the hook inside a job cancel's transaction,
    and the observer a stopped handler runs (see the module docstring)."""

    def __init__(self, db: Database, runtime: Runtime, clock: Clock) -> None:
        self.db = db
        self.runtime = runtime
        self.clock = clock

    async def cancel_hook(self, conn: AsyncConnection, job_ids: list[int], now: datetime) -> None:
        """Cancel the render requests of cancelled jobs inside the cancel's transaction."""
        await request_cancel_for_jobs(self.db, conn, job_ids, now)

    async def observe_cancel(self, job_id: int) -> int:
        """Cancel the job's live requests if (and only if) the job was asked to cancel."""
        async with self.db.write_transaction() as conn:
            _status, asked = await self.runtime.cancel_flag(job_id, conn, lock=True)
            if not asked:
                return 0
            return await request_cancel_for_jobs(self.db, conn, [job_id], self.clock.now())

    async def observe_quietly(self, job_id: int) -> None:
        """`observe_cancel`, logging a failure: the request's deadline bounds it then."""
        try:
            await self.observe_cancel(job_id)
        except Exception:
            log.exception(
                "job %d: cancel observer failed; the request's deadline bounds it", job_id
            )


def document_object_key(key: str) -> str:
    """The artefact store key of the document whose content key is `key`."""
    return f"{DOCUMENT_PREFIX}{key}.html"


async def documents_by_reference(
    store: ArtifactStore, render_input: dict[str, Any]
) -> dict[str, Any]:
    """`render_input` (one render or `{"pages": [...]}`) with each document stored and replaced by
    its key. Storing again refreshes the object's age, so a sweep in progress keeps it."""
    if "pages" in render_input:
        pages = [await _one_by_reference(store, page) for page in render_input["pages"]]
        return {**render_input, "pages": pages}
    return await _one_by_reference(store, render_input)


async def _one_by_reference(store: ArtifactStore, render: dict[str, Any]) -> dict[str, Any]:
    document = render.get("document")
    if document is None:
        return render
    key = document_key(document)
    await store.put(document_object_key(key), document.encode("utf-8"))
    rest = {k: v for k, v in render.items() if k != "document"}
    return {**rest, "document_key": key}


async def documents_by_value(
    store: ArtifactStore, body: dict[str, Any], missing: list[str]
) -> dict[str, Any] | None:
    """`body` (an attempt or a deck attempt) with the `missing` keys' documents by value, or None
    when one of them is no longer stored."""
    wanted = set(missing)
    loaded: dict[str, str] = {}
    renders = body.get("pages", [body])
    keys = {str(r["document_key"]) for r in renders if r.get("document_key") in wanted}
    datas = await asyncio.gather(*(store.get(document_object_key(k)) for k in sorted(keys)))
    for key, data in zip(sorted(keys), datas, strict=True):
        if data is None:
            return None
        loaded[key] = data.decode("utf-8")

    def fill(render: dict[str, Any]) -> dict[str, Any]:
        key = render.get("document_key")
        if key not in loaded:
            return render
        rest = {k: v for k, v in render.items() if k != "document_key"}
        return {**rest, "document": loaded[key]}

    if "pages" in body:
        return {**body, "pages": [fill(page) for page in body["pages"]]}
    return fill(body)


def document_keys(body: dict[str, Any]) -> list[str]:
    """The document keys `body` (an attempt or a deck attempt) names, in order, once each."""
    keys = (r.get("document_key") for r in body.get("pages", [body]))
    return list(dict.fromkeys(k for k in keys if isinstance(k, str)))


class DocumentsHeld:
    """The document keys each renderer took (by value, or by key without a refusal), as far as
    this process saw, for the renderer's current epoch; the newest `limit` per renderer.

    A guess, never a promise: a renderer that dropped a key from its bounded cache, or took it
    from another node, is corrected by its refusal or costs one document sent by value.
    """

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._held: dict[str, tuple[str, OrderedDict[str, None]]] = {}

    def _keys(self, renderer: str, epoch: str) -> OrderedDict[str, None]:
        known = self._held.get(renderer)
        if known is None or known[0] != epoch:
            known = (epoch, OrderedDict())
            self._held[renderer] = known
        return known[1]

    def unknown(self, renderer: str, epoch: str, keys: Iterable[str]) -> list[str]:
        """Those of `keys` the renderer was not seen to take in this epoch."""
        held = self._keys(renderer, epoch)
        return [k for k in keys if k not in held]

    def took(self, renderer: str, epoch: str, keys: Iterable[str]) -> None:
        """The renderer accepted a submission naming `keys`: it holds them now."""
        held = self._keys(renderer, epoch)
        for key in keys:
            held[key] = None
            held.move_to_end(key)
        while len(held) > self.limit:
            held.popitem(last=False)
