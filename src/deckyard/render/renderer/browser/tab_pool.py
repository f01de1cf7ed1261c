"""The document tab pool: warm tabs on the current browser, reset after use, replaced when spent.

The pool keeps `renderer_slots + renderer_spare_tabs` tabs alive on the current browser. A
document render takes a ready tab at its scale; after a successful render the tab resets in the
background (off the render's critical path, which is what the spare is for) and becomes ready
again if the reset verified clean. A tab that failed its reset, served
`renderer_tab_reuse_limit` renders, belongs to a retired or crashed browser, or was used by a
render that failed, is closed and replaced by a never-used one opened in the background. A render
that finds no ready tab waits for one, or opens its own when the pool has room.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from deckyard.config import Settings
from deckyard.render.protocol import DEFAULT_HEIGHT, DEFAULT_WIDTH, RenderInput
from deckyard.render.renderer.browser.pool import BrowserHandle, BrowserPool
from deckyard.render.renderer.browser.tabs import CleanupTimeoutError, DocumentTab

log = logging.getLogger(__name__)


class TabPool:
    """Hands out, resets, replaces and closes document tabs; see the module docstring."""

    def __init__(self, settings: Settings, browsers: BrowserPool) -> None:
        self._settings = settings
        self._browsers = browsers
        self._limit = settings.renderer_slots + settings.renderer_spare_tabs
        self._ready: list[DocumentTab] = []
        self._alive: set[DocumentTab] = set()
        self._changed = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()
        self._warm_shape = (1.0, DEFAULT_WIDTH, DEFAULT_HEIGHT)
        self._stopping = False

    def start(self) -> None:
        """Open the first tabs in the background."""
        self._replenish()

    async def take(self, handle: BrowserHandle, render: RenderInput) -> DocumentTab:
        """A ready tab on `handle` at the render's scale; waits for one or opens one."""
        self._warm_shape = (render.scale, render.width, render.height)
        while True:
            self._drop_stale(handle)
            for tab in self._ready:
                if tab.scale == render.scale:
                    self._ready.remove(tab)
                    return tab
            if len(self._alive) >= self._limit and self._ready:
                self._retire(self._ready.pop(0))
            if len(self._alive) < self._limit:
                return await self._open(handle, render)
            self._changed.clear()
            await self._changed.wait()

    def give_back(self, tab: DocumentTab) -> None:
        """After a successful render: reset the tab in the background, or replace it if spent."""
        tab.unbind()
        if tab.uses >= self._settings.renderer_tab_reuse_limit or not self._usable(tab):
            self._retire(tab)
            self._replenish()
        else:
            self._spawn(self._reset(tab))

    async def discard(self, tab: DocumentTab) -> None:
        """Close a tab now (after a failed render); raise `CleanupTimeoutError` if it hangs."""
        tab.unbind()
        self._forget(tab)
        try:
            await tab.close()
        finally:
            self._replenish()

    async def stop(self) -> None:
        """Stop opening and resetting, and close every tab the pool still holds."""
        self._stopping = True
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        tabs, self._ready = list(self._alive), []
        self._alive.clear()
        await asyncio.gather(*(self._close_quietly(tab) for tab in tabs))

    def _usable(self, tab: DocumentTab) -> bool:
        return not self._stopping and tab.handle is self._browsers.healthy()

    def _drop_stale(self, handle: BrowserHandle) -> None:
        stale = [tab for tab in self._ready if tab.handle is not handle or handle.gone.is_set()]
        for tab in stale:
            self._ready.remove(tab)
            self._retire(tab)

    def _forget(self, tab: DocumentTab) -> None:
        self._alive.discard(tab)
        self._changed.set()

    def _retire(self, tab: DocumentTab) -> None:
        self._forget(tab)
        self._spawn(self._close_quietly(tab))

    async def _open(self, handle: BrowserHandle, render: RenderInput) -> DocumentTab:
        tab = DocumentTab(handle, render.scale, self._settings)
        self._alive.add(tab)
        try:
            await tab.open(render.width, render.height)
        except BaseException:
            self._retire(tab)
            raise
        return tab

    def _replenish(self) -> None:
        handle = self._browsers.healthy()
        if handle is None or self._stopping:
            return
        scale, width, height = self._warm_shape
        while len(self._alive) < self._limit:
            tab = DocumentTab(handle, scale, self._settings)
            self._alive.add(tab)
            self._spawn(self._warm(tab, width, height))

    async def _warm(self, tab: DocumentTab, width: int, height: int) -> None:
        try:
            await tab.open(width, height)
        except Exception as exc:
            if not tab.handle.gone.is_set():
                log.warning("could not open a document tab: %s", _first_line(exc))
            self._retire(tab)
            return
        self._make_ready(tab)

    async def _reset(self, tab: DocumentTab) -> None:
        clean = False
        try:
            async with asyncio.timeout(self._settings.renderer_tab_reset_timeout_seconds):
                left = await tab.reset()
        except Exception as exc:
            if not tab.handle.gone.is_set():
                log.warning("document tab reset failed: %s", _first_line(exc))
        else:
            clean = not left
            if left:
                log.warning("document tab kept state after its reset (%s); closing it", left)
        if clean:
            self._make_ready(tab)
        else:
            self._retire(tab)
            self._replenish()

    def _make_ready(self, tab: DocumentTab) -> None:
        if tab in self._alive and self._usable(tab):
            self._ready.append(tab)
            self._changed.set()
        else:
            self._retire(tab)

    async def _close_quietly(self, tab: DocumentTab) -> None:
        try:
            await tab.close()
        except CleanupTimeoutError:
            if not tab.handle.gone.is_set():
                log.warning("a document tab hung on close; killing its browser")
                self._browsers.kill(tab.handle)
        except Exception:
            log.exception("closing a document tab failed")

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else type(exc).__name__
