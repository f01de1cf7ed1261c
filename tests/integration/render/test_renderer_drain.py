"""Draining a renderer, on SQLite and PostgreSQL, against renderer doubles (issue 33 item 2).

A drain is a row state every node reads at admission: from the moment it commits, no attempt is
admitted to that renderer; what it hands back (or loses on its way out) costs its request no
attempt; a node that reaches it tells it to drain and releases it once none of its attempts
holds a slot; its replacement is `up` again. `POST /v1/renderers/{id}/drain` needs an admin.
The real processes are in `tests/drills/test_renderer_drain.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from deckyard.api.auth import TokenRole, token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.db import Database
from deckyard.render.control.models import AttemptState, Renderer, RendererState, RequestStatus
from deckyard.render.control.store import (
    RendererSeen,
    renderer_list,
    renderer_upsert_if_changed,
)
from tests.helpers.api import running_app
from tests.integration.render.fake_renderer import FakeRenderer
from tests.integration.render.test_control import Plane, make_plane

STOPPED = {
    "status": "failed",
    "error_code": "RENDER_WORKER_STOPPED",
    "error_kind": "infrastructure",
    "retryable": True,
    "message": "handed back: the renderer is draining",
}


@dataclass
class DrainableRenderer(FakeRenderer):
    """A renderer double that drains: it says so in its capabilities, refuses new attempts
    (429) while draining and records each `POST /v1/drain` (its `release` flag)."""

    draining: bool = False
    drain_calls: list[bool] = field(default_factory=list)
    handed_back: set[str] = field(default_factory=set)

    def receipt(self, key: str) -> dict[str, Any]:
        body = super().receipt(key)
        if key in self.handed_back:
            body.update(STOPPED, pages=[])  # handed back before its page started
        return body

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if self.up and path == "/v1/drain":
            self.drain_calls.append(bool(json.loads(request.content).get("release")))
            self.draining = True
            return httpx.Response(200, json={"draining": True})
        if self.up and self.draining and path == "/v1/deck-attempts" and request.method == "POST":
            refusal = {"error": "RENDER_NO_FREE_SLOT", "message": "draining: no new attempts"}
            return httpx.Response(429, json=refusal, headers={"Retry-After": "1"})
        answer = super().handle(request)
        if path == "/v1/capabilities":
            return httpx.Response(200, json={**answer.json(), "draining": self.draining})
        return answer

    def hand_back(self, key: str) -> None:
        """End an attempt as a drain's bound does: failed, `RENDER_WORKER_STOPPED`."""
        self.attempts[key] = "failed"
        self.handed_back.add(key)


async def rows(p: Plane) -> dict[str, Renderer]:
    async with p.db.read_connection() as conn:
        return {r.name: r for r in await renderer_list(conn)}


async def on(p: Plane, name: str) -> list[Any]:
    """The active attempts held on renderer `name`."""
    row = (await rows(p))[name]
    return [a for a in await p.active() if a.renderer_row_id == row.id]


def two(db: Database, tmp_path: Path) -> tuple[Plane, DrainableRenderer, DrainableRenderer]:
    a = DrainableRenderer("http://ra", slots=2)
    b = DrainableRenderer("http://rb", slots=2)
    return make_plane(db, tmp_path, a, b), a, b


async def test_a_drained_renderer_takes_no_new_admissions_and_is_released(
    db: Database, tmp_path: Path
) -> None:
    p, a, b = two(db, tmp_path)
    try:
        await p.coordinator.probe_once()
        first = await p.request("ws", 0)
        await p.coordinator.dispatch_once()
        [running] = await on(p, "http://ra")  # the tie goes to the first renderer
        a_id = (await rows(p))["http://ra"].id

        drained = await p.coordinator.drain(a_id)
        assert drained is not None and drained.state is RendererState.DRAINING
        assert drained.draining_since == p.clock.now()
        p.clock.advance(1)
        again = await p.coordinator.drain(a_id)
        assert again is not None and again.draining_since == drained.draining_since
        assert await p.coordinator.drain(a_id + 100) is None

        later = [await p.request(f"w{n}", n) for n in range(1, 5)]
        for _ in range(3):
            await p.coordinator.dispatch_once()
        assert [x.id for x in await on(p, "http://ra")] == [running.id]
        assert len(await on(p, "http://rb")) == 2  # both of its slots; the rest wait
        assert a.calls.count("POST /v1/deck-attempts") == 1
        statuses = [(await p.get(r)).status for r in later]
        assert statuses.count(RequestStatus.PENDING) == 2

        await p.coordinator.probe_once()
        assert a.drain_calls == [False]  # told to drain; one attempt of ours still runs there
        a.set_all("succeeded")
        await p.coordinator.receipts_once()
        await p.settle_results()
        assert (await p.get(first)).status is RequestStatus.SUCCEEDED
        await p.coordinator.probe_once()
        assert a.drain_calls == [False, True]  # nothing of ours left: released
        assert b.drain_calls == []

        a.up = False  # it exits
        await p.coordinator.probe_once()
        gone = (await rows(p))["http://ra"]
        assert (gone.state, gone.draining_since) == (RendererState.DRAINED, drained.draining_since)

        a.restart("epoch-2")  # its replacement
        a.draining = False
        await p.coordinator.probe_once()
        back = (await rows(p))["http://ra"]
        assert (back.state, back.epoch, back.draining_since) == (RendererState.UP, "epoch-2", None)
        await p.coordinator.dispatch_once()
        assert len(await on(p, "http://ra")) == 2
    finally:
        await p.coordinator.client.aclose()


