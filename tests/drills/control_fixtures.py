"""Fixtures for the control-plane drills: a renderer behind a fault proxy and a running plane.

Import these names into a drill module to use them. `hygiene` replaces the renderer drills'
machine-wide check with seed 004's gate scoped to this test process and its renderers, since
other Chromium instances may run on a shared machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from deckyard.artifacts import ArtifactStore
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.jobs import Runtime
from deckyard.render.control.models import DOCUMENT_PREFIX
from deckyard.render.control.schema import render_attempts
from deckyard.render.control.service import RenderService
from tests.drills.conftest import LIVE, start_renderer
from tests.drills.control_support import (
    FaultProxy,
    NavigationSite,
    browsers_below,
    own_pid,
    tagged_processes,
    zombie_children,
)
from tests.drills.support import SECRET, DrillSite, RendererProcess
from tests.helpers.api import ROOMY_LEASE
from tests.helpers.eventually import settled, settled_sync
from tests.helpers.runtime import FAST

CAP = 2
DRILL_SETTINGS: dict[str, Any] = {
    **FAST,
    "render_lease_seconds": 3.0,
    "render_receipt_poll_seconds": 0.2,
    "render_unknown_reconcile_after_seconds": 1.5,
    "render_attempt_timeout_seconds": 20.0,
    "render_request_deadline_seconds": 20.0,
    "render_retry_after_seconds": 0.5,
    "render_max_attempts": 3,
    "render_global_cap": CAP,
    "render_workspace_cap": CAP,
    "render_workspace_slot_share": 1.0,
    "render_probe_interval_seconds": 0.5,
    "render_idle_poll_ceiling_seconds": 1.0,
    "renderer_secret": SECRET,
}


ROOMY_LEASES: dict[str, Any] = {**ROOMY_LEASE, "render_lease_seconds": 6.0}
"""An in-process plane's leases unless a drill asks for others: the drills that are about a
lease's expiry (3 and 4) pass 3 s. At 1.5 s (job) and 3 s (render) a cold or loaded machine
lapses them in drills about something else (a cancel seen as a lost attempt)."""


@pytest.fixture(scope="module")
def nav() -> Iterator[NavigationSite]:
    """The navigation site whose page loads the drills hold."""
    site = NavigationSite()
    yield site
    site.close()


def renderer_env(nav: NavigationSite) -> dict[str, str]:
    """Renderer settings for the drills: allowed to reach the navigation site."""
    return {"renderer_url_allow_hosts": json.dumps([f"127.0.0.1:{nav.port}"])}


def stop_control_renderer(renderer: RendererProcess) -> None:
    """Stop a renderer and check that nothing of it (process or file) is left.

    Scoped to the renderer's own epoch tag rather than to every Chromium on the machine, which
    may be shared with other Chromium users.
    """
    LIVE.pop(renderer.proc.pid, None)
    epoch = renderer.ready["epoch"]
    STOPPED_EPOCHS.add(epoch)
    assert renderer.stop() == 0, renderer.stderr_path.read_text()[-2000:]
    assert not settled_sync(lambda: tagged_processes({epoch})), "processes outlived their renderer"
    assert settled_sync(lambda: list(renderer.tmp_dir.iterdir())) == []
    renderer.tmp_dir.rmdir()
    renderer.stderr_path.unlink()


@pytest.fixture(scope="module")
def shared_renderer(site: DrillSite, nav: NavigationSite) -> Iterator[RendererProcess]:
    """One real renderer with two slots for the drills that do not kill it."""
    process = start_renderer(site, slots=CAP, **renderer_env(nav))
    yield process
    stop_control_renderer(process)


@dataclass
class Plane:
    """A job runtime and a render service on a fresh SQLite file, behind a fault proxy."""

    db: Database
    runtime: Runtime
    service: RenderService
    store: ArtifactStore
    proxy: FaultProxy
    settings: Settings
    samples: list[int] = field(default_factory=list)

    async def results(self) -> list[str]:
        """The store's keys but the render documents (inputs by key, `control/requests.py`)."""
        return [k for k in await self.store.keys() if not k.startswith(DOCUMENT_PREFIX)]

    async def occupancy(self) -> int:
        """Slots held right now: one per single attempt, one per slot of a deck attempt."""
        async with self.db.read_connection() as conn:
            rows = await conn.execute(
                select(render_attempts.c.extra_slots).where(render_attempts.c.active_occupancy == 1)
            )
            return sum(1 + len(row.extra_slots or []) for row in rows)


@contextlib.asynccontextmanager
async def running_plane(
    tmp_path: Path,
    renderer: RendererProcess,
    *,
    before_start: Callable[[Runtime, RenderService], None] | None = None,
    **over: Any,
) -> AsyncIterator[Plane]:
    """Start a plane against `renderer` (through a fault proxy); sample occupancy throughout.

    `before_start` may register more job handlers (say, a deck job) before the runtime starts;
    `database_url` in `over` puts the plane on another database (PostgreSQL).
    """
    proxy = FaultProxy(renderer.url)
    settings = Settings.load(
        **{
            **DRILL_SETTINGS,
            **ROOMY_LEASES,
            "data_dir": tmp_path,
            "database_url": f"sqlite:///{tmp_path / 'drill.db'}",
            "renderer_urls": [proxy.url],
            **over,
        }
    )
    db = Database(settings.resolved_database_url)
    await upgrade(db)
    runtime = Runtime(db, settings=settings, migrate=False)
    service = RenderService(db, runtime, settings, supervise=False)
    runtime.worker(["render"], concurrency=4)
    if before_start is not None:
        before_start(runtime, service)
    plane = Plane(db, runtime, service, service.store, proxy, settings)
    await runtime.start()
    await service.start()

    async def sample() -> None:
        while True:
            plane.samples.append(await plane.occupancy())
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    try:
        yield plane
        busy = await settled(lambda: _busy(plane))
        assert busy == [], f"a renderer still holds a slot at the end: {busy}"
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        await service.stop()
        await runtime.stop()
        proxy.close()
        await db.dispose()
    assert plane.samples, "occupancy was never sampled"
    assert max(plane.samples) <= CAP, f"occupancy exceeded the cap: {max(plane.samples)}"
    assert [k for k in await plane.store.keys() if ".tmp-" in k] == []


async def _busy(plane: Plane) -> list[dict[str, Any]]:
    return [w for w in await plane.service.renderers() if w["occupancy"]]


@pytest.fixture(autouse=True)
def hygiene() -> Iterator[None]:
    """Seed 004's gate after each drill: no temp files, no stray browsers, no zombies."""
    yield

    def leftovers() -> list[str]:
        found: list[str] = []
        for renderer in LIVE.values():
            attempts = renderer.root / "attempts"
            if attempts.exists():
                found.extend(str(p) for p in attempts.iterdir())
        live_epochs = {r.ready["epoch"] for r in LIVE.values()}
        live_roots = {r.proc.pid for r in LIVE.values()}
        for pid in browsers_below(own_pid()):
            if not any(pid in browsers_below(root) for root in live_roots):
                found.append(f"browser {pid} outside a live renderer")
        found.extend(f"zombie {pid}" for pid in zombie_children(own_pid()))
        found.extend(
            f"tagged {pid}"
            for pid in tagged_processes(STOPPED_EPOCHS)
            if not live_epochs & STOPPED_EPOCHS
        )
        return found

    remaining = settled_sync(leftovers)
    assert not remaining, f"left behind: {remaining}"


STOPPED_EPOCHS: set[str] = set()
"""Epochs of renderers a drill killed or stopped: none of their processes may survive."""
