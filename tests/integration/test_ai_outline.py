"""A deck from an outline: one job whose status is the whole outline's, against a fake model.

The outline job (`ai.deck_outline`) writes one slide after the other as `ai.page_create`
children; it succeeds only when every slide was written and fails as soon as one was not.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import FastAPI

from deckyard.jobs import Runtime
from tests.helpers.ai import ai_app, events
from tests.helpers.api import make_token
from tests.helpers.eventually import eventually
from tests.helpers.fake_openai import Reply

BROKEN = "Here is the page:\n```markdown\n# Agenda\n\n![logo](assets/missing.png)\n```\n"


async def pages_of(client: httpx.AsyncClient, deck: int, headers: dict[str, str]) -> list[str]:
    shown = (await client.get(f"/v1/decks/{deck}", headers=headers)).json()
    return [p["page"] for p in shown["pages"]]


async def start(
    client: httpx.AsyncClient, headers: dict[str, str], outline: list[str], **over: Any
) -> tuple[int, dict[str, Any]]:
    body = {"title": "Launch", "outline": outline, "skip_visual_verification": True, **over}
    r = await client.post("/v1/decks/from-outline", json=body, headers=headers)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert job["kind"] == "ai.deck_outline"
    assert r.headers["location"] == f"/v1/jobs/{job['id']}"
    return int(r.json()["deck_id"]), job


async def wait(app: FastAPI, job_id: int) -> Any:
    rt: Runtime = app.state.runtime
    return await rt.wait(job_id, timeout=60)


async def test_the_outline_job_succeeds_once_every_slide_is_written(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        fake.chat.extend(
            [Reply("```md\n# Why\n\nBecause.\n```"), Reply(BROKEN), Reply("```md\n# How\n```")]
        )
        deck, job = await start(
            client, alice, ["Why we launch", "How it works!"], slide={"width": 1280, "height": 720}
        )
        done = await wait(app, job["id"])
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert await pages_of(client, deck, alice) == [
            "01-title",
            "02-why-we-launch",
            "03-how-it-works",
        ]
        rt: Runtime = app.state.runtime
        children = sorted(await rt.list(parent_id=done.id), key=lambda j: j.id)
        assert [c.kind for c in children] == ["ai.page_create", "ai.page_create"]
        assert all(c.status == "succeeded" for c in children)
        assert children[1].result["rounds"] == 2
        assert done.result["slides"] == [
            {"page": "02-why-we-launch", "job_id": children[0].id, "version_number": 1},
            {"page": "03-how-it-works", "job_id": children[1].id, "version_number": 1},
        ]
        assert done.result["usage"]["calls"] == 3
        slides = await events(app, done.id, "ai_slide")
        assert [s["page"] for s in slides] == ["02-why-we-launch", "03-how-it-works"]
        prompt = fake.seen("/v1/chat/completions")[1].body["messages"][1]["content"]
        assert "3. How it works!" in prompt
        assert "1280x720" in fake.requests[1].body["messages"][0]["content"]

        # every slide's job and version carry the caller's token, like the outline job
        actor = done.actor_token_id
        assert actor is not None and all(c.actor_token_id == actor for c in children)
        for page in ("02-why-we-launch", "03-how-it-works"):
            [version] = (
                await client.get(f"/v1/decks/{deck}/pages/{page}/versions", headers=alice)
            ).json()
            assert version["actor_token_id"] == actor, version

        bad = await client.post(
            "/v1/decks/from-outline", json={"title": "x", "outline": []}, headers=alice
        )
        assert bad.status_code == 422


async def test_a_failed_slide_fails_the_outline_and_a_retry_continues_there(db_url: str) -> None:
    async with ai_app(db_url, ai_repair_rounds=0) as (app, client, fake):
        alice = await make_token(app, "alice")
        fake.chat.extend([Reply("```md\n# One\n```"), Reply("I'd rather not.")])
        deck, job = await start(client, alice, ["One", "Two", "Three"])
        done = await wait(app, job["id"])
        assert done.status == "failed"
        assert done.error_code == "AI_NO_PAGE_SOURCE"
        assert "slide 3" in (done.error_message or "") and "03-two" in (done.error_message or "")
        assert done.attempt == 1
        assert len(fake.seen("/v1/chat/completions")) == 2, "no slide after the failed one"
        assert await pages_of(client, deck, alice) == ["01-title", "02-one"]

        fake.chat.extend([Reply("```md\n# Two\n```"), Reply("```md\n# Three\n```")])
        again = await client.post(f"/v1/jobs/{done.id}/retry", headers=alice)
        assert again.status_code == 200, again.text
        done = await wait(app, done.id)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert await pages_of(client, deck, alice) == ["01-title", "02-one", "03-two", "04-three"]
        assert len(fake.seen("/v1/chat/completions")) == 4, "the written slide was not redone"
        assert [s["page"] for s in done.result["slides"]] == ["02-one", "03-two", "04-three"]


async def test_cancelling_the_outline_job_stops_the_slide_being_written(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        hold = asyncio.Event()
        fake.chat.extend([Reply("```md\n# One\n```"), Reply("```md\n# Two\n```", hold=hold)])
        deck, job = await start(client, alice, ["One", "Two", "Three"])

        async def second_asked() -> bool:
            return len(fake.seen("/v1/chat/completions")) == 2

        await eventually(second_asked, timeout=30)
        cancel = await client.post(f"/v1/jobs/{job['id']}/cancel", headers=alice)
        assert cancel.status_code == 200, cancel.text
        hold.set()
        done = await wait(app, job["id"])
        assert done.status == "cancelled"
        rt: Runtime = app.state.runtime
        children = sorted(await rt.list(parent_id=done.id), key=lambda j: j.id)
        assert [c.status for c in children] == ["succeeded", "cancelled"]
        assert await pages_of(client, deck, alice) == ["01-title", "02-one"]
        assert len(fake.seen("/v1/chat/completions")) == 2
