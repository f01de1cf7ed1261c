"""The receipt pass and the result commit: from a renderer's receipt to a committed artefact.

The receipt pass polls live attempts in one batch per renderer and acts on what comes back.

A lease is renewed only from a real `accepted|running|cleaning` receipt, with one UPDATE per
renderer. A renderer that does not answer gets nothing written: its attempts keep their old
leases until recovery takes them. An `unknown` receipt is believed only after it persisted for
`render_unknown_reconcile_after_seconds` (a POST may still be on its way); a receipt from
another epoch means the renderer restarted and lost everything, which is reconciled at once.

A succeeded attempt's artefact is fetched, stored and committed with the CAS (`ResultCommitter`).
The bytes are stored before the commit so that a committed result always points at a complete
artefact; when the CAS is refused the stored copy is deleted again, so a refused result leaves
nothing behind.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import logging
import uuid
from collections import defaultdict
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
from deckyard.render.control.deck_results import DeckCommitter
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
    request_captures,
    request_finish,
    requests_running_overdue_or_cancelled,
    result_commit,
)
from deckyard.render.protocol import (
    AttemptStatus,
    ChangesAnswer,
    Receipt,
    RenderErrorCode,
    is_retryable,
)

log = logging.getLogger(__name__)
LIVE = (AttemptStatus.ACCEPTED, AttemptStatus.RUNNING, AttemptStatus.CLEANING)
EXPECTED_KEPT = 1024


def artifact_key(attempt: RenderAttempt, fmt: str) -> str:
    """A fresh place in the store for one download of an attempt's artefact.

    Unique per download, so deleting the artefact of a refused commit can never remove the file
    an earlier, committed download of the same attempt points at.
    """
    unique = uuid.uuid4().hex[:12]
    return (
        f"renders/{attempt.workspace_id}/{attempt.request_id}/{attempt.attempt_key}-{unique}.{fmt}"
    )


class ResultCommitter:
    """Turns a `succeeded` receipt into a committed request result, or into nothing."""

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

    async def fetch_and_commit(
        self,
        attempt: RenderAttempt,
        receipt: Receipt,
        source: RendererSource,
        inline: bytes | None = None,
        captures: bool | None = None,
    ) -> bool:
        """Download (unless `inline` brought the bytes), verify, store and commit; True when
        the result became the request's. `captures`: whether the request asked for a picture,
        when the caller knows (else a success without an artefact reads it from the row)."""
        info = receipt.artifact
        if info is None:
            if captures is None:
                async with self.db.read_connection() as conn:
                    captures = await request_captures(conn, attempt.request_id)
            if captures is False:
                return await self._commit_check(attempt, receipt, source)
            await self._lose(attempt, "the renderer reported success without an artefact")
            return False
        if inline is not None and (
            len(inline) != info.size or hashlib.sha256(inline).hexdigest() != info.sha256
        ):
            log.warning("attempt %s: inline artefact does not match; downloading", attempt.id)
            inline = None
        try:
            data = inline or await self.client.artifact(
                source.url, source.secret, attempt.attempt_key, info.size, info.sha256
            )
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code == 404:
                await self._lose(attempt, "the renderer no longer has the artefact")
            return False
        except (httpx.HTTPError, ArtifactMismatch) as exc:
            log.warning("attempt %s: artefact download failed: %s", attempt.attempt_key, exc)
            return False
        key = artifact_key(attempt, info.format)
        await self.store.put(key, data)
        result: dict[str, Any] = {
            "request_id": attempt.request_id,
            "attempt_id": attempt.id,
            "attempt_key": attempt.attempt_key,
            "artifact_key": key,
            "size": info.size,
            "sha256": info.sha256,
            "format": info.format,
            "content_type": info.content_type,
            "renderer": source.name,
            "epoch": attempt.renderer_epoch,
            "diagnostics": (
                receipt.diagnostics.model_dump(mode="json") if receipt.diagnostics else None
            ),
        }
        try:
            async with self.db.write_transaction() as conn:
                await result_commit(self.db, conn, attempt, result, key, self.clock.now())
        except ResultRefused as exc:
            await self.store.delete(key)
            self.stats.refused += 1
            self.stats.refused_keys.append(attempt.attempt_key)
            log.warning(
                "attempt %s: result refused (%s); artefact deleted", attempt.attempt_key, exc
            )
            return False
        except BaseException:
            await self.store.delete(key)
            raise
        self.stats.committed += 1
        log.info("request %d: result committed from %s", attempt.request_id, attempt.attempt_key)
        return True

    async def _commit_check(
        self, attempt: RenderAttempt, receipt: Receipt, source: RendererSource
    ) -> bool:
        """Commit the result of a render that asked for no picture: its diagnostics."""
        result: dict[str, Any] = {
            "request_id": attempt.request_id,
            "attempt_id": attempt.id,
            "attempt_key": attempt.attempt_key,
            "artifact_key": None,
            "renderer": source.name,
            "epoch": attempt.renderer_epoch,
            "diagnostics": (
                receipt.diagnostics.model_dump(mode="json") if receipt.diagnostics else None
            ),
        }
        try:
            async with self.db.write_transaction() as conn:
                await result_commit(self.db, conn, attempt, result, None, self.clock.now())
        except ResultRefused as exc:
            self.stats.refused += 1
            self.stats.refused_keys.append(attempt.attempt_key)
            log.warning("attempt %s: result refused (%s)", attempt.attempt_key, exc)
            return False
        self.stats.committed += 1
        return True

    async def _lose(self, attempt: RenderAttempt, message: str) -> None:
        async with self.db.write_transaction() as conn:
            status = await attempt_end(
                self.db,
                conn,
                attempt,
                AttemptState.LOST,
                code=RenderErrorCode.RESULT_LOST.value,
                message=message,
                retryable=True,
                retry_after_seconds=self.settings.render_retry_after_seconds,
                now=self.clock.now(),
            )
        if status is not None:
            self.stats.lost += 1


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
    """Results taken straight from a change answer (no pass); `inline`: with their bytes."""
    inline: int = 0


@dataclass
class _Plan:
    renew: list[int] = field(default_factory=list)
    ends: list[tuple[RenderAttempt, AttemptState, str, str, bool]] = field(default_factory=list)


def _failed_end(
    attempt: RenderAttempt, receipt: Receipt
) -> tuple[RenderAttempt, AttemptState, str, str, bool]:
    """The end a `failed` receipt gives its attempt (retryable as the renderer says, else by
    its code)."""
    code = receipt.error_code or RenderErrorCode.INTERNAL_ERROR.value
    retryable = receipt.retryable if receipt.retryable is not None else is_retryable(code)
    return attempt, AttemptState.FAILED, code, receipt.message or code, retryable


def _completeness(receipt: Receipt) -> tuple[bool, int]:
    """How much a deck receipt says: an ended attempt's most, then more finished pages."""
    return receipt.status.terminal, len(receipt.pages or [])


