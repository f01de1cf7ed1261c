"""Fetching a succeeded attempt's artefact, storing it, and committing it with the CAS.

The bytes are stored before the commit so that a committed result always points at a complete
artefact; when the CAS is refused the stored copy is deleted again, so a refused result leaves
nothing behind.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.client import ArtifactMismatch, RendererClient, RendererSource
from deckyard.render.control.models import RenderAttempt
from deckyard.render.control.status import AttemptState
from deckyard.render.control.store_attempts import ResultRefused, attempt_end, result_commit
from deckyard.render.protocol import Receipt, RenderErrorCode

log = logging.getLogger(__name__)


@dataclass
class ResultStats:
    """How result commits went, for metrics and tests."""

    committed: int = 0
    refused: int = 0
    lost: int = 0
    refused_keys: list[str] = field(default_factory=list)


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
        self, attempt: RenderAttempt, receipt: Receipt, source: RendererSource
    ) -> bool:
        """Download, verify, store and commit; True when the result became the request's."""
        info = receipt.artifact
        if info is None:
            await self._lose(attempt, "the renderer reported success without an artefact")
            return False
        try:
            data = await self.client.artifact(
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
