"""The dashboard's deck pages in a real Chromium against `deckyard serve` with a renderer:
decks, pages with thumbnails, versions and publications, and the published site itself
opening in the browser (the viewer runs under the site's sandboxing CSP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, async_playwright, expect

from tests.e2e.test_dashboard import CHROMIUM_ARGS, chromium_pids, shot
from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually, settled
from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.slow]
WAIT_MS = 15_000


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium, closed afterwards; no Chromium process may outlive the test."""
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()
    left = await settled(lambda: asyncio.to_thread(chromium_pids), timeout=20)
    assert left == set(), f"Chromium outlived the test: {left}"


async def publish(client: httpx.AsyncClient, deck_id: int, body: dict[str, Any]) -> None:
    started = await client.post(f"/v1/decks/{deck_id}/publish", json=body)
    assert started.status_code == 202, started.text
    task_id = started.json()["task_id"]

    async def done() -> bool:
        task = (await client.get(f"/v1/tasks/{task_id}")).json()
        assert task["status"] not in ("failed", "cancelled"), task
        return bool(task["status"] == "succeeded")

    await eventually(done, timeout=240, every=0.5, what=f"publish task {task_id}")


async def test_deck_pages_in_a_browser(
    chromium: Browser, tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(tmp_path, DECKYARD_RENDERERS="1", DECKYARD_RENDERER_SLOTS="2")
    token = create_token(env, tmp_path, "demo")
    server = Server([], env, tmp_path)
    servers.append(server)
    server.wait_ready(90)
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as api:
        body = json_deck("# Quarterly review\n\nRenders are up.\n")
        body["pages"].append({"name": "02-end", "kind": "md", "text": "# Thank you\n"})  # type: ignore[attr-defined]
        made = await api.post("/v1/decks", json=body)
        assert made.status_code == 201, made.text
        deck_id = made.json()["id"]
        await publish(api, deck_id, {"visibility": "public"})
        edit = await api.put(
            f"/v1/decks/{deck_id}/pages/02-end",
            json={"source": "# Thanks!\n", "skip_visual_verification": True},
        )
        assert edit.status_code == 201, edit.text
        await publish(api, deck_id, {"visibility": "public"})

    ctx = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await ctx.new_page()
    await page.goto(f"{server.url}/ui/decks")
    await page.fill("#token", token)
    await page.click("button[type=submit]")
    await expect(page).to_have_url(f"{server.url}/ui/decks")
    row = page.locator(f"#deck-{deck_id}")
    await expect(row).to_contain_text("Hello")
    await expect(row.get_by_test_id("deck-site")).to_have_text("live · public")
    await shot(page, tmp_path, "decks")

    await row.locator("a").first.click()
    await expect(page).to_have_url(f"{server.url}/ui/decks/{deck_id}")
    cards = page.get_by_test_id("pages").locator("article")
    await expect(cards).to_have_count(2)
    thumbs = page.get_by_test_id("page-thumb")
    await expect(thumbs).to_have_count(2)
    await page.wait_for_function(
        "[...document.querySelectorAll('[data-testid=page-thumb]')]"
        ".every(img => img.complete && img.naturalWidth === 1920)",
        timeout=WAIT_MS,
    )
    end = page.get_by_test_id("page-02-end")
    await end.locator("summary").click()
    await expect(end.get_by_test_id("version-2")).to_contain_text("passed")
    await expect(end.get_by_test_id("version-1")).to_be_visible()
    pubs = page.get_by_test_id("publications").locator("tbody tr")
    await expect(pubs).to_have_count(2)
    await expect(pubs.nth(0)).to_have_attribute("data-status", "live")
    await expect(pubs.nth(1)).to_have_attribute("data-status", "superseded")
    await shot(page, tmp_path, "deck")

    # The live site opens from the dashboard and its viewer shows the first slide.
    async with ctx.expect_page() as opened:
        await page.get_by_test_id("open-site").click()
    site = await opened.value
    await site.wait_for_load_state()
    assert site.url.split("#")[0] == f"{server.url}/sites/demo/{deck_id}/"
    slide = site.frame_locator("#frame")
    await expect(slide.locator("h1")).to_have_text("Quarterly review", timeout=WAIT_MS)
    await site.keyboard.press("ArrowRight")
    await expect(slide.locator("h1")).to_have_text("Thanks!", timeout=WAIT_MS)
    # The site's scripts cannot use the dashboard session: the sandbox gives them no origin.
    status = await site.evaluate(
        "fetch('/v1/decks', {credentials: 'include'}).then(r => r.status, () => 'blocked')"
    )
    assert status in ("blocked", 401), status
    await shot(site, tmp_path, "site")
    await ctx.close()
