"""Webhooks through the API, delivered to a receiver on loopback started by each test.

On SQLite and PostgreSQL: a delivery verifies with the endpoint's secret; a receiver that
answers 500 and then 200 gets the delivery twice, both attempts logged; redeliver sends it
again; a publication going live reaches its endpoint; the SSRF guard refuses private targets
unless allowed; another workspace cannot see or change an endpoint; bad input is a 422 in the
documented error shape.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from deckyard.api.auth import TokenRole, token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck
from deckyard.decks.jobs.names import DeckJobKind
from deckyard.decks.store import deck_get, deck_source
from deckyard.outputs.site_build import build_site
from deckyard.webhooks.delivery import body_bytes, post_signed
from deckyard.webhooks.models import WebhookErrorCode
from deckyard.webhooks.signing import verify
from tests.helpers.api import ROOMY_LEASE, make_token, running_app
from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually
from tests.helpers.loopback_http import loopback_server

HOOKS: dict[str, Any] = {
    "webhook_allow_private_targets": True,
    "webhook_retry_base_delay_seconds": 0.05,
    "webhook_retry_max_delay_seconds": 0.2,
    "webhook_relay_interval_seconds": 0.05,
    "webhook_relay_idle_seconds": 0.2,
    "webhook_timeout_seconds": 5.0,
    **ROOMY_LEASE,  # an attempt counted twice (lease lost on a stalled machine) is another test
}


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1: answers the scripted statuses in turn, then 200."""

    url: str = ""
    script: list[int] = field(default_factory=list)
    got: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    gate: threading.Event | None = None
    """When set, each answer waits until the gate opens."""

    def answer(self, headers: dict[str, str], body: bytes) -> int:
        with self.lock:
            self.got.append(Received(headers, body))
            status = self.script.pop(0) if self.script else 200
        if self.gate is not None:
            self.gate.wait(timeout=10)
        return status

    async def requests(self, count: int) -> list[Received]:
        """The first `count` requests, once that many came."""

        async def enough() -> list[Received] | None:
            with self.lock:
                return list(self.got) if len(self.got) >= count else None

        found = await eventually(enough, what=f"{count} request(s) at the receiver")
        return found[:count]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    hook = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            status = hook.answer({k.lower(): v for k, v in self.headers.items()}, body)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    with loopback_server(Handler) as host:
        hook.url = f"http://{host}/hook"
        yield hook


async def built_site(app: FastAPI, deck_id: int, task_id: int) -> dict[str, Any]:
    """The deck's site ZIP in the store, as its publish's build stage leaves it."""
    async with app.state.db.read_connection() as conn:
        row = await deck_get(conn, deck_id, "alice")
        assert row is not None
        source = await deck_source(conn, row)
    limits = app.state.decks.limits
    data = build_site("Site", compile_deck(source, limits), version=f"{deck_id}.{task_id}")
    key = f"decks/alice/{deck_id}/site-job-{task_id}.zip"
    await app.state.render.store.put(key, data)
    return {
        "artifact_key": key,
        "sha256": hashlib.sha256(data).hexdigest(),
        "deck_version": row.version,
        "site_version": f"{deck_id}.{task_id}",
    }


