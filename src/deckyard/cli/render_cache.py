"""The render cache of `deckyard render`: earlier runs' renders, reused when nothing that
draws them changed (`render.control.result_cache`).

Its identity is everything besides a render's own input that can change a picture or a
finding: Deckyard's code (every file of the package and the vendored JavaScript's lock file,
by size and modification time, so an edited checkout is a new identity), the version of the
Chromium the run's renderer launched, the installed fonts (fontconfig's list of files and
versions) and the renderer's settings.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
from pathlib import Path

import deckyard
from deckyard.config import Settings
from deckyard.render.control.result_cache import RenderResultCache
from deckyard.render_node import RenderNode

PACKAGE = Path(deckyard.__file__).resolve().parent
VENDOR_LOCK = PACKAGE.parents[1] / "vendor" / "js" / "package-lock.json"


def code_fingerprint() -> str:
    """Every file of the package (and the vendored JavaScript's lock file) by path, size and
    modification time."""
    digest = hashlib.sha256(deckyard.__version__.encode())
    files = sorted(p for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in [*files, VENDOR_LOCK]:
        try:
            stat = path.stat()
        except OSError:
            continue
        digest.update(f"{path.as_posix()}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def fonts_fingerprint() -> str:
    """fontconfig's installed fonts, by file and version ('' when fc-list cannot say)."""
    try:
        listing = subprocess.run(
            ["fc-list", "--format", "%{file}|%{fontversion}\n"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return hashlib.sha256("\n".join(sorted(listing.splitlines())).encode()).hexdigest()


def identity(settings: Settings, browser_version: str) -> str:
    """The identity of this run's rendering (see the module docstring)."""
    renderer = {
        k: v for k, v in settings.model_dump(mode="json").items() if k.startswith("renderer_")
    }
    parts = {
        "code": code_fingerprint(),
        "browser": browser_version,
        "fonts": fonts_fingerprint(),
        "renderer": renderer,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


async def browser_version(node: RenderNode) -> str | None:
    """The Chromium version a live renderer of `node` reports; None when none answers."""
    render = node.render
    for source in render.sources.all():
        status = await render.coordinator.client.capabilities(source.url, source.secret)
        if status is not None:
            return status.browser_version
    return None


async def open_render_cache(node: RenderNode, directory: Path) -> RenderResultCache | None:
    """The render cache under `directory` for this run, None when it is off (a size of 0) or
    no renderer says which Chromium it runs."""
    settings = node.settings
    if settings.render_result_cache_max_bytes <= 0:
        return None
    version = await browser_version(node)
    if version is None:
        return None
    who = await asyncio.to_thread(identity, settings, version)
    max_bytes = settings.render_result_cache_max_bytes
    return await asyncio.to_thread(RenderResultCache, directory, who, max_bytes)
