"""Jobs waiting for their renders hold no worker slot: five decks published at once on two slots.

A deck job of a publish waits for the render request it opened (no job wraps a render) and gives
its worker slot back while it waits, so with two deck slots five publishes still all finish, and
more of them are in flight than there are slots. Held slots would show as at most two jobs with
a render alive at any moment (each job keeps its slot until its render ends, so a third job
starts only after a render has finished).
"""

from __future__ import annotations

from datetime import datetime

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from deckyard.decks.jobs.names import DECK_QUEUE
from deckyard.jobs import Runtime
from deckyard.node import Node
from deckyard.render.control.models import RenderRequest, RequestStatus
from deckyard.render.control.service import RenderService
from deckyard.webhooks import WEBHOOK_QUEUE
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually

pytestmark = [pytest.mark.chromium, pytest.mark.processes]
DECKS = 5
SLOTS = 2


def most_parents_waiting_at_once(requests: list[RenderRequest]) -> int:
    """The largest number of distinct parent jobs with a render request alive (created, not
    yet finished) at one instant: a job that opens several at once counts once."""
    edges: list[tuple[datetime, int, int]] = []
    for request in requests:
        assert request.finished_at is not None and request.parent_job_id is not None, request
        edges += [
            (request.created_at, 1, request.parent_job_id),
            (request.finished_at, -1, request.parent_job_id),
        ]
    alive: dict[int, int] = {}
    most = 0
    for _, step, parent in sorted(edges, key=lambda e: (e[0], e[1])):
        alive[parent] = alive.get(parent, 0) + step
        most = max(most, sum(1 for n in alive.values() if n > 0))
    return most


async def test_five_decks_publish_on_two_slots(db_url: str) -> None:
    async with running_app(
        db_url, renderers=1, job_concurrency=SLOTS, deck_job_concurrency=SLOTS
    ) as (app, client):
        alice = await make_token(app, "alice")
        node: Node = app.state.node
        # one worker claims deck jobs, with its two slots; the webhook deliveries have their own
        deck_workers = [w for w in node.runtime.workers if DECK_QUEUE in w.queues]
        assert [w.concurrency for w in deck_workers] == [SLOTS], [
            (w.queues, w.concurrency) for w in node.runtime.workers
        ]
        assert [w.queues for w in node.runtime.workers if WEBHOOK_QUEUE in w.queues] == [
            [WEBHOOK_QUEUE]
        ]
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
    service: RenderService = app.state.render
    renders = [r for r in await service.of_workspace("alice", limit=500) if r.parent_job_id]
    assert renders and all(r.status is RequestStatus.SUCCEEDED for r in renders), renders
    assert not await rt.list(kind="screenshot")  # no job wraps a render
    # A deck job's render request is alive only while the job waits for it: more jobs waiting
    # for a live render than deck slots means they waited without a slot.
    assert most_parents_waiting_at_once(renders) > SLOTS
    for w in rt.workers:
        assert w.occupied == 0 and not w.suspended
        assert w.stats.most_occupied <= w.concurrency
    assert sum(w.stats.suspensions for w in rt.workers) >= DECKS


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
    assert not [w for _, w in got if w and "render" in w]  # no worker runs renders as jobs
