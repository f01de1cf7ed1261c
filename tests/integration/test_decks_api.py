"""The deck API without a renderer: Q0 (unavailable is never passed), isolation, bad input.

No renderer runs here (`renderers=0`, no renderer URLs), which is exactly the situation rule
Q0 is about: validation must say `unavailable`, the write gate must refuse, and the external
validate API must answer `valid=false` with 503.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import httpx

from deckyard.decks.validation.rules import is_validation_passed
from deckyard.jobs import Runtime
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import MANIFEST, counts, folder_zip, json_deck, make_zip
from tests.helpers.eventually import eventually
from tests.helpers.reveal import reveal_deck

INFRA = {"RENDER_SERVICE_UNAVAILABLE", "RENDER_RESULT_LOST", "RENDER_DEADLINE_EXCEEDED"}
ZIP = {"content-type": "application/zip"}


async def test_q0_renderer_unavailable(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        assert made.status_code == 201, made.text
        deck = made.json()
        assert len(deck["pages"]) == 6 and deck["pages"][0]["page"] == "01-cover"
        assert deck["problems"] == []
        deck_id = deck["id"]
        before = await counts(app)

        # the page.validate job: unavailable, not passed, never "passed" in the summary
        job = await client.post(f"/v1/decks/{deck_id}/pages/02-agenda/validate", headers=alice)
        assert job.status_code == 202
        rt: Runtime = app.state.runtime
        done = await rt.wait(job.json()["id"], timeout=30)
        assert done.status == "failed"
        assert done.error_code == "RENDER_SERVICE_UNAVAILABLE"
        validation = await app.state.decks.validation_of(done.id)
        assert validation is not None
        assert validation.status == "unavailable"
        assert validation.success is not True
        assert validation.retryable is True
        assert validation.stages.render.status == "unavailable"
        assert "passed" not in validation.summary.lower()
        assert not is_validation_passed(validation)

        # the write gate refuses with 503 and writes nothing
        edit = {"source": "# Agenda\n\nNew text\n"}
        put = await client.put(f"/v1/decks/{deck_id}/pages/02-agenda", json=edit, headers=alice)
        assert put.status_code == 503, put.text
        err = put.json()["error"]
        assert err["code"] in INFRA
        assert err["validation"]["status"] == "unavailable"
        assert err["validation"]["success"] is False
        assert await counts(app) == before
        versions = await client.get(f"/v1/decks/{deck_id}/pages/02-agenda/versions", headers=alice)
        assert [v["number"] for v in versions.json()] == [1]

        # the external validate API: valid=false, infrastructure code, 503
        for body, headers in (
            ({"json": {"kind": "md", "source": "# Hi"}}, alice),
            ({"content": folder_zip()}, {**alice, **ZIP}),
        ):
            r = await client.post("/v1/validate", headers=headers, **body)
            assert r.status_code == 503, r.text
            out = r.json()
            assert out["valid"] is False
            assert out["status"] == "unavailable"
            assert out["error_code"] in INFRA
            assert out["error"]["code"] in INFRA
            assert "passed" not in out["summary"].lower()
        assert await counts(app) == before

        # skip_visual_verification writes, and says so in the version and in the job's events
        skip = {**edit, "skip_visual_verification": True}
        put = await client.put(f"/v1/decks/{deck_id}/pages/02-agenda", json=skip, headers=alice)
        assert put.status_code == 201, put.text
        version = put.json()["version"]
        assert version["number"] == 2
        assert version["skipped_visual_verification"] is True
        assert version["validation"]["status"] == "unverified"
        assert version["validation"]["stages"]["render"]["status"] == "skipped"
        types = [e.type async for e in rt.events(put.json()["job_id"], follow=False)]
        assert "skipped_visual_verification" in types
        page = await client.get(f"/v1/decks/{deck_id}/pages/02-agenda", headers=alice)
        assert page.json()["source"] == edit["source"]
        assert (await client.get(f"/v1/decks/{deck_id}", headers=alice)).json()["version"] == 2

        # a compile error is refused as content (422) even when skipping the render check
        broken = {"source": '<img src="assets/nope.png">', "skip_visual_verification": True}
        put = await client.put(f"/v1/decks/{deck_id}/pages/01-cover", json=broken, headers=alice)
        assert put.status_code == 422, put.text
        problem = put.json()["error"]["validation"]["diagnostics"][0]
        assert problem["page"] == "01-cover" and problem["reference"] == "assets/nope.png"
        assert problem["line"] == 1


async def task_end(client: httpx.AsyncClient, headers: dict[str, str], task_id: int) -> Any:
    """The task once it has ended."""
    seen: dict[str, Any] = {}

    async def ended() -> bool:
        seen.update((await client.get(f"/v1/tasks/{task_id}", headers=headers)).json())
        return seen["status"] in ("succeeded", "failed", "cancelled")

    await eventually(ended, timeout=60, every=0.1)
    return seen


async def test_build_export_and_publish_say_unavailable_without_a_renderer(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        deck_id = made.json()["id"]
        rt: Runtime = app.state.runtime
        build = await client.post(f"/v1/decks/{deck_id}/build", headers=alice)
        assert build.status_code == 202
        done = await rt.wait(build.json()["id"], timeout=30)
        # The site is checked by loading it in Chromium: no renderer, no claim that it works.
        assert done.status == "failed" and done.error_code == "RENDER_SERVICE_UNAVAILABLE"
        assert (await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)).status_code == 404
        assert (await client.get(f"/v1/jobs/{done.id}/artifact", headers=bob)).status_code == 404
        export = await client.post(f"/v1/decks/{deck_id}/export", headers=alice)
        failed = await rt.wait(export.json()["id"], timeout=30)
        assert failed.status == "failed" and failed.error_code == "RENDER_SERVICE_UNAVAILABLE"
        publish = await client.post(f"/v1/decks/{deck_id}/publish", headers=alice)
        assert publish.status_code == 202
        task_id = publish.json()["task_id"]
        task = await task_end(client, alice, task_id)
        assert task["status"] == "failed", task
        assert task["error_code"] == "RENDER_SERVICE_UNAVAILABLE"


async def test_workspace_isolation_and_token(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        bob = await make_token(app, "bob")
        made = await client.post("/v1/decks", json=json_deck(), headers=alice)
        assert made.status_code == 201, made.text
        deck_id = made.json()["id"]
        base = f"/v1/decks/{deck_id}"
        page = f"{base}/pages/01-hello"
        calls = [
            ("GET", base, None),
            ("GET", page, None),
            ("GET", f"{page}/versions", None),
            ("PUT", page, {"source": "# x", "skip_visual_verification": True}),
            ("POST", f"{page}/validate", None),
            ("POST", f"{page}/screenshot", None),
            ("POST", f"{base}/build", None),
            ("POST", f"{base}/export", None),
            ("POST", f"{base}/publish", None),
        ]
        before = await counts(app)
        for method, url, body in calls:
            r = await client.request(method, url, json=body, headers=bob)
            assert r.status_code == 404, (method, url, r.text)
            assert r.json()["error"]["code"] == "NOT_FOUND"
            r = await client.request(method, url, json=body)
            assert r.status_code == 401, (method, url, r.text)
        assert await counts(app) == before
        assert (await client.get("/v1/decks", headers=bob)).json() == []
        assert [d["id"] for d in (await client.get("/v1/decks", headers=alice)).json()] == [deck_id]
        for url in ("/v1/decks", "/v1/validate"):
            assert (await client.post(url, json=json_deck())).status_code == 401
        missing = await client.get(f"{base}/pages/nope", headers=alice)
        assert missing.status_code == 404


async def test_idempotent_deck_create(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        key = {**alice, "idempotency-key": "deck-1"}
        first = await client.post("/v1/decks", json=json_deck(), headers=key)
        again = await client.post("/v1/decks", json=json_deck(), headers=key)
        assert first.status_code == again.status_code == 201
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.json()["id"] == first.json()["id"]
        other = await client.post("/v1/decks", json=json_deck("# Other"), headers=key)
        assert other.status_code == 422, other.text
        assert (await counts(app))[0] == 1


def _bomb() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("deck.toml", MANIFEST)
        archive.writestr("pages/01.md", b"# x")
        archive.writestr("assets/bomb.bin", b"\0" * (8 * 1024 * 1024))
    return out.getvalue()


async def test_bad_input_is_refused_and_nothing_is_stored(db_url: str) -> None:
    limits = {
        "deck_max_uncompressed_bytes": 4 * 1024 * 1024,
        "deck_max_zip_entries": 10,
        "deck_max_body_bytes": 1024 * 1024,
    }
    async with running_app(db_url, **limits) as (app, client):
        alice = await make_token(app, "alice")
        page = {"pages/01.md": b"# x"}
        zips = {
            "escape": (make_zip({"deck.toml": MANIFEST, **page, "../evil.txt": b"x"}), 422),
            "absolute": (make_zip({"deck.toml": MANIFEST, **page, "/etc/evil": b"x"}), 422),
            "symlink": (
                make_zip(
                    {"deck.toml": MANIFEST, **page, "assets/l": b"/etc/passwd"}, symlink="assets/l"
                ),
                422,
            ),
            "bomb": (_bomb(), 413),
            "entries": (
                make_zip(
                    {"deck.toml": MANIFEST, **{f"pages/{i:02}.md": b"# x" for i in range(12)}}
                ),
                422,
            ),
            "no manifest": (make_zip(page), 422),
            "not a zip": (b"hello", 422),
            "body too large": (b"PK" + b"\0" * (1024 * 1024 + 10), 413),
        }
        codes: dict[str, str] = {}
        for name, (data, status) in zips.items():
            r = await client.post("/v1/decks/zip", content=data, headers={**alice, **ZIP})
            assert r.status_code == status, (name, r.text)
            codes[name] = r.json()["error"]["code"]
        assert codes["escape"] == "DECK_PATH_ESCAPE"
        assert codes["absolute"] == "DECK_ABSOLUTE_PATH"
        assert codes["symlink"] == "DECK_SYMLINK"
        assert codes["entries"] == "DECK_TOO_MANY_FILES"
        assert codes["no manifest"] == "DECK_MANIFEST_MISSING"
        missing = await client.post(
            "/v1/decks/zip", content=make_zip(page), headers={**alice, **ZIP}
        )
        assert missing.json()["error"]["field"] == "deck.toml"
        bad_json = [
            ({**json_deck(), "colour": "red"}, "colour"),
            ({**json_deck(), "manifest": {"title": 3}}, "manifest.title"),
            (
                {**json_deck(), "manifest": {"title": "x", "slide": {"width": "1920"}}},
                "manifest.slide.width",
            ),
        ]
        for body, field in bad_json:
            r = await client.post("/v1/decks", json=body, headers=alice)
            assert r.status_code == 422, r.text
            assert r.json()["error"]["field"] == field, r.json()
        bad_edit = await client.post("/v1/validate", json={"kind": "md", "src": "x"}, headers=alice)
        assert bad_edit.status_code == 422
        assert await counts(app) == (0, 0, 0, 0)


MARKDOWN_DECK = """---
lang: en
paginate: true
---

