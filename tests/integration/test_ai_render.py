"""A model's page through the full write gate with a real renderer: a render error is repaired."""

from __future__ import annotations

import pytest

from deckyard.jobs import Runtime
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually
from tests.helpers.fake_openai import FakeOpenAI, Reply

pytestmark = [pytest.mark.chromium, pytest.mark.processes]
THROWS = '```html\n<h1>Hi</h1><script>throw new Error("boom from the model")</script>\n```'
FINE = "```html\n<h1>Hello, renderer</h1>\n```"


async def test_render_failure_goes_back_to_the_model_then_passes(db_url: str) -> None:
    async with FakeOpenAI() as fake:
        fake.chat.extend([Reply(THROWS), Reply(FINE)])
        async with running_app(
            db_url, renderers=1, ai_base_url=fake.base_url, ai_catalog_cron=None
        ) as (app, client):
            alice = await make_token(app, "alice")
            # the model answers at once: without a renderer up, round 1 fails as unavailable
            await eventually(app.state.decks.validator.gateway.renderer_live, timeout=60)
            made = await client.post(
                "/v1/decks", json=json_deck("<h1>x</h1>", "html"), headers=alice
            )
            deck = made.json()["id"]
            r = await client.post(
                f"/v1/decks/{deck}/pages/01-hello/ai-edit",
                json={"instruction": "greet the renderer"},
                headers=alice,
            )
            assert r.status_code == 202, r.text
            rt: Runtime = app.state.runtime
            done = await rt.wait(r.json()["id"], timeout=180)
            assert done.status == "succeeded", (done.error_code, done.error_message)
            assert done.result["rounds"] == 2
            assert done.result["validation"]["status"] == "passed"
            repair = fake.seen("/v1/chat/completions")[1].body["messages"][-1]["content"]
            assert "boom from the model" in repair
            rounds = [
                e.data async for e in rt.events(done.id, follow=False) if e.type == "ai_round"
            ]
            assert [x["outcome"] for x in rounds] == ["failed", "passed"]
            page = (await client.get(f"/v1/decks/{deck}/pages/01-hello", headers=alice)).json()
            assert page["source"] == "<h1>Hello, renderer</h1>\n"
            assert page["validation"]["stages"]["render"]["status"] in ("passed", "warning")
