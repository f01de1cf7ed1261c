"""AI authoring through the API against a scripted OpenAI-compatible server on loopback.

No renderer runs here, which is exactly what rule Q0 is about: a model's page that compiles is
still never written while the render check is unavailable. The repair loop is exercised with
`skip_visual_verification` (compile errors go back to the model); the render-stage pass is in
the Chromium test.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

from sqlalchemy import func, select

from deckyard.ai.schema import ai_models
from deckyard.decks.schema import asset_blobs, deck_assets
from deckyard.jobs import Runtime
from tests.helpers.ai import ai_app, events, finished, new_deck
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import counts
from tests.helpers.eventually import eventually
from tests.helpers.fake_openai import Reply, png_bytes

BROKEN = "Here is the page:\n```markdown\n# Agenda\n\n![logo](assets/missing.png)\n```\n"
FIXED = "```markdown\n# Agenda\n\n- one\n- two\n```"


async def test_not_configured_answers_503_and_changes_nothing(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        calls = [
            client.post(
                f"/v1/decks/{deck}/pages/01-hello/ai-edit", json={"instruction": "x"}, headers=alice
            ),
            client.post(
                f"/v1/decks/{deck}/pages/02-new/ai-create", json={"prompt": "x"}, headers=alice
            ),
            client.post(f"/v1/decks/{deck}/assets:generate", json={"prompt": "x"}, headers=alice),
            client.get("/v1/ai/models", headers=alice),
            client.post(
                "/v1/decks/from-outline", json={"title": "t", "outline": ["a"]}, headers=alice
            ),
        ]
        for call in calls:
            r = await call
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "AI_NOT_CONFIGURED"
        rt: Runtime = app.state.runtime
        assert not any(k.startswith("ai.") for k in rt.handlers)
        assert await rt.list() == []


async def test_repair_round_then_written_once(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        fake.chat.extend([Reply(BROKEN), Reply(FIXED)])
        body = {"instruction": "make it an agenda", "skip_visual_verification": True}
        done = await finished(
            app,
            await client.post(f"/v1/decks/{deck}/pages/01-hello/ai-edit", json=body, headers=alice),
        )
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert done.result["rounds"] == 2
        assert done.result["usage"] == {
            "prompt_tokens": 200,
            "completion_tokens": 40,
            "total_tokens": 240,
            "calls": 2,
        }
        first, second = (r.body for r in fake.seen("/v1/chat/completions"))
        system = first["messages"][0]["content"]
        assert "1920x1080" in system and "assets/" in system
        assert "# Hello" in first["messages"][1]["content"]
        repair = second["messages"][-1]["content"]
        assert "page 01-hello, line 3" in repair and "assets/missing.png" in repair
        rounds = await events(app, done.id, "ai_round")
        assert [r["outcome"] for r in rounds] == ["failed", "passed"]
        assert all(r["prompt_chars"] > 0 and r["answer_chars"] > 0 for r in rounds)
        versions = (
            await client.get(f"/v1/decks/{deck}/pages/01-hello/versions", headers=alice)
        ).json()
        assert [v["number"] for v in versions] == [1, 2]
        page = (await client.get(f"/v1/decks/{deck}/pages/01-hello", headers=alice)).json()
        assert page["source"] == "# Agenda\n\n- one\n- two\n"
        assert versions[1]["skipped_visual_verification"] is True


async def test_q0_unavailable_renderer_writes_nothing_and_stops(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        before = await counts(app)
        fake.chat.append(Reply(FIXED))
        done = await finished(
            app,
            await client.post(
                f"/v1/decks/{deck}/pages/01-hello/ai-edit", json={"instruction": "x"}, headers=alice
            ),
        )
        assert done.status == "failed"
        assert done.error_code == "RENDER_SERVICE_UNAVAILABLE"
        assert "no version was written" in (done.error_message or "")
        assert len(fake.seen("/v1/chat/completions")) == 1, "unavailable is not sent for repair"
        assert [r["outcome"] for r in await events(app, done.id, "ai_round")] == ["unavailable"]
        assert await counts(app) == before


async def test_no_usable_source_is_a_clear_failure(db_url: str) -> None:
    async with ai_app(db_url, ai_repair_rounds=1) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        before = await counts(app)
        fake.chat.extend([Reply("I'd rather not."), Reply("```python\nprint(1)\n```")])
        body = {"instruction": "x", "skip_visual_verification": True}
        done = await finished(
            app,
            await client.post(f"/v1/decks/{deck}/pages/01-hello/ai-edit", json=body, headers=alice),
        )
        assert done.status == "failed" and done.error_code == "AI_NO_PAGE_SOURCE"
        assert done.attempt == 1
        assert await counts(app) == before
        usage = await events(app, done.id, "ai_usage")
        assert usage == [
            {"prompt_tokens": 200, "completion_tokens": 40, "total_tokens": 240, "calls": 2}
        ]


async def test_rate_limit_retries_after_retry_after_and_4xx_does_not(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        fake.chat.extend(
            [
                Reply(
                    status=429,
                    headers={"retry-after": "1"},
                    body={"error": {"message": "slow down"}},
                ),
                Reply(FIXED),
            ]
        )
        body = {"instruction": "x", "skip_visual_verification": True}
        done = await finished(
            app,
            await client.post(f"/v1/decks/{deck}/pages/01-hello/ai-edit", json=body, headers=alice),
        )
        assert done.status == "succeeded" and done.attempt == 2
        assert [
            e
            async for e in app.state.runtime.events(done.id, follow=False)
            if e.type == "retry_scheduled"
        ]
        assert fake.requests[1].headers  # the second call happened
        stamps = [
            e.created_at
            async for e in app.state.runtime.events(done.id, follow=False)
            if e.type == "started"
        ]
        assert (stamps[1] - stamps[0]).total_seconds() >= 1.0, "Retry-After: 1 was not honoured"

        fake.chat.append(Reply(status=400, body={"error": {"message": "bad model"}}))
        done = await finished(
            app,
            await client.post(f"/v1/decks/{deck}/pages/01-hello/ai-edit", json=body, headers=alice),
        )
        assert done.status == "failed" and done.error_code == "AI_REQUEST_REJECTED"
        assert done.attempt == 1

        fake.chat.extend([Reply(status=500, body={}), Reply(drop=True), Reply(FIXED)])
        done = await finished(
            app,
            await client.post(f"/v1/decks/{deck}/pages/01-hello/ai-edit", json=body, headers=alice),
        )
        assert done.status == "succeeded" and done.attempt == 3


async def test_deadline_aborts_the_provider_call(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        fake.chat.append(Reply(FIXED, delay=60))
        rt: Runtime = app.state.runtime
        started = time.monotonic()
        job = await rt.enqueue(
            "ai.page_edit",
            {
                "deck_id": deck,
                "page": "01-hello",
                "instruction": "x",
                "skip_visual_verification": True,
            },
            queue="ai",
            workspace_id="alice",
            deadline=1.0,
        )
        done = await rt.wait(job.id, timeout=30)
        assert done.status == "failed" and done.error_code == "DEADLINE_EXCEEDED"
        assert time.monotonic() - started < 20
        assert fake.disconnects == 1


async def test_ai_create_appends_a_page(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        deck = await new_deck(client, alice)
        fake.chat.append(Reply("Sure:\n```md\n# Closing\n\nThanks!\n```"))
        body = {"prompt": "a closing slide", "skip_visual_verification": True}
        done = await finished(
            app,
            await client.post(
                f"/v1/decks/{deck}/pages/02-closing/ai-create", json=body, headers=alice
            ),
        )
        assert done.status == "succeeded", done.error_message
        pages = (await client.get(f"/v1/decks/{deck}", headers=alice)).json()["pages"]
        assert [p["page"] for p in pages] == ["01-hello", "02-closing"]
        again = await client.post(
            f"/v1/decks/{deck}/pages/02-closing/ai-create", json=body, headers=alice
        )
        assert again.status_code == 409
        other = await client.post(f"/v1/decks/{deck}/pages/03-x/ai-create", json=body, headers=bob)
        assert other.status_code == 404
        bad = await client.post(
            f"/v1/decks/{deck}/pages/03-x/ai-create", json={"prompt": ""}, headers=alice
        )
        assert bad.status_code == 422 and "error" in bad.json()


async def test_generated_image_becomes_an_asset(db_url: str) -> None:
    async with ai_app(db_url, ai_image_sizes=["256x256", "512x512"]) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        gen = f"/v1/decks/{deck}/assets:generate"
        done = await finished(
            app, await client.post(gen, json={"prompt": "a cat", "size": "256x256"}, headers=alice)
        )
        assert done.status == "succeeded", done.error_message
        path = done.result["path"]
        assert path.startswith("assets/generated/") and path.endswith(".png")
        assert done.result["width"] == 256 and done.result["usage"]["total_tokens"] == 60
        async with app.state.db.read_connection() as conn:
            row = (await conn.execute(select(deck_assets).where(deck_assets.c.path == path))).one()
            blob = (
                await conn.execute(select(asset_blobs).where(asset_blobs.c.sha256 == row.sha256))
            ).one()
        assert blob.data == png_bytes(256, 256) and row.media_type == "image/png"

        # the same image again is the same asset, one row
        done = await finished(
            app, await client.post(gen, json={"prompt": "a cat", "size": "256x256"}, headers=alice)
        )
        assert done.result["path"] == path
        # a page can use it: the write gate compiles it in
        put = await client.put(
            f"/v1/decks/{deck}/pages/01-hello",
            json={"source": f"![cat]({path})", "skip_visual_verification": True},
            headers=alice,
        )
        assert put.status_code == 201, put.text

        before = await counts(app)
        wrong_size = base64.b64encode(png_bytes(300, 256)).decode()
        for data, code, says in (
            ("bm90IGFuIGltYWdl", "AI_IMAGE_INVALID", "not an image file"),
            (wrong_size, "AI_IMAGE_WRONG_SIZE", "300x256, not the 256x256"),
        ):
            fake.images.append(Reply(body={"created": 1, "data": [{"b64_json": data}]}))
            done = await finished(
                app, await client.post(gen, json={"prompt": "x", "size": "256x256"}, headers=alice)
            )
            assert done.status == "failed" and done.error_code == code, done.error_message
            message = done.error_message or ""
            assert says in message and "BytesIO" not in message and " at 0x" not in message, message
        assert await counts(app) == before
        bad = await client.post(gen, json={"prompt": "x", "size": "7x7"}, headers=alice)
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_IMAGE_SIZE"


async def test_catalog_writes_only_on_change_and_survives_failures(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        ai = app.state.ai

        async def sync() -> Any:
            job = await ai.sync_catalog()
            return await rt.wait(job.id, timeout=30)

        first = await sync()
        assert first.status == "succeeded" and first.result["added"] == ["fake-image", "fake-text"]
        models = (await client.get("/v1/ai/models", headers=alice)).json()
        assert [m["id"] for m in models] == ["fake-image", "fake-text"]
        same = await sync()
        assert same.result["written"] is False

        fake.models_script.append(Reply(status=500, body={"error": {"message": "down"}}))
        broken = await sync()
        assert broken.status == "failed" and broken.error_code == "AI_PROVIDER_ERROR"
        assert ai.catalog.failures == 1
        scraped = (await client.get("/metrics")).text
        assert "deckyard_ai_catalog_sync_failures_total 1.0" in scraped

        fake.models = ["fake-text", "new-model"]
        changed = await sync()
        assert changed.result["added"] == ["new-model"] and changed.result["removed"] == [
            "fake-image"
        ]
        async with app.state.db.read_connection() as conn:
            n = (await conn.execute(select(func.count()).select_from(ai_models))).scalar_one()
        assert n == 2


async def test_cancel_aborts_a_running_edit(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        before = await counts(app)
        fake.chat.append(Reply(FIXED, delay=60))
        body = {"instruction": "x", "skip_visual_verification": True}
        r = await client.post(f"/v1/decks/{deck}/pages/01-hello/ai-edit", json=body, headers=alice)
        job_id = r.json()["id"]

        async def asked() -> bool:
            return len(fake.seen("/v1/chat/completions")) == 1

        await eventually(asked, timeout=30)
        started = time.monotonic()
        cancel = await client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)
        assert cancel.status_code == 200, cancel.text
        done = await app.state.runtime.wait(job_id, timeout=30)
        assert done.status == "cancelled"
        assert time.monotonic() - started < 20

        async def hung_up() -> bool:
            return fake.disconnects == 1

        await eventually(hung_up, timeout=10)
        assert await counts(app) == before


async def test_a_version_written_meanwhile_is_not_overwritten(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        release = asyncio.Event()
        fake.chat.append(Reply(FIXED, hold=release))
        body = {"instruction": "x", "skip_visual_verification": True}
        r = await client.post(f"/v1/decks/{deck}/pages/01-hello/ai-edit", json=body, headers=alice)

        async def asked() -> bool:
            return len(fake.seen("/v1/chat/completions")) == 1

        await eventually(asked, timeout=30)
        human = {"source": "# Mine\n", "skip_visual_verification": True}
        put = await client.put(f"/v1/decks/{deck}/pages/01-hello", json=human, headers=alice)
        assert put.status_code == 201, put.text
        release.set()
        done = await app.state.runtime.wait(r.json()["id"], timeout=30)
        assert done.status == "failed" and done.error_code == "EDIT_CONFLICT", done.error_message
        page = (await client.get(f"/v1/decks/{deck}/pages/01-hello", headers=alice)).json()
        assert page["source"] == "# Mine\n"


async def test_url_only_image_answer_fails_at_once_without_retry(db_url: str) -> None:
    async with ai_app(db_url, ai_image_sizes=["256x256"]) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        before = await counts(app)
        fake.images.append(
            Reply(body={"created": 1, "data": [{"url": "http://127.0.0.1:9/cat.png"}]})
        )
        done = await finished(
            app,
            await client.post(
                f"/v1/decks/{deck}/assets:generate",
                json={"prompt": "a cat", "size": "256x256"},
                headers=alice,
            ),
        )
        assert done.status == "failed" and done.error_code == "AI_IMAGE_URL_ONLY"
        assert "URL" in (done.error_message or "")
        assert done.attempt == 1
        assert len(fake.seen("/v1/images/generations")) == 1, "one paid call, not four"
        assert await counts(app) == before


async def test_versions_a_model_writes_carry_the_jobs_actor(db_url: str) -> None:
    async with ai_app(db_url) as (app, client, fake):
        alice = await make_token(app, "alice")
        deck = await new_deck(client, alice)
        fake.chat.extend([Reply(FIXED), Reply("```md\n# Closing\n```")])
        edit = await finished(
            app,
            await client.post(
                f"/v1/decks/{deck}/pages/01-hello/ai-edit",
                json={"instruction": "x", "skip_visual_verification": True},
                headers=alice,
            ),
        )
        create = await finished(
            app,
            await client.post(
                f"/v1/decks/{deck}/pages/02-closing/ai-create",
                json={"prompt": "a closing slide", "skip_visual_verification": True},
                headers=alice,
            ),
        )
        assert edit.status == create.status == "succeeded", (edit.error_message, create)
        actor = edit.actor_token_id
        assert actor is not None and create.actor_token_id == actor
        for page, number in (("01-hello", 2), ("02-closing", 1)):
            versions = (
                await client.get(f"/v1/decks/{deck}/pages/{page}/versions", headers=alice)
            ).json()
            [written] = [v for v in versions if v["number"] == number]
            assert written["actor_token_id"] == actor, (page, written)
