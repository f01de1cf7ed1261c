"""Lite supervision: run `deckyard renderer` subprocesses, restart them, leave nothing behind.

Each renderer runs on 127.0.0.1 with `--port 0` under a secret generated for this process, in a
process group of its own. A renderer that exits is restarted with exponential backoff (it comes
back with a new epoch, which the coordinator reconciles at once). A renderer that drained (it
printed `{"event": "drained"}` and exited 0: SIGTERM, or `POST /v1/renderers/{id}/drain`) is no
crash: its replacement starts at once, without backoff, a rolling restart. This process marks
itself a child subreaper, so the renderer's watchdog and any Chromium left by a SIGKILLed
renderer are re-parented here rather than to PID 1, and a reaping loop collects them: no zombie
survives. On stop every renderer gets SIGINT (stop now, not a drain) and SIGTERM, then its whole
process group SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.loop import Loop, Tick
from deckyard.render.control.client import RendererSource, RendererSources
from deckyard.render.processes import (
    become_subreaper,
    kill_groups,
    reap_adopted,
    spawn_renderer,
    terminate_renderer,
)

log = logging.getLogger(__name__)


@dataclass
class SupervisedRenderer:
    """One supervised renderer slot: its current process, URL and epoch, and its history."""

    name: str
    process: asyncio.subprocess.Process | None = None
    url: str | None = None
    epoch: str | None = None
    starts: int = 0
    epochs: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    adopted: asyncio.subprocess.Process | None = None
    drains: int = 0
    """Exits after a drain (restarted at once, not counted as crashes)."""

    @property
    def pid(self) -> int | None:
        """The running renderer's pid, if any."""
        return self.process.pid if self.process is not None else None


