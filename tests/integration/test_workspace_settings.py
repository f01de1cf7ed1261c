"""Issue 29, item 4: whether the server fetches a deck's remote files is a workspace setting
(`fetch_remote`, null following the server's `deck_fetch_remote`), read and changed at
`/v1/workspace/settings`.

Remote files come from a loopback HTTP server this module starts; the SSRF guard lets it
through only because its host:port is in `renderer_url_allow_hosts`.
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from deckyard.api.auth import TokenRole, token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.decks.errors import CompileErrorCode
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import PNG_1PX
from tests.helpers.loopback_http import loopback_server

SETTINGS = "/v1/workspace/settings"
REFUSED = CompileErrorCode.EXTERNAL_REFERENCE.value


class _Pictures(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Pictures.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(PNG_1PX)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def pictures() -> Iterator[str]:
    _Pictures.hits.clear()
    with loopback_server(_Pictures) as host:
        yield host


async def _token(app: FastAPI, workspace: str, role: TokenRole) -> dict[str, str]:
    token = await token_create(app.state.db, workspace, SYSTEM_CLOCK.now(), role=role)
    return {"authorization": f"Bearer {token}"}


def _page(host: str, name: str) -> bytes:
    return f"# Remote\n\n![logo](http://{host}/{name})\n".encode()


async def _validate(
    client: httpx.AsyncClient, headers: dict[str, str], host: str, name: str
) -> dict[str, str]:
    """Validate a one-file Markdown deck showing `http://host/name`: its diagnostics by code.

    No renderer runs here: a deck that compiles answers 503 (its render check could not run),
    one whose reference was refused answers 200 with the compile error."""
    r = await client.post(
        "/v1/validate",
        headers={**headers, "content-type": "text/markdown"},
        content=_page(host, name),
    )
    assert r.status_code in (200, 503), r.text
    out: dict[str, Any] = r.json()
    return {d["code"]: d["message"] for d in out["result"]["diagnostics"]}


async def test_an_admin_changes_the_settings_and_any_person_reads_them(db_url: str) -> None:
    async with running_app(db_url, deck_fetch_remote=False) as (app, client):
        admin = await make_token(app, "acme")
        viewer = await _token(app, "acme", TokenRole.VIEWER)
        r = await client.get(SETTINGS, headers=viewer)
        assert r.status_code == 200, r.text
        assert r.json() == {"fetch_remote": None, "effective": {"fetch_remote": False}}

        r = await client.patch(SETTINGS, headers=admin, json={"fetch_remote": True})
        assert r.status_code == 200, r.text
        assert r.json() == {"fetch_remote": True, "effective": {"fetch_remote": True}}
        assert (await client.get(SETTINGS, headers=viewer)).json()["fetch_remote"] is True
        # another workspace is untouched
        other = await make_token(app, "globex")
        assert (await client.get(SETTINGS, headers=other)).json()["fetch_remote"] is None

        # a merge patch: an empty body keeps the setting, a null unsets it
        r = await client.patch(SETTINGS, headers=admin, json={})
        assert r.json()["fetch_remote"] is True
        r = await client.patch(
            SETTINGS,
            headers={**admin, "content-type": "application/merge-patch+json"},
            content=b'{"fetch_remote": null}',
        )
        assert r.status_code == 200, r.text
        assert r.json() == {"fetch_remote": None, "effective": {"fetch_remote": False}}
        assert (await client.get(SETTINGS, headers=viewer)).json()["fetch_remote"] is None


async def test_only_an_admin_changes_them_and_a_bad_body_is_refused(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        admin = await make_token(app, "acme")
        for role in (TokenRole.EDITOR, TokenRole.VIEWER, TokenRole.WORKER):
            r = await client.patch(
                SETTINGS, headers=await _token(app, "acme", role), json={"fetch_remote": False}
            )
            assert r.status_code == 403, (role, r.text)
            assert r.json()["error"]["code"] == "ROLE_FORBIDDEN"
        for body, field in (
            ({"fetch_remote": False, "fetch_everything": True}, "fetch_everything"),
            ({"fetch_remote": "no"}, "fetch_remote"),
            ({"fetch_remote": 0}, "fetch_remote"),
        ):
            r = await client.patch(SETTINGS, headers=admin, json=body)
            assert r.status_code == 422, (body, r.text)
            error = r.json()["error"]
            assert (error["code"], error["field"]) == ("INVALID_INPUT", field)
        r = await client.patch(SETTINGS, headers=admin, json=[{"fetch_remote": False}])
        assert r.status_code == 422
        assert r.json()["error"]["code"] == "INVALID_INPUT"
        # nothing refused was stored
        r = await client.get(SETTINGS, headers=admin)
        assert r.json() == {"fetch_remote": None, "effective": {"fetch_remote": True}}


async def test_validate_fetches_remote_files_as_each_workspace_says(
    db_url: str, pictures: str
) -> None:
    async with running_app(db_url, renderer_url_allow_hosts=[pictures]) as (app, client):
        off = await make_token(app, "offline-co")
        on = await make_token(app, "default-co")
        r = await client.patch(SETTINGS, headers=off, json={"fetch_remote": False})
        assert r.json()["effective"] == {"fetch_remote": False}

        refused = await _validate(client, off, pictures, "off.png")
        assert "the workspace's fetch_remote setting" in refused[REFUSED]
        assert _Pictures.hits == []
        assert REFUSED not in await _validate(client, on, pictures, "on.png")
        assert _Pictures.hits == ["/on.png"]

        # an upload follows the same setting
        for headers, name, problems in ((off, "up-off.png", [REFUSED]), (on, "up-on.png", [])):
            r = await client.post(
                "/v1/decks/markdown",
                headers={**headers, "content-type": "text/markdown"},
                content=_page(pictures, name),
            )
            assert r.status_code == 201, r.text
            assert [p["code"] for p in r.json()["problems"]] == problems
        assert _Pictures.hits == ["/on.png", "/up-on.png"]


async def test_a_workspace_that_fetches_overrides_the_server_that_does_not(
    db_url: str, pictures: str
) -> None:
    async with running_app(
        db_url, deck_fetch_remote=False, renderer_url_allow_hosts=[pictures]
    ) as (app, client):
        fetching = await make_token(app, "fetching-co")
        plain = await make_token(app, "plain-co")
        r = await client.patch(SETTINGS, headers=fetching, json={"fetch_remote": True})
        assert r.json()["effective"] == {"fetch_remote": True}

        assert REFUSED in await _validate(client, plain, pictures, "plain.png")
        assert _Pictures.hits == []
        assert REFUSED not in await _validate(client, fetching, pictures, "fetching.png")
        assert _Pictures.hits == ["/fetching.png"]
