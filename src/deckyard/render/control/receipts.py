"""The receipt pass and the result commit: from a renderer's receipt to a committed artefact.

The receipt pass polls live attempts in one batch per renderer and acts on what comes back.

A lease is renewed only from a real `accepted|running|cleaning` receipt, with one UPDATE per
renderer. A renderer that does not answer gets nothing written: its attempts keep their old
leases until recovery takes them. An `unknown` receipt is believed only after it persisted for
`render_unknown_reconcile_after_seconds` (a POST may still be on its way); a receipt from
another epoch means the renderer restarted and lost everything, which is reconciled at once.

An attempt's finished pages are committed, and its end acted on, by `PageCommitter`: the one
commit path of every render, a single picture being a request of one page. Every finished page
the renderer reports is handled once per attempt: a rendered page is verified (its bytes came
inline in a change answer, or are downloaded), stored and committed with `store.page_commit`'s
compare-and-set (a refused commit deletes what it stored; the bytes are stored before the
commit, so a committed result always points at a complete artefact); a page that asked for no
picture is committed with its diagnostics; a page that failed for its content is committed with
its error code and no artefact; a page that failed for infrastructure is left pending, so the
next attempt renders it. Once the renderer reports the attempt terminal and every finished page
is decided, an attempt that still holds its slots is ended and its request requeued (the next
attempt gets only the pending pages) or failed.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import enum
import functools
import hashlib
import logging
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from deckyard import tracing
from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.client import (
    ArtifactMismatch,
    RendererClient,
    RendererSource,
    RendererSources,
)
from deckyard.render.control.models import (
    AttemptState,
    RenderAttempt,
    RenderRequest,
    RequestStatus,
    ResultStats,
)
from deckyard.render.control.store import (
    ResultRefused,
    attempt_end,
    attempt_release,
    attempts_active,
    lease_renew,
    page_commit,
    request_captures,
    request_finish,
    requests_running_overdue_or_cancelled,
)
from deckyard.render.protocol import (
    AttemptStatus,
    ChangesAnswer,
    ErrorKind,
    PageReceipt,
    Receipt,
    RenderErrorCode,
    error_kind,
    is_retryable,
)

log = logging.getLogger(__name__)
LIVE = (AttemptStatus.ACCEPTED, AttemptStatus.RUNNING, AttemptStatus.CLEANING)
ENDED_KEPT = 1024


def page_artifact_key(attempt: RenderAttempt, index: int, fmt: str) -> str:
    """A fresh place in the store for one download of one page of an attempt.

    Unique per download, so deleting the artefact of a refused commit can never remove the file
    an earlier, committed download of the same page points at.
    """
    unique = uuid.uuid4().hex[:12]
    return (
        f"renders/{attempt.workspace_id}/{attempt.request_id}/"
        f"{attempt.attempt_key}-p{index}-{unique}.{fmt}"
    )


class Outcome(enum.Enum):
    """What became of one finished page in a sync."""

    COMMITTED = "committed"
    LAST = "last"
    """Committed, and the request's last page: the attempt and the request ended with it."""
    DECIDED = "decided"
    """Refused by the CAS, or left pending for the next attempt: not looked at again."""
    OPEN = "open"
    """Its bytes could not be had now: the next receipt tries again."""


