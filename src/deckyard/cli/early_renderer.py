"""The renderer `deckyard render` and `validate` start first thing, before their heavy imports.

Start-up used to be serial: the pipeline's imports (SQLAlchemy, the deck compiler, the whole
node: about 2-3 s), then the renderer process's own imports and Chromium's launch (about 4 s).
Spawning the renderer process before the pipeline is imported runs the two side by side; the
node's supervisor then adopts it (`Supervisor.adopt`) and watches, restarts and stops it like
any renderer it started itself. The spawn comes before even the settings are loaded (the
renderer reads the same environment, so it picks the same slot count) and imports nothing but
the process helpers, so it happens within a few hundred milliseconds of the command's start.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from deckyard.cli.common import CLI_SPARE_TABS
from deckyard.render.processes import SPARE_TABS_ENV, spawn_renderer, terminate_renderer
from deckyard.startup import before_exit, heavy_imports

RENDERER_URLS_ENV = "DECKYARD_RENDERER_URLS"


@dataclass
class EarlyRenderer:
    """A renderer process started ahead of the node, ours to stop until a supervisor adopts it."""

    process: asyncio.subprocess.Process
    secret: str
    name: str
    adopted: bool = False

    async def stop(self, grace_seconds: float) -> None:
        """SIGTERM the process, then SIGKILL its group after the grace; a no-op once adopted."""
        if self.adopted:
            return
        await terminate_renderer(self.process, grace_seconds)
        self.adopted = True


async def start_early_renderer() -> EarlyRenderer:
    """Spawn `deckyard renderer` the way the supervisor would, under a fresh secret and name.

    It takes its slot count from its settings, as the node's would: both read this environment;
    its spare tabs are the CLI's (`CLI_SPARE_TABS`) unless the environment says.
    """
    secret = secrets.token_urlsafe(32)
    name = f"{socket.gethostname()}-{secrets.token_hex(4)}-lite-0"
    spare = int(os.environ.get(SPARE_TABS_ENV, CLI_SPARE_TABS))
    return EarlyRenderer(await spawn_renderer(None, secret, name, spare), secret, name)


async def _launch(
    deck_dir: Path,
    out: Path | None,
    formats: str,
    database_url: str | None,
    verbose: bool,
    options: dict[str, bool],
) -> int:
    # With renderer URLs configured the node supervises none. URLs set another way (a settings
    # file) show only once the settings load: the early renderer is stopped then.
    early = None if os.environ.get(RENDERER_URLS_ENV) else await start_early_renderer()
    try:
        # The heavy imports run while the renderer process imports and launches Chromium.
        with heavy_imports():
            from deckyard.cli.pipeline import run_command

        return await run_command(deck_dir, out, formats, database_url, verbose, early, **options)
    finally:
        if early is not None and not early.adopted:
            # The run ended before a node adopted it (a deck or output folder refused).
            from deckyard.config import Settings

            await early.stop(Settings.load().render_renderer_stop_grace_seconds)


def launch(
    deck_dir: Path,
    out: Path | None,
    formats: str,
    database_url: str | None,
    verbose: bool,
    *,
    offline: bool = False,
    strict: bool = False,
    pdf_tagged: bool = False,
    steps: bool = False,
    reuse: bool = True,
) -> int:
    """Run the pipeline for the CLI with its renderer started first; returns the exit code.

    `offline`, `strict`, `pdf_tagged`, `steps` and `reuse` as in `run_pipeline`.

    The process exits right after: what the run made is frozen first, so the interpreter's
    last collection does not walk it (`deckyard.startup`).
    """
    try:
        options = {"offline": offline, "strict": strict, "pdf_tagged": pdf_tagged}
        if steps:
            options["steps"] = True
        if not reuse:
            options["reuse"] = False
        return asyncio.run(_launch(deck_dir, out, formats, database_url, verbose, options))
    finally:
        before_exit()
