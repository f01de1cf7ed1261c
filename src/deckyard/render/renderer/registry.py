"""The attempt registry (slots, each attempt's lifecycle, cancel, receipts) and documents by key.

An attempt renders N pages (a single render is an attempt of one page, index 0: there is no
other shape). It takes up to `parallel` free slots at admission (no queue: a full renderer
answers 429) and runs under its own deadline, each page under its own timeout; every page is
cleaned up (temp directory removed; a URL render's context and proxy closed; a document render's
tab carried to the slot's next page, handed back for a reset or kept for its tenant after a
success, closed after anything else) before it is reported, and every slot is given back before
the attempt's terminal status. Terminal attempts and their artefacts are kept for
`renderer_artifact_ttl_seconds`, then swept; after that the renderer answers `unknown`.

`ChangeFeed` counts endings (each finished page, and each attempt's end) for
`GET /v1/changes?after=N&wait=S`, which answers as soon as the count passes `N` (or after `S`
seconds, capped by `renderer_changes_max_wait_seconds`): the control plane keeps one such
long-poll open per renderer while it has attempts there. The feed remembers which attempts the
last few hundred endings belong to, so that answer can carry their receipts (and their finished
pages' small artefacts inline, `app.py`). Nothing is stored: the count starts at 0 with each
epoch.

`DocumentCache` holds the documents renders name by key: the control plane sends a render's
document as its SHA-256 (`document_key`). A renderer that holds it renders at once; one that does
not refuses the whole call with 422 `RENDER_DOCUMENT_UNKNOWN` and the `missing` keys, and the
control plane submits again with those documents by value, which the renderer keeps under their
key for the next render. The cache lives as long as the process (a new epoch starts empty) and
never holds more than `renderer_document_cache_bytes`; a document larger than that is rendered
and not kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.async_api import Error as PlaywrightError

from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.render.protocol import (
    CONTENT_TYPES,
    ArtifactInfo,
    AttemptStatus,
    DeckAttemptRequest,
    Diagnostics,
    PageReceipt,
    Receipt,
    RenderErrorCode,
    RenderInput,
    Timings,
    document_key,
    error_kind,
    is_infrastructure,
    is_retryable,
)
from deckyard.render.renderer.browser.capture import (
    CaptureSession,
    DiagnosticsCollector,
    RenderFailure,
)
from deckyard.render.renderer.browser.pool import BrowserHandle, BrowserPool
from deckyard.render.renderer.browser.tabs import CleanupTimeoutError, DocumentTab, TabPool
from deckyard.render.renderer.ssrf import UrlGuard


class ChangeFeed:
    """Counts endings; `wait_past` blocks until the count moves past what was seen.

    The last `keep` endings are remembered with the attempt each belongs to (each finished page
    counts one, and so does the attempt's end), so an answer can say which attempts ended or
    finished a page since `seen`.
    """

    def __init__(self, keep: int = 256) -> None:
        self.count = 0
        self._moved = asyncio.Event()
        self._ended: deque[tuple[int, str]] = deque(maxlen=keep)

    def bump(self, attempt_id: str) -> None:
        """Record that an attempt (or a page of one) ended and wake every waiter."""
        self.count += 1
        self._ended.append((self.count, attempt_id))
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    def ended_since(self, seen: int) -> tuple[list[str], bool]:
        """The attempts with an ending past `seen` (oldest first, each once), and whether
        those are all of them: False for `seen` < 0 or once older endings were forgotten."""
        ids = list(dict.fromkeys(a for c, a in self._ended if c > seen))
        first = self._ended[0][0] if self._ended else self.count + 1
        return ids, seen >= 0 and first <= seen + 1

    async def wait_past(self, seen: int, timeout: float) -> int:
        """The count once it is above `seen`, or the current one after `timeout` seconds."""
        if self.count > seen:
            return self.count
        moved = self._moved
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(moved.wait(), timeout)
        return self.count


class DocumentCache:
    """Documents by content key, at most `limit_bytes` of them (UTF-8 bytes), LRU first out."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._documents: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __contains__(self, key: object) -> bool:
        return key in self._documents

    def __len__(self) -> int:
        return len(self._documents)

    def get(self, key: str) -> str | None:
        """The document under `key` (now the most recently used), or None."""
        entry = self._documents.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._documents.move_to_end(key)
        self.hits += 1
        return entry[0]

    def keep(self, document: str) -> str:
        """Keep `document` under its key (evicting the least recently used); the key."""
        key = document_key(document)
        if key in self._documents:
            self._documents.move_to_end(key)
            return key
        size = len(document.encode("utf-8"))
        if size > self.limit_bytes:
            return key
        while self.size_bytes + size > self.limit_bytes:
            _old, (_doc, old_size) = self._documents.popitem(last=False)
            self.size_bytes -= old_size
            self.evictions += 1
        self._documents[key] = (document, size)
        self.size_bytes += size
        return key


log = logging.getLogger(__name__)

_CRASH_HINTS = ("closed", "crash", "disconnected")


class NoFreeSlotError(Exception):
    """Every slot is busy; the caller should retry after a while."""


class AttemptConflictError(Exception):
    """An attempt with this id exists with a different input."""


class BrowserGoneError(Exception):
    """The browser disconnected while the attempt was using it."""


@dataclass
class Visit:
    """What one browser visit produced: an artefact, or an error code, and diagnostics."""

    code: RenderErrorCode | None = None
    message: str | None = None
    diagnostics: Diagnostics | None = None
    artifact: ArtifactInfo | None = None
    artifact_path: Path | None = None


@dataclass
class PageState:
    """One page of a deck attempt; terminal once its visit ended on its own."""

    index: int
    render: RenderInput
    status: AttemptStatus = AttemptStatus.ACCEPTED
    visit: Visit | None = None
    artifact_served: bool = False
    sent_inline: bool = False
    """Its bytes went out in a change answer (`app.py`); they go inline once, not per answer."""

    @property
    def artifact(self) -> tuple[ArtifactInfo, Path] | None:
        """The page's stored artefact and its file, once it succeeded with one."""
        visit = self.visit
        if visit is None or visit.artifact is None or visit.artifact_path is None:
            return None
        return visit.artifact, visit.artifact_path

    def receipt(self) -> PageReceipt:
        """The page's part of its attempt's receipt."""
        visit = self.visit or Visit()
        code = visit.code
        return PageReceipt(
            index=self.index,
            status=self.status,
            error_code=code,
            error_kind=error_kind(code) if code else None,
            retryable=is_retryable(code) if code else None,
            message=visit.message,
            diagnostics=visit.diagnostics,
            artifact=visit.artifact,
        )


def leaves_tab_to(render: RenderInput, tab: DocumentTab, settings: Settings) -> str | None:
    """The tenant a successful render may leave its tab to without a reset, or None.

    Only a document that runs no script (nothing can have left timers, globals, storage,
    cookies, popups or history behind; the next `set_content` replaces the whole document)
    and brings no `files` (a later render's file at the same path could be answered from
    the document's list of available images); the next render of the same tenant then
    skips the navigation and the clears, which cost as much Chromium time as the render.
    """
    if not settings.renderer_tab_keep_for_tenant or not render.tenant or render.files:
        return None
    return None if tab.scripted else render.tenant


_FRESH = object()
"""`DeckTab.leave_to` before the tab served a page."""


@dataclass
class DeckTab:
    """The tab a deck slot carries from one page to the next, while that is safe.

    A tab is kept after a successful page whose document runs no script (no script can have
    left timers, globals, storage, cookies, popups or history behind; the next page's
    `set_content` replaces the whole document) and while it has served fewer than
    `reuse_limit` renders; anything else goes back to the pool for its reset. When the slot is
    done, the tab it still carries goes back kept for its tenant (`leaves_tab_to`) if every
    page it served allowed that for the same tenant: a one-page attempt of a tenant leaves
    its tab to that tenant's next one, as a render between two renders of the deck would.
    """

    reuse_limit: int
    tab: DocumentTab | None = None
    leave_to: object = _FRESH

    def take(self) -> DocumentTab | None:
        """The kept tab, now in use again (or none)."""
        tab, self.tab = self.tab, None
        return tab

    def keep(self, tab: DocumentTab, tenant: str | None) -> bool:
        """Keep `tab` for the next page if its last page left it clean; see the class docstring.

        `tenant` is what that page alone would leave the tab to (`leaves_tab_to`).
        """
        if tab.uses >= self.reuse_limit or tab.scripted:
            self.leave_to = _FRESH
            return False
        self.leave_to = tenant if self.leave_to in (_FRESH, tenant) else None
        self.tab = tab
        return True

    def give_back(self, tabs: TabPool) -> None:
        """Hand the carried tab (if any) back to the pool when the slot is done."""
        tab = self.take()
        if tab is not None:
            keep_for = self.leave_to if isinstance(self.leave_to, str) else None
            tabs.give_back(tab, keep_for)
        self.leave_to = _FRESH


@dataclass
class Attempt:
    """One attempt's state (its pages and their outcomes); mutated only by the registry.

    It holds `slot` and may hold `extra_slots` besides, one per page rendered at a time.
    """

    attempt_id: str
    fingerprint: str
    slot: int
    pages: dict[int, PageState]
    status: AttemptStatus = AttemptStatus.ACCEPTED
    error_code: RenderErrorCode | None = None
    message: str | None = None
    finished_at: float | None = None
    cancel_requested: bool = False
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    extra_slots: list[int] = field(default_factory=list)
    deadline_seconds: float | None = None
    receipt_served: bool = False

    @property
    def slots(self) -> list[int]:
        """Every slot the attempt holds."""
        return [self.slot, *self.extra_slots]

    @property
    def collected(self) -> bool:
        """Whether its outcome was fetched: a terminal receipt and every artefact it made were
        served (a cancelled one needs nobody); a draining renderer waits for this."""
        if self.status is AttemptStatus.CANCELLED:
            return True
        if not self.receipt_served:
            return False
        return all(p.artifact_served or p.artifact is None for p in self.pages.values())


class AttemptRegistry:
    """Admits, runs, cancels, reports and forgets attempts; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        pool: BrowserPool,
        tabs: TabPool,
        guard: UrlGuard,
        root: Path,
        clock: Clock,
        renderer_id: str,
        epoch: str,
    ) -> None:
        self._settings = settings
        self._pool = pool
        self._tabs = tabs
        self._guard = guard
        self._clock = clock
        self._work_root = root / "attempts"
        self._artifact_root = root / "artifacts"
        self._attempts: dict[str, Attempt] = {}
        self._free = list(range(settings.renderer_slots))
        self._stopping = False
        self.draining = False
        """Set by `drain.Drain`: no new attempt is admitted, no deck page is started."""
        self.on_collected: Callable[[], None] = lambda: None
        """Called whenever an ended attempt's receipt or an artefact is served."""
        self.changes = ChangeFeed()
        self.renderer_id = renderer_id
        self.epoch = epoch

    @property
    def free_slots(self) -> int:
        """Slots an attempt could take right now."""
        return len(self._free)

    def start(self) -> None:
        """Create the working directories."""
        self._work_root.mkdir(parents=True, exist_ok=True)
        self._artifact_root.mkdir(parents=True, exist_ok=True)

    def get(self, attempt_id: str) -> Attempt | None:
        """The attempt with this id, if the renderer still knows it."""
        return self._attempts.get(attempt_id)

    def submit_deck(self, deck: DeckAttemptRequest) -> tuple[Attempt, bool]:
        """Admit a deck attempt on up to `deck.parallel` free slots (at least one)."""
        fingerprint = deck.fingerprint()
        existing = self._attempts.get(deck.attempt_id)
        if existing is not None:
            if existing.fingerprint != fingerprint:
                raise AttemptConflictError(deck.attempt_id)
            return existing, False
        if self._stopping or self.draining or not self._free:
            raise NoFreeSlotError(deck.attempt_id)
        self._free.sort()
        width = min(deck.parallel, len(self._free), len(deck.pages))
        slots, self._free = self._free[:width], self._free[width:]
        pages = {
            p.index: PageState(p.index, RenderInput(**p.model_dump(exclude={"index"})))
            for p in deck.pages
        }
        attempt = Attempt(
            deck.attempt_id,
            fingerprint,
            slots[0],
            pages,
            extra_slots=slots[1:],
            deadline_seconds=deck.deadline_seconds,
        )
        self._attempts[deck.attempt_id] = attempt
        attempt.task = asyncio.create_task(
            self._run_deck(attempt), name=f"deck attempt {deck.attempt_id}"
        )
        return attempt, True

    async def _run_deck(self, attempt: Attempt) -> None:
        """Render every page, `len(attempt.slots)` at a time, each page reported when done.

        Each slot renders its pages in one tab (`DeckTab`): a page whose document runs no
        script leaves nothing behind but its content, so the next page of the same deck is
        written over it without the reset (a navigation and the storage clears) that costs
        about as much as the render itself. When the slot is done its tab goes back to the
        pool, for a reset or kept for the pages' tenant (`DeckTab.give_back`).
        """
        attempt.status = AttemptStatus.RUNNING
        queue = list(attempt.pages.values())
        queue.reverse()

        async def page(state: PageState, carry: DeckTab) -> None:
            state.status = AttemptStatus.RUNNING
            visit = await self._visit(
                f"{attempt.attempt_id}.p{state.index}",
                state.render,
                attempt,
                carry,
            )
            state.visit = visit
            # A page that asked for no picture (`capture` false) succeeds with its diagnostics.
            state.status = AttemptStatus.SUCCEEDED if visit.code is None else AttemptStatus.FAILED
            self.changes.bump(attempt.attempt_id)

        async def slot() -> None:
            # Each slot's first page starts even if a drain began after the admission (the
            # attempt was taken: it runs until the drain's bound, as a one-page render must,
            # however late its task starts); a drain stops a slot only between pages.
            carry = DeckTab(self._settings.renderer_tab_reuse_limit)
            try:
                if queue:
                    await page(queue.pop(), carry)
                while queue and not self.draining:
                    await page(queue.pop(), carry)
            finally:
                carry.give_back(self._tabs)

        code: RenderErrorCode | None = None
        message: str | None = None
        slots = [asyncio.create_task(slot()) for _ in attempt.slots]
        try:
            async with asyncio.timeout(attempt.deadline_seconds):
                await asyncio.gather(*slots)
        except TimeoutError:
            code, message = RenderErrorCode.DEADLINE_EXCEEDED, "the attempt's deadline passed"
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            if attempt.cancel_requested and not self._stopping:
                code, message = RenderErrorCode.CANCELLED, "cancelled by request"
            else:
                code, message = RenderErrorCode.WORKER_STOPPED, self._stop_message()
        # Every slot has ended before the attempt does and gives its slots back: on a cancel or
        # the deadline `gather` ends with the first slot whose page was cancelled, while another
        # may still be closing its page (bounded by `renderer_cleanup_timeout_seconds`), and the
        # renderer would take a new attempt onto a slot still in use.
        await asyncio.gather(*slots, return_exceptions=True)
        # A drain stops the slots between pages: the pages never started go back with the
        # attempt, and the control plane resumes the deck elsewhere from them.
        unstarted = sum(1 for p in attempt.pages.values() if p.status is AttemptStatus.ACCEPTED)
        if code is None and unstarted:
            code = RenderErrorCode.WORKER_STOPPED
            message = f"{self._stop_message()}; {unstarted} page(s) not started"
        if code is None:
            for state in attempt.pages.values():
                visit = state.visit
                if visit is not None and visit.code is not None and is_infrastructure(visit.code):
                    code = visit.code
                    message = f"page {state.index}: {visit.message}"
                    break
        attempt.error_code, attempt.message = code, message
        if code is None:
            attempt.status = AttemptStatus.SUCCEEDED
        elif code is RenderErrorCode.CANCELLED:
            attempt.status = AttemptStatus.CANCELLED
        else:
            attempt.status = AttemptStatus.FAILED
        self._finish(attempt)

    def page_artifact(self, attempt_id: str, index: int) -> PageState | None:
        """A page of an attempt, if the renderer still knows it."""
        attempt = self._attempts.get(attempt_id)
        return attempt.pages.get(index) if attempt is not None else None

    def receipt(self, attempt_id: str) -> Receipt:
        """The attempt's receipt; `unknown` when the renderer does not know the id."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None:
            return Receipt(
                attempt_id=attempt_id,
                status=AttemptStatus.UNKNOWN,
                renderer_id=self.renderer_id,
                epoch=self.epoch,
            )
        code = attempt.error_code
        if attempt.status.terminal and not attempt.receipt_served:
            attempt.receipt_served = True
            self.on_collected()
        return Receipt(
            attempt_id=attempt_id,
            status=attempt.status,
            renderer_id=self.renderer_id,
            epoch=self.epoch,
            slot=attempt.slot if not attempt.status.terminal else None,
            error_code=code,
            error_kind=error_kind(code) if code else None,
            retryable=is_retryable(code) if code else None,
            message=attempt.message,
            pages=[p.receipt() for p in attempt.pages.values() if p.status.terminal],
        )

    async def cancel(self, attempt_id: str) -> Receipt:
        """Cancel an active attempt and wait up to `renderer_cancel_wait_seconds` for it to end."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None or attempt.status.terminal:
            return self.receipt(attempt_id)
        if not attempt.cancel_requested and attempt.task is not None:
            attempt.cancel_requested = True
            attempt.status = AttemptStatus.CLEANING
            attempt.task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(attempt.done.wait(), self._settings.renderer_cancel_wait_seconds)
        return self.receipt(attempt_id)

    async def wait(self, attempt_id: str) -> Receipt:
        """Wait until the attempt is terminal and return its receipt."""
        attempt = self._attempts.get(attempt_id)
        if attempt is not None:
            await attempt.done.wait()
        return self.receipt(attempt_id)

    async def _until_gone(
        self, work: Coroutine[Any, Any, bytes | None], handle: BrowserHandle
    ) -> bytes | None:
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(handle.gone.wait())
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, gone, return_exceptions=True)
        if task.cancelled():
            raise BrowserGoneError("browser disconnected during the attempt")
        return task.result()

    async def _crashed(self, handle: BrowserHandle | None, exc: BaseException) -> bool:
        if handle is None:
            return False
        text = str(exc).lower()
        if not handle.gone.is_set() and any(hint in text for hint in _CRASH_HINTS):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._settings.renderer_cleanup_timeout_seconds):
                    await handle.gone.wait()
        return handle.gone.is_set() or "crash" in text

    def artifact_served(self, attempt_id: str, index: int) -> None:
        """Note that one page's artefact was sent to a client (on its own, or inline)."""
        attempt = self._attempts.get(attempt_id)
        if attempt is None or index not in attempt.pages:
            return
        attempt.pages[index].artifact_served = True
        self.on_collected()

    @property
    def active(self) -> int:
        """Attempts that have not ended."""
        return sum(1 for a in self._attempts.values() if not a.status.terminal)

    def active_ids(self) -> set[str]:
        """The ids of the attempts that have not ended."""
        return {a.attempt_id for a in self._attempts.values() if not a.status.terminal}

    def uncollected(self, among: set[str]) -> list[Attempt]:
        """Those of `among` that ended without their outcome fetched (`Attempt.collected`)."""
        found = (self._attempts.get(i) for i in among)
        return [a for a in found if a is not None and a.status.terminal and not a.collected]

    def _stop_message(self) -> str:
        if self.draining and not self._stopping:
            return "handed back: the renderer is draining"
        return "the renderer is stopping"

    async def hand_back(self) -> int:
        """End every active attempt with `RENDER_WORKER_STOPPED` (a drain's bound passed) and
        wait for their cleanup; returns how many there were."""
        tasks = [
            a.task for a in self._attempts.values() if a.task is not None and not a.task.done()
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    def _finish(self, attempt: Attempt) -> None:
        attempt.finished_at = self._clock.monotonic()
        self._free.extend(attempt.slots)
        attempt.done.set()
        self.changes.bump(attempt.attempt_id)

    async def _visit(
        self,
        name: str,
        render: RenderInput,
        attempt: Attempt,
        carry: DeckTab,
    ) -> Visit:
        """One browser visit of one page's `render`: capture, store the artefact as `name`,
        clean up.

        A cancellation is raised again once the page is cleaned up: the attempt reports it.
        The tab the slot's last page left (`carry`) is used, and this one's is kept for the
        next page when `DeckTab.keep` allows.
        """
        settings = self._settings
        started = time.monotonic()
        workdir = self._work_root / f"{name}.{secrets.token_hex(4)}"
        collector = DiagnosticsCollector(
            settings.renderer_diagnostics_max_items, settings.renderer_diagnostics_max_chars
        )
        handle: BrowserHandle | None = None
        tab: DocumentTab | None = None
        session: CaptureSession | None = None
        data: bytes | None = None
        code: RenderErrorCode | None = None
        message: str | None = None
        cancelled = False
        in_page = False
        budget = render.timeout_seconds or settings.renderer_default_timeout_seconds
        visit = Visit()
        try:
            workdir.mkdir(parents=True)
            async with asyncio.timeout(budget):
                handle = await self._pool.acquire()
                if render.document is not None:
                    tab = self._carried(carry, handle, render)
                    tab = tab or await self._tabs.take(handle, render)
                session = CaptureSession(
                    handle.browser, render, self._guard, settings, collector, tab
                )
                await session.open()
                in_page = tab is not None
                data = await self._until_gone(session.capture(), handle)
        except TimeoutError:
            code, message = self._timed_out(handle, in_page, budget)
        except asyncio.CancelledError:
            cancelled = True
            if attempt.cancel_requested and not self._stopping:
                code, message = RenderErrorCode.CANCELLED, "cancelled by request"
            else:
                code, message = RenderErrorCode.WORKER_STOPPED, self._stop_message()
        except BrowserGoneError as exc:
            code, message = RenderErrorCode.BROWSER_CRASHED, str(exc)
        except (RenderFailure, PlaywrightError) as exc:
            text = exc.message if isinstance(exc, RenderFailure) else str(exc).splitlines()[0]
            if await self._crashed(handle, exc):
                code, message = RenderErrorCode.BROWSER_CRASHED, text
            elif isinstance(exc, RenderFailure):
                code, message = exc.code, text
            else:
                code, message = RenderErrorCode.NAVIGATION_FAILED, text
        except Exception as exc:
            log.exception("attempt %s failed unexpectedly", name)
            code, message = RenderErrorCode.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"
        encode_start = time.monotonic()
        if code is None and data is not None:
            try:
                stored = self._store(name, render.format, workdir, data)
                visit.artifact, visit.artifact_path = stored
            except OSError as exc:
                code, message = RenderErrorCode.INTERNAL_ERROR, f"cannot store artefact: {exc}"
        encode_ms = round((time.monotonic() - encode_start) * 1000, 1)
        tenant = leaves_tab_to(render, tab, settings) if tab is not None else None
        if tab is not None and code is None and carry.keep(tab, tenant):
            tab = None
        await self._cleanup(session, tab, handle, workdir, reusable=code is None)
        timings = session.timings if session is not None else None
        if timings is not None:
            timings.encode_ms = encode_ms
            timings.total_ms = round((time.monotonic() - started) * 1000, 1)
        visit.diagnostics = collector.build(timings or Timings())
        visit.code, visit.message = code, message
        if cancelled:
            raise asyncio.CancelledError
        return visit

    def _timed_out(
        self, handle: BrowserHandle | None, in_page: bool, budget: float
    ) -> tuple[RenderErrorCode, str]:
        """The code of a visit that ran out of time: the page's fault or the renderer's.

        A document whose own load, settle and capture (a script that never yields, too many
        elements to lay out) outlasted the budget while its browser was alive is a content
        failure: another attempt would spend the same budget again. Time spent before the
        page got its tab (a browser launch, a tab opening) and a URL's remote server are the
        renderer's and the network's, so those stay a retryable deadline.
        """
        if in_page and handle is not None and not handle.gone.is_set():
            return RenderErrorCode.PAGE_BUDGET_EXCEEDED, (
                f"the page did not finish loading, settling and capturing within its budget "
                f"of {budget:g} s (a script that never ends, or too much to lay out)"
            )
        return RenderErrorCode.DEADLINE_EXCEEDED, "the attempt's deadline passed"

    def _carried(
        self, carry: DeckTab, handle: BrowserHandle, render: RenderInput
    ) -> DocumentTab | None:
        """The tab a deck slot kept, if it is on `handle` at the render's scale; else none."""
        tab = carry.take()
        if tab is None:
            return None
        if tab.handle is handle and not handle.gone.is_set() and tab.scale == render.scale:
            return tab
        self._tabs.give_back(tab)
        return None

    async def _cleanup(
        self,
        session: CaptureSession | None,
        tab: DocumentTab | None,
        handle: BrowserHandle | None,
        workdir: Path,
        *,
        reusable: bool,
    ) -> None:
        try:
            if session is not None:
                await session.close()
            if tab is not None and reusable:
                self._tabs.give_back(tab)
            elif tab is not None:
                await self._tabs.discard(tab)
        except CleanupTimeoutError:
            if handle is not None:
                log.warning("context of Chromium %d hung on close; retiring it", handle.generation)
                self._pool.retire(handle)
        except Exception:
            log.exception("closing an attempt's context failed")
        finally:
            if handle is not None:
                self._pool.release(handle)
            shutil.rmtree(workdir, ignore_errors=True)

    def _store(self, name: str, fmt: str, workdir: Path, data: bytes) -> tuple[ArtifactInfo, Path]:
        staged = workdir / f"artifact.{fmt}"
        staged.write_bytes(data)
        final = self._artifact_root / f"{name}.{fmt}"
        os.replace(staged, final)
        info = ArtifactInfo(
            format=fmt,
            content_type=CONTENT_TYPES[fmt],
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        return info, final

    def sweep(self) -> int:
        """Forget terminal attempts older than the TTL and delete their artefacts."""
        cutoff = self._clock.monotonic() - self._settings.renderer_artifact_ttl_seconds
        expired = [
            a
            for a in self._attempts.values()
            if a.status.terminal and a.finished_at is not None and a.finished_at <= cutoff
        ]
        for attempt in expired:
            for page in attempt.pages.values():
                if page.artifact is not None:
                    page.artifact[1].unlink(missing_ok=True)
            del self._attempts[attempt.attempt_id]
        return len(expired)

    async def stop(self) -> None:
        """Fail every active attempt with `RENDER_WORKER_STOPPED` and wait for their cleanup."""
        self._stopping = True
        tasks = []
        for attempt in self._attempts.values():
            if attempt.task is None or attempt.task.done():
                continue
            tasks.append(attempt.task)
            if not attempt.cancel_requested:
                attempt.cancel_requested = True
                attempt.task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        shutil.rmtree(self._artifact_root, ignore_errors=True)
        shutil.rmtree(self._work_root, ignore_errors=True)