class PageCommitter:
    """Turns an attempt's page receipts into committed pages, and its end into a requeue."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        client: RendererClient,
        store: ArtifactStore,
        clock: Clock,
    ) -> None:
        self.db = db
        self.settings = settings
        self.client = client
        self.store = store
        self.clock = clock
        self.stats = ResultStats()
        self._ended: OrderedDict[str, None] = OrderedDict()
        """The last `ENDED_KEPT` attempts whose end this process committed (with their last
        page, or as `_end`): a receipt of one that comes later has nothing left to do."""

    def ended(self, attempt_key: str) -> bool:
        """Whether this process already committed the attempt's end."""
        return attempt_key in self._ended

    def _note_ended(self, attempt_key: str) -> None:
        self._ended[attempt_key] = None
        while len(self._ended) > ENDED_KEPT:
            self._ended.popitem(last=False)

    async def sync(
        self,
        attempt: RenderAttempt,
        receipt: Receipt,
        source: RendererSource,
        decided: set[int],
        inline: dict[int, bytes] | None = None,
    ) -> bool:
        """Commit the pages of `receipt` not in `decided` (adding them), then end the attempt if
        the receipt is terminal and its last page's commit did not already; True when this
        committed a page (the span's `deckyard.render.committed`).

        `inline`: page bytes a change answer carried, by index; a page without them is
        downloaded.
        """
        fresh = [p for p in receipt.pages or [] if p.index not in decided]
        gate = asyncio.Semaphore(max(1, len(attempt.slots)))
        given = inline or {}
        outcomes: list[Outcome] = []

        async def one(page: PageReceipt) -> None:
            async with gate:
                outcome = await self._commit_page(attempt, page, source, given.get(page.index))
            if outcome is not Outcome.OPEN:
                decided.add(page.index)
            outcomes.append(outcome)

        await asyncio.gather(*(one(p) for p in fresh))
        key = attempt.attempt_key
        if Outcome.LAST in outcomes:
            self._note_ended(key)
        elif (
            receipt.status.terminal
            and not self.ended(key)
            and all(p.index in decided for p in receipt.pages or [])
        ):
            await self._end(attempt, receipt)
            self._note_ended(key)
        return Outcome.COMMITTED in outcomes or Outcome.LAST in outcomes

    async def _commit_page(
        self,
        attempt: RenderAttempt,
        page: PageReceipt,
        source: RendererSource,
        inline: bytes | None,
    ) -> Outcome:
        """Commit one page, or refuse or leave it (decided), or leave it open (its bytes could
        not be had now: a later receipt tries again)."""
        if page.status is not AttemptStatus.SUCCEEDED:
            code = page.error_code or RenderErrorCode.INTERNAL_ERROR.value
            if error_kind(code) is not ErrorKind.CONTENT:
                return Outcome.DECIDED
            result: dict[str, Any] = {
                "attempt_key": attempt.attempt_key,
                "diagnostics": page.diagnostics.model_dump(mode="json")
                if page.diagnostics
                else None,
            }
            return await self._commit(attempt, page.index, result, None, code, page.message)
        info = page.artifact
        if info is None:
            return await self._commit_check(attempt, page, source)
        if inline is not None and (
            len(inline) != info.size or hashlib.sha256(inline).hexdigest() != info.sha256
        ):
            log.warning("attempt %s page %d: inline bytes do not match", attempt.id, page.index)
            inline = None
        try:
            data = inline or await self.client.artifact(
                source.url, source.secret, attempt.attempt_key, info.size, info.sha256, page.index
            )
        except httpx.HTTPStatusError as exc:
            return Outcome.DECIDED if exc.response.status_code == 404 else Outcome.OPEN
        except (httpx.HTTPError, ArtifactMismatch) as exc:
            log.warning(
                "attempt %s page %d: download failed: %s", attempt.attempt_key, page.index, exc
            )
            return Outcome.OPEN
        key = page_artifact_key(attempt, page.index, info.format)
        await self.store.put(key, data)
        result = {
            "attempt_id": attempt.id,
            "attempt_key": attempt.attempt_key,
            "artifact_key": key,
            "size": info.size,
            "sha256": info.sha256,
            "format": info.format,
            "content_type": info.content_type,
            "renderer": source.name,
            "epoch": attempt.renderer_epoch,
            "diagnostics": page.diagnostics.model_dump(mode="json") if page.diagnostics else None,
        }
        return await self._commit(attempt, page.index, result, key, None, None)

    async def _commit_check(
        self, attempt: RenderAttempt, page: PageReceipt, source: RendererSource
    ) -> Outcome:
        """Commit a page that succeeded without a picture: its diagnostics, when its request
        asked for none (a check); else the page stays pending (the renderer lost it)."""
        async with self.db.read_connection() as conn:
            captures = await request_captures(conn, attempt.request_id)
        if captures is not False:
            log.warning("attempt %s page %d: no artefact", attempt.attempt_key, page.index)
            return Outcome.DECIDED
        result: dict[str, Any] = {
            "attempt_id": attempt.id,
            "attempt_key": attempt.attempt_key,
            "artifact_key": None,
            "renderer": source.name,
            "epoch": attempt.renderer_epoch,
            "diagnostics": page.diagnostics.model_dump(mode="json") if page.diagnostics else None,
        }
        return await self._commit(attempt, page.index, result, None, None, None)

    async def _commit(
        self,
        attempt: RenderAttempt,
        index: int,
        result: dict[str, Any],
        key: str | None,
        code: str | None,
        message: str | None,
    ) -> Outcome:
        try:
            async with self.db.write_transaction() as conn:
                last = await page_commit(
                    self.db,
                    conn,
                    attempt,
                    index,
                    result=result,
                    artifact_key=key,
                    error_code=code,
                    error_message=message,
                    now=self.clock.now(),
                )
        except ResultRefused as exc:
            if key is not None:
                await self.store.delete(key)
            self.stats.refused += 1
            self.stats.refused_keys.append(f"{attempt.attempt_key}#p{index}")
            log.warning("attempt %s page %d: refused (%s)", attempt.attempt_key, index, exc)
            return Outcome.DECIDED
        except BaseException:
            if key is not None:
                await self.store.delete(key)
            raise
        self.stats.committed += 1
        return Outcome.LAST if last else Outcome.COMMITTED

    async def _end(self, attempt: RenderAttempt, receipt: Receipt) -> None:
        """End an attempt the renderer finished, unless its last page's commit already did."""
        if receipt.status is AttemptStatus.SUCCEEDED:
            state, code = AttemptState.LOST, RenderErrorCode.RESULT_LOST.value
            message, retryable = "the attempt ended with pages not committed", True
        else:
            state = AttemptState.FAILED
            code = receipt.error_code or RenderErrorCode.INTERNAL_ERROR.value
            message = receipt.message or code
            retryable = receipt.retryable if receipt.retryable is not None else is_retryable(code)
        async with self.db.write_transaction() as conn:
            await attempt_end(
                self.db,
                conn,
                attempt,
                state,
                code=code,
                message=message,
                retryable=retryable,
                retry_after_seconds=self.settings.render_retry_after_seconds,
                now=self.clock.now(),
            )


