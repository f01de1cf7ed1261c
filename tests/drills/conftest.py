"""Fixtures for the renderer drills: a real renderer subprocess and a local test site.

After every test the `hygiene` check asserts that no attempt temp directory is left, that no
Chromium process lives outside a running renderer, and that no new zombie appeared.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.drills.support import DrillSite, RendererProcess, chromium_outside, zombies
from tests.helpers.eventually import settled_sync

LIVE: dict[int, RendererProcess] = {}
SETTLE_SECONDS = 5.0


@pytest.fixture(scope="session")
def site() -> Iterator[DrillSite]:
    """The local web server URL renders may reach (allow-listed by host and port)."""
    server = DrillSite()
    yield server
    server.close()


def start_renderer(site: DrillSite, slots: int = 2, **env: str) -> RendererProcess:
    """Start a renderer allowed to reach the test site, registered for hygiene checks.

    Its temp dir is short on purpose: Chromium's singleton socket path must fit in 108 bytes.
    """
    tmp_dir = Path(tempfile.mkdtemp(prefix="dyd-"))
    settings_env = {
        "DECKYARD_RENDERER_URL_ALLOW_HOSTS": f'["127.0.0.1:{site.port}"]',
        "DECKYARD_RENDERER_DEFAULT_TIMEOUT_SECONDS": "20",
        **{f"DECKYARD_{k.upper()}": v for k, v in env.items()},
    }
    renderer = RendererProcess(tmp_dir, settings_env, slots=slots)
    LIVE[renderer.proc.pid] = renderer
    return renderer


def stop_renderer(renderer: RendererProcess) -> None:
    """Stop a renderer and check it left no process and no file behind."""
    LIVE.pop(renderer.proc.pid, None)
    assert renderer.stop() == 0, renderer.stderr_path.read_text()[-2000:]
    outside = settled_sync(lambda: chromium_outside(set(LIVE)), SETTLE_SECONDS)
    assert not outside, f"Chromium outlived its renderer: {outside}"
    assert list(renderer.tmp_dir.iterdir()) == []
    renderer.tmp_dir.rmdir()
    renderer.stderr_path.unlink()


@pytest.fixture(scope="session")
def renderer(site: DrillSite) -> Iterator[RendererProcess]:
    """One renderer with two slots, shared by the drills that do not need special settings."""
    process = start_renderer(site)
    yield process
    stop_renderer(process)


@pytest.fixture(scope="module")
def audited(site: DrillSite) -> Iterator[RendererProcess]:
    """A renderer with the page audit on (tests/conftest.py turns it off for the others)."""
    process = start_renderer(site, renderer_page_audit="true")
    yield process
    stop_renderer(process)


@pytest.fixture(scope="module")
def one_tab(site: DrillSite) -> Iterator[RendererProcess]:
    """A renderer with one slot and no spare tab, one per test module: consecutive documents
    (or a deck's pages) go through the same tab."""
    process = start_renderer(site, slots=1, renderer_spare_tabs="0")
    yield process
    stop_renderer(process)


@pytest.fixture(autouse=True)
def hygiene() -> Iterator[None]:
    """After each test: no attempt temp dirs, no stray Chromium, no new zombies."""
    before = zombies()
    yield

    def leftovers() -> list[str]:
        found: list[str] = []
        for renderer in LIVE.values():
            attempts = renderer.root / "attempts"
            if attempts.exists():
                found.extend(str(p) for p in attempts.iterdir())
        found.extend(f"chromium {pid}" for pid in chromium_outside(set(LIVE)))
        found.extend(f"zombie {pid}" for pid in zombies() - before)
        return found

    remaining = settled_sync(leftovers, SETTLE_SECONDS)
    assert not remaining, f"left behind: {remaining}"
