"""A context slower to close than `renderer_cleanup_timeout_seconds` retires its browser: the
other page of the deck still rendering on that browser finishes, instead of failing as crashed.

A loaded machine closes a healthy context that slowly. The renderer used to SIGKILL the browser
for it, which failed the deck's other page `RENDER_BROWSER_CRASHED` and made the control plane
retry the deck in a whole new attempt (the cause of the flaky mid-deck cancel drill).
Chromium is faked here: the hang is a close that never returns, so no timing is involved.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from deckyard.clock import SYSTEM_CLOCK
from deckyard.config import Settings
from deckyard.render.protocol import AttemptStatus, DeckAttemptRequest
from deckyard.render.renderer.browser.pool import BrowserHandle, BrowserPool
from deckyard.render.renderer.browser.tabs import TabPool
from deckyard.render.renderer.registry import AttemptRegistry
from deckyard.render.renderer.ssrf import UrlGuard
from tests.helpers.eventually import eventually

HELD = "http://127.0.0.1:9/held"
SLOW_CLOSE = "http://127.0.0.1:9/slow-close"
HELD_GATED_CLOSE = "http://127.0.0.1:9/held-gated-close"


class FakePage:
    def __init__(self, context: FakeContext) -> None:
        self.context = context

    def on(self, _event: str, _callback: Any) -> None:
        return

    async def emulate_media(self, **_kwargs: Any) -> None:
        return

    async def goto(self, url: str, **_kwargs: Any) -> None:
        self.context.url = url
        if url in (HELD, HELD_GATED_CLOSE):
            self.context.browser.held += 1
            await self.context.browser.release_held.wait()

    async def evaluate(self, _script: str, _args: Any = None) -> dict[str, Any]:
        return {
            "width": 320,
            "height": 200,
            "overflow": [],
            "invisibleText": [],
            "brokenImages": [],
            "fontsNotLoaded": [],
        }

    async def screenshot(self, **_kwargs: Any) -> bytes:
        return b"png of " + self.context.url.encode()


class FakeContext:
    def __init__(self, browser: FakeBrowser) -> None:
        self.browser = browser
        self.url = ""

    async def add_init_script(self, _script: str) -> None:
        return

    async def new_page(self) -> FakePage:
        return FakePage(self)

    async def close(self) -> None:
        if self.url == SLOW_CLOSE:
            await asyncio.Event().wait()
        if self.url == HELD_GATED_CLOSE:
            self.browser.closing.set()
            await self.browser.close_gate.wait()


class FakeBrowser:
    def __init__(self) -> None:
        self.release_held = asyncio.Event()
        self.held = 0
        self.closing = asyncio.Event()
        self.close_gate = asyncio.Event()
        self.on_disconnected: list[Any] = []
        self.closed = asyncio.Event()

    def on(self, event: str, callback: Any) -> None:
        assert event == "disconnected"
        self.on_disconnected.append(callback)

    async def new_context(self, **_kwargs: Any) -> FakeContext:
        return FakeContext(self)

    async def close(self) -> None:
        self.closed.set()


class FakeHandle(BrowserHandle):
    """A fake Chromium whose SIGKILL disconnects it, as a real one's does."""

    killed = False

    @property
    def fake(self) -> FakeBrowser:
        return cast(FakeBrowser, self.browser)

    def kill(self) -> None:
        if not self.killed:
            self.killed = True
            for callback in self.fake.on_disconnected:
                callback(self.browser)


@dataclass
class Renderer:
    """An attempt registry over a browser pool whose launches make fake browsers."""

    registry: AttemptRegistry
    pool: BrowserPool
    browsers: list[FakeHandle] = field(default_factory=list)


@pytest.fixture
async def renderer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Renderer]:
    async for rig in fake_renderer(tmp_path, monkeypatch, cleanup_timeout=0.05):
        yield rig


