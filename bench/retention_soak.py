"""Soak: N screenshots through the API with a short retention; storage must end where it began.

Runs the app in process (a real renderer process, Chromium) on a fresh SQLite file or PostgreSQL
schema, posts `--shots` distinct screenshots (`--in-flight` at a time), samples the storage
footprint (rows of jobs, job_events, render_requests, render_attempts, tasks, task_events; store
objects and bytes) every second, and waits until it is back to its start. Prints the figures.

Run: .venv/bin/python bench/retention_soak.py sqlite|postgresql [--shots 1000] [--in-flight 16]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from job_queue import Target

from deckyard.api.app import create_app
from deckyard.api.auth import token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.config import Settings
from deckyard.decks.retention import Footprint, Retention

SHORT = {
    "job_retention_seconds": 5.0,
    "job_prune_interval_seconds": 1.0,
    "render_retention_seconds": 5.0,
    "task_retention_seconds": 5.0,
    "retention_prune_interval_seconds": 1.0,
    "artifact_sweep_interval_seconds": 2.0,
    "artifact_sweep_grace_seconds": 10.0,
    "renderers": 1,
    "render_workspace_cap": 16,
    "render_workspace_queue_limit": 1000,
}


def flat(f: Footprint) -> dict[str, int]:
    return {**f.rows, "store_objects": f.store_objects, "store_bytes": f.store_bytes}


async def soak(dialect: str, shots: int, in_flight: int) -> dict[str, Any]:
    target = Target(dialect)
    store = Path(target._tmp.name) / "artifacts"
    settings = Settings.load(database_url=target.url, artifact_store_url=str(store), **SHORT)
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            retention: Retention = app.state.node.retention
            token = await token_create(app.state.db, "soak", SYSTEM_CLOCK.now())
            headers = {"authorization": f"Bearer {token}"}
            start = flat(await retention.footprint())
            peak = dict(start)
            stop = asyncio.Event()

            async def sample() -> None:
                while not stop.is_set():
                    now = flat(await retention.footprint())
                    for k, v in now.items():
                        peak[k] = max(peak[k], v)
                    await asyncio.sleep(1.0)

            sampler = asyncio.create_task(sample())
            transport = httpx.ASGITransport(app=app)
            gate = asyncio.Semaphore(in_flight)
            began = time.monotonic()
            failed = 0
            async with httpx.AsyncClient(
                transport=transport, base_url="http://soak", timeout=300
            ) as client:

                async def one(i: int) -> None:
                    nonlocal failed
                    html = f"<!doctype html><body style='margin:0'><h1>shot {i}</h1></body>"
                    async with gate:
                        r = await client.post(
                            "/v1/screenshots",
                            json={"html": html, "width": 320, "height": 180},
                            headers=headers,
                        )
                        r.raise_for_status()
                        done = await app.state.render.wait_for_terminal(r.json()["id"], timeout=300)
                        if done.status != "succeeded":
                            failed += 1

                await asyncio.gather(*(one(i) for i in range(shots)))
            rendered = time.monotonic() - began
            while flat(await retention.footprint()) != start:
                if time.monotonic() - began > rendered + 600:
                    break
                await asyncio.sleep(1.0)
            settled = time.monotonic() - began - rendered
            stop.set()
            await sampler
            end = flat(await retention.footprint())
            return {
                "dialect": dialect,
                "shots": shots,
                "failed": failed,
                "render_seconds": round(rendered, 1),
                "shots_per_second": round(shots / rendered, 1),
                "settle_seconds": round(settled, 1),
                "start": start,
                "peak": peak,
                "end": end,
                "pruned_jobs": app.state.runtime.metrics.pruned,
                "pruned_render_requests": retention.stats.render_requests,
                "artefacts_deleted": retention.stats.artifacts
                + retention.sweeper.stats.objects_deleted,
            }
    finally:
        target.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dialect", choices=["postgresql", "sqlite"])
    ap.add_argument("--shots", type=int, default=1000)
    ap.add_argument("--in-flight", type=int, default=16)
    args = ap.parse_args()
    r = asyncio.run(soak(args.dialect, args.shots, args.in_flight))
    print(
        f"{r['dialect']}: {r['shots']} screenshots ({r['failed']} failed) in "
        f"{r['render_seconds']} s ({r['shots_per_second']}/s); back to start "
        f"{r['settle_seconds']} s later"
    )
    for phase in ("start", "peak", "end"):
        print(f"  {phase:5}: {r[phase]}")
    print(
        f"  pruned: {r['pruned_jobs']} jobs, {r['pruned_render_requests']} render requests; "
        f"artefacts deleted: {r['artefacts_deleted']}"
    )


if __name__ == "__main__":
    main()
