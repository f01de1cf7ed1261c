"""A Lite control plane in its own process, supervising its renderers, for the supervisor drill.

`python -m tests.drills.control_harness DATA_DIR URL` starts a runtime and a `RenderService`
with one supervised renderer, prints JSON lines (`ready`, `render`, `done`), renders `URL` as a
one-page render request, and stops cleanly when stdin closes. (`job` repeats `render` for
readers of the harness from when a screenshot was a job.) It runs apart from pytest because the
supervisor makes its process a child subreaper, which must not leak into other tests.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from deckyard.config import Settings
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.jobs import Runtime
from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.control.service import RenderService
from tests.drills.control_fixtures import DRILL_SETTINGS


def say(event: str, **data: Any) -> None:
    """Print one JSON line."""
    print(json.dumps({"event": event, **data}, default=str), flush=True)


def renderers(service: RenderService) -> list[dict[str, Any]]:
    """What the supervisor knows about its renderers."""
    assert service.supervisor is not None
    return [
        {"name": r.name, "pid": r.pid, "epoch": r.epoch, "epochs": r.epochs, "starts": r.starts}
        for r in service.supervisor.renderers
    ]


async def main(data_dir: Path, url: str) -> None:
    """Run the scenario described in the module docstring."""
    over = {k: v for k, v in DRILL_SETTINGS.items() if k not in ("renderer_secret", "renderers")}
    settings = Settings.load(
        **over,
        data_dir=data_dir,
        renderers=1,
        renderer_slots=1,
        render_restart_backoff_seconds=0.2,
        render_restart_backoff_max_seconds=1.0,
        render_reap_interval_seconds=0.2,
    )
    db = Database(settings.resolved_database_url)
    await upgrade(db)
    runtime = Runtime(db, settings=settings, migrate=False)
    service = RenderService(db, runtime, settings)
    await runtime.start()
    await service.start()
    say("ready", renderers=renderers(service), subreaper=service.supervisor.subreaper)  # type: ignore[union-attr]
    request = await service.submit(
        ScreenshotSpec(url=url, width=320, height=200), workspace_id="ws"
    )
    say("render", id=request.id)
    done = await service.wait_for_terminal(request.id, timeout=60)
    attempts = await service.attempts(request.id)
    say(
        "done",
        status=done.status.value,
        error=[done.error_code, done.error_message],
        result=done.result,
        attempts=[
            {"status": a.status.value, "epoch": a.renderer_epoch, "error": a.error_code}
            for a in attempts
        ],
        renderers=renderers(service),
        renderer_rows=await service.renderers(),
    )
    await asyncio.to_thread(sys.stdin.read)
    await service.stop()
    await runtime.stop()
    await db.dispose()
    say("stopped")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
