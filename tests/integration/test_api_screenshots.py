"""`POST /v1/screenshots` through the control plane to a supervised renderer and back."""

from __future__ import annotations

import asyncio
import struct

import pytest

from tests.helpers.api import make_token, running_app
from tests.helpers.eventually import eventually
from tests.helpers.renders import sse_events

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

PAGE = """<!doctype html><html><head><style>html,body{margin:0;background:#fff}
#box{position:absolute;left:20px;top:10px;width:100px;height:50px;background:#0a0}</style>
</head><body><div id=box></div></body></html>"""


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_screenshot_is_a_render_request_with_its_artifact_and_events(db_url: str) -> None:
    async with running_app(db_url, renderers=1) as (app, client):
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        body = {"html": PAGE, "width": 320, "height": 200}
        created = await client.post("/v1/screenshots", json=body, headers=alice)
        assert created.status_code == 202, created.text
        render = created.json()
        render_id = render["id"]
        assert created.headers["location"] == f"/v1/renders/{render_id}"
        assert render["kind"] == "screenshot"
        assert render["links"]["artifact"] == f"/v1/renders/{render_id}/artifact"
        again = await client.post("/v1/screenshots", json=body, headers=alice)
        assert again.json()["id"] == render_id  # same input, active render: joined
        other = await client.post("/v1/screenshots", json=body, headers=bob)
        assert other.json()["id"] != render_id  # another workspace never joins it

        # The events follow the render to its end; the last one is the succeeded render.
        stream = await client.get(f"/v1/renders/{render_id}/events", headers=alice, timeout=90)
        assert stream.status_code == 200
        events = sse_events(stream.text)
        assert events[-1][0] == "succeeded", events
        assert events[-1][1]["result"]["content_type"] == "image/png"
        # Resumed past its last event, the stream of an ended render sends nothing again.
        last = stream.text.strip().split("\n\n")[-1]
        last_id = next(line[4:] for line in last.splitlines() if line.startswith("id: "))
        resumed = await client.get(
            f"/v1/renders/{render_id}/events", headers={**alice, "Last-Event-ID": last_id}
        )
        assert sse_events(resumed.text) == []

        shown = (await client.get(f"/v1/renders/{render_id}", headers=alice)).json()
        assert shown["status"] == "succeeded" and shown["attempts"] == 1
        assert shown["job_id"] is None
        art = await client.get(f"/v1/renders/{render_id}/artifact", headers=alice)
        assert art.status_code == 200
        assert art.headers["content-type"] == "image/png"
        assert art.headers["x-deckyard-sha256"] == shown["result"]["sha256"]
        assert png_size(art.content) == (320, 200)
        for path in ("", "/artifact", "/events"):
            r = await client.get(f"/v1/renders/{render_id}{path}", headers=bob)
            assert r.status_code == 404, path
            assert r.json()["error"]["code"] == "NOT_FOUND"
        finished = await client.post(f"/v1/renders/{render_id}/cancel", headers=alice)
        assert finished.status_code == 409
        assert finished.json()["error"]["code"] == "RENDER_FINISHED"
        retried = await client.post(f"/v1/renders/{render_id}/retry", headers=alice)
        assert retried.status_code == 409
        assert retried.json()["error"]["code"] == "RENDER_NOT_RETRYABLE"

        renderers = (await client.get("/v1/renderers", headers=alice)).json()
        assert len(renderers) == 1
        assert renderers[0]["slots"] >= 1
        from prometheus_client.parser import text_string_to_metric_families

        async def idle() -> bool:
            shown = (await client.get("/v1/renderers", headers=alice)).json()
            return bool(shown[0]["occupancy"] == 0)

        await eventually(idle, what="the renderer's slot freed")
        metrics = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families((await client.get("/metrics")).text)
            for s in family.samples
        }
        key = ("deckyard_render_requests", (("error_code", ""), ("status", "succeeded")))
        assert metrics[key] >= 1
        name = renderers[0]["name"]
        assert metrics[("deckyard_render_slots", (("renderer", name), ("state", "up")))] >= 1


