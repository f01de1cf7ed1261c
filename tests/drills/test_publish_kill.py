"""Drill (issue 14 item 8): SIGKILL `deckyard serve` at each stage of a publish it drives, on
SQLite (Lite) and PostgreSQL.

After every restart the task must move on within a lease or so (the dead server's task lease
lapses and the new server resumes it), never wait for reconciliation's 1 800 s threshold
(left at its default here), and each stage must start and finish exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually_sync
from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.slow]

TASK_LEASE = 3.0
ENV = {
    "DECKYARD_RENDERERS": "1",
    "DECKYARD_RENDERER_SLOTS": "2",
    "DECKYARD_JOB_LEASE_SECONDS": "3",
    "DECKYARD_JOB_HEARTBEAT_INTERVAL_SECONDS": "0.5",
    "DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS": "1",
    "DECKYARD_JOB_RECOVERY_BACKOFF_SECONDS": "0",
    "DECKYARD_RENDER_LEASE_SECONDS": "3",
    "DECKYARD_RENDER_RECEIPT_POLL_SECONDS": "0.2",
    "DECKYARD_TASK_LEASE_SECONDS": str(TASK_LEASE),
    "DECKYARD_TASK_HEARTBEAT_INTERVAL_SECONDS": "0.5",
}
STAGES = ["validate", "screenshot", "build", "export", "live"]
RESUME_BOUND = 120.0
"""Seconds from a restart to the task's next event: lease + job recovery + renderer start, with
room for a loaded machine; far below the 1 800 s staleness threshold the bug waited for."""


def deck() -> dict[str, object]:
    body = json_deck("# One")
    body["pages"] = [
        {"name": f"0{i}-page", "kind": "md", "text": f"# Page {i}\n\nText {i}."}
        for i in range(1, 7)
    ]
    return body


def test_sigkill_serve_at_each_stage_of_a_publish(
    db_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(tmp_path, **ENV, DECKYARD_DATABASE_URL=db_url)
    token = create_token(env, tmp_path, "drill")
    headers = {"authorization": f"Bearer {token}"}

    def start() -> Server:
        server = Server([], env, tmp_path)
        servers.append(server)
        server.wait_ready(60)
        return server

    server = start()
    with httpx.Client(base_url=server.url, timeout=30) as client:
        made = client.post("/v1/decks", json=deck(), headers=headers)
        assert made.status_code == 201, made.text
        published = client.post(f"/v1/decks/{made.json()['id']}/publish", headers=headers)
        assert published.status_code == 202, published.text
        task_id = published.json()["task_id"]

    def task(s: Server) -> dict[str, Any]:
        got = httpx.get(f"{s.url}/v1/tasks/{task_id}", headers=headers, timeout=30)
        assert got.status_code == 200, got.text
        body: dict[str, Any] = got.json()
        assert body["status"] not in ("failed", "cancelled"), body
        return body

    def events(s: Server) -> list[dict[str, Any]]:
        got = httpx.get(f"{s.url}/v1/tasks/{task_id}/events", headers=headers, timeout=30)
        assert got.status_code == 200, got.text
        out: list[dict[str, Any]] = got.json()
        return out

    killed_at: list[int] = []
    for index in range(len(STAGES)):
        # the first stage not killed in yet (a stage may outlast a restart, or be passed over)
        first = max(index, killed_at[-1] + 1 if killed_at else 0)

        def reached(s: Server = server, i: int = first) -> dict[str, Any] | None:
            now = task(s)
            return now if now["status"] == "succeeded" or now["stage"] >= i else None

        now = eventually_sync(reached, timeout=RESUME_BOUND, every=0.1, what=f"stage {first}")
        if now["status"] == "succeeded":
            break
        seen = len(events(server))
        killed_at.append(int(now["stage"]))
        os.kill(server.proc.pid, signal.SIGKILL)  # the server alone; its renderer follows it
        server.proc.wait(10)
        server = start()
        restarted = time.monotonic()

        def moved_on(s: Server = server, before: int = seen) -> bool:
            # The kill can land just after the last stage committed: then the task is already
            # succeeded, every event written, and the new server has nothing left to add.
            return len(events(s)) > before or task(s)["status"] == "succeeded"

        eventually_sync(moved_on, timeout=RESUME_BOUND, every=0.1, what="progress after restart")
        assert time.monotonic() - restarted < RESUME_BOUND

    def succeeded(s: Server = server) -> bool:
        return bool(task(s)["status"] == "succeeded")

    eventually_sync(succeeded, timeout=RESUME_BOUND * 2, every=0.2, what="publish succeeded")
    # Each kill lands in the first stage not killed in yet; one that ends within a poll is
    # passed over. The screenshot stage reuses validation's renders and the build's browser check
    # sends one page, so after the first restart the stages from screenshot to live can all end
    # within a second: how many kills land is the machine's timing (seen: 2 to 4). The first
    # (validate) always lands, and one more lands in a later stage.
    assert len(killed_at) >= 2 and killed_at == sorted(set(killed_at)), killed_at
    log = events(server)
    types = [e["type"] for e in log]
    assert [e["data"]["stage"] for e in log if e["type"] == "stage_started"] == STAGES, types
    assert [e["data"]["stage"] for e in log if e["type"] == "stage_finished"] == STAGES, types
    assert types.count("succeeded") == 1 and types[-1] == "succeeded", types
    server.stop()
