"""The browser pool: one warm Chromium at a time, relaunched on crash, hang or recycle.

Attempts share the current browser, each in its own fresh context. When the browser disconnects
(crashed or killed), its attempts fail with `RENDER_BROWSER_CRASHED` and the next acquire
launches a new one. A probe sends `Browser.getVersion` over CDP every
`renderer_probe_interval_seconds`; no answer within `renderer_probe_timeout_seconds` means the
browser hangs, and it is killed. After `renderer_recycle_after_renders` renders a browser retires:
new attempts go to a fresh browser and the old one closes when its last attempt ends. A browser
one of whose contexts did not close in time retires the same way (it is not killed: the pages
still rendering on it are fine, and would fail as crashed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, CDPSession, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from deckyard.config import Settings
from deckyard.render.processes import (
    BROWSER_ENV,
    browser_main_pgid,
    children_of,
    kill_groups,
    kill_tagged,
)

log = logging.getLogger(__name__)

DEBIAN_CHROMIUM = Path("/usr/bin/chromium")
CLOSED_NETWORK_ARGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-quic",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-domain-reliability",
    "--dns-prefetch-disable",
    "--mute-audio",
    "--hide-scrollbars",
    "--password-store=basic",
    # No UDP leaves a render (issue 14): WebRTC may use UDP only through a proxy, and the
    # contexts' proxy carries TCP only, so STUN, TURN/UDP and ICE checks never go out. Full
    # Chromium reads the first spelling (its command-line pref store, new headless included);
    # headless-shell reads only the second. QUIC (and with it WebTransport) is off above.
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    # WebUIOmniboxPopup and WebUIOmniboxAimPopup: new headless opens a window per context, and
    # each window preloads its omnibox popup WebUI in a renderer process of its own (about
    # 110 MiB RSS and its start-up CPU per document tab) that no render ever shows.
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,"
    "AutofillServerCommunication,CertificateTransparencyComponentUpdater,"
    "WebUIOmniboxPopup,WebUIOmniboxAimPopup",
)

NO_PEER_NETWORK_SCRIPT = """(() => {
  for (const name of ['RTCPeerConnection', 'webkitRTCPeerConnection', 'RTCDataChannel',
      'RTCIceCandidate', 'RTCSessionDescription', 'RTCRtpSender', 'RTCRtpReceiver',
      'RTCRtpTransceiver', 'RTCDtlsTransport', 'RTCIceTransport', 'RTCSctpTransport',
      'WebTransport']) {
    try { delete globalThis[name]; } catch (e) {}
  }
})();"""
"""Run in every frame of every render context: the peer-to-peer APIs are gone from the page.

