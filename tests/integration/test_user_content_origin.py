"""User content never runs on the API's origin, and the dashboard's session resists forgery.

Issue 30, item 1: an editor's SVG asset with a `<script>`, opened by a signed-in admin, minted an
admin token. The browser drill is `tests/e2e/test_user_content_drill.py`; here are the headers,
the CSRF rule and the sign-in redirect, on both databases.
"""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from deckyard.api.auth import SESSION_COOKIE, TokenRole, token_create
from deckyard.clock import SYSTEM_CLOCK
from tests.helpers.api import running_app
from tests.helpers.decks import MANIFEST, make_zip

ZIP = {"content-type": "application/zip"}
PAGE = {"pages/01-cover.md": b"# Cover\n"}
EVIL_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>'
    b'fetch("/v1/tokens",{method:"POST",body:\'{"role":"admin"}\'})</script></svg>'
)
SANDBOX = "sandbox; default-src 'none'"


async def token_of(app: FastAPI, role: TokenRole) -> str:
    return await token_create(app.state.db, "acme", SYSTEM_CLOCK.now(), role=role)


async def deck_with_assets(client: httpx.AsyncClient, editor: str) -> int:
    files = {"deck.toml": MANIFEST, **PAGE, "assets/evil.svg": EVIL_SVG}
    files["assets/app.js"] = b"document.title = 'ran';\n"
    made = await client.post(
        "/v1/decks/zip",
        content=make_zip(files),
        headers={**ZIP, "authorization": f"Bearer {editor}"},
    )
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


async def test_assets_are_served_sandboxed_and_scripts_as_downloads(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        editor = await token_of(app, TokenRole.EDITOR)
        deck_id = await deck_with_assets(client, editor)
        auth = {"authorization": f"Bearer {editor}"}

        svg = await client.get(f"/v1/decks/{deck_id}/assets/evil.svg", headers=auth)
        assert svg.status_code == 200
        assert svg.headers["content-type"].startswith("image/svg+xml")
        assert svg.headers["content-security-policy"] == SANDBOX
        assert svg.headers["x-content-type-options"] == "nosniff"
        assert "content-disposition" not in svg.headers  # an image: shown, never run

        js = await client.get(f"/v1/decks/{deck_id}/assets/app.js", headers=auth)
        assert js.status_code == 200
        assert js.headers["content-security-policy"] == SANDBOX
        assert js.headers["content-disposition"].startswith("attachment")
        assert 'filename="app.js"' in js.headers["content-disposition"]

        # JSON answers and errors are sandboxed too; the dashboard's pages are not.
        listed = await client.get("/v1/decks", headers=auth)
        assert listed.headers["content-security-policy"] == SANDBOX
        assert "content-disposition" not in listed.headers
        missing = await client.get(f"/v1/decks/{deck_id}/assets/nope.svg", headers=auth)
        assert missing.status_code == 404
        assert missing.headers["content-security-policy"] == SANDBOX
        sign_in = await client.get("/ui/sign-in")
        assert "content-security-policy" not in sign_in.headers
        assert sign_in.headers["x-content-type-options"] == "nosniff"


async def sign_in(client: httpx.AsyncClient, token: str, next_path: str) -> httpx.Response:
    return await client.post(
        "/ui/session",
        content=httpx.QueryParams({"token": token, "next": next_path}).__str__(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )


async def test_sign_in_goes_only_to_dashboard_pages(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        admin = await token_of(app, TokenRole.ADMIN)
        cases = {
            "/ui/jobs?status=failed": "/ui/jobs?status=failed",
            "/": "/",
            "/v1/decks/1/assets/evil.svg": "/",
            "/ui/../v1/decks/1/assets/evil.svg": "/",
            "/sites/acme/1/": "/",
            "//evil.example/ui/": "/",
            "https://evil.example/ui/": "/",
            "/\\evil.example": "/",
        }
        for asked, expected in cases.items():
            resp = await sign_in(client, admin, asked)
            assert resp.status_code == 303, asked
            assert resp.headers["location"] == expected, asked
        form = await client.get("/ui/sign-in", params={"next": "/v1/decks/1/assets/evil.svg"})
        assert 'value="/"' in form.text
        assert "evil.svg" not in form.text


async def test_cookie_writes_need_the_sessions_csrf_token_and_this_origin(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        admin = await token_of(app, TokenRole.ADMIN)
        client.cookies.set(SESSION_COOKIE, admin)
        page = await client.get("/ui/jobs")
        assert page.status_code == 200
        found = re.search(r'<meta name="deckyard-csrf" content="([0-9a-f]{64})">', page.text)
        assert found is not None, "every dashboard page carries the session's CSRF token"
        csrf = found.group(1)
        body = '{"role": "admin", "label": "minted"}'
        json_type = {"content-type": "application/json"}
        host = "deckyard.test"

        # What a same-origin script could always add is no longer enough.
        forged = [
            {"x-deckyard-ui": "1"},
            {"x-deckyard-csrf": "0" * 64},
            {"x-deckyard-csrf": csrf, "origin": "null"},  # a sandboxed document
            {"x-deckyard-csrf": csrf, "origin": "https://evil.example"},
            {"x-deckyard-csrf": csrf, "sec-fetch-site": "cross-site"},
        ]
        for headers in forged:
            refused = await client.post(
                "/v1/tokens", content=body, headers={**json_type, **headers}
            )
            assert refused.status_code == 403, headers
            assert refused.json()["error"]["code"] in {"CSRF_TOKEN_REQUIRED", "CROSS_SITE"}
        listed = await client.get("/v1/tokens")
        assert [t["label"] for t in listed.json()].count("minted") == 0

        accepted = await client.post(
            "/v1/tokens",
            content=body,
            headers={
                **json_type,
                "x-deckyard-csrf": csrf,
                "origin": f"http://{host}",
                "sec-fetch-site": "same-origin",
            },
        )
        assert accepted.status_code == 201, accepted.text

        # Another session's token is not this session's.
        other = await token_of(app, TokenRole.ADMIN)
        client.cookies.set(SESSION_COOKIE, other)
        stolen = await client.post(
            "/v1/tokens", content=body, headers={**json_type, "x-deckyard-csrf": csrf}
        )
        assert stolen.status_code == 403