async def test_what_a_drain_hands_back_costs_no_attempt(db: Database, tmp_path: Path) -> None:
    p, a, b = two(db, tmp_path)
    try:
        await p.coordinator.probe_once()
        handed, on_b, lost = [await p.request("ws", n) for n in range(3)]
        await p.coordinator.dispatch_once()
        assert {x.request_id for x in await on(p, "http://ra")} == {handed, lost}
        [b_attempt] = await on(p, "http://rb")
        a.set_all("running")
        b.set_all("running")
        await p.coordinator.receipts_once()
        await p.coordinator.drain((await rows(p))["http://ra"].id)

        [key] = [x.attempt_key for x in await on(p, "http://ra") if x.request_id == handed]
        a.hand_back(key)  # the drain's bound passed while it still ran
        b.hand_back(b_attempt.attempt_key)  # the same failure on a renderer not draining
        await p.coordinator.receipts_once()
        await p.settle_results()
        back = await p.get(handed)
        assert (back.status, back.attempts) == (RequestStatus.PENDING, 0)
        assert (await p.get(on_b)).attempts == 1  # counted: b was not draining

        p.clock.advance(1)
        await p.coordinator.dispatch_once()
        [retry] = [x for x in await p.active() if x.request_id == handed]
        assert retry.renderer_row_id == (await rows(p))["http://rb"].id  # elsewhere

        a.restart("epoch-2")  # exits and is replaced with `lost` still on it
        await p.coordinator.probe_once()
        [gone] = await p.attempts(lost)
        assert gone.status is AttemptState.LOST
        assert ((await p.get(lost)).status, (await p.get(lost)).attempts) == (
            RequestStatus.PENDING,
            0,
        )

        b.set_all("succeeded")
        await p.coordinator.receipts_once()
        await p.settle_results()
        done = await p.get(handed)
        assert (done.status, done.attempts) == (RequestStatus.SUCCEEDED, 1)
        assert [x.status for x in await p.attempts(handed)] == [
            AttemptState.FAILED,
            AttemptState.SUCCEEDED,
        ]
    finally:
        await p.coordinator.client.aclose()


async def test_a_renderer_that_reports_draining_gets_no_attempts(
    db: Database, tmp_path: Path
) -> None:
    """SIGTERM: the renderer drains before any node knows; what it refuses meanwhile is free."""
    p, a, _ = two(db, tmp_path)
    try:
        await p.coordinator.probe_once()
        a.draining = True
        req = await p.request("ws", 0)
        await p.coordinator.dispatch_once()  # the row still says up: posted, refused (429)
        refused = await p.get(req)
        assert (refused.status, refused.attempts) == (RequestStatus.PENDING, 0)

        await p.coordinator.probe_once()
        row = (await rows(p))["http://ra"]
        assert (row.state, row.draining_since) == (RendererState.DRAINING, p.clock.now())
        assert a.drain_calls == [True]  # nothing of ours there: released at once
        p.clock.advance(1)
        await p.coordinator.dispatch_once()
        [attempt] = await p.active()
        assert attempt.renderer_row_id == (await rows(p))["http://rb"].id
    finally:
        await p.coordinator.client.aclose()


async def test_the_drain_endpoint_needs_an_admin_and_says_draining(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        db: Database = app.state.db
        now = SYSTEM_CLOCK.now()
        tokens = {
            role: await token_create(db, "ws", now, role=role)
            for role in (TokenRole.ADMIN, TokenRole.EDITOR, TokenRole.VIEWER)
        }
        auth = {role: {"authorization": f"Bearer {t}"} for role, t in tokens.items()}
        async with db.write_transaction() as conn:
            seen = RendererSeen("r1", "http://r1", RendererState.UP, "host:1", "e1", slots=2)
            row = await renderer_upsert_if_changed(conn, None, seen, now)
        url = f"/v1/renderers/{row.id}/drain"

        for role in (TokenRole.EDITOR, TokenRole.VIEWER):
            refused = await client.post(url, headers=auth[role])
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["code"] == "ROLE_FORBIDDEN"
        assert (await client.post(url)).status_code == 401
        missing = await client.post(f"/v1/renderers/{row.id + 1}/drain", headers=auth["admin"])
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "NOT_FOUND"
        listed = (await client.get("/v1/renderers", headers=auth["viewer"])).json()
        assert [(r["id"], r["state"], r["draining_since"]) for r in listed] == [
            (row.id, "up", None)
        ]

        first = await client.post(url, headers=auth["admin"])
        assert first.status_code == 202, first.text
        assert first.json()["state"] == "draining" and first.json()["draining_since"]
        second = await client.post(url, headers=auth["admin"])
        assert second.status_code == 202
        assert second.json() == first.json()
        [shown] = (await client.get("/v1/renderers", headers=auth["viewer"])).json()
        assert shown == first.json()

        doc = (await client.get("/openapi.json")).json()
        drain = doc["paths"]["/v1/renderers/{renderer_id}/drain"]["post"]
        assert {"202", "403", "404"} <= set(drain["responses"])
        states = doc["components"]["schemas"]["RendererState"]["enum"]
        assert states == ["up", "down", "draining", "drained"]
