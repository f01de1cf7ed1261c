"""The app with a scripted model on loopback, and small helpers of the AI API tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI

from deckyard.jobs import Job, Runtime
from tests.helpers.api import running_app
from tests.helpers.decks import json_deck
from tests.helpers.fake_openai import FakeOpenAI


@asynccontextmanager
async def ai_app(
    db_url: str, **over: Any
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient, FakeOpenAI]]:
    """The app configured against a `FakeOpenAI`, both stopped on leaving."""
    async with FakeOpenAI() as fake:
        settings = {
            "ai_base_url": fake.base_url,
            "ai_api_key": "sk-test",
            "ai_text_model": "fake-text",
            "ai_image_model": "fake-image",
            "ai_catalog_cron": None,
            **over,
        }
        async with running_app(db_url, **settings) as (app, client):
            yield app, client, fake


async def new_deck(client: httpx.AsyncClient, headers: dict[str, str]) -> int:
    """A one-page deck (`01-hello`) of the caller's workspace."""
    made = await client.post("/v1/decks", json=json_deck("# Hello"), headers=headers)
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


async def finished(app: FastAPI, response: httpx.Response) -> Job:
    """The job a 202 answered, once it ended."""
    assert response.status_code == 202, response.text
    rt: Runtime = app.state.runtime
    return await rt.wait(response.json()["id"], timeout=60)


async def events(app: FastAPI, job_id: int, kind: str) -> list[Any]:
    """The data of a job's events of type `kind`, oldest first."""
    rt: Runtime = app.state.runtime
    return [e.data async for e in rt.events(job_id, follow=False) if e.type == kind]
