"""The renderer runtime: pool, attempt registry, signing, SSRF guard and the background loops.

`start()` makes the process a child subreaper, launches the browser pool, opens the first
document tabs, and starts the artefact sweeper and the reaper (woken by SIGCHLD, with a periodic
pass because signals coalesce).
`stop()` fails what is still running, closes every browser and reaps what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings
from deckyard.render.processes import (
    EPOCH_ENV,
    become_subreaper,
    children_of,
    kill_groups,
    kill_pids,
    reap_adopted,
    tagged_pids,
)
from deckyard.render.protocol import IMAGE_FORMATS, Capabilities, SignatureVerifier
from deckyard.render.renderer.browser.pool import BrowserPool
from deckyard.render.renderer.browser.tabs import TabPool
from deckyard.render.renderer.registry import AttemptRegistry
from deckyard.render.renderer.ssrf import UrlGuard

log = logging.getLogger(__name__)


class RendererRuntime:
    """Everything the control API drives; one per renderer process."""

    def __init__(
        self,
        settings: Settings,
        *,
        epoch: str,
        renderer_id: str,
        root: Path,
        clock: Clock = SYSTEM_CLOCK,
        on_process_group: Callable[[int], None] = lambda _pgid: None,
    ) -> None:
        if not settings.renderer_secret:
            raise ValueError("a renderer needs DECKYARD_RENDERER_SECRET")
        self.settings = settings
        self.epoch = epoch
        self.renderer_id = renderer_id
        self.root = root
        self.verifier = SignatureVerifier(
            settings.renderer_secret, settings.renderer_signature_skew_seconds, clock
        )
        self.guard = UrlGuard(
            settings.renderer_url_allow_hosts, settings.renderer_dns_timeout_seconds
        )
        self.pool = BrowserPool(settings, epoch, on_process_group)
        self.tabs = TabPool(settings, self.pool)
        self.registry = AttemptRegistry(
            settings, self.pool, self.tabs, self.guard, root, clock, renderer_id, epoch
        )
        self._protected: set[int] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._subreaper = False

    async def start(self) -> None:
        """Become a subreaper, launch Chromium and start the sweeper and reaper loops."""
        self._subreaper = become_subreaper()
        if not self._subreaper:
            log.warning("PR_SET_CHILD_SUBREAPER unavailable; orphans go to PID 1")
        self.registry.start()
        self._protected = set(children_of(os.getpid()))
        await self.pool.start()
        self._protected |= self.pool.driver_pids
        self.tabs.start()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGCHLD, self.reap)
        self._loops = [
            asyncio.create_task(
                self._every(self.settings.renderer_sweep_interval_seconds, self.registry.sweep)
            ),
            asyncio.create_task(
                self._every(self.settings.renderer_reap_interval_seconds, self.reap)
            ),
        ]

    def reap(self) -> None:
        """Reap exited processes adopted as subreaper (not the driver or the watchdog)."""
        reap_adopted(self._protected)

    async def _every(self, seconds: float, action: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                action()
            except Exception:
                log.exception("background pass %r failed", action)

    def capabilities(self) -> Capabilities:
        """What `GET /v1/capabilities` answers."""
        settings = self.settings
        return Capabilities(
            renderer_id=self.renderer_id,
            epoch=self.epoch,
            slots=settings.renderer_slots,
            free_slots=self.registry.free_slots,
            browser_version=self.pool.version,
            browser_generation=self.pool.generation,
            formats=list(IMAGE_FORMATS),
            max_dimension=settings.renderer_max_dimension,
            max_pixels=settings.renderer_max_pixels,
            max_scale=settings.renderer_max_scale,
            max_timeout_seconds=settings.renderer_max_timeout_seconds,
        )

    async def stop(self) -> None:
        """Stop the loops, fail active attempts, close the browsers and reap the leftovers."""
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.registry.stop()
        await self.tabs.stop()
        await self.pool.stop()
        with contextlib.suppress(RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGCHLD)
        await self._sweep_leftovers()

    async def _sweep_leftovers(self) -> None:
        """Kill and reap tagged helpers (crash handlers and the like) that outlived Chromium.

        Without this they would be re-parented to PID 1 when the renderer exits, and a PID 1
        that does not reap (a bare container entrypoint) keeps them as zombies.
        """
        deadline = asyncio.get_running_loop().time() + self.settings.renderer_watchdog_grace_seconds
        while asyncio.get_running_loop().time() < deadline:
            leftovers = tagged_pids(EPOCH_ENV, self.epoch, exclude=self._protected)
            kill_pids(leftovers)
            kill_groups(self.pool.process_groups)
            self.reap()
            adopted = [p for p in children_of(os.getpid()) if p not in self._protected]
            if not leftovers and not adopted:
                return
            await asyncio.sleep(self.settings.renderer_cleanup_timeout_seconds / 10)
