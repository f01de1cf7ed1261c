"""A PostgreSQL cluster drill: two `deckyard serve` nodes share one renderer; one is SIGKILLed.

Both nodes take screenshots (render requests) and coordinate only through PostgreSQL (row locks,
SKIP LOCKED, LISTEN/NOTIFY). The renderer's slots are never oversubscribed, and after one node
dies mid-batch the survivor finishes every render exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.drills.support import SECRET, RendererProcess, zombies
from tests.helpers.eventually import eventually_sync, settled_sync
from tests.helpers.renders import assert_rendered_once_each, render_statuses, sse_events
from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.postgres, pytest.mark.slow]
N = 16
SLOTS = 2


@pytest.fixture(autouse=True)
def hygiene() -> Iterator[None]:
    """Scoped to this drill's processes: other tests may run Chromium on the machine."""
    before = zombies()
    yield
    new = settled_sync(lambda: zombies() - before, timeout=5)  # one about to be reaped is fine
    assert not new, f"new zombie processes that nobody reaps: {new}"


@pytest.fixture
def renderer() -> Iterator[RendererProcess]:
    """One standalone renderer both nodes use."""
    tmp_dir = Path(tempfile.mkdtemp(prefix="dyc-"))
    process = RendererProcess(tmp_dir, {}, slots=SLOTS)
    yield process
    assert process.stop() == 0
    assert list(tmp_dir.iterdir()) == []
    tmp_dir.rmdir()
    process.stderr_path.unlink()


def page(i: int) -> str:
    return f"<!doctype html><body style='margin:0'><h1>node render {i}</h1></body>"


def test_two_nodes_share_a_renderer_and_survive_a_kill(
    pg_schema_url: str, renderer: RendererProcess, tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(
        tmp_path,
        DECKYARD_DATABASE_URL=pg_schema_url,
        DECKYARD_RENDERERS="0",
        DECKYARD_RENDERER_URLS=json.dumps([renderer.url]),
        DECKYARD_RENDERER_SECRET=SECRET,
        DECKYARD_JOB_LEASE_SECONDS="3",
        DECKYARD_JOB_HEARTBEAT_INTERVAL_SECONDS="0.5",
        DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS="1",
        DECKYARD_JOB_RECOVERY_BACKOFF_SECONDS="0",
        DECKYARD_RENDER_LEASE_SECONDS="3",
        DECKYARD_RENDER_RECEIPT_POLL_SECONDS="0.2",
    )
    token = create_token(env, tmp_path, "cluster")
    headers = {"authorization": f"Bearer {token}"}
    a = Server([], env, tmp_path)
    servers.append(a)
    a.wait_ready(60)
    b = Server([], env, tmp_path)
    servers.append(b)
    b.wait_ready(60)
    ids: list[int] = []
    with httpx.Client(timeout=30) as client:
        for i in range(N):
            node = a if i % 2 == 0 else b
            r = client.post(
                f"{node.url}/v1/screenshots",
                headers=headers,
                json={"html": page(i), "width": 320, "height": 200},
            )
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        occupancy = [0]

        def states() -> dict[int, str]:
            renderers = client.get(f"{b.url}/v1/renderers", headers=headers).json()
            occupancy.extend(w["occupancy"] for w in renderers)
            return render_statuses(client, headers, ids, b.url)

        def three_done() -> bool:
            return sum(s == "succeeded" for s in states().values()) >= 3

        eventually_sync(three_done, timeout=90, every=0.1, what="3 screenshots done")
        family = {a.proc.pid, *(c.pid for c in psutil.Process(a.proc.pid).children(True))}
        os.kill(a.proc.pid, signal.SIGKILL)
        a.proc.wait(10)

        def all_succeeded() -> bool:
            now = states()
            assert not [s for s in now.values() if s in ("failed", "cancelled")], now
            return all(s == "succeeded" for s in now.values())

        eventually_sync(all_succeeded, timeout=120, every=0.25, what="every screenshot done")
        for render_id in ids:
            # the survivor follows each render to its end, and serves its picture
            stream = client.get(f"{b.url}/v1/renders/{render_id}/events", headers=headers)
            assert [e for e, _ in sse_events(stream.text)] == ["succeeded"], stream.text
            art = client.get(f"{b.url}/v1/renders/{render_id}/artifact", headers=headers)
            assert art.status_code == 200 and art.content[:4] == b"\x89PNG"
        renderers = client.get(f"{b.url}/v1/renderers", headers=headers).json()
    # exactly once, counted in the database: one succeeded attempt per render
    assert_rendered_once_each(pg_schema_url, ids)
    peak = max(occupancy)
    assert peak <= SLOTS, f"occupancy {peak} exceeded the renderer's {SLOTS} slots"
    assert [w["occupancy"] for w in renderers] == [0]
    assert not [
        p
        for p in family
        if psutil.pid_exists(p)
        and p != a.proc.pid
        and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