class ReceiptPoller:
    """One pass over every live attempt this process can reach."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        client: RendererClient,
        sources: RendererSources,
        committer: ResultCommitter,
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
        self._fetching: dict[str, asyncio.Task[bool]] = {}
        self._fetched_keys: set[str] = set()
        """Attempts whose result is committed; a poll that read the attempt list before that
        commit must not download it again (a failed download stays eligible for a retry)."""
        self._syncing: dict[str, asyncio.Task[None]] = {}
        self._decided: dict[str, set[int]] = {}
        """Per live deck attempt, the pages already committed, refused or left to the next."""
        self._expected: dict[str, tuple[RenderAttempt, bool]] = {}
        """Single attempts this process posted, by key, with whether they asked for a picture,
        until a result of theirs was fetched (the last `EXPECTED_KEPT`): a change answer that
        carries their receipt is committed from without a pass, and one that comes late meets
        the result CAS like any other."""
        self.watched: Callable[[str], bool] = lambda _name: False
        """Whether a change long-poll to renderer `name` is open (set by the coordinator)."""
        self.fresh_seconds = 0.0
        """How long an attempt this process posted to a watched renderer goes without a poll:
        its lease is new, and the change long-poll reports its end."""
        self._resync: dict[str, tuple[RenderAttempt, Receipt, RendererSource]] = {}
        """Per deck attempt, the most complete receipt that came while its sync ran."""
        self._stopping = False
        self._decks_posted: dict[str, tuple[RenderAttempt, float]] = {}
        """Deck attempts this process posted, by key, while they hold slots: a change answer
        carrying one's receipt with newly finished pages starts their commit without a pass."""
        self.decks = DeckCommitter(db, settings, client, committer.store, clock, committer.stats)

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
        # A deck posted after this read began may be missing from it (the dispatch and this
        # pass wake on the same change): only decks posted before it are known to have ended.
        live_keys = {a.attempt_key for a in active}
        for key, (_attempt, posted_at) in list(self._decks_posted.items()):
            if key not in live_keys and posted_at < read_at:
                del self._decks_posted[key]
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
        self._fetched_keys &= live_keys
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
        if key not in self._expected and key not in self._decks_posted:
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
            if receipt.status is not AttemptStatus.UNKNOWN:
                self._unknown_since.pop(attempt.attempt_key, None)
            if receipt.pages is not None and receipt.status is not AttemptStatus.CANCELLED:
                if receipt.status in LIVE:
                    left = (attempt.lease_expires_at - now).total_seconds()
                    if attempt.last_receipt_at is None or left < renew_below:
                        plan.renew.append(attempt.id)
                done = self._decided.get(attempt.attempt_key, set())
                fresh = any(p.index not in done for p in receipt.pages)
                if fresh or receipt.status.terminal:
                    self._start_deck_sync(attempt, receipt, source)
                continue
            if receipt.status in LIVE:
                left = (attempt.lease_expires_at - now).total_seconds()
                if attempt.last_receipt_at is None or left < renew_below:
                    plan.renew.append(attempt.id)
            elif receipt.status is AttemptStatus.SUCCEEDED:
                self._start_fetch(attempt, receipt, source)
            elif receipt.status is AttemptStatus.FAILED:
                plan.ends.append(_failed_end(attempt, receipt))
            elif receipt.status is AttemptStatus.CANCELLED:
                plan.ends.append(
                    (
                        attempt,
                        AttemptState.LOST,
                        RenderErrorCode.RESULT_LOST.value,
                        "the renderer cancelled the attempt on its own",
                        True,
                    )
                )
            else:
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

    def expect(self, attempt: RenderAttempt, *, deck: bool = False, capture: bool = True) -> None:
        """Note an attempt just posted, so `take_ended` can commit from a change answer (and
        knows without a read whether it asked for a picture)."""
        if deck:
            self._decks_posted[attempt.attempt_key] = (attempt, self.clock.monotonic())
            return
        self._expected[attempt.attempt_key] = (attempt, capture)
        while len(self._expected) > EXPECTED_KEPT:
            del self._expected[next(iter(self._expected))]

    def take_ended(self, source: RendererSource, answer: ChangesAnswer) -> bool:
        """Commit the results a change answer carries; False when a receipt pass must look.

        Taken here: succeeded single attempts this process posted (their rows' ids are all the
        result CAS needs, and it decides as it does after a pass), their failures (ended as a
        pass ends them: the answer counts as the receipt served, so a draining renderer that
        handed the attempt back may exit at once, and a pass after that found it gone and
        ended the attempt lost), and the newly finished pages of a live deck attempt this
        process posted (the page CAS decides, as after a pass; leases are the timed pass's to
        renew). Anything else (a deck's end, a deck whose pages are being committed already,
        an attempt posted elsewhere, an answer that misses endings) is left to the pass. Each
        page of a deck used to cost a pass: two reads and the renderer's whole receipt of the
        deck fetched again, which the answer carries.
        """
        taken = answer.complete
        for receipt in answer.receipts:
            if receipt.pages is not None:
                taken = self._take_deck_pages(source, receipt) and taken
                continue
            expected = self._expected.get(receipt.attempt_id)
            attempt = expected[0] if expected is not None else None
            if attempt is None or receipt.epoch != attempt.renderer_epoch:
                taken = False
                continue
            if receipt.status is AttemptStatus.FAILED:
                self._start_end(attempt, receipt)
                continue
            if receipt.status is not AttemptStatus.SUCCEEDED:
                taken = False
                continue
            inline: bytes | None = None
            encoded = answer.artifacts.get(receipt.attempt_id)
            if encoded is not None:
                try:
                    inline = base64.b64decode(encoded, validate=True)
                except (binascii.Error, ValueError):
                    inline = None
            self.stats.from_changes += 1
            self.stats.inline += inline is not None
            self._start_fetch(attempt, receipt, source, inline)
        return taken

    def _take_deck_pages(self, source: RendererSource, receipt: Receipt) -> bool:
        posted = self._decks_posted.get(receipt.attempt_id)
        if posted is None:
            return False
        attempt = posted[0]
        if receipt.status not in LIVE or receipt.epoch != attempt.renderer_epoch:
            return False
        done = self._decided.get(attempt.attempt_key, set())
        if any(p.index not in done for p in receipt.pages or []):
            self._start_deck_sync(attempt, receipt, source)
            self.stats.from_changes += 1
        return True

    def _start_fetch(
        self,
        attempt: RenderAttempt,
        receipt: Receipt,
        source: RendererSource,
        inline: bytes | None = None,
    ) -> None:
        key = attempt.attempt_key
        running = self._fetching.get(key)
        if key in self._fetched_keys or (running is not None and not running.done()):
            return
        expected = self._expected.get(key)
        captures = expected[1] if expected is not None else None
        commit = self.committer.fetch_and_commit
        work = functools.partial(commit, attempt, receipt, source, inline, captures)
        task = asyncio.create_task(
            tracing.result_span(attempt, source.name, work),
            name=f"render-result:{attempt.attempt_key}",
        )
        self._fetching[key] = task
        task.add_done_callback(functools.partial(self._fetched, key))

    def _start_end(self, attempt: RenderAttempt, receipt: Receipt) -> None:
        """End a single attempt from its `failed` receipt in the background, as a pass would
        (one at a time per attempt; `attempt_end` ends an attempt once)."""
        key = attempt.attempt_key
        running = self._fetching.get(key)
        if running is not None and not running.done():
            return
        self.stats.from_changes += 1

        async def end() -> bool:
            await self._apply(_Plan(ends=[_failed_end(attempt, receipt)]), [receipt])
            return False

        task = asyncio.create_task(end(), name=f"render-end:{key}")
        self._fetching[key] = task
        task.add_done_callback(functools.partial(self._fetched, key))

    def _start_deck_sync(
        self, attempt: RenderAttempt, receipt: Receipt, source: RendererSource
    ) -> None:
        """Commit a deck attempt's newly finished pages in the background, one sync at a time.

        A receipt that comes while a sync runs is kept (the most complete one: a deck's
        receipts only grow) and synced when that sync ends, so the pages and the end it
        carries wait for no timed pass.
        """
        key = attempt.attempt_key
        running = self._syncing.get(key)
        if running is not None and not running.done():
            kept = self._resync.get(key)
            if kept is None or _completeness(receipt) >= _completeness(kept[1]):
                self._resync[key] = (attempt, receipt, source)
            return
        decided = self._decided.setdefault(key, set())
        work = functools.partial(self.decks.sync, attempt, receipt, source, decided)
        task = asyncio.create_task(
            tracing.result_span(attempt, source.name, work), name=f"render-deck:{key}"
        )
        self._syncing[key] = task
        task.add_done_callback(functools.partial(self._synced, key))

    def _synced(self, key: str, task: asyncio.Task[None]) -> None:
        if self._syncing.get(key) is task:
            del self._syncing[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("deck page commit failed", exc_info=task.exception())
        later = self._resync.pop(key, None)
        if later is not None and not self._stopping:
            self._start_deck_sync(*later)

    def _fetched(self, key: str, task: asyncio.Task[bool]) -> None:
        if self._fetching.get(key) is task:
            del self._fetching[key]
        self._expected.pop(key, None)
        if not task.cancelled() and task.exception() is None and task.result():
            self._fetched_keys.add(key)
        if not task.cancelled() and task.exception() is not None:
            log.error("result commit failed", exc_info=task.exception())

    async def stop(self) -> None:
        """Wait for result downloads in flight (their CAS decides), then forget them."""
        self._stopping = True
        tasks: list[asyncio.Task[Any]] = [*self._fetching.values(), *self._syncing.values()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._fetching.clear()
        self._syncing.clear()
        self._resync.clear()
        self._stopping = False
