"""`POST /v1/decks/{id}/export?format=`: the registered formats, and refusals in the error shape.

No renderer runs here: a PPTX export job is accepted and then fails as unavailable (rule Q0),
never with a file.
"""

from __future__ import annotations

from deckyard.jobs import Runtime
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import folder_zip

ZIP = {"content-type": "application/zip"}


async def test_export_takes_pptx_refuses_unknown_formats_and_pdf_only_option(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        deck_id = made.json()["id"]
        base = f"/v1/decks/{deck_id}/export"

        unknown = await client.post(f"{base}?format=docx", headers=alice)
        assert unknown.status_code == 422, unknown.text
        error = unknown.json()["error"]
        assert error["code"] == "EXPORT_FORMAT_UNKNOWN" and error["field"] == "format"
        assert "pdf, pptx" in error["message"]

        tagged = await client.post(f"{base}?format=pptx", json={"tagged": True}, headers=alice)
        assert tagged.status_code == 422, tagged.text
        assert tagged.json()["error"]["code"] == "EXPORT_OPTION_UNSUPPORTED"

        # a slide per step is a PPTX option too
        job = await client.post(f"{base}?format=pptx", json={"steps": True}, headers=alice)
        assert job.status_code == 202, job.text
        rt: Runtime = app.state.runtime
        done = await rt.wait(job.json()["id"], timeout=30)
        assert done.payload["format"] == "pptx" and done.payload["steps"] is True
        assert done.status == "failed" and done.error_code == "RENDER_SERVICE_UNAVAILABLE"
        artifact = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
        assert artifact.status_code == 404
