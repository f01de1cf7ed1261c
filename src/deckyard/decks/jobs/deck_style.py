"""`deck.style`: theme, manifest and asset-replacement edits through the write gate.

A theme or manifest change (title, language, slide size, fonts) can change how every page
looks, so every page is validated again in the edited deck; the write happens only when all of
them passed (or compiled, with `skip_visual_verification`, recorded). It then stores the deck's
new theme/manifest and a new version of each page (same source, the newly compiled document
and its validation) in the job's finish transaction, under the deck row's lock and If-Match.

An asset replacement (`asset` in the payload: path, media type and the SHA-256 of bytes already
stored as a blob) validates only the pages that use the asset (found again here, on the deck as
it is now) with the new bytes, and on success repoints the asset and writes those pages' new
versions in the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.db import Database
from deckyard.decks.asset_edits import asset_users
from deckyard.decks.jobs.handler_support import load_deck, refused, workspace_of
from deckyard.decks.jobs.names import DeckEvent, DeckJobErrorCode
from deckyard.decks.jobs.screenshots import render_pointer
from deckyard.decks.source.deck_source import Asset, DeckManifest, DeckSource
from deckyard.decks.store import (
    deck_touch,
    page_find,
    page_version_insert,
    page_version_next_number,
    page_version_set_screenshot,
)
from deckyard.decks.store_assets import asset_blob_get, deck_asset_upsert
from deckyard.decks.store_pages import deck_lock, deck_style_set, page_lock
from deckyard.decks.validation.page_check import PageValidator
from deckyard.decks.validation.rules import is_validation_passed
from deckyard.jobs import JobContext

DEFAULT_THEME_PATH = "theme.css"


class DeckStyleJob:
    """The handler of `deck.style`."""

    def __init__(self, db: Database, clock: Clock, validator: PageValidator) -> None:
        self.db = db
        self.clock = clock
        self.validator = validator

    async def run(self, ctx: JobContext) -> dict[str, Any]:
        """Validate every page with the new theme/manifest; write all or nothing."""
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        _row, source = await load_deck(self.db, deck_id, workspace)
        asset: dict[str, Any] | None = ctx.payload.get("asset")
        new_asset: Asset | None = None
        names = [p.name for p in source.pages]
        if asset is not None:
            new_asset, names = await self._replacement(source, asset)
            source = source.model_copy(
                update={"assets": {**source.assets, new_asset.path: new_asset}}
            )
        changes: dict[str, Any] = dict(ctx.payload.get("manifest") or {})
        theme_css = ctx.payload.get("theme_css")
        theme_path = source.theme_path
        fields = {**source.manifest.model_dump(mode="json"), **changes}
        if theme_css is not None:
            theme_path = theme_path or DEFAULT_THEME_PATH
            fields["theme"] = theme_path
        manifest = DeckManifest.model_validate(fields)
        edited = source.model_copy(
            update={
                "manifest": manifest,
                "theme_css": source.theme_css if theme_css is None else str(theme_css),
                "theme_path": theme_path,
            }
        )
        skip = bool(ctx.payload.get("skip_visual_verification", False))
        base = ctx.payload.get("base")
        if skip:
            await ctx.emit(DeckEvent.SKIPPED_VISUAL_VERIFICATION, {"deck_id": deck_id})
        if base is None:
            await ctx.emit(DeckEvent.UNCONDITIONAL_WRITE, {"deck_id": deck_id})
        checks = await asyncio.gather(
            *(
                self.validator.check(
                    edited, p.name, workspace_id=workspace, parent_id=ctx.id, skip_render=skip
                )
                for p in edited.pages
                if p.name in names
            )
        )
        data: dict[str, dict[str, Any]] = {}
        for check in checks:
            data[check.name] = check.result.model_dump(mode="json")
            await ctx.emit(
                DeckEvent.VALIDATION,
                {"page": check.name, "render_id": check.render_id, **data[check.name]},
            )
        failed = [
            c
            for c in checks
            if c.compiled is None or not is_validation_passed(c.result, require_render=not skip)
        ]
        if failed:
            which = ", ".join(c.name for c in failed)
            code = failed[0].result.error_code or "VALIDATION_FAILED"
            raise refused(code, f"{len(failed)} page(s) did not pass ({which}); nothing written")
        summary: dict[str, Any] = {"deck_id": deck_id, "if_match": base, "pages": {}}

        async def write(conn: AsyncConnection) -> None:
            now = self.clock.now()
            head = await deck_lock(conn, deck_id)
            if head is None:
                raise refused(DeckJobErrorCode.DECK_NOT_FOUND, f"no deck {deck_id}")
            if base is not None and head != int(base):
                raise refused(
                    DeckJobErrorCode.EDIT_CONFLICT,
                    f"deck {deck_id} is at version {head}, not {base}",
                )
            if new_asset is not None:
                await deck_asset_upsert(
                    self.db,
                    conn,
                    deck_id,
                    new_asset.path,
                    new_asset.media_type,
                    new_asset.data,
                    now,
                )
            else:
                await deck_style_set(
                    conn,
                    deck_id,
                    manifest.model_dump(mode="json"),
                    edited.theme_css,
                    edited.theme_path,
                )
            for check in checks:
                page_id = await page_find(conn, deck_id, check.name)
                if page_id is None or await page_lock(conn, page_id) is None:
                    raise refused(
                        DeckJobErrorCode.EDIT_CONFLICT, f"page {check.name!r} went meanwhile"
                    )
                page = edited.page(check.name)
                assert page is not None
                assert check.compiled is not None
                number = await page_version_next_number(conn, page_id)
                version_id = await page_version_insert(
                    conn,
                    page_id,
                    page.kind.value,
                    page.text,
                    check.compiled.document,
                    check.compiled.sha256,
                    now,
                    validation=data[check.name],
                    skipped=skip,
                    actor_token_id=ctx.payload.get("actor_token_id"),
                    number=number,
                )
                shot = render_pointer(check, job_id=ctx.id)
                if shot is not None:
                    await page_version_set_screenshot(conn, version_id, shot)
                summary["pages"][check.name] = number
            await deck_touch(conn, deck_id, now)

        ctx.on_success(write)
        if new_asset is not None:
            summary["asset"] = {"path": new_asset.path, "pages": names}
        return summary

    async def _replacement(
        self, source: DeckSource, asset: dict[str, Any]
    ) -> tuple[Asset, list[str]]:
        """The replacing asset (bytes from its blob) and the pages that use its path now."""
        path = str(asset["path"])
        if path not in source.assets:
            raise refused(DeckJobErrorCode.ASSET_GONE, f"the deck has no asset {path} any more")
        async with self.db.read_connection() as conn:
            data = await asset_blob_get(conn, str(asset["sha256"]))
        if data is None:
            raise refused(DeckJobErrorCode.ASSET_GONE, f"the new bytes of {path} are gone")
        users = asset_users(source, path, self.validator.limits)
        new = Asset(path=path, data=data, media_type=str(asset["media_type"]))
        return new, sorted({p.page for p in users})