@dataclass
class ReceiptStats:
    """What receipt passes did, for metrics and tests."""

    polls: int = 0
    renewals: int = 0
    unreachable: int = 0
    epoch_reconciled: int = 0
    unknown_reconciled: int = 0
    skipped: int = 0
    """Renderer polls left out: every attempt on it was just posted and is watched."""
    from_changes: int = 0
    """Receipts acted on straight from a change answer (no pass); `inline`: pages whose bytes
    came with it."""
    inline: int = 0


@dataclass
class _Plan:
    renew: list[int] = field(default_factory=list)
    ends: list[tuple[RenderAttempt, AttemptState, str, str, bool]] = field(default_factory=list)


def _completeness(receipt: Receipt) -> tuple[bool, int]:
    """How much a receipt says: an ended attempt's most, then more finished pages."""
    return receipt.status.terminal, len(receipt.pages or [])


class ReceiptPoller:
    """One pass over every live attempt this process can reach."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        client: RendererClient,
        sources: RendererSources,
        committer: PageCommitter,
        renderer_names: dict[int, str],
        clock: Clock,
    ) -> None:
        self.db = db
        self.settings = settings
        self.client = client
        self.sources = sources
        self.committer = committer
        self.renderer_names = renderer_names
        self.clock = clock
        self.stats = ReceiptStats()
        # Keyed by attempt key, never by row id: a row id can come back for a new attempt
        # once rows are deleted (SQLite reuses the highest), and would inherit this state.
        self._unknown_since: dict[str, float] = {}
        self._polled_at: dict[str, float] = {}
        """When each renderer's receipts last came back (monotonic): the pace of our passes."""
        self._syncing: dict[str, asyncio.Task[bool]] = {}
        self._decided: dict[str, set[int]] = {}
        """Per live attempt, the pages already committed, refused or left to the next."""
        self.watched: Callable[[str], bool] = lambda _name: False
        """Whether a change long-poll to renderer `name` is open (set by the coordinator)."""
        self.fresh_seconds = 0.0
        """How long an attempt this process posted to a watched renderer goes without a poll:
        its lease is new, and the change long-poll reports its end."""
        self._resync: dict[str, tuple[RenderAttempt, Receipt, RendererSource]] = {}
        """Per attempt, the most complete receipt that came while its sync ran."""
        self._stopping = False
        self._posted: dict[str, tuple[RenderAttempt, float]] = {}
        """Attempts this process posted, by key, while they hold slots: a change answer
        carrying one's receipt with newly finished pages, or its end, starts their commit
        without a pass."""

    def _source(self, attempt: RenderAttempt) -> RendererSource | None:
        name = self.renderer_names.get(attempt.renderer_row_id)
        return self.sources.get(name) if name is not None else None

    async def pass_once(self) -> bool:
        """Poll and act; False when nothing holds a slot and nothing waits to be stopped."""
        now = self.clock.now()
        read_at = self.clock.monotonic()
        async with self.db.read_transaction() as conn:
            active = await attempts_active(conn)
            stopping = await requests_running_overdue_or_cancelled(conn, now)
        # An attempt posted after this read began may be missing from it (the dispatch and
        # this pass wake on the same change): only those posted before it are known to have
        # ended.
        live_keys = {a.attempt_key for a in active}
        for key, (_attempt, posted_at) in list(self._posted.items()):
            if key not in live_keys and posted_at < read_at:
                del self._posted[key]
        if not active and not stopping:
            self._unknown_since.clear()
            return False
        stop_ids = {r.id: r for r in stopping}
        await self._stop(stopping, [a for a in active if a.request_id in stop_ids], now)
        by_renderer: dict[int, list[RenderAttempt]] = defaultdict(list)
        for attempt in active:
            if attempt.request_id not in stop_ids:
                by_renderer[attempt.renderer_row_id].append(attempt)
        for gone in set(self._unknown_since) - live_keys:
            del self._unknown_since[gone]
        for gone in set(self._decided) - live_keys:
            del self._decided[gone]
        for attempts in by_renderer.values():
            source = self._source(attempts[0])
            if source is None:
                continue
            if self.watched(source.name):
                attempts = [a for a in attempts if not self._just_posted(a, now)]
                if not attempts:
                    self.stats.skipped += 1
                    continue
            await self._poll_renderer(source, attempts)
        return True

    def _just_posted(self, attempt: RenderAttempt, now: datetime) -> bool:
        """An attempt this process posted moments ago, without a receipt yet: a poll would ask
        the renderer, busy starting it, what its answer to the post already said."""
        key = attempt.attempt_key
        if attempt.last_receipt_at is not None:
            return False
        if key not in self._posted:
            return False
        return (now - attempt.created_at).total_seconds() < self.fresh_seconds

    async def _stop(
        self, requests: list[RenderRequest], attempts: list[RenderAttempt], now: datetime
    ) -> None:
        """Abort the attempts of cancelled or overdue requests, then end those requests."""
        for attempt in attempts:
            source = self._source(attempt)
            if source is not None:
                await self.client.cancel(source.url, source.secret, attempt.attempt_key)
        if not requests:
            return
        now = self.clock.now()
        async with self.db.write_transaction() as conn:
            for attempt in attempts:
                await attempt_release(
                    self.db,
                    conn,
                    attempt.id,
                    AttemptState.CANCELLED,
                    now,
                    code=RenderErrorCode.CANCELLED.value,
                )
            for req in requests:
                if req.cancel_requested_at is not None:
                    await request_finish(
                        self.db,
                        conn,
                        req.id,
                        RequestStatus.CANCELLED,
                        now,
                        code=RenderErrorCode.CANCELLED.value,
                        message="cancelled",
                        from_status=[RequestStatus.RUNNING.value],
                    )
                else:
                    await request_finish(
                        self.db,
                        conn,
                        req.id,
                        RequestStatus.FAILED,
                        now,
                        code=RenderErrorCode.DEADLINE_EXCEEDED.value,
                        message=f"the request's deadline passed during attempt {req.attempts}",
                        from_status=[RequestStatus.RUNNING.value],
                    )

    async def _poll_renderer(self, source: RendererSource, attempts: list[RenderAttempt]) -> None:
        self.stats.polls += 1
        receipts = await self.client.receipts(
            source.url, source.secret, [a.attempt_key for a in attempts]
        )
        if receipts is None:
            self.stats.unreachable += 1
            return
        by_key = {r.attempt_id: r for r in receipts}
        now = self.clock.now()
        mono = self.clock.monotonic()
        # Renew below the configured fraction, or while less than two passes' time is left: on
        # a loaded machine passes come seconds apart, and a lease just above the fraction
        # would expire before the next pass renews it (a deck attempt lost mid-deck).
        gap = mono - self._polled_at.get(source.name, mono)
        self._polled_at[source.name] = mono
        renew_below = max(
            self.settings.render_lease_seconds * self.settings.render_lease_renew_fraction, 2 * gap
        )
        plan = _Plan()
        for attempt in attempts:
            receipt = by_key.get(attempt.attempt_key)
            if receipt is None:
                continue
            if receipt.epoch != attempt.renderer_epoch:
                self.stats.epoch_reconciled += 1
                plan.ends.append(
                    (
                        attempt,
                        AttemptState.LOST,
                        RenderErrorCode.RESULT_LOST.value,
                        f"the renderer restarted (epoch {receipt.epoch})",
                        True,
                    )
                )
                continue
            if receipt.status is AttemptStatus.UNKNOWN:
                first = self._unknown_since.setdefault(attempt.attempt_key, mono)
                if mono - first >= self.settings.render_unknown_reconcile_after_seconds:
                    self.stats.unknown_reconciled += 1
                    plan.ends.append(
                        (
                            attempt,
                            AttemptState.LOST,
                            RenderErrorCode.RESULT_LOST.value,
                            "the renderer does not know the attempt",
                            True,
                        )
                    )
                continue
            self._unknown_since.pop(attempt.attempt_key, None)
            if receipt.status is AttemptStatus.CANCELLED:
                plan.ends.append(
                    (
                        attempt,
                        AttemptState.LOST,
                        RenderErrorCode.RESULT_LOST.value,
                        "the renderer cancelled the attempt on its own",
                        True,
                    )
                )
                continue
            if receipt.status in LIVE:
                left = (attempt.lease_expires_at - now).total_seconds()
                if attempt.last_receipt_at is None or left < renew_below:
                    plan.renew.append(attempt.id)
            done = self._decided.get(attempt.attempt_key, set())
            fresh = any(p.index not in done for p in receipt.pages or [])
            if fresh or receipt.status.terminal:
                self._start_sync(attempt, receipt, source)
        await self._apply(plan, receipts)

    async def _apply(self, plan: _Plan, receipts: list[Receipt]) -> None:
        if not plan.renew and not plan.ends:
            return
        now = self.clock.now()
        status = receipts[0].status.value if receipts else AttemptStatus.RUNNING.value
        async with self.db.write_transaction() as conn:
            if plan.renew:
                renewed = await lease_renew(
                    conn, plan.renew, status, now, self.settings.render_lease_seconds
                )
                self.stats.renewals += 1 if renewed else 0
            for attempt, state, code, message, retryable in plan.ends:
                await attempt_end(
                    self.db,
                    conn,
                    attempt,
                    state,
                    code=code,
                    message=message,
                    retryable=retryable,
                    retry_after_seconds=self.settings.render_retry_after_seconds,
                    now=now,
                )

    def expect(self, attempt: RenderAttempt) -> None:
        """Note an attempt just posted, so `take_ended` can act on a change answer's receipt
        of it."""
        self._posted[attempt.attempt_key] = (attempt, self.clock.monotonic())

    def take_ended(self, source: RendererSource, answer: ChangesAnswer) -> bool:
        """Commit the pages and ends a change answer carries; False when a receipt pass must
        look.

        Taken here: the receipts of attempts this process posted that finished pages or
        ended, with the page bytes the answer carries inline. Their pages are committed and
        their ends acted on as after a pass (the page CAS decides; `attempt_end` ends an
        attempt once); the answer counts as the receipt served, so a draining renderer that
        handed an attempt back may exit at once. Leases are the timed pass's to renew.
        Anything else (an attempt posted elsewhere, an unknown or cancelled receipt, an answer
        that misses endings) is left to the pass. A single picture used to cost a pass and a
        download after its change answer; a deck page, two reads and the renderer's whole
        receipt of the deck fetched again.
        """
        taken = answer.complete
        for receipt in answer.receipts:
            posted = self._posted.get(receipt.attempt_id)
            attempt = posted[0] if posted is not None else None
            if (
                attempt is None
                or receipt.pages is None
                or receipt.epoch != attempt.renderer_epoch
                or receipt.status in (AttemptStatus.CANCELLED, AttemptStatus.UNKNOWN)
            ):
                taken = False
                continue
            done = self._decided.get(attempt.attempt_key, set())
            fresh = [p.index for p in receipt.pages if p.index not in done]
            if not fresh and not receipt.status.terminal:
                continue
            inline = _inline_pages(answer, receipt.attempt_id, fresh)
            self.stats.from_changes += 1
            self.stats.inline += len(inline)
            self._start_sync(attempt, receipt, source, inline)
        return taken

    def _start_sync(
        self,
        attempt: RenderAttempt,
        receipt: Receipt,
        source: RendererSource,
        inline: dict[int, bytes] | None = None,
    ) -> None:
        """Commit an attempt's newly finished pages in the background, one sync at a time.

        A receipt that comes while a sync runs is kept (the most complete one: a receipt only
        grows) and synced when that sync ends, so the pages and the end it carries wait for no
        timed pass (their bytes are downloaded then).
        """
        key = attempt.attempt_key
        decided = self._decided.get(key, set())
        if self.committer.ended(key) and all(p.index in decided for p in receipt.pages or []):
            return  # its end is committed and it brings no page: nothing to do, no write
        running = self._syncing.get(key)
        if running is not None and not running.done():
            kept = self._resync.get(key)
            if kept is None or _completeness(receipt) >= _completeness(kept[1]):
                self._resync[key] = (attempt, receipt, source)
            return
        decided = self._decided.setdefault(key, set())
        work = functools.partial(self.committer.sync, attempt, receipt, source, decided, inline)
        task = asyncio.create_task(
            tracing.result_span(attempt, source.name, work), name=f"render-pages:{key}"
        )
        self._syncing[key] = task
        task.add_done_callback(functools.partial(self._synced, key))

    def _synced(self, key: str, task: asyncio.Task[bool]) -> None:
        if self._syncing.get(key) is task:
            del self._syncing[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("deck page commit failed", exc_info=task.exception())
        later = self._resync.pop(key, None)
        if later is not None and not self._stopping:
            self._start_sync(*later)

    async def stop(self) -> None:
        """Wait for page commits in flight (their CAS decides), then forget them."""
        self._stopping = True
        tasks: list[asyncio.Task[Any]] = list(self._syncing.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._syncing.clear()
        self._resync.clear()
        self._stopping = False


def _inline_pages(answer: ChangesAnswer, attempt_id: str, indices: list[int]) -> dict[int, bytes]:
    """The bytes of `indices` a change answer carries inline (key `attempt_id/index`); a page
    whose bytes do not decode is downloaded instead."""
    found: dict[int, bytes] = {}
    for index in indices:
        encoded = answer.artifacts.get(f"{attempt_id}/{index}")
        if encoded is None:
            continue
        try:
            found[index] = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
    return found