def problem(response: httpx.Response) -> tuple[int, str, str | None]:
    """(status, code, field) of an error answer, checking it has the documented shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return response.status_code, body["error"]["code"], body["error"].get("field")


async def test_deliveries_are_signed_retried_logged_and_redelivered(
    db_url: str, receiver: Receiver
) -> None:
    receiver.script = [500]
    async with running_app(db_url, **HOOKS) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post(
            "/v1/webhooks",
            json={"url": receiver.url, "events": ["job.finished"], "description": "ci"},
            headers=alice,
        )
        assert made.status_code == 201, made.text
        endpoint = made.json()
        secret = endpoint.pop("secret")
        assert secret.startswith("whsec_")
        assert made.headers["location"] == f"/v1/webhooks/{endpoint['id']}"
        shown = (await client.get(f"/v1/webhooks/{endpoint['id']}", headers=alice)).json()
        assert "secret" not in shown and shown["events"] == ["job.finished"]

        # A job of the workspace ends (cancelled before it ran): job.finished goes out.
        job = await app.state.runtime.enqueue("noop", {}, queue="nowhere", workspace_id="alice")
        await app.state.runtime.cancel(job.id)
        first, second = await receiver.requests(2)
        for got in (first, second):
            assert verify(secret, got.headers["deckyard-signature"], got.body, time.time(), 300)
            assert got.headers["deckyard-event"] == "job.finished"
        assert first.body == second.body
        assert first.headers["deckyard-delivery"] == second.headers["deckyard-delivery"]
        event = httpx.Response(200, content=first.body).json()
        assert event["type"] == "job.finished" and event["workspace"] == "alice"
        assert event["data"]["job"]["id"] == job.id
        assert event["data"]["job"]["status"] == "cancelled"
        assert first.headers["deckyard-event-id"] == event["id"]

        base = f"/v1/webhooks/{endpoint['id']}/deliveries"
        delivery_id = int(first.headers["deckyard-delivery"])

        async def settled() -> dict[str, Any] | None:
            found = (await client.get(f"{base}/{delivery_id}", headers=alice)).json()
            return found if found["status"] == "succeeded" else None

        delivery = await eventually(settled, what="the delivery to succeed")
        log = [(a["number"], a["status_code"], a["error"]) for a in delivery["attempt_log"]]
        assert log == [(1, 500, "HTTP 500"), (2, 200, None)]
        assert delivery["attempts"] == 2 and delivery["last_status_code"] == 200
        assert all(a["duration_ms"] >= 0 and a["job_id"] for a in delivery["attempt_log"])
        listed = (await client.get(base, headers=alice)).json()
        assert [d["id"] for d in listed] == [delivery_id]

        again = await client.post(f"{base}/{delivery_id}/redeliver", headers=alice)
        assert again.status_code == 202, again.text
        assert again.json()["status"] == "pending"
        third = (await receiver.requests(3))[2]
        assert third.body == first.body
        assert third.headers["deckyard-event-id"] == event["id"]
        assert verify(secret, third.headers["deckyard-signature"], third.body, time.time(), 300)

        async def three() -> dict[str, Any] | None:
            found = (await client.get(f"{base}/{delivery_id}", headers=alice)).json()
            done = found["status"] == "succeeded" and len(found["attempt_log"]) == 3
            return found if done else None

        assert [a["number"] for a in (await eventually(three))["attempt_log"]] == [1, 2, 3]

        # After a rotation both the new and the old secret verify a ping.
        rotated = await client.post(f"/v1/webhooks/{endpoint['id']}/rotate-secret", headers=alice)
        new_secret = rotated.json()["secret"]
        assert new_secret != secret
        ping = await client.post(f"/v1/webhooks/{endpoint['id']}/ping", headers=alice)
        assert ping.status_code == 202 and ping.json()["event_type"] == "webhook.ping"
        pinged = (await receiver.requests(4))[3]
        for key in (new_secret, secret):
            assert verify(key, pinged.headers["deckyard-signature"], pinged.body, time.time(), 300)


async def test_a_site_going_live_is_announced(db_url: str, receiver: Receiver) -> None:
    async with running_app(db_url, **HOOKS) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post(
            "/v1/webhooks",
            json={"url": receiver.url, "events": ["publication.live"]},
            headers=alice,
        )
        assert made.status_code == 201, made.text
        deck_id = (await client.post("/v1/decks", json=json_deck(), headers=alice)).json()["id"]
        go_live = app.state.runtime.handlers[DeckJobKind.SITE_GO_LIVE.value].fn
        build = await built_site(app, deck_id, 1)

        async def emit(kind: str, data: Any) -> None:
            return None

        ctx = SimpleNamespace(
            payload={"deck_id": deck_id, "task_id": 1, "visibility": "public", "build": build},
            job=SimpleNamespace(workspace_id="alice"),
            emit=emit,
        )
        result = await go_live(ctx)
        assert result["status"] == "live"
        got = (await receiver.requests(1))[0]
        event = httpx.Response(200, content=got.body).json()
        assert event["type"] == "publication.live"
        publication = event["data"]["publication"]
        assert publication["id"] == result["publication_id"]
        assert publication["url"] == f"/sites/alice/{deck_id}/"


async def test_the_ssrf_guard_refuses_private_targets_unless_allowed(
    db_url: str, receiver: Receiver
) -> None:
    body = body_bytes({"id": "x"})
    refused = await post_signed(receiver.url, {}, body, Settings.load())
    assert refused.code is WebhookErrorCode.TARGET_REFUSED and not refused.retryable
    assert "loopback" in (refused.error or "")
    assert receiver.got == []
    allowed = await post_signed(
        receiver.url, {}, body, Settings.load(webhook_allow_private_targets=True)
    )
    assert allowed.ok and allowed.status_code == 200
    assert len(receiver.got) == 1

    strict = {**HOOKS, "webhook_allow_private_targets": False}
    async with running_app(db_url, **strict) as (app, client):
        alice = await make_token(app, "alice")
        private = (
            receiver.url,
            "http://169.254.169.254/x",
            "http://[::1]:9/x",
            "http://localhost/",
        )
        for url in private:
            answer = await client.post(
                "/v1/webhooks", json={"url": url, "events": ["job.finished"]}, headers=alice
            )
            assert problem(answer) == (422, "WEBHOOK_URL_REFUSED", "url")
        assert (await client.get("/v1/webhooks", headers=alice)).json() == []

        # A name is checked as it resolves at each attempt: one that resolves to loopback is
        # refused then, logged, and not retried.
        async def to_loopback(host: str, port: int) -> list[str]:
            return ["127.0.0.1"]

        app.state.runtime.handlers["webhook.deliver"].fn.resolver = to_loopback
        port = receiver.url.split(":")[2].split("/")[0]
        made = await client.post(
            "/v1/webhooks",
            json={"url": f"http://hooks.test:{port}/hook", "events": ["job.finished"]},
            headers=alice,
        )
        assert made.status_code == 201, made.text
        hook = made.json()["id"]
        ping = (await client.post(f"/v1/webhooks/{hook}/ping", headers=alice)).json()

        async def given_up() -> dict[str, Any] | None:
            path = f"/v1/webhooks/{hook}/deliveries/{ping['id']}"
            found = (await client.get(path, headers=alice)).json()
            return found if found["status"] == "failed" else None

        delivery = await eventually(given_up, what="the refused delivery to be given up")
        (attempt,) = delivery["attempt_log"]
        assert attempt["status_code"] is None
        assert "SSRF guard" in attempt["error"] and "127.0.0.1" in attempt["error"]
        assert len(receiver.got) == 1  # only the allowed call above reached it


async def test_another_workspace_cannot_see_or_change_an_endpoint(
    db_url: str, receiver: Receiver
) -> None:
    async with running_app(db_url, **HOOKS) as (app, client):
        alice, bob = await make_token(app, "alice"), await make_token(app, "bob")
        made = await client.post(
            "/v1/webhooks", json={"url": receiver.url, "events": ["task.finished"]}, headers=alice
        )
        hook = made.json()["id"]
        ping = (await client.post(f"/v1/webhooks/{hook}/ping", headers=alice)).json()
        await receiver.requests(1)
        base = f"/v1/webhooks/{hook}"
        calls = [
            ("GET", base, None),
            ("PATCH", base, {"enabled": False}),
            ("DELETE", base, None),
            ("POST", f"{base}/rotate-secret", None),
            ("POST", f"{base}/ping", None),
            ("GET", f"{base}/deliveries", None),
            ("GET", f"{base}/deliveries/{ping['id']}", None),
            ("POST", f"{base}/deliveries/{ping['id']}/redeliver", None),
        ]
        for method, path, body in calls:
            answer = await client.request(method, path, json=body, headers=bob)
            assert problem(answer) == (404, "NOT_FOUND", None), (method, path)
        assert (await client.get("/v1/webhooks", headers=bob)).json() == []
        still = (await client.get(base, headers=alice)).json()
        assert still["enabled"] is True and still["secret_rotated_at"] is None
        assert len(receiver.got) == 1


async def test_bad_input_is_a_422_in_the_error_shape(db_url: str) -> None:
    async with running_app(db_url, **HOOKS) as (app, client):
        alice = await make_token(app, "alice")
        url = "http://127.0.0.1:9/hook"
        bad: list[tuple[dict[str, Any], str]] = [
            ({"url": url}, "events"),
            ({"url": url, "events": []}, "events"),
            ({"url": url, "events": ["job.started"]}, "events.0"),
            ({"url": url, "events": ["webhook.ping"]}, "events"),
            ({"url": "ftp://example.com/x", "events": ["job.finished"]}, "url"),
            ({"url": "http://user:pw@example.com/x", "events": ["job.finished"]}, "url"),
            ({"url": "not a url", "events": ["job.finished"]}, "url"),
            ({"url": url, "events": ["job.finished"], "secret": "mine"}, "secret"),
        ]
        for body, where in bad:
            answer = await client.post("/v1/webhooks", json=body, headers=alice)
            assert problem(answer) == (422, "INVALID_INPUT", where), body
        made = await client.post(
            "/v1/webhooks", json={"url": url, "events": ["job.finished"]}, headers=alice
        )
        hook = made.json()["id"]
        for body, where in (({"events": None}, "events"), ({"enabled": "maybe"}, "enabled")):
            answer = await client.patch(f"/v1/webhooks/{hook}", json=body, headers=alice)
            assert problem(answer) == (422, "INVALID_INPUT", where), body
        answer = await client.get(f"/v1/webhooks/{hook}/deliveries?status=lost", headers=alice)
        assert problem(answer) == (422, "INVALID_INPUT", "status")
        editor = await token_create(
            app.state.db, "alice", SYSTEM_CLOCK.now(), role=TokenRole.EDITOR
        )
        answer = await client.get("/v1/webhooks", headers={"authorization": f"Bearer {editor}"})
        assert problem(answer) == (403, "ROLE_FORBIDDEN", None)


async def test_an_attempt_stopped_mid_send_is_logged(db_url: str, receiver: Receiver) -> None:
    receiver.gate = threading.Event()
    async with running_app(db_url, **HOOKS) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post(
            "/v1/webhooks", json={"url": receiver.url, "events": ["task.finished"]}, headers=alice
        )
        hook = made.json()["id"]
        ping = (await client.post(f"/v1/webhooks/{hook}/ping", headers=alice)).json()
        await receiver.requests(1)  # held by the receiver: the attempt is in flight
        (job,) = await app.state.runtime.list(workspace_id="alice", queue="webhooks")
        try:
            cancelled = await client.post(f"/v1/jobs/{job.id}/cancel", headers=alice)
            assert cancelled.status_code == 200, cancelled.text
        finally:
            receiver.gate.set()

        async def logged() -> list[Any] | None:
            path = f"/v1/webhooks/{hook}/deliveries/{ping['id']}"
            found = (await client.get(path, headers=alice)).json()
            return found["attempt_log"] or None

        (attempt,) = await eventually(logged, what="the stopped attempt in the log")
        assert attempt["number"] == 1 and attempt["status_code"] is None
        assert attempt["job_id"] == job.id and "stopped" in attempt["error"]
