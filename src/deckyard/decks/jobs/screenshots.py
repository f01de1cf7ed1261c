"""Screenshot pointers: a page version's rendered image, keyed by content and render settings.

A pointer names a committed artefact and the `input_hash` of the render that made it (the
SHA-256 of the document and every render setting but the audit, `ScreenshotSpec.picture_hash`:
an audit changes the diagnostics, not the picture). The render that
validates a page already produces the PNG a default screenshot asks for, so `page.validate`
keeps it as the version's pointer, and `page.screenshot` of a version whose pointer has the
same key returns it without a second render: a page version is rendered once per settings.
"""

from __future__ import annotations

from typing import Any

from deckyard.artifacts import ArtifactStore
from deckyard.decks.store import PageVersionRow
from deckyard.decks.validation.page_check import PageCheck
from deckyard.render.control.models import ScreenshotSpec


def screenshot_pointer(
    spec: ScreenshotSpec,
    result: dict[str, Any],
    *,
    job_id: int,
    render_id: int | None,
) -> dict[str, Any]:
    """The pointer for a committed render `result` (a render request's result) of `spec`."""
    return {
        "job_id": job_id,
        "render_id": render_id,
        "artifact_key": result["artifact_key"],
        "content_type": result["content_type"],
        "size": result["size"],
        "sha256": result["sha256"],
        "width": spec.width,
        "height": spec.height,
        "scale": spec.scale,
        "format": spec.format,
        "input_hash": spec.picture_hash(),
    }


def pointer_matches(pointer: Any, spec: ScreenshotSpec) -> bool:
    """Whether `pointer` draws exactly `spec` (same document, same settings but the audit)."""
    return isinstance(pointer, dict) and pointer.get("input_hash") == spec.picture_hash()


async def kept_screenshot(pointer: Any, spec: ScreenshotSpec, store: ArtifactStore) -> bytes | None:
    """The bytes `pointer` names when it is a render of `spec` still in the store, else None."""
    if not pointer_matches(pointer, spec):
        return None
    key = pointer.get("artifact_key")
    return await store.get(key) if isinstance(key, str) else None


async def reusable_pointer(
    pointer: Any, spec: ScreenshotSpec, store: ArtifactStore
) -> dict[str, Any] | None:
    """`pointer` when it renders `spec` and its artefact is still in the store, else None."""
    if await kept_screenshot(pointer, spec, store) is None:
        return None
    return dict(pointer)


def validation_pointer(
    check: PageCheck, version: PageVersionRow, *, job_id: int
) -> dict[str, Any] | None:
    """The validation render as the version's screenshot, when it rendered that version.

    Only when the validated document is the stored one (the same compiled sha256) and the
    version has no screenshot at other settings that it would replace.
    """
    if check.render is None or check.spec is None or check.compiled is None:
        return None
    if version.compiled_sha256 != check.compiled.sha256:
        return None
    if version.screenshot is not None and not pointer_matches(version.screenshot, check.spec):
        return None
    return render_pointer(check, job_id=job_id)


def render_pointer(check: PageCheck, *, job_id: int) -> dict[str, Any] | None:
    """The render that validated `check`'s page as a screenshot pointer, when it rendered.

    The write gate gives it to the version it writes: that version's document is the one
    that was rendered.
    """
    if check.render is None or check.spec is None or check.compiled is None:
        return None
    return screenshot_pointer(check.spec, check.render, job_id=job_id, render_id=check.render_id)
