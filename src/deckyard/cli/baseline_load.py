"""The `--mixed` load of `deckyard baseline`: page edits, screenshots and builds at once.

Everything goes through the HTTP API (in process), as a client would drive it: a token, a small
deck, then three concurrent streams of requests until the window ends, then a bounded wait for
the jobs they started.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import httpx
from fastapi import FastAPI

from deckyard.api.auth import token_create
from deckyard.clock import SYSTEM_CLOCK

DECK = {
    "manifest": {"title": "Baseline deck"},
    "pages": [
        {"name": "01-intro", "kind": "md", "text": "# Baseline\n\nA mixed load, edit 0."},
        {"name": "02-body", "kind": "html", "text": "<h1>Body</h1><p>Steady text.</p>"},
        {"name": "03-end", "kind": "md", "text": "# Thanks\n\n- one\n- two"},
    ],
}


async def _wait_for_renderer(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        r = await client.get("/v1/renderers", headers=headers)
        if r.status_code == 200 and any(w.get("state") == "up" for w in r.json()):
            return
        await asyncio.sleep(0.5)
    raise RuntimeError("no renderer came up for the mixed load")


async def mixed_load(app: FastAPI, client: httpx.AsyncClient, seconds: float) -> dict[str, Any]:
    """Drive edits, screenshots and builds for `seconds`; returns counts of what was done."""
    token = await token_create(app.state.db, "baseline", SYSTEM_CLOCK.now())
    headers = {"authorization": f"Bearer {token}"}
    await _wait_for_renderer(client, headers)
    created = await client.post("/v1/decks", json=DECK, headers=headers)
    created.raise_for_status()
    deck_id = created.json()["id"]
    outcomes: Counter[str] = Counter()
    jobs: list[int] = []
    stop_at = time.monotonic() + seconds

    async def edits() -> None:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            r = await client.put(
                f"/v1/decks/{deck_id}/pages/01-intro",
                json={"source": f"# Baseline\n\nA mixed load, edit {n}."},
                headers=headers,
            )
            outcomes[f"page_edit_{r.status_code}"] += 1

    async def screenshots() -> None:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            r = await client.post(
                "/v1/screenshots",
                json={"html": f"<h1>shot {n}</h1>", "width": 640, "height": 360},
                headers=headers,
            )
            outcomes[f"screenshot_{r.status_code}"] += 1
            if r.status_code == 202:
                jobs.append(r.json()["id"])
            await asyncio.sleep(0.2)

    async def builds() -> None:
        while time.monotonic() < stop_at:
            r = await client.post(f"/v1/decks/{deck_id}/build", headers=headers)
            outcomes[f"build_{r.status_code}"] += 1
            if r.status_code == 202:
                jobs.append(r.json()["id"])
            await asyncio.sleep(1.0)

    await asyncio.gather(edits(), screenshots(), builds())
    runtime = app.state.runtime
    finished: Counter[str] = Counter()
    for job_id in jobs:
        try:
            done = await runtime.wait(job_id, timeout=60)
            finished[done.status.value] += 1
        except TimeoutError:
            finished["unfinished"] += 1
    return {"requests": dict(outcomes), "jobs": dict(finished)}
