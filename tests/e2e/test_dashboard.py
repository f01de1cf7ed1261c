"""The dashboard in a real Chromium against a real server process.

The server is `tests.e2e.dashboard_server`: the app `deckyard serve` runs, plus demo job kinds and
a test-only enqueue route, because the server has no job handlers or enqueue route of its own yet.
Screenshots of every page go to the test's tmp_path; with DECKYARD_UPDATE_DOC_IMAGES=1 they
are also copied to docs/img (the README's pictures), so ordinary runs leave the tree alone.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.e2e.conftest import DECKYARD, Server, clean_env, free_port
from tests.helpers.eventually import settled

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DOCS_IMG = ROOT / "docs" / "img"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
WAIT_MS = 15_000
RENDER_WAIT_MS = 60_000


class DemoServer(Server):
    """`tests.e2e.dashboard_server` as a subprocess, stopped like `deckyard serve`."""

    def __init__(self, env: dict[str, str], cwd: Path, logs: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = logs / f"dashboard-{self.port}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.e2e.dashboard_server", "--port", str(self.port)],
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def chromium_pids() -> set[int]:
    """Chromium processes this test's browser started (not those of the server's renderer).

    Both are descendants of the test process: the server is its child too. A Chromium under a
    `deckyard` process belongs to the server, which the `servers` fixture stops and checks.
    """
    found = set()
    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" not in (proc.name() or "").lower():
                continue
            if any("deckyard" in " ".join(a.cmdline()) for a in proc.parents()):
                continue
        except psutil.Error:
            continue
        found.add(proc.pid)
    return found


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """A headless Chromium, closed afterwards; no Chromium process may outlive the test."""
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()
    left = await settled(lambda: asyncio.to_thread(chromium_pids), timeout=20)
    assert left == set(), f"Chromium outlived the test: {left}"


@pytest.fixture
def server(tmp_path: Path, servers: list[Server]) -> tuple[Server, str]:
    """A started demo server over SQLite and a token for workspace `demo`, made beforehand."""
    env = clean_env(tmp_path)
    made = subprocess.run(
        [*DECKYARD, "token", "create", "--workspace", "demo", "--label", "dashboard test"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    srv = DemoServer(env, ROOT, tmp_path)
    servers.append(srv)
    srv.wait_ready()
    return srv, made.stdout.strip()


SLIDE = """<!doctype html><html><body style="margin:0;font:48px system-ui;background:#fff">
<div style="background:#3157c8;color:#fff;padding:40px 64px;font-weight:700">Q3 review</div>
<ul style="padding:40px 110px;color:#333;line-height:1.6"><li>Renders: 12,480</li>
<li>p95 latency: 1.4 s</li><li>Failed: 0.2 %</li></ul></body></html>"""


class Api:
    """The server's API as the test's other client (bearer token)."""

    def __init__(self, srv: Server, token: str) -> None:
        self.client = httpx.AsyncClient(
            base_url=srv.url, headers={"authorization": f"Bearer {token}"}, timeout=30
        )

    async def post(self, path: str, **body: Any) -> int:
        resp = await self.client.post(path, json=body)
        resp.raise_for_status()
        return int(resp.json()["id"])

    async def enqueue(self, kind: str, **body: Any) -> int:
        return await self.post("/demo/jobs", kind=kind, **body)


async def shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"dashboard-{name}.png"
    await page.screenshot(path=path, full_page=True)
    if os.environ.get("DECKYARD_UPDATE_DOC_IMAGES") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / path.name)


async def test_dashboard_in_a_browser(
    browser: Browser, server: tuple[Server, str], tmp_path: Path
) -> None:
    srv, token = server
    api = Api(srv, token)
    ctx = await browser.new_context(viewport={"width": 1280, "height": 800})
    page = await ctx.new_page()
    page.on("dialog", lambda d: asyncio.ensure_future(d.accept()))

    # Sign in through the form; a page asked for before sign-in comes back after it.
    await page.goto(f"{srv.url}/ui/jobs")
    await expect(page).to_have_url(f"{srv.url}/ui/sign-in?next=%2Fui%2Fjobs")
    await shot(page, tmp_path, "sign-in")
    await page.fill("#token", "dy_not-a-token")
    await page.click("button[type=submit]")
    await expect(page.get_by_role("alert")).to_contain_text("unknown or revoked")
    await page.fill("#token", token)
    await page.click("button[type=submit]")
    await expect(page).to_have_url(f"{srv.url}/ui/jobs")
    await expect(page.get_by_test_id("workspace")).to_have_text("demo")

    # A job enqueued while the page is open appears, runs and succeeds without a reload.
    for _ in range(2):
        await api.enqueue("demo.step", payload={"seconds": 0.2})
    failed = await api.enqueue("deck.unknown")
    live = await api.enqueue("demo.step", payload={"seconds": 2.5})
    row = page.locator(f"#job-{live}")
    await expect(row).to_be_visible(timeout=WAIT_MS)
    await expect(row).to_have_attribute("data-status", "running", timeout=WAIT_MS)
    await expect(row).to_have_attribute("data-status", "succeeded", timeout=WAIT_MS)
    await expect(page.locator(f"#job-{failed}")).to_have_attribute(
        "data-status", "failed", timeout=WAIT_MS
    )
    await expect(page.locator(f"#job-{failed}")).to_contain_text("NO_HANDLER")
    snap = await api.post("/v1/screenshots", html=SLIDE, width=1280, height=720)
    parked = [await api.enqueue("demo.step", delay=3600) for _ in range(3)]
    await expect(page.locator(f"#job-{parked[-1]}")).to_be_visible(timeout=WAIT_MS)

    # Filters narrow the list.
    await page.select_option("[data-testid=filter-status]", "failed")
    await page.click("text=Apply")
    await expect(page.locator("tbody tr")).to_have_count(1)
    await page.goto(f"{srv.url}/ui/jobs")
    await expect(page.locator(f"#job-{parked[-1]}")).to_be_visible()
    await shot(page, tmp_path, "jobs")
    # A screenshot is a render request, not a job: the jobs list never shows it.
    await expect(page.locator("tbody a.kind", has_text="screenshot")).to_have_count(0)

    # A job's page: its timeline from start to finish.
    await page.click(f"#job-{live} a.kind")
    await expect(page.get_by_test_id("job-status")).to_have_text("succeeded")
    timeline = page.get_by_test_id("timeline")
    await expect(timeline).to_contain_text("started")
    await expect(timeline).to_contain_text("succeeded")
    await shot(page, tmp_path, "job")

    # The screenshot on the renders page, listed, followed until it succeeds without a reload.
    await page.get_by_role("link", name="Renders", exact=True).click()
    await expect(page).to_have_url(f"{srv.url}/ui/renders")
    row = page.locator(f"#render-{snap}")
    await expect(row).to_be_visible()
    await expect(row).to_contain_text("screenshot")
    await expect(row).to_have_attribute("data-status", "succeeded", timeout=RENDER_WAIT_MS)
    await shot(page, tmp_path, "renders")

    # The render: its status, a thumbnail, and the full image behind it.
    await page.click(f"#render-{snap} a.kind")
    await expect(page).to_have_url(f"{srv.url}/ui/renders/{snap}")
    await expect(page.get_by_test_id("render-status")).to_have_text("succeeded")
    thumb = page.get_by_test_id("artifact-thumb")
    await expect(thumb).to_be_visible()
    assert await thumb.evaluate("img => img.decode().then(() => img.naturalWidth)") == 1280
    await shot(page, tmp_path, "render")
    async with ctx.expect_page() as popup_info:
        await page.get_by_test_id("artifact-link").click()
    full = await popup_info.value
    await full.wait_for_load_state()
    assert full.url == f"{srv.url}/v1/renders/{snap}/artifact"
    assert await full.evaluate("document.contentType") == "image/png"
    await full.close()

    # A running job: its timeline grows live, and the Cancel button stops it.
    held = await api.enqueue("demo.hold")
    await page.goto(f"{srv.url}/ui/jobs/{held}")
    await expect(page.get_by_test_id("job-status")).to_have_text("running", timeout=WAIT_MS)
    await expect(page.get_by_test_id("timeline")).to_contain_text("holding until cancelled")
    await page.get_by_role("button", name="Cancel").click()
    await expect(page.get_by_test_id("job-status")).to_have_text("cancelled", timeout=WAIT_MS)
    await expect(page.get_by_test_id("timeline")).to_contain_text("cancelled")
    await expect(page.get_by_role("button", name="Retry")).to_be_visible()
    await shot(page, tmp_path, "job-cancelled")

    # A task: its stages advance on the page until the last one is done.
    task_id = await api.post("/demo/tasks")
    await page.goto(f"{srv.url}/ui/tasks/{task_id}")
    await expect(page.locator(".step")).to_have_count(4)
    current = page.locator("[aria-current=step]")
    await expect(current).to_contain_text(re.compile("screenshot|build"), timeout=WAIT_MS)
    await expect(page.locator(".step-done").first).to_be_visible()
    await shot(page, tmp_path, "task-running")
    await expect(page.locator(".step-done")).to_have_count(4, timeout=WAIT_MS)
    await expect(page.get_by_test_id("task-events")).to_contain_text("stage finished")
    await expect(current).to_have_count(0)
    await expect(page.locator("#task-actions [data-status]")).to_have_text("succeeded")
    await shot(page, tmp_path, "task")
    await page.goto(f"{srv.url}/ui/tasks")
    await expect(page.get_by_test_id("tasks")).to_contain_text("demo.publish")
    await shot(page, tmp_path, "tasks")

    # The overview: queue depths, loops, and renderers (or "not available").
    await page.goto(f"{srv.url}/")
    await expect(page.get_by_test_id("total-pending")).to_have_text(str(len(parked)))
    await expect(page.get_by_test_id("queues")).to_contain_text("demo")
    await expect(page.get_by_test_id("loops")).to_contain_text("alive")
    await expect(page.get_by_test_id("renderers")).not_to_contain_text("Loading")
    await shot(page, tmp_path, "overview")

    # Signing out ends the session for the API too.
    await page.click("text=Sign out")
    await expect(page).to_have_url(f"{srv.url}/ui/sign-in")
    status = await page.evaluate("fetch('/v1/jobs').then(r => r.status)")
    assert status == 401
    await ctx.close()
    await api.client.aclose()
