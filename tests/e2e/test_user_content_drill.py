"""Drill, in a real Chromium against `deckyard serve`: an editor's SVG cannot mint an admin token.

Issue 30, item 1. The editor uploads an SVG whose `<script>` posts to `/v1/tokens` with a
synchronous XHR (so it has finished by the page's `load`), with the header the dashboard's old
CSRF rule trusted. A signed-in admin follows the sign-in link that names the SVG, then opens the
SVG itself. No token is minted: sign-in lands on the dashboard, the SVG is sandboxed so its
script never runs, and even a same-origin script (the SVG served without its policy, as the
browser's request interception lets the test do) is refused without the session's CSRF token.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Route, async_playwright, expect

from tests.e2e.conftest import DECKYARD, Server, clean_env
from tests.helpers.decks import MANIFEST, make_zip

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
EVIL_SVG = b"""<svg xmlns="http://www.w3.org/2000/svg" width="200" height="50">
<title>untouched</title><text x="5" y="30">logo</text><script>
var x = new XMLHttpRequest();
x.open("POST", "/v1/tokens", false);
x.setRequestHeader("content-type", "application/json");
x.setRequestHeader("x-deckyard-ui", "1");
x.send('{"role": "admin", "label": "stolen"}');
document.title = "status " + x.status;
</script></svg>"""


def token(env: dict[str, str], role: str) -> str:
    return subprocess.run(
        [*DECKYARD, "token", "create", "--workspace", "acme", "--role", role],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()


async def test_an_editors_svg_cannot_mint_a_token_for_a_signed_in_admin(
    browser: Browser, tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(tmp_path)
    admin, editor = token(env, "admin"), token(env, "editor")
    srv = Server(["--renderers", "0"], env, tmp_path)
    servers.append(srv)
    srv.wait_ready()
    async with httpx.AsyncClient(base_url=srv.url, timeout=30) as api:
        files = {
            "deck.toml": MANIFEST,
            "pages/01-cover.md": b"# Cover\n",
            "assets/evil.svg": EVIL_SVG,
        }
        made = await api.post(
            "/v1/decks/zip",
            content=make_zip(files),
            headers={"content-type": "application/zip", "authorization": f"Bearer {editor}"},
        )
        assert made.status_code == 201, made.text
        svg_path = f"/v1/decks/{made.json()['id']}/assets/evil.svg"

        async def labels() -> list[str | None]:
            listed = await api.get("/v1/tokens", headers={"authorization": f"Bearer {admin}"})
            assert listed.status_code == 200
            return [t["label"] for t in listed.json()]

        before = await labels()

        ctx = await browser.new_context()
        page = await ctx.new_page()
        # The link an attacker sends: sign in, then "come back" to the SVG.
        await page.goto(f"{srv.url}/ui/sign-in?next={svg_path}")
        await page.fill("#token", admin)
        await page.click("button[type=submit]")
        await expect(page).to_have_url(f"{srv.url}/")
        assert await labels() == before

        # The admin opens the SVG itself: shown, sandboxed, its script never runs.
        opened = await page.goto(f"{srv.url}{svg_path}")
        assert opened is not None and opened.status == 200
        assert opened.headers["content-security-policy"] == "sandbox; default-src 'none'"
        assert await labels() == before

        # Second line of defence: the same script on this origin, unsandboxed, is refused.
        async def without_policy(route: Route) -> None:
            response = await route.fetch()
            headers = {k: v for k, v in response.headers.items() if k != "content-security-policy"}
            await route.fulfill(response=response, headers=headers)

        await page.route(f"{srv.url}{svg_path}", without_policy)
        await page.goto(f"{srv.url}{svg_path}")
        assert await page.title() == "status 403"
        assert await labels() == before
        assert "stolen" not in [label for label in await labels()]
        await ctx.close()
