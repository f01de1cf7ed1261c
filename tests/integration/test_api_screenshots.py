"""`POST /v1/screenshots` through the control plane to a supervised renderer and back."""

from __future__ import annotations

import struct

import pytest

from deckyard.jobs import Runtime
from tests.helpers.api import make_token, running_app

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

PAGE = """<!doctype html><html><head><style>html,body{margin:0;background:#fff}
#box{position:absolute;left:20px;top:10px;width:100px;height:50px;background:#0a0}</style>
</head><body><div id=box></div></body></html>"""


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


async def test_screenshot_job_artifact_and_renderers(db_url: str) -> None:
    async with running_app(db_url, renderers=1) as (app, client):
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        body = {"html": PAGE, "width": 320, "height": 200}
        created = await client.post("/v1/screenshots", json=body, headers=alice)
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]
        assert created.headers["location"] == f"/v1/jobs/{job_id}"
        again = await client.post("/v1/screenshots", json=body, headers=alice)
        assert again.json()["id"] == job_id  # same input, active job: joined
        rt: Runtime = app.state.runtime
        done = await rt.wait(job_id, timeout=90)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        art = await client.get(f"/v1/jobs/{job_id}/artifact", headers=alice)
        assert art.status_code == 200
        assert art.headers["content-type"] == "image/png"
        assert png_size(art.content) == (320, 200)
        assert (await client.get(f"/v1/jobs/{job_id}/artifact", headers=bob)).status_code == 404
        renderers = (await client.get("/v1/renderers", headers=alice)).json()
        assert len(renderers) == 1
        assert renderers[0]["slots"] >= 1
        assert renderers[0]["occupancy"] == 0
        from prometheus_client.parser import text_string_to_metric_families

        metrics = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families((await client.get("/metrics")).text)
            for s in family.samples
        }
        key = ("deckyard_render_requests", (("error_code", ""), ("status", "succeeded")))
        assert metrics[key] == 1
        name = renderers[0]["name"]
        assert metrics[("deckyard_render_occupancy", (("renderer", name),))] == 0
        assert metrics[("deckyard_render_slots", (("renderer", name), ("state", "up")))] >= 1


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
