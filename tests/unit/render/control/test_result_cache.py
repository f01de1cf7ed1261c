"""The render result cache: kept by input and identity, checked on the way out."""

from __future__ import annotations

import hashlib
from pathlib import Path

from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.control.result_cache import RenderResultCache

PNG = b"\x89PNG\r\n\x1a\n" + b"picture" * 100


def spec(html: str = "<h1>Hello</h1>", **more: object) -> ScreenshotSpec:
    return ScreenshotSpec.model_validate({"html": html, "width": 640, "height": 360, **more})


def result(data: bytes) -> dict[str, object]:
    return {
        "artifact_key": "renders/ws/1/a.png",
        "request_id": 7,
        "format": "png",
        "content_type": "image/png",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "diagnostics": {"overflow": [], "timings": {"total_ms": 12.0}},
    }


async def test_a_kept_render_comes_back_for_the_same_input_and_identity(tmp_path: Path) -> None:
    cache = RenderResultCache(tmp_path, "identity-1", 10_000_000)
    try:
        assert await cache.get(spec()) is None
        await cache.put(spec(), result(PNG), PNG)
        found = await cache.get(spec())
        assert found is not None and found.data == PNG
        # where and by which request it was stored is not kept: the next run stores it afresh
        assert "artifact_key" not in found.result and "request_id" not in found.result
        assert found.result["diagnostics"] == {"overflow": [], "timings": {"total_ms": 12.0}}
        assert await cache.get(spec("<h1>Hello!</h1>")) is None  # another document
        assert await cache.get(spec(scale=2)) is None  # another setting
        assert await cache.get(spec(audit=True)) is None  # the audit's findings differ
        assert (cache.stats.hits, cache.stats.misses, cache.stats.stored) == (1, 4, 1)
    finally:
        cache.close()
    # the next run (another process) finds it; another code, browser or font set does not
    again = RenderResultCache(tmp_path, "identity-1", 10_000_000)
    other = RenderResultCache(tmp_path, "identity-2", 10_000_000)
    try:
        assert await again.get(spec()) is not None
        assert await other.get(spec()) is None
    finally:
        again.close()
        other.close()


async def test_damaged_or_mismatched_bytes_are_never_served(tmp_path: Path) -> None:
    cache = RenderResultCache(tmp_path, "identity", 10_000_000)
    try:
        await cache.put(spec(), result(PNG), b"not the picture the result names")
        assert await cache.get(spec()) is None  # refused when kept
        await cache.put(spec(), result(PNG), PNG)
        cache._cache.set(f"{cache.key(spec())}.data", PNG[:-1])  # damaged on disk since
        assert await cache.get(spec()) is None
        await cache.put(spec(), result(PNG), PNG)  # rendered again, written over
        found = await cache.get(spec())
        assert found is not None and found.data == PNG
    finally:
        cache.close()
