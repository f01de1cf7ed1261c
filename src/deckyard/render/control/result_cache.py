"""Render results kept across runs, by content: what makes `deckyard render` incremental.

A render's result (its diagnostics and its artefact's bytes) depends only on its input, the
spec's `input_hash` (the document, its files, every setting of the render), and on what
rendered it: Deckyard's own code, the renderer's Chromium, the installed fonts and the
renderer's settings, which the caller folds into one `identity`. A render of the same input
under the same identity is taken from here instead of the renderer; any change to either is
another key, so an entry is never stale, only unused (and evicted, least recently used first,
once the cache passes `max_bytes`).

Only succeeded renders are kept. Entries live in a `diskcache` folder (an SQLite index and a
file per large value, safe to share between processes); values are JSON text and raw bytes,
so reading an entry never unpickles anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diskcache

from deckyard.render.control.models import ScreenshotSpec

KEPT_FIELDS = ("format", "content_type", "size", "sha256", "diagnostics")
"""What a kept result holds: everything of a committed result but where it was stored and
which request, attempt and renderer made it."""


@dataclass
class CacheStats:
    """What one run asked of the cache."""

    hits: int = 0
    misses: int = 0
    stored: int = 0


@dataclass(frozen=True)
class CachedRender:
    """A kept render: its result (`KEPT_FIELDS`) and its artefact's bytes (None: no picture)."""

    result: dict[str, Any]
    data: bytes | None


class RenderResultCache:
    """A content-keyed store of succeeded render results; see the module docstring."""

    def __init__(self, directory: Path, identity: str, max_bytes: int) -> None:
        self.directory = directory
        self.identity = identity
        self.stats = CacheStats()
        self._cache = diskcache.Cache(
            str(directory), size_limit=max_bytes, eviction_policy="least-recently-used"
        )

    def key(self, spec: ScreenshotSpec) -> str:
        """The entry of `spec` under this cache's identity."""
        return hashlib.sha256(f"{self.identity}\n{spec.input_hash()}".encode()).hexdigest()

    async def get(self, spec: ScreenshotSpec) -> CachedRender | None:
        """The kept render of `spec`, or None (counted as a hit or a miss)."""
        found = await asyncio.to_thread(self._read, self.key(spec))
        if found is None:
            self.stats.misses += 1
        else:
            self.stats.hits += 1
        return found

    async def put(self, spec: ScreenshotSpec, result: dict[str, Any], data: bytes | None) -> None:
        """Keep the succeeded render `result` of `spec`, with its artefact's bytes."""
        kept = {k: result.get(k) for k in KEPT_FIELDS}
        if data is not None and hashlib.sha256(data).hexdigest() != kept["sha256"]:
            return
        await asyncio.to_thread(self._write, self.key(spec), kept, data)
        self.stats.stored += 1

    def close(self) -> None:
        """Close the index (the entries stay on disk for the next run)."""
        self._cache.close()

    def _read(self, key: str) -> CachedRender | None:
        meta = self._cache.get(f"{key}.json")
        if not isinstance(meta, str):
            return None
        result = json.loads(meta)
        data: bytes | None = None
        if result.get("sha256") is not None:
            found = self._cache.get(f"{key}.data")
            if (
                not isinstance(found, bytes)
                or hashlib.sha256(found).hexdigest() != result["sha256"]
            ):
                return None
            data = found
        return CachedRender(result, data)

    def _write(self, key: str, kept: dict[str, Any], data: bytes | None) -> None:
        if data is not None:
            self._cache.set(f"{key}.data", data)
        self._cache.set(f"{key}.json", json.dumps(kept, separators=(",", ":")))
