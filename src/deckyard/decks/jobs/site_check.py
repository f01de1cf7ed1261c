"""The check of a built site ZIP before it is stored (`Verify.SITE`): a safe extraction that
checks the manifest's sizes and hashes, then `index.html` loaded in Chromium with the rest of
the site as its only reachable files: any failed or blocked request, page error or broken
image refuses the site.
"""

from __future__ import annotations

import base64
import io
import json
import zipfile
from typing import Any

from deckyard.config import Settings
from deckyard.decks.errors import SiteVerificationError
from deckyard.decks.jobs.handler_support import refused
from deckyard.decks.jobs.names import BrowserCheck, DeckEvent, DeckJobErrorCode
from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.limits import site_zip_limits
from deckyard.decks.validation.render_check import RenderGateway
from deckyard.jobs import JobContext
from deckyard.outputs.site_build import INDEX, MANIFEST
from deckyard.render.control.models import ScreenshotSpec

_PROBLEMS = ("failed_requests", "blocked_requests", "page_errors", "broken_images")


async def check_site(
    ctx: JobContext,
    gateway: RenderGateway,
    settings: Settings,
    site: bytes,
    size: tuple[int, int],
    workspace: str,
) -> dict[str, Any]:
    """Check the site ZIP `site` (slides of `size`); its facts for the job's result.

    Emits `site_verified` after the extraction and `site_loaded` after the browser load.
    """
    try:
        check = verify_site_zip(site, site_zip_limits(settings))
    except SiteVerificationError as exc:
        raise refused(DeckJobErrorCode.SITE_INVALID, f"{exc.code}: {exc.message}") from None
    await ctx.emit(
        DeckEvent.SITE_VERIFIED,
        {"version": check.version, "page_count": check.page_count, "files": len(check.files)},
    )
    browser = await _load(ctx, gateway, site, size, workspace, settings.deck_job_timeout_seconds)
    await ctx.emit(DeckEvent.SITE_LOADED, browser)
    return {
        "site_version": check.version,
        "browser_check": BrowserCheck.PASSED.value,
        "browser": browser,
    }


async def _load(
    ctx: JobContext,
    gateway: RenderGateway,
    site: bytes,
    size: tuple[int, int],
    workspace: str,
    timeout: float,
) -> dict[str, Any]:
    """Load the site's index in Chromium (at slide `size`); refuse it unless nothing failed.

    The index shows the first page; the other pages are not loaded at start, so they stay
    out of the render (each page of a reveal.js deck holds the whole deck, and forty of
    them passed the renderer's document limit).
    """
    width, height = size
    with zipfile.ZipFile(io.BytesIO(site)) as archive:
        pages = [str(p["file"]) for p in json.loads(archive.read(MANIFEST))["pages"]]
        unused = set(pages[1:])
        files = {
            info.filename: base64.b64encode(archive.read(info)).decode("ascii")
            for info in archive.infolist()
            if not info.is_dir() and info.filename not in unused
        }
    index = base64.b64decode(files.pop(INDEX)).decode("utf-8")
    spec = ScreenshotSpec.model_validate(
        {
            "html": index,
            "files": files,
            "width": width,
            "height": height,
            "wait": {"until": "load", "delay_ms": 300},
        }
    )
    outcome = await gateway.run(spec, workspace_id=workspace, parent_id=ctx.id, timeout=timeout)
    if outcome.error_code is not None:
        raise refused(outcome.error_code, outcome.message or outcome.error_code)
    diagnostics = (outcome.result or {}).get("diagnostics") or {}
    found = {name: items for name in _PROBLEMS if (items := diagnostics.get(name) or [])}
    if found:
        raise refused(
            DeckJobErrorCode.SITE_INVALID,
            f"the built site did not load cleanly in Chromium: {json.dumps(found)[:1500]}",
        )
    return {"failed_requests": 0, "files_served": len(files), "render_id": outcome.request_id}