A second layer only: a script can race it (a new frame's window before the script ran), so
the flags above are what keep UDP in; this makes the common case fail early and visibly.
"""


class ChromiumNotFoundError(RuntimeError):
    """No usable Chromium: neither the configured path, Debian's, nor Playwright's own."""


def find_chromium(settings: Settings, playwright_default: str | None) -> Path:
    """The Chromium to launch: the configured path, else Debian's, else Playwright's own."""
    tried: list[str] = []
    candidates: list[tuple[str, Path | None]] = [
        ("DECKYARD_CHROMIUM_PATH", settings.chromium_path),
        ("Debian chromium", DEBIAN_CHROMIUM),
        ("Playwright's Chromium", Path(playwright_default) if playwright_default else None),
    ]
    for label, path in candidates:
        if path is not None and path.is_file() and os.access(path, os.X_OK):
            return path
        tried.append(f"{label} ({path or 'not set'})")
    raise ChromiumNotFoundError(
        "no Chromium found; tried " + ", ".join(tried) + ". Install Debian's `chromium` package "
        "or set DECKYARD_CHROMIUM_PATH."
    )


class BrowserHandle:
    """One launched Chromium with its bookkeeping; `gone` is set when it disconnects."""

    def __init__(self, browser: Browser, generation: int, tag: str, pgid: int | None) -> None:
        self.browser = browser
        self.generation = generation
        self.tag = tag
        self.pgid = pgid
        self.renders = 0
        self.in_flight = 0
        self.retiring = False
        self.gone = asyncio.Event()
        self.cdp: CDPSession | None = None
        browser.on("disconnected", lambda _browser: self._on_disconnected())

    def _on_disconnected(self) -> None:
        self.gone.set()
        self.kill()

    def kill(self) -> None:
        """SIGKILL this Chromium's process group and its tagged helpers."""
        if self.pgid is not None:
            kill_groups([self.pgid])
        kill_tagged(BROWSER_ENV, self.tag)


class BrowserPool:
    """Launches, shares, probes, recycles and replaces Chromium; see the module docstring."""

    def __init__(
        self, settings: Settings, epoch: str, on_process_group: Callable[[int], None]
    ) -> None:
        self._settings = settings
        self._on_process_group = on_process_group
        self.driver_pids: set[int] = set()
        self.process_groups: set[int] = set()
        self._epoch = epoch
        self._playwright: Playwright | None = None
        self._executable: Path | None = None
        self._current: BrowserHandle | None = None
        self._retiring: set[BrowserHandle] = set()
        self._lock = asyncio.Lock()
        self._generation = 0
        self._probe_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.version = ""

    @property
    def generation(self) -> int:
        """How many browsers this pool has launched."""
        return self._generation

    @property
    def executable(self) -> Path | None:
        """The Chromium binary in use, once started."""
        return self._executable

    async def start(self) -> None:
        """Start Playwright's driver, find Chromium, launch the first browser and the probe."""
        before = set(children_of(os.getpid()))
        self._playwright = await async_playwright().start()
        self.driver_pids = set(children_of(os.getpid())) - before
        self._executable = find_chromium(self._settings, self._playwright.chromium.executable_path)
        async with self._lock:
            self._current = await self._launch()
        self._probe_task = asyncio.create_task(self._probe_loop())

    async def _launch(self) -> BrowserHandle:
        assert self._playwright is not None
        self._generation += 1
        tag = f"{self._epoch}-{self._generation}"
        browser = await self._playwright.chromium.launch(
            executable_path=self._executable,
            args=list(CLOSED_NETWORK_ARGS),
            chromium_sandbox=os.geteuid() != 0,
            env={**os.environ, BROWSER_ENV: tag},
            handle_sigint=False,
            handle_sigterm=False,
            handle_sighup=False,
            timeout=self._settings.renderer_launch_timeout_seconds * 1000,
        )
        self.version = browser.version
        pgid = browser_main_pgid(tag)
        if pgid is not None:
            self.process_groups.add(pgid)
            self._on_process_group(pgid)
        log.info("launched Chromium %s (generation %d)", self.version, self._generation)
        return BrowserHandle(browser, self._generation, tag, pgid)

    def healthy(self) -> BrowserHandle | None:
        """The current browser if it is connected and not retiring, else None."""
        current = self._current
        if current is None or current.gone.is_set() or current.retiring:
            return None
        return current

    async def acquire(self) -> BrowserHandle:
        """The browser to render on, launching a new one if the current one is gone or retiring."""
        async with self._lock:
            current = self._current
            if current is None or current.gone.is_set() or current.retiring:
                self._current = current = await self._launch()
            current.in_flight += 1
            return current

    def release(self, handle: BrowserHandle) -> None:
        """Return a browser after an attempt; retire it once it has rendered enough."""
        handle.in_flight -= 1
        handle.renders += 1
        if handle.renders >= self._settings.renderer_recycle_after_renders:
            handle.retiring = True
        self._close_if_idle(handle)

    def retire(self, handle: BrowserHandle) -> None:
        """Give new attempts a fresh browser and close this one once its last attempt is done.

        For a browser one of whose contexts did not close within
        `renderer_cleanup_timeout_seconds`. A loaded machine makes a healthy browser that
        slow too, and killing it would fail every page still rendering on it as crashed (a
        deck's other page, retried by a whole new attempt). `_close` kills it if it does not
        close in time either; a browser that hangs outright is the probe's to kill.
        """
        handle.retiring = True
        self._close_if_idle(handle)

    def _close_if_idle(self, handle: BrowserHandle) -> None:
        if handle.retiring and handle.in_flight == 0 and handle not in self._retiring:
            self._retiring.add(handle)
            self._spawn(self._close(handle))

    def kill(self, handle: BrowserHandle) -> None:
        """SIGKILL a browser and its helpers; its attempts then fail as crashed."""
        handle.retiring = True
        handle.kill()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _close(self, handle: BrowserHandle) -> None:
        try:
            async with asyncio.timeout(self._settings.renderer_launch_timeout_seconds):
                await handle.browser.close()
        except (TimeoutError, PlaywrightError):
            self.kill(handle)
        finally:
            self._retiring.discard(handle)

    async def probe_once(self) -> bool:
        """Check the current browser answers over CDP in time; kill it if it does not."""
        handle = self._current
        if handle is None or handle.gone.is_set():
            return True
        try:
            async with asyncio.timeout(self._settings.renderer_probe_timeout_seconds):
                if handle.cdp is None:
                    handle.cdp = await handle.browser.new_browser_cdp_session()
                await handle.cdp.send("Browser.getVersion")
        except TimeoutError:
            log.warning(
                "Chromium generation %d did not answer the probe; killing it", handle.generation
            )
            self.kill(handle)
            return False
        except PlaywrightError:
            return handle.gone.is_set()
        return True

    async def _probe_loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.renderer_probe_interval_seconds)
            try:
                await self.probe_once()
            except Exception:
                log.exception("browser probe failed")

    async def kill_browsers(self) -> None:
        """Stop probing, kill every browser and wait until the driver sees each disconnect.

        For a renderer going away: its attempts have ended and every browser profile lives
        under the renderer's temporary root, which it deletes next. A graceful
        `browser.close()` bought nothing but its time (a third of a second or more on 2 cores,
        added to every `deckyard render`), and the tabs' closes that followed waited on a live
        browser; on a killed one they answer at once.
        """
        if self._probe_task is not None:
            self._probe_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe_task
            self._probe_task = None
        handles = [h for h in (self._current, *self._retiring) if h is not None]
        self._current = None
        for handle in handles:
            self.kill(handle)
        await asyncio.gather(*(self._disconnected(h) for h in handles))

    async def stop(self) -> None:
        """Kill every browser (`kill_browsers`), then stop the driver."""
        await self.kill_browsers()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def _disconnected(self, handle: BrowserHandle) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._settings.renderer_launch_timeout_seconds):
                await handle.gone.wait()


def remove_tree(path: Path) -> None:
    """Delete a directory tree, ignoring what is already gone."""
    shutil.rmtree(path, ignore_errors=True)