@pytest.fixture
async def patient_renderer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Renderer]:
    """One that waits for a slow close (and answers a cancel after 0.1 s at the most)."""
    async for rig in fake_renderer(tmp_path, monkeypatch, cleanup_timeout=30, cancel_wait=0.1):
        yield rig


async def fake_renderer(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    cleanup_timeout: float,
    cancel_wait: float = 1.0,
) -> AsyncIterator[Renderer]:
    settings = Settings.load(
        renderer_slots=2,
        renderer_cleanup_timeout_seconds=cleanup_timeout,
        renderer_cancel_wait_seconds=cancel_wait,
    )
    pool = BrowserPool(settings, "epoch", lambda _pgid: None)
    guard = UrlGuard(settings.renderer_url_allow_hosts, settings.renderer_dns_timeout_seconds)
    registry = AttemptRegistry(
        settings, pool, TabPool(settings, pool), guard, tmp_path, SYSTEM_CLOCK, "r", "epoch"
    )
    rig = Renderer(registry, pool)

    async def launch() -> BrowserHandle:
        generation = len(rig.browsers) + 1
        handle = FakeHandle(cast(Any, FakeBrowser()), generation, f"t-{generation}", None)
        rig.browsers.append(handle)
        return handle

    monkeypatch.setattr(pool, "_launch", launch)
    registry.start()
    yield rig
    await registry.stop()
    await pool.stop()


async def test_a_context_slow_to_close_does_not_crash_the_other_page_on_its_browser(
    renderer: Renderer,
) -> None:
    registry = renderer.registry
    deck = DeckAttemptRequest.model_validate(
        {
            "attempt_id": "deck-1",
            "parallel": 2,
            "pages": [{"index": 0, "url": HELD}, {"index": 1, "url": SLOW_CLOSE}],
        }
    )
    registry.submit_deck(deck)
    # page 1 is rendered and its context hangs on close while page 0 still loads
    await registry.changes.wait_past(0, timeout=10)
    [first] = renderer.browsers
    assert first.retiring, "the browser whose context hung on close was not retired"
    first.fake.release_held.set()
    receipt = await asyncio.wait_for(registry.wait("deck-1"), 10)
    assert (receipt.status, receipt.message) == (AttemptStatus.SUCCEEDED, None)
    assert [p.status for p in receipt.pages or []] == [AttemptStatus.SUCCEEDED] * 2
    # the retired browser closes once its last page is done; the next render gets a new one
    await asyncio.wait_for(first.fake.closed.wait(), 10)
    assert not first.killed
    handle = await renderer.pool.acquire()
    assert handle is not first and handle.generation == 2
    renderer.pool.release(handle)


async def test_a_cancelled_deck_gives_its_slots_back_only_when_every_page_has_closed(
    patient_renderer: Renderer,
) -> None:
    """Both slots render a page; on cancel one page closes at once, the other slowly. The
    attempt ends, and its slots come back, when the slow one has closed too, not before."""
    registry = patient_renderer.registry
    deck = DeckAttemptRequest.model_validate(
        {
            "attempt_id": "deck-2",
            "parallel": 2,
            "pages": [{"index": 0, "url": HELD}, {"index": 1, "url": HELD_GATED_CLOSE}],
        }
    )
    registry.submit_deck(deck)
    assert registry.free_slots == 0

    async def both_held() -> bool:
        return any(b.fake.held == 2 for b in patient_renderer.browsers)

    await eventually(both_held, what="both pages loading")
    receipt = await registry.cancel("deck-2")
    [browser] = patient_renderer.browsers
    await asyncio.wait_for(browser.fake.closing.wait(), 10)
    # page 0 has ended cancelled; page 1 is still closing its context on its slot
    assert not receipt.status.terminal
    assert registry.free_slots == 0
    browser.fake.close_gate.set()
    receipt = await asyncio.wait_for(registry.wait("deck-2"), 10)
    assert receipt.status is AttemptStatus.CANCELLED
    assert registry.free_slots == 2
