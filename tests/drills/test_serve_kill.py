"""Drill 6: SIGKILL `deckyard serve` (Lite) in the middle of 20 screenshots, start it again.

Every screenshot (a render request) must complete exactly once: succeeded, its events stream
ending `succeeded`, an artefact, one succeeded attempt in the database; and the killed server's
renderer and Chromium processes must not outlive it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.drills.support import zombies
from tests.helpers.eventually import eventually_sync, settled_sync
from tests.helpers.renders import assert_rendered_once_each, render_statuses, sse_events
from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.slow]
N = 20

ENV = {
    "DECKYARD_RENDERERS": "1",
    "DECKYARD_RENDERER_SLOTS": "2",
    "DECKYARD_JOB_LEASE_SECONDS": "3",
    "DECKYARD_JOB_HEARTBEAT_INTERVAL_SECONDS": "0.5",
    "DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS": "1",
    "DECKYARD_JOB_RECOVERY_BACKOFF_SECONDS": "0",
    "DECKYARD_RENDER_LEASE_SECONDS": "3",
    "DECKYARD_RENDER_RECEIPT_POLL_SECONDS": "0.2",
}


@pytest.fixture(autouse=True)
def hygiene() -> Iterator[None]:
    """Scoped to this drill's own processes: other tests may run Chromium on the machine."""
    before = zombies()
    yield
    new = settled_sync(lambda: zombies() - before, timeout=5)  # one about to be reaped is fine
    assert not new, f"new zombie processes that nobody reaps: {new}"


def tree(pid: int) -> set[int]:
    """A process and all its descendants."""
    root = psutil.Process(pid)
    return {root.pid, *(c.pid for c in root.children(recursive=True))}


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` still running (zombies count as gone)."""
    out = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.add(pid)
        except psutil.NoSuchProcess:
            continue
    return out


def page(i: int) -> str:
    return (
        "<!doctype html><html><body style='margin:0'>"
        f"<div style='width:200px;height:100px;background:rgb({i * 10},80,160)'>shot {i}</div>"
        "</body></html>"
    )


def statuses(client: httpx.Client, headers: dict[str, str], ids: list[int]) -> dict[int, str]:
    return render_statuses(client, headers, ids)


def test_sigkill_serve_mid_batch_then_every_screenshot_completes_once(
    tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(tmp_path, **ENV)
    token = create_token(env, tmp_path, "drill")
    headers = {"authorization": f"Bearer {token}"}
    first = Server([], env, tmp_path)
    servers.append(first)
    first.wait_ready(60)
    with httpx.Client(base_url=first.url, timeout=30) as client:
        ids = []
        for i in range(N):
            r = client.post(
                "/v1/screenshots",
                json={"html": page(i), "width": 200, "height": 100},
                headers=headers,
            )
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])

        def three_done() -> list[int] | None:
            done = [i for i, s in statuses(client, headers, ids).items() if s == "succeeded"]
            return done if len(done) >= 3 else None

        done = eventually_sync(three_done, timeout=90, every=0.1, what="3 screenshots done")
    assert len(done) < N, "the kill came too late to prove anything"
    family = tree(first.proc.pid) - {first.proc.pid}
    assert any("chrom" in psutil.Process(p).name() for p in alive(family)), "no Chromium seen"
    os.kill(first.proc.pid, signal.SIGKILL)  # the server alone, not its process group
    first.proc.wait(10)
    left = settled_sync(lambda: alive(family), timeout=15, every=0.2)
    assert left == set(), f"the killed server's renderer or Chromium outlived it: {left}"

    second = Server([], env, tmp_path)
    servers.append(second)
    second.wait_ready(60)
    with httpx.Client(base_url=second.url, timeout=30) as client:

        def all_succeeded() -> bool:
            now = statuses(client, headers, ids)
            assert not [s for s in now.values() if s in ("failed", "cancelled")], now
            return all(s == "succeeded" for s in now.values())

        eventually_sync(all_succeeded, timeout=150, every=0.25, what="every screenshot done")
        for render_id in ids:
            stream = client.get(f"/v1/renders/{render_id}/events", headers=headers)
            assert [e for e, _ in sse_events(stream.text)] == ["succeeded"], stream.text
            art = client.get(f"/v1/renders/{render_id}/artifact", headers=headers)
            assert art.status_code == 200, (
                render_id,
                art.text,
                client.get(f"/v1/renders/{render_id}", headers=headers).json(),
            )
            assert art.content[:8] == b"\x89PNG\r\n\x1a\n"
    family = tree(second.proc.pid)
    second.stop()
    left = settled_sync(lambda: alive(family), timeout=15, every=0.2)
    assert left == set(), f"a stopped server left processes behind: {left}"
    # exactly once, counted in the database (the Lite file, once no server holds it)
    assert_rendered_once_each(f"sqlite:///{tmp_path / 'data' / 'deckyard.db'}", ids)
