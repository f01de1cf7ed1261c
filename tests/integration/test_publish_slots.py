"""Parents waiting for children hold no worker slot: five decks published at once on two slots.

Every waiting layer of a publish (a deck job waiting for its screenshot job, a screenshot job
waiting for its render request) gives its worker slot back while it waits, so with two slots per
worker five publishes still all finish, and more of them are in flight than there are slots.
Held slots would show as at most two children alive at any moment (each parent keeps its slot
until its child ends, so the third parent starts only after a child has finished).
"""

from __future__ import annotations

from datetime import datetime

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from deckyard.jobs import Job, Runtime
from deckyard.node import Node
from deckyard.webhooks import WEBHOOK_QUEUE
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually

pytestmark = [pytest.mark.chromium, pytest.mark.processes]
DECKS = 5
SLOTS = 2


def most_alive_at_once(jobs: list[Job]) -> int:
    """The largest number of `jobs` alive (created, not yet finished) at one instant."""
    edges: list[tuple[datetime, int]] = []
    for job in jobs:
        assert job.finished_at is not None, job
        edges += [(job.created_at, 1), (job.finished_at, -1)]
    alive = most = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        alive += step
        most = max(most, alive)
    return most


async def test_five_decks_publish_on_two_slots(db_url: str) -> None:
    async with running_app(
        db_url, renderers=1, job_concurrency=SLOTS, deck_job_concurrency=SLOTS
    ) as (app, client):
        alice = await make_token(app, "alice")
        node: Node = app.state.node
        # every worker but the webhook deliveries' own (webhook_concurrency)
        deck_workers = [w for w in node.runtime.workers if WEBHOOK_QUEUE not in w.queues]
        assert deck_workers and all(w.concurrency == SLOTS for w in deck_workers)
        decks = []
        for n in range(DECKS):
            made = await client.post("/v1/decks", json=json_deck(f"# Deck {n}"), headers=alice)
            assert made.status_code == 201, made.text
            decks.append(made.json()["id"])
        tasks = []
        for deck_id in decks:
            published = await client.post(f"/v1/decks/{deck_id}/publish", headers=alice)
            assert published.status_code == 202, published.text
            tasks.append(published.json()["task_id"])

        async def all_ended() -> list[dict[str, object]] | None:
            seen = [(await client.get(f"/v1/tasks/{t}", headers=alice)).json() for t in tasks]
            ended = all(s["status"] in ("succeeded", "failed", "cancelled") for s in seen)
            return seen if ended else None

        ended = await eventually(all_ended, timeout=240, every=0.2, what="five publishes")
        assert [t["status"] for t in ended] == ["succeeded"] * DECKS, ended
        await assert_waits_held_no_slot(app)
        await assert_metrics_say_so(client)


async def assert_waits_held_no_slot(app: FastAPI) -> None:
    rt: Runtime = app.state.runtime
    shots = [j for j in await rt.list(kind="screenshot") if j.parent_id is not None]
    assert shots and all(j.status == "succeeded" for j in shots)
    # A deck job's screenshot child is alive only while its parent runs: more children alive
    # than deck slots means parents waited without a slot.
    assert most_alive_at_once(shots) > SLOTS
    for w in rt.workers:
        assert w.occupied == 0 and not w.suspended
        assert w.stats.most_occupied <= w.concurrency
    assert sum(w.stats.suspensions for w in rt.workers) >= 2 * DECKS


async def assert_metrics_say_so(client: httpx.AsyncClient) -> None:
    text = (await client.get("/metrics")).text
    got = {
        (s.name, s.labels.get("worker")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("deckyard_job_worker_")
    }
    assert got[("deckyard_job_worker_slots", "decks")] == SLOTS
    assert got[("deckyard_job_worker_occupied", "decks")] == 0
    assert got[("deckyard_job_worker_suspended", "decks")] == 0
    assert got[("deckyard_job_worker_suspensions_total", "decks")] >= DECKS
    assert got[("deckyard_job_worker_suspensions_total", "render")] >= DECKS
