"""The `site.go_live` job: the last stage of a publish, which puts a verified site online.

It takes the site ZIP the build stage stored (and verified in Chromium), checks it again
against its manifest (a safe extraction), stores every file under the publication's own store
prefix, reads each one back and compares its SHA-256, and only then moves the deck's live
pointer to the new publication. Until that one-row compare-and-set the previous publication is
what `/sites/...` serves. Every step is idempotent, so a retried or resumed job finishes the
same publication instead of making a second one.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from deckyard.artifacts import ArtifactStore
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.errors import SiteVerificationError
from deckyard.decks.jobs.handler_support import refused, workspace_of
from deckyard.decks.jobs.names import DeckEvent, DeckJobErrorCode
from deckyard.decks.site.hosting import PublicationStatus, Visibility, content_type_of
from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.limits import site_zip_limits
from deckyard.decks.store_sites import (
    PublicationRow,
    publication_get,
    publication_set_files,
    publication_stage,
    site_go_live,
)
from deckyard.jobs import JobContext, Runtime
from deckyard.outputs.site_build import MANIFEST
from deckyard.webhooks import announce, publication_live


def store_prefix(workspace_id: str, deck_id: int, task_id: int) -> str:
    """Where a publication's files live in the artefact store (one prefix per publish task)."""
    return f"sites/{workspace_id}/{deck_id}/publish-{task_id}/"


class SiteJobs:
    """Handler of `site.go_live`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        store: ArtifactStore,
        clock: Clock,
        *,
        runtime: Runtime | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.clock = clock
        self.runtime = runtime
        """Announces `publication.live` to webhooks when given (every node gives it)."""

    async def go_live(self, ctx: JobContext) -> dict[str, Any]:
        """Store the built site as a publication and make it the deck's live site."""
        workspace = workspace_of(ctx)
        payload = ctx.payload
        deck_id, task_id = int(payload["deck_id"]), int(payload["task_id"])
        build: dict[str, Any] = payload["build"]
        data = await self.store.get(str(build["artifact_key"]))
        if data is None or hashlib.sha256(data).hexdigest() != build["sha256"]:
            raise refused(
                DeckJobErrorCode.SITE_INVALID,
                f"the built site {build['artifact_key']} is missing or changed since the build",
            )
        files = self._verified_files(data)
        prefix = store_prefix(workspace, deck_id, task_id)
        values = {
            "deck_id": deck_id,
            "workspace_id": workspace,
            "task_id": task_id,
            "visibility": Visibility(payload.get("visibility", Visibility.PRIVATE)).value,
            "deck_version": int(build["deck_version"]),
            "site_version": str(build["site_version"]),
            "site_key": str(build["artifact_key"]),
            "site_sha256": str(build["sha256"]),
            "store_prefix": prefix,
            "files": [],
            "actor_token_id": payload.get("actor_token_id"),
            "created_at": self.clock.now(),
        }
        publication = await self.db.write(lambda conn: publication_stage(self.db, conn, values))
        if publication.status == PublicationStatus.STAGED.value:
            entries = await self._store_files(prefix, files)
            await self.db.write(lambda conn: publication_set_files(conn, publication.id, entries))
            switch = await self.db.write(lambda conn: self._switch(conn, publication.id))
            await ctx.emit(
                DeckEvent.SITE_LIVE,
                {"publication_id": publication.id, "live": switch, "files": len(entries)},
            )
        async with self.db.read_connection() as conn:
            final = await publication_get(conn, publication.id)
        assert final is not None
        return self._result(final)

    async def _switch(self, conn: Any, publication_id: int) -> bool:
        fresh = await publication_get(conn, publication_id)
        if fresh is None:
            return False
        now = self.clock.now()
        switch = await site_go_live(self.db, conn, fresh, now)
        if switch.live and self.runtime is not None:
            event = publication_live(
                fresh.workspace_id,
                fresh.id,
                fresh.deck_id,
                visibility=fresh.visibility,
                site_version=fresh.site_version,
                replaced=switch.previous,
                now=now,
            )
            await announce(self.runtime, conn, event)
        return switch.live

    def _verified_files(self, data: bytes) -> dict[str, bytes]:
        """The site's files after a safe extraction checked them against the manifest."""
        with tempfile.TemporaryDirectory(prefix="deckyard-publish-") as tmp:
            root = Path(tmp)
            try:
                check = verify_site_zip(data, site_zip_limits(self.settings), dest=root)
            except SiteVerificationError as exc:
                raise refused(DeckJobErrorCode.SITE_INVALID, f"{exc.code}: {exc.message}") from None
            paths = [f.path for f in check.files] + [MANIFEST]
            return {path: (root / path).read_bytes() for path in paths}

    async def _store_files(self, prefix: str, files: dict[str, bytes]) -> list[dict[str, Any]]:
        """Put every file under `prefix`, read it back and check it; the publication's list."""
        entries = []
        for path in sorted(files):
            content = files[path]
            digest = hashlib.sha256(content).hexdigest()
            await self.store.put(prefix + path, content)
            back = await self.store.get(prefix + path)
            if back is None or hashlib.sha256(back).hexdigest() != digest:
                raise refused(
                    DeckJobErrorCode.SITE_INVALID, f"{path} did not read back from the store"
                )
            entries.append(
                {
                    "path": path,
                    "size": len(content),
                    "sha256": digest,
                    "content_type": content_type_of(path),
                }
            )
        return entries

    @staticmethod
    def _result(p: PublicationRow) -> dict[str, Any]:
        return {
            "publication_id": p.id,
            "deck_id": p.deck_id,
            "status": p.status,
            "visibility": p.visibility,
            "site_version": p.site_version,
            "files": len(p.files),
            "url": f"/sites/{p.workspace_id}/{p.deck_id}/",
        }