class Supervisor:
    """Keeps `count` local renderers running and registered in `sources`."""

    def __init__(
        self,
        settings: Settings,
        sources: RendererSources,
        clock: Clock,
        *,
        count: int,
        on_change: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.sources = sources
        self.clock = clock
        self.on_change = on_change
        self.secret = secrets.token_urlsafe(32)
        # Unique per process: two nodes on one host (or two containers with one hostname) must
        # never share a renderer name, or each would read the other's epoch as a restart.
        node = f"{socket.gethostname()}-{secrets.token_hex(4)}"
        self.renderers = [SupervisedRenderer(f"{node}-lite-{i}") for i in range(count)]
        self._stopping = False
        self._ready: list[asyncio.Future[None]] = []
        self.subreaper = False
        self.reap_loop = Loop.configured(
            "render.reap",
            self._reap_tick,
            settings,
            poll_interval=settings.render_reap_interval_seconds,
            idle_ceiling=settings.render_reap_interval_seconds,
            clock=clock,
        )

    @property
    def loops(self) -> list[Loop]:
        """The reaping loop."""
        return [self.reap_loop]

    def adopt(self, process: asyncio.subprocess.Process, secret: str, name: str) -> None:
        """Supervise `process` as the first renderer, started early under `secret` and `name`.

        `deckyard render` spawns its renderer (`spawn_renderer`) before its
        heavy imports, then hands it over here before `start()`; restarts spawn as usual.
        """
        if self._ready or not self.renderers:
            raise RuntimeError("adopt a renderer before the supervisor starts")
        self.secret = secret
        self.renderers[0].name = name
        self.renderers[0].adopted = process

    async def start(self) -> None:
        """Become a subreaper, start every renderer and wait until each is listening.

        A second call (`deckyard render` starts the renderers before the node migrates, and the
        node's start calls this again) only waits for the renderers the first one started.
        """
        if not self._ready:
            self.subreaper = become_subreaper()
            if not self.subreaper:
                log.warning("cannot become a child subreaper; orphans of renderers go to PID 1")
            self.reap_loop.start()
            for renderer in self.renderers:
                started = asyncio.get_running_loop().create_future()
                renderer.task = asyncio.create_task(
                    self._keep_running(renderer, started), name=f"supervise:{renderer.name}"
                )
                self._ready.append(started)
        await asyncio.gather(*self._ready)

    async def stop(self) -> None:
        """Stop every renderer and its process group, then reap what is left."""
        self._stopping = True
        for renderer in self.renderers:
            if renderer.task is not None:
                renderer.task.cancel()
        await asyncio.gather(
            *(r.task for r in self.renderers if r.task is not None), return_exceptions=True
        )
        for renderer in self.renderers:
            if renderer.adopted is not None:
                renderer.process, renderer.adopted = renderer.adopted, None
        await asyncio.gather(*(self._terminate(r) for r in self.renderers))
        await self.reap_loop.stop()
        self._reap()

    async def _keep_running(
        self, renderer: SupervisedRenderer, started: asyncio.Future[None]
    ) -> None:
        backoff = self.settings.render_restart_backoff_seconds
        while not self._stopping:
            began = self.clock.monotonic()
            try:
                await self._spawn(renderer)
            except (OSError, RuntimeError, TimeoutError) as exc:
                log.error("renderer %s failed to start: %s", renderer.name, exc)
            else:
                if not started.done():
                    started.set_result(None)
                self.on_change()
                if await self._watch(renderer) and not self._stopping:
                    renderer.drains += 1
                    log.info("renderer %s drained; starting its replacement", renderer.name)
                    backoff = self.settings.render_restart_backoff_seconds
                    continue
            if not started.done():
                started.set_result(None)
            if self._stopping:
                return
            if self.clock.monotonic() - began > self.settings.render_restart_backoff_max_seconds:
                backoff = self.settings.render_restart_backoff_seconds
            log.warning("renderer %s exited; restarting in %.1fs", renderer.name, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.settings.render_restart_backoff_max_seconds)

    async def _spawn(self, renderer: SupervisedRenderer) -> None:
        proc = renderer.adopted
        renderer.adopted = None
        if proc is None:
            settings = self.settings
            proc = await spawn_renderer(
                settings.renderer_slots, self.secret, renderer.name, settings.renderer_spare_tabs
            )
        renderer.process = proc
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(self.settings.render_renderer_start_timeout_seconds):
                line = await proc.stdout.readline()
            ready: dict[str, Any] = json.loads(line) if line else {}
        except (TimeoutError, ValueError):
            ready = {}
        if ready.get("event") != "listening":
            await self._terminate(renderer)
            raise RuntimeError(f"renderer {renderer.name} did not report listening")
        renderer.url, renderer.epoch = str(ready["url"]), str(ready["epoch"])
        renderer.starts += 1
        renderer.epochs.append(renderer.epoch)
        self.sources.put(RendererSource(renderer.name, renderer.url, self.secret))
        log.info(
            "renderer %s listening on %s (epoch %s)", renderer.name, renderer.url, renderer.epoch
        )

    async def _watch(self, renderer: SupervisedRenderer) -> bool:
        """Wait for the renderer to exit; True when it exited 0 after announcing its drain."""
        proc = renderer.process
        assert proc is not None
        drained = asyncio.Event()
        events = asyncio.create_task(self._read_events(renderer, proc, drained))
        try:
            code = await proc.wait()
            if code == 0 and not drained.is_set():
                # Its last line may still be unread in the pipe; the pipe ends only once the
                # watchdog (which shares it) has exited too.
                seen = asyncio.create_task(drained.wait())
                grace = self.settings.render_renderer_stop_grace_seconds
                await asyncio.wait({events, seen}, timeout=grace, return_when="FIRST_COMPLETED")
                seen.cancel()
                await asyncio.gather(seen, return_exceptions=True)
        finally:
            events.cancel()
            await asyncio.gather(events, return_exceptions=True)
        kill_groups([proc.pid])
        renderer.process = None
        if code != 0 or not drained.is_set():
            log.warning("renderer %s (pid %d) exited with %s", renderer.name, proc.pid, code)
        self._reap()
        self.on_change()
        return code == 0 and drained.is_set()

    async def _read_events(
        self, renderer: SupervisedRenderer, proc: asyncio.subprocess.Process, drained: asyncio.Event
    ) -> None:
        """Read the renderer's stdout to its end: a `draining` line pokes the probe at once (no
        new attempts there), a `drained` line sets `drained`."""
        assert proc.stdout is not None
        async for raw in proc.stdout:
            try:
                event = json.loads(raw).get("event")
            except (ValueError, AttributeError):
                continue
            if event == "draining":
                log.info("renderer %s is draining", renderer.name)
                self.on_change()
            elif event == "drained":
                drained.set()

    async def _terminate(self, renderer: SupervisedRenderer) -> None:
        proc = renderer.process
        if proc is None:
            return
        if proc.returncode is None:
            # SIGINT stops it now; SIGTERM alone would drain it, for results nobody collects
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        grace = self.settings.render_renderer_stop_grace_seconds
        if not await terminate_renderer(proc, grace):
            log.warning("renderer %s ignored SIGTERM; its group was killed", renderer.name)
        renderer.process = None

    def _reap(self) -> int:
        protected = {r.pid for r in self.renderers if r.pid is not None}
        return reap_adopted({p for p in protected if p is not None})

    async def _reap_tick(self) -> Tick:
        reaped = self._reap()
        if reaped:
            log.info("reaped %d orphaned process(es) of renderers", reaped)
        return Tick(due_in=self.settings.render_reap_interval_seconds)
