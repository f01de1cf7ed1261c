"""A document tab costs Chromium one page and nothing else it would never show."""

from __future__ import annotations

import pytest

from deckyard.config import Settings
from deckyard.render.renderer.browser.pool import BrowserPool
from deckyard.render.renderer.browser.tabs import DocumentTab

pytestmark = pytest.mark.chromium


async def test_a_document_tab_opens_no_browser_ui_target() -> None:
    """New headless opens a window per context; its omnibox popup WebUI (a renderer process of
    its own per tab) is switched off, so the tab's page is the only target of its context."""
    pool = BrowserPool(Settings(), "windows", lambda _pgid: None)
    await pool.start()
    try:
        handle = pool.healthy()
        assert handle is not None
        tabs = [DocumentTab(handle, 1.0, Settings()) for _ in range(2)]
        for tab in tabs:
            await tab.open(640, 360)
        session = await handle.browser.new_browser_cdp_session()
        found = (await session.send("Target.getTargets"))["targetInfos"]
        await session.detach()
        for tab in tabs:
            await tab.close()
        kinds = sorted(t["type"] for t in found)
        assert kinds == ["page", "page"], [(t["type"], t["url"]) for t in found]
    finally:
        await pool.stop()
