"""The dashboard's render pages (`/ui/renders`, `/ui/renders/{id}`), in process on both
databases. No renderer runs, so screenshots stay queued until cancelled; the picture of a
succeeded render is checked in a real browser by `tests/e2e/test_dashboard.py`."""

from __future__ import annotations

from deckyard.api.auth import SESSION_COOKIE
from tests.helpers.api import make_token, running_app

BODY = {"html": "<h1>hi</h1>", "width": 320, "height": 200}


async def test_render_pages_list_show_and_act_on_the_workspaces_renders(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        queued = (await client.post("/v1/screenshots", json=BODY, headers=alice)).json()["id"]
        other = {**BODY, "html": "<h1>other</h1>"}
        cancelled = (await client.post("/v1/screenshots", json=other, headers=alice)).json()["id"]
        await client.post(f"/v1/renders/{cancelled}/cancel", headers=alice)
        bobs = (await client.post("/v1/screenshots", json=BODY, headers=bob)).json()["id"]
        client.cookies.set(SESSION_COOKIE, alice["authorization"].split()[1])

        listed = await client.get("/ui/renders")
        assert listed.status_code == 200
        assert (
            f'id="render-{queued}" data-render-id="{queued}" data-status="pending"' in listed.text
        )
        assert f'data-render-id="{cancelled}" data-status="cancelled"' in listed.text
        assert f'id="render-{bobs}"' not in listed.text
        assert 'data-refresh="1"' in listed.text  # one is active: the table refreshes itself
        assert 'href="/ui/renders" aria-current="page"' in listed.text

        page = await client.get(f"/ui/renders/{queued}")
        assert page.status_code == 200
        assert 'data-testid="render-status">pending<' in page.text
        assert f'data-action="/v1/renders/{queued}/cancel"' in page.text
        assert "Retry" not in page.text
        page = await client.get(f"/ui/renders/{cancelled}")
        assert 'data-testid="render-status">cancelled<' in page.text
        assert f'data-action="/v1/renders/{cancelled}/retry"' in page.text
        assert 'data-refresh="1"' not in page.text  # ended: nothing to follow
        for missing in (bobs, 999999):
            gone = await client.get(f"/ui/renders/{missing}")
            assert gone.status_code == 404
            assert f"There is no render #{missing}" in gone.text

        await client.post(f"/v1/renders/{queued}/cancel", headers=alice)
        listed = await client.get("/ui/renders")
        assert 'data-refresh="1"' not in listed.text