async def test_a_queued_render_is_cancelled_then_retried(db_url: str) -> None:
    # No renderer: the render stays queued until cancelled; its retry queues it again.
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        body = {"html": PAGE, "width": 320, "height": 200}
        render_id = (await client.post("/v1/screenshots", json=body, headers=alice)).json()["id"]
        assert (await client.get(f"/v1/renders/{render_id}/artifact", headers=alice)).json()[
            "error"
        ]["code"] == "NO_ARTIFACT"
        cancelled = await client.post(f"/v1/renders/{render_id}/cancel", headers=alice)
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "cancelled"
        again = await client.post(f"/v1/renders/{render_id}/cancel", headers=alice)
        assert again.status_code == 200 and again.json()["status"] == "cancelled"
        stream = await client.get(f"/v1/renders/{render_id}/events", headers=alice)
        assert [e for e, _ in sse_events(stream.text)] == ["cancelled"]
        # A new render of the same input while the old one is retried: the retry is refused.
        fresh = (await client.post("/v1/screenshots", json=body, headers=alice)).json()["id"]
        assert fresh != render_id
        conflict = await client.post(f"/v1/renders/{render_id}/retry", headers=alice)
        assert conflict.status_code == 409
        assert conflict.json()["error"]["code"] == "DEDUPE_CONFLICT"
        assert conflict.json()["error"]["render_id"] == fresh
        await client.post(f"/v1/renders/{fresh}/cancel", headers=alice)
        retried = await client.post(f"/v1/renders/{render_id}/retry", headers=alice)
        assert retried.status_code == 200, retried.text
        assert retried.json()["status"] == "pending"
        assert retried.json()["attempts"] == 0 and retried.json()["error_code"] is None
        await client.post(f"/v1/renders/{render_id}/cancel", headers=alice)
        assert (await client.get("/v1/renders/999999", headers=alice)).status_code == 404


async def test_bad_screenshot_input_names_the_field(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        cases = [
            ({"html": PAGE, "width": 0}, "width"),
            ({"html": PAGE, "format": "gif"}, "format"),
            ({"html": PAGE, "url": "https://example.com"}, "url"),
            ({"html": PAGE, "colour": "red"}, "colour"),
        ]
        for body, field in cases:
            r = await client.post("/v1/screenshots", json=body, headers=alice)
            assert r.status_code == 422, (body, r.text)
            assert r.json()["error"]["field"] == field, r.json()
        assert (await client.post("/v1/screenshots", json={"html": PAGE})).status_code == 401


async def test_open_event_streams_share_one_reader(db_url: str) -> None:
    """N streams open at once cost about one read a state change, not one a stream: each ends
    with its own render's end, and the reads stay linear in the state changes."""
    async with running_app(db_url) as (app, client):  # no renderer: the renders stay queued
        alice = await make_token(app, "alice")
        followers = app.state.render.followers
        ids = []
        for n in range(12):
            body = {"html": PAGE + f"<!-- {n} -->", "width": 320, "height": 200}
            ids.append(
                (await client.post("/v1/screenshots", json=body, headers=alice)).json()["id"]
            )

        async def stream(render_id: int) -> list[str]:
            got = await client.get(f"/v1/renders/{render_id}/events", headers=alice, timeout=60)
            return [event for event, _ in sse_events(got.text)]

        async def all_open() -> bool:
            return len(followers._followers) == len(ids)

        streams = [asyncio.create_task(stream(i)) for i in ids]
        await eventually(all_open, what="every stream open")
        before = followers.reads
        for render_id in ids:
            cancelled = await client.post(f"/v1/renders/{render_id}/cancel", headers=alice)
            assert cancelled.status_code == 200, cancelled.text
        assert [await s for s in streams] == [["pending", "cancelled"]] * len(ids)
        # one read per cancel (give or take a wake that two cancels share); each stream reading
        # its own render would take a read per open stream per cancel: 12 + 11 + ... + 1 = 78
        assert followers.reads - before <= 2 * len(ids)
        assert not followers._followers
