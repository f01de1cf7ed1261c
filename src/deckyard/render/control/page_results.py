"""An attempt's receipt stream: commit each finished page as it arrives, then end the attempt.

This is the one way a render's result is committed: a single picture is a request of one page,
a deck's render a request of N. Every finished page the renderer reports is handled once per
attempt: a rendered page is verified (its bytes came inline in a change answer, or are
downloaded), stored and committed with `page_commit`'s compare-and-set (a refused commit
deletes what it stored; the bytes are stored before the commit, so a committed result always
points at a complete artefact); a page that asked for no picture is committed with its
diagnostics; a page that failed for its content is committed with its error code and no
artefact; a page that failed for infrastructure is left pending, so the next attempt renders
it. Once the renderer reports the attempt terminal and every finished page is decided, an
attempt that still holds its slots is ended and its request requeued (the next attempt gets
only the pending pages) or failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import uuid
from typing import Any

import httpx

from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.client import ArtifactMismatch, RendererClient, RendererSource
from deckyard.render.control.models import AttemptState, RenderAttempt, ResultStats
from deckyard.render.control.store import ResultRefused, attempt_end, request_captures
from deckyard.render.control.store_pages import page_commit
from deckyard.render.protocol import (
    AttemptStatus,
    ErrorKind,
    PageReceipt,
    Receipt,
    RenderErrorCode,
    error_kind,
    is_retryable,
)

log = logging.getLogger(__name__)


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

    async def sync(
        self,
        attempt: RenderAttempt,
        receipt: Receipt,
        source: RendererSource,
        decided: set[int],
        inline: dict[int, bytes] | None = None,
    ) -> None:
        """Commit the pages of `receipt` not in `decided` (adding them), then end if terminal.

        `inline`: page bytes a change answer carried, by index; a page without them is
        downloaded.
        """
        fresh = [p for p in receipt.pages or [] if p.index not in decided]
        gate = asyncio.Semaphore(max(1, len(attempt.slots)))
        given = inline or {}

        async def one(page: PageReceipt) -> None:
            async with gate:
                if await self._commit_page(attempt, page, source, given.get(page.index)):
                    decided.add(page.index)

        await asyncio.gather(*(one(p) for p in fresh))
        if not receipt.status.terminal or any(p.index not in decided for p in receipt.pages or []):
            return
        await self._end(attempt, receipt)

    async def _commit_page(
        self,
        attempt: RenderAttempt,
        page: PageReceipt,
        source: RendererSource,
        inline: bytes | None,
    ) -> bool:
        """Commit one page; True once the page is decided (committed, refused or left)."""
        if page.status is not AttemptStatus.SUCCEEDED:
            code = page.error_code or RenderErrorCode.INTERNAL_ERROR.value
            if error_kind(code) is not ErrorKind.CONTENT:
                return True
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
            return exc.response.status_code == 404
        except (httpx.HTTPError, ArtifactMismatch) as exc:
            log.warning(
                "attempt %s page %d: download failed: %s", attempt.attempt_key, page.index, exc
            )
            return False
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
    ) -> bool:
        """Commit a page that succeeded without a picture: its diagnostics, when its request
        asked for none (a check); else the page stays pending (the renderer lost it)."""
        async with self.db.read_connection() as conn:
            captures = await request_captures(conn, attempt.request_id)
        if captures is not False:
            log.warning("attempt %s page %d: no artefact", attempt.attempt_key, page.index)
            return True
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
    ) -> bool:
        try:
            async with self.db.write_transaction() as conn:
                await page_commit(
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
            return True
        except BaseException:
            if key is not None:
                await self.store.delete(key)
            raise
        self.stats.committed += 1
        return True

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
