"""A change answer carries each finished page's artefact inline, once, within its byte budget,
and a page that asked for no picture succeeds with its diagnostics alone.

Every attempt is a deck of pages: a live attempt shows up in the answer as soon as one of its
pages finished (the feed counts each page), with that page in its receipt and its bytes keyed
`attempt_id/index`. Chromium is faked (`test_slow_close`): a URL page's "image" is the bytes
`png of <url>`, so sizes are known and the budget can be pinned between them. The routes run
through the real app, signed, over ASGI.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

from deckyard.config import Settings
from deckyard.render.protocol import AttemptStatus, DeckAttemptRequest, HmacAuth
from deckyard.render.renderer.app import RendererRuntime, create_app
from deckyard.render.renderer.browser.pool import BrowserHandle
from tests.unit.render.renderer import test_slow_close as fakes

SECRET = "unit-secret-0123456789"
PAGE_A = "http://127.0.0.1:9/a"
PAGE_B = "http://127.0.0.1:9/b"
PAGE_C = "http://127.0.0.1:9/c"
SIZE = len(b"png of " + PAGE_A.encode())
"""The fake artefact of each of the pages above."""
BUDGET = 2 * SIZE + SIZE // 2
"""Two of those pages fit one answer, a third does not."""


@dataclass
class Rig:
    """A renderer runtime over fake browsers, and a signed client of its API."""

    runtime: RendererRuntime
    client: httpx.AsyncClient
    browsers: list[fakes.FakeHandle]

    async def changes(self, after: int) -> dict[str, Any]:
        """`GET /v1/changes?after=...&receipts=1`, decoded."""
        params = {"after": after, "receipts": 1}
        response = await self.client.get("/v1/changes", params=params)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def submit(self, attempt_id: str, *pages: dict[str, Any]) -> None:
        """Admit a deck attempt of `pages` (indexed in order), one page at a time."""
        indexed = [{"index": i, **page} for i, page in enumerate(pages)]
        deck = DeckAttemptRequest.model_validate({"attempt_id": attempt_id, "pages": indexed})
        self.runtime.registry.submit_deck(deck)


@pytest.fixture
async def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Rig]:
    settings = Settings.load(
        renderer_secret=SECRET,
        renderer_slots=2,
        renderer_changes_inline_max_bytes=BUDGET,
    )
    runtime = RendererRuntime(settings, epoch="epoch", renderer_id="r", root=tmp_path)
    browsers: list[fakes.FakeHandle] = []

    async def launch() -> BrowserHandle:
        generation = len(browsers) + 1
        handle = fakes.FakeHandle(
            cast(Any, fakes.FakeBrowser()), generation, f"t-{generation}", None
        )
        browsers.append(handle)
        return handle

    monkeypatch.setattr(runtime.pool, "_launch", launch)
    runtime.registry.start()
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://renderer", auth=HmacAuth(SECRET)
    ) as client:
        yield Rig(runtime, client, browsers)
    await runtime.registry.stop()
    await runtime.tabs.stop()
    await runtime.pool.stop()


def inline(url: str) -> str:
    """What a change answer carries for the fake artefact of `url`."""
    return base64.b64encode(b"png of " + url.encode()).decode("ascii")


async def test_a_live_attempts_finished_page_goes_inline_once_under_attempt_slash_index(
    rig: Rig,
) -> None:
    registry = rig.runtime.registry
    rig.submit("deck-1", {"url": PAGE_A}, {"url": fakes.HELD})
    assert await registry.changes.wait_past(0, timeout=10) == 1  # page 0 finished

    first = await rig.changes(0)
    [receipt] = first["receipts"]
    assert (receipt["attempt_id"], receipt["status"]) == ("deck-1", "running")
    assert [(p["index"], p["status"]) for p in receipt["pages"]] == [(0, "succeeded")]
    assert first["artifacts"] == {"deck-1/0": inline(PAGE_A)}
    attempt = registry.get("deck-1")
    assert attempt is not None and attempt.pages[0].artifact_served

    # asked again from the same count: the receipt again, the bytes not again
    again = await rig.changes(0)
    assert [r["attempt_id"] for r in again["receipts"]] == ["deck-1"]
    assert again["artifacts"] == {}

    [browser] = rig.browsers
    browser.fake.release_held.set()
    done = await asyncio.wait_for(registry.wait("deck-1"), 10)
    assert done.status is AttemptStatus.SUCCEEDED
    last = await rig.changes(first["changes"])
    [receipt] = last["receipts"]
    assert receipt["status"] == "succeeded"
    assert [p["index"] for p in receipt["pages"]] == [0, 1]
    assert last["artifacts"] == {"deck-1/1": inline(fakes.HELD)}
    # the page route still serves a page that went inline
    fetched = await rig.client.get("/v1/attempts/deck-1/pages/0/artifact")
    assert fetched.content == b"png of " + PAGE_A.encode()


async def test_pages_go_inline_while_the_budget_lasts_and_the_rest_in_a_later_answer(
    rig: Rig,
) -> None:
    registry = rig.runtime.registry
    rig.submit("deck-2", {"url": PAGE_A}, {"url": PAGE_B}, {"url": PAGE_C})
    await asyncio.wait_for(registry.wait("deck-2"), 10)

    first = await rig.changes(-1)
    assert first["artifacts"] == {"deck-2/0": inline(PAGE_A), "deck-2/1": inline(PAGE_B)}
    assert sum(len(base64.b64decode(v)) for v in first["artifacts"].values()) <= BUDGET
    second = await rig.changes(-1)
    assert second["artifacts"] == {"deck-2/2": inline(PAGE_C)}
    assert (await rig.changes(-1))["artifacts"] == {}


async def test_a_page_without_capture_succeeds_with_diagnostics_and_no_artefact(
    rig: Rig,
) -> None:
    registry = rig.runtime.registry
    rig.submit("deck-3", {"url": PAGE_A, "capture": False}, {"url": PAGE_B})
    done = await asyncio.wait_for(registry.wait("deck-3"), 10)
    assert (done.status, done.error_code) == (AttemptStatus.SUCCEEDED, None)
    checked, captured = done.pages or []
    assert (checked.status, checked.error_code, checked.artifact) == (
        AttemptStatus.SUCCEEDED,
        None,
        None,
    )
    assert checked.diagnostics is not None and checked.diagnostics.document_width == 320
    assert captured.status is AttemptStatus.SUCCEEDED and captured.artifact is not None

    answer = await rig.changes(-1)
    assert answer["artifacts"] == {"deck-3/1": inline(PAGE_B)}  # nothing to send for page 0
    missing = await rig.client.get("/v1/attempts/deck-3/pages/0/artifact")
    assert (missing.status_code, missing.json()["error"]) == (404, "RENDER_RESULT_LOST")
    # its receipt and its one artefact were served: a drain waits for nothing more
    attempt = registry.get("deck-3")
    assert attempt is not None and attempt.collected