# Title

<!-- Say hello first. -->

---

## Second

<Tweet id="1" />

---

## Third

Note:
reveal.js style note
"""


async def test_a_one_file_markdown_deck_is_a_deck_of_its_slides(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        headers = {**alice, "content-type": "text/markdown"}
        made = await client.post(
            "/v1/decks/markdown?filename=talk.md", content=MARKDOWN_DECK, headers=headers
        )
        assert made.status_code == 201, made.text
        deck = made.json()
        assert [p["page"] for p in deck["pages"]] == ["slide-01", "slide-02", "slide-03"]
        assert deck["title"] == "Title" and deck["problems"] == []
        assert deck["warnings"] == [
            {
                "file": "talk.md",
                "line": 14,
                "slide": 2,
                "message": "the Vue component <Tweet> is not rendered; only its text shows",
            }
        ]
        first = await client.get(f"/v1/decks/{deck['id']}/pages/slide-01", headers=alice)
        assert first.json()["notes"] == ["Say hello first."]
        third = await client.get(f"/v1/decks/{deck['id']}/pages/slide-03", headers=alice)
        assert third.json()["notes"] == ["reveal.js style note"]

        checked = await client.post("/v1/validate", content=MARKDOWN_DECK, headers=headers)
        assert checked.status_code == 503
        body = checked.json()
        assert body["valid"] is False and sorted(body["pages"]) == [
            "slide-01",
            "slide-02",
            "slide-03",
        ]
        assert body["warnings"][0]["slide"] == 2

        bad = await client.post(
            "/v1/decks/markdown", content="---\ntitle: [x\n---\n# A\n", headers=headers
        )
        assert bad.status_code == 422
        assert "front matter" in bad.json()["error"]["message"]


async def test_a_reveal_js_slides_notes_are_in_its_page_output(db_url: str, tmp_path: Path) -> None:
    folder = reveal_deck(tmp_path / "talk")
    entries = {
        str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()
    }
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post(
            "/v1/decks/zip", content=make_zip(entries), headers={**alice, **ZIP}
        )
        assert made.status_code == 201, made.text
        deck = made.json()
        notes = []
        for page in deck["pages"]:
            got = await client.get(f"/v1/decks/{deck['id']}/pages/{page['page']}", headers=alice)
            assert got.status_code == 200, got.text
            notes.append(got.json()["notes"])
        assert notes == [[], [], [], ["A speaker note"]]


MARP_DECK = """---
marp: true
theme: gaia
---

# Title

<!-- Say hello first. -->

---

## Second
"""


async def test_a_marp_deck_uploaded_is_rendered_by_marps_engine(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        headers = {**alice, "content-type": "text/markdown"}
        made = await client.post(
            "/v1/decks/markdown?filename=talk.md", content=MARP_DECK, headers=headers
        )
        assert made.status_code == 201, made.text
        deck = made.json()
        assert [p["page"] for p in deck["pages"]] == ["slide-01", "slide-02"]
        assert deck["slide"] == {"width": 1280, "height": 720} and deck["problems"] == []
        first = await client.get(f"/v1/decks/{deck['id']}/pages/slide-01", headers=alice)
        assert first.json()["kind"] == "html" and 'data-theme="gaia"' in first.json()["source"]
        assert first.json()["notes"] == ["Say hello first."]
