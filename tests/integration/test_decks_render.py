"""The deck API with a real supervised renderer: warnings pass, content errors are refused.

One renderer per database, shared by every check in the test, to keep the wall time modest.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import struct
import zipfile

import pikepdf
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.limits import site_zip_limits
from deckyard.decks.validation import deck_check
from deckyard.jobs import Runtime
from deckyard.outputs.images import page_stem
from deckyard.render.control.models import DOCUMENT_PREFIX
from deckyard.render.control.schema import render_requests
from tests.helpers.api import make_token, running_app
from tests.helpers.decks import counts, folder_zip
from tests.helpers.eventually import eventually

pytestmark = [pytest.mark.chromium, pytest.mark.processes]
ZIP = {"content-type": "application/zip"}
THROWS = '<h1>Thanks</h1><script>throw new Error("boom from the page")</script>'


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def pdf_pages(data: bytes) -> int:
    assert data[:5] == b"%PDF-"
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", data))


async def test_renderer_up(db_url: str) -> None:
    async with running_app(db_url, renderers=1) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        deck_id = made.json()["id"]
        base = f"/v1/decks/{deck_id}"

        # a content warning (the example's overflow page) stays passed
        job = await client.post(f"{base}/pages/05-fine-print/validate", headers=alice)
        done = await rt.wait(job.json()["id"], timeout=120)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        validation = done.result["validation"]
        assert validation["status"] == "passed" and validation["success"] is True
        assert validation["stages"]["render"]["status"] == "warning"
        assert any(d["code"] == "RENDER_OVERFLOW" for d in validation["diagnostics"])
        page = (await client.get(f"{base}/pages/05-fine-print", headers=alice)).json()
        assert page["validation"]["status"] == "passed"

        # a content error (a script that throws) is failed and the edit is refused with 422
        before = await counts(app)
        put = await client.put(f"{base}/pages/06-thanks", json={"source": THROWS}, headers=alice)
        assert put.status_code == 422, put.text
        refused = put.json()["error"]["validation"]
        assert refused["status"] == "failed" and refused["success"] is False
        assert refused["stages"]["render"]["status"] == "failed"
        assert any("boom from the page" in d["message"] for d in refused["diagnostics"])
        assert await counts(app) == before
        kept = (await render_request_count(app), len(await rt.list(limit=1000)))
        stored = set(await app.state.render.store.keys())
        checked = await client.post(
            "/v1/validate", json={"kind": "html", "source": THROWS}, headers=alice
        )
        assert checked.status_code == 200
        assert checked.json()["valid"] is False and checked.json()["status"] == "failed"
        fine = await client.post(
            "/v1/validate", json={"kind": "md", "source": "# Fine"}, headers=alice
        )
        assert fine.json()["valid"] is True and fine.json()["status"] == "passed"

        # /v1/validate keeps nothing: no job, no render request (nor its attempts, deleted
        # once it answered), no picture; only its pages, by content key, until the sweep
        async def rows() -> bool:
            return (await render_request_count(app), len(await rt.list(limit=1000))) == kept

        await eventually(rows, what="the validations' render requests deleted")
        new_objects = set(await app.state.render.store.keys()) - stored
        assert all(k.startswith(DOCUMENT_PREFIX) for k in new_objects)

        # a passing edit writes version 2
        put = await client.put(
            f"{base}/pages/06-thanks", json={"source": "<h1>Thank you</h1>"}, headers=alice
        )
        assert put.status_code == 201, put.text
        assert put.json()["version"]["number"] == 2
        assert put.json()["version"]["skipped_visual_verification"] is False

        # a page screenshot (at other settings than the edit's render, which the version keeps):
        # deduped while active, pointer set at the finish
        half = {"scale": 0.5}
        shot = await client.post(f"{base}/pages/06-thanks/screenshot", json=half, headers=alice)
        again = await client.post(f"{base}/pages/06-thanks/screenshot", json=half, headers=alice)
        assert shot.json()["id"] == again.json()["id"]
        done = await rt.wait(shot.json()["id"], timeout=120)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        art = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
        assert png_size(art.content) == (960, 540)
        page = (await client.get(f"{base}/pages/06-thanks", headers=alice)).json()
        assert page["screenshot"]["job_id"] == done.id
        assert page["screenshot"]["sha256"] == done.result["sha256"]
        assert page["screenshot"]["render_id"] == done.result["render_id"]
        # the job's render is a render request of its own (no child job), parented to the job
        assert not await rt.list(kind="screenshot")
        render = (await client.get(f"/v1/renders/{done.result['render_id']}", headers=alice)).json()
        assert render["job_id"] == done.id and render["status"] == "succeeded"
        assert render["result"]["sha256"] == done.result["sha256"]

        # PDF export: one page per slide
        export = await client.post(f"{base}/export", headers=alice)
        done = await rt.wait(export.json()["id"], timeout=180)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        pdf = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
        assert pdf.headers["content-type"] == "application/pdf"
        assert pdf_pages(pdf.content) == 6

        # a tagged PDF on request, navigable like every export
        tagged = await client.post(f"{base}/export", json={"tagged": True}, headers=alice)
        done = await rt.wait(tagged.json()["id"], timeout=180)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert done.result["tagged"] is True
        pdf = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
        with pikepdf.open(io.BytesIO(pdf.content)) as document:
            assert "/StructTreeRoot" in document.Root and "/MarkInfo" in document.Root
            assert str(document.docinfo.Title) == "Orbit 2.0 Launch"
            with document.open_outline() as outline:
                assert len(outline.root) == 6
        refused = await client.post(f"{base}/export", json={"tagged": "x"}, headers=alice)
        assert refused.status_code == 422, refused.text

        # a PPTX of a page per step (this deck has none: a slide per page, each compiled from
        # the deck's source by the export itself)
        stepped = await client.post(
            f"{base}/export?format=pptx", json={"steps": True}, headers=alice
        )
        done = await rt.wait(stepped.json()["id"], timeout=180)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert done.result["page_count"] == 6
        assert [slide["page"] for slide in done.result["pages"]][-1] == "06-thanks"

        # Build: a ZIP that extracts safely and loads in Chromium with zero failed requests
        build = await client.post(f"{base}/build", headers=alice)
        done = await rt.wait(build.json()["id"], timeout=180)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert done.result["browser_check"] == "passed"
        assert done.result["browser"]["failed_requests"] == 0
        site = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
        # the index loads its first page; the other pages are not sent to the browser check
        with zipfile.ZipFile(io.BytesIO(site.content)) as archive:
            entries = len(archive.namelist())
        assert done.result["browser"]["files_served"] == entries - 1 - 5  # the index, 5 pages
        assert site.headers["content-type"] == "application/zip"
        assert verify_site_zip(site.content, site_zip_limits(app.state.settings)).page_count == 6
        # its pages are the stored versions' compiled documents (the deck compiles once)
        with zipfile.ZipFile(io.BytesIO(site.content)) as archive:
            listed = {
                p["name"]: p["sha256"] for p in json.loads(archive.read("manifest.json"))["pages"]
            }
        for name, digest in listed.items():
            page = (await client.get(f"{base}/pages/{name}", headers=alice)).json()
            assert page["compiled_sha256"] == digest, name
        # the site is the `zip` output format: `deck.export`, as `?format=zip` makes it
        assert done.kind == "deck.export" and done.result["format"] == "zip"
        assert done.result["site_version"] == f"{deck_id}.{done.result['deck_version']}"
        again = await client.post(f"{base}/export?format=zip", headers=alice)
        same = await rt.wait(again.json()["id"], timeout=180)
        assert same.status == "succeeded", (same.error_code, same.error_message)
        assert same.result["sha256"] == done.result["sha256"]  # a deterministic ZIP
        no_steps = await client.post(
            f"{base}/export?format=zip", json={"steps": True}, headers=alice
        )
        assert no_steps.status_code == 422, no_steps.text
        assert no_steps.json()["error"]["code"] == "EXPORT_OPTION_UNSUPPORTED"
        # a `deck.build` job an older version queued still makes the site
        legacy = await rt.enqueue(
            "deck.build", {"deck_id": deck_id}, queue="decks", workspace_id=done.workspace_id
        )
        old = await rt.wait(legacy.id, timeout=180)
        assert old.status == "succeeded", (old.error_code, old.error_message)
        assert old.result["format"] == "zip" and old.result["sha256"] == done.result["sha256"]


async def render_request_count(app: FastAPI) -> int:
    """Render requests opened so far (each one a visit to the renderer)."""
    async with app.state.db.read_connection() as conn:
        found = await conn.execute(select(func.count()).select_from(render_requests))
        return int(found.scalar_one())


async def test_a_page_version_is_rendered_once(db_url: str) -> None:
    async with running_app(db_url, renderers=1) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        base = f"/v1/decks/{made.json()['id']}/pages/02-agenda"

        # the render that validates the page is kept as the version's screenshot
        job = await client.post(f"{base}/validate", headers=alice)
        validated = await rt.wait(job.json()["id"], timeout=120)
        assert validated.status == "succeeded", (validated.error_code, validated.error_message)
        pointer = (await client.get(base, headers=alice)).json()["screenshot"]
        assert pointer is not None and pointer["job_id"] == validated.id
        assert (pointer["width"], pointer["height"], pointer["format"]) == (1920, 1080, "png")
        renders = await render_request_count(app)

        # a screenshot at the same settings is that render: no second visit to the renderer
        shot = await client.post(f"{base}/screenshot", headers=alice)
        done = await rt.wait(shot.json()["id"], timeout=120)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert done.result["reused"] is True and done.result["sha256"] == pointer["sha256"]
        # the render reused is the validation's own, opened by the validation job
        kept = (await client.get(f"/v1/renders/{done.result['render_id']}", headers=alice)).json()
        assert kept["job_id"] == validated.id and kept["result"]["sha256"] == pointer["sha256"]
        assert await render_request_count(app) == renders
        art = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
        assert png_size(art.content) == (1920, 1080)

        # other settings are another render
        other = await client.post(f"{base}/screenshot", json={"scale": 0.5}, headers=alice)
        done = await rt.wait(other.json()["id"], timeout=120)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert done.result.get("reused") is None
        assert await render_request_count(app) == renders + 1
        art = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
        assert png_size(art.content) == (960, 540)


async def test_an_edit_keeps_its_render_as_the_new_versions_thumbnail(db_url: str) -> None:
    """The write gate renders the edited page; that render is the version's screenshot, so the
    dashboard shows it at once instead of "no screenshot yet" after every edit."""
    async with running_app(db_url, renderers=1) as (app, client):
        alice = await make_token(app, "alice")
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        deck_id = made.json()["id"]
        base = f"/v1/decks/{deck_id}/pages/02-agenda"
        renders = await render_request_count(app)
        put = await client.put(base, json={"source": "# Agenda, edited\n"}, headers=alice)
        assert put.status_code == 201, put.text
        page = (await client.get(base, headers=alice)).json()
        assert page["number"] == 2 and page["validation"]["status"] == "passed"
        pointer = page["screenshot"]
        assert pointer is not None, "the edit's render was not kept"
        assert (pointer["width"], pointer["height"], pointer["format"]) == (1920, 1080, "png")
        assert await render_request_count(app) == renders + 1

        html = (await client.get(f"/ui/decks/{deck_id}", headers=alice)).text
        card = html.split('data-testid="page-02-agenda"', 1)[1].split("</article>", 1)[0]
        assert "no screenshot yet" not in card
        src = re.search(r'<img src="([^"]+)" alt="Screenshot of 02-agenda"', card)
        assert src is not None, card
        thumb = await client.get(src.group(1).replace("&amp;", "&"), headers=alice)
        assert thumb.status_code == 200 and png_size(thumb.content) == (1920, 1080)

        # a theme edit writes a version of every page, each with the render that checked it
        theme = await client.put(
            f"/v1/decks/{deck_id}/theme", json={"css": "h1 { color: teal; }"}, headers=alice
        )
        assert theme.status_code == 201, theme.text
        deck = (await client.get(f"/v1/decks/{deck_id}", headers=alice)).json()
        for name in [p["page"] for p in deck["pages"]]:
            page = (await client.get(f"/v1/decks/{deck_id}/pages/{name}", headers=alice)).json()
            assert page["screenshot"] is not None, name


async def test_a_deck_validation_reports_each_page_as_page_validate_does(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_app(db_url, renderers=1) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        service = app.state.decks
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        deck_id = made.json()["id"]
        deck = await service.deck("alice", deck_id)
        names = [p.page_name for p in deck.pages]
        one_by_one = {}
        for name in names:
            job = await client.post(f"/v1/decks/{deck_id}/pages/{name}/validate", headers=alice)
            done = await rt.wait(job.json()["id"], timeout=120)
            found = await service.validation_of(done.id)
            one_by_one[name] = found.model_dump(mode="json")
        before = await render_request_count(app)
        job = await service.validate_deck("alice", deck_id)
        done = await rt.wait(job.id, timeout=180)
        # one render request for the whole deck, and each page's verdict is the same as alone
        assert await render_request_count(app) == before + 1
        found = await service.validations_of(done.id)
        assert {k: v.model_dump(mode="json") for k, v in found.items()} == one_by_one
        passed = all(v["status"] == "passed" for v in one_by_one.values())
        assert done.status == ("succeeded" if passed else "failed"), done.error_code
        if not passed:
            return
        # the deck's validation renders are its pages' screenshots: nothing is rendered again
        shots = await service.screenshot_deck("alice", deck_id, {"format": "png"})
        shot = await rt.wait(shots.id, timeout=120)
        assert shot.status == "succeeded", (shot.error_code, shot.error_message)
        assert shot.result["rendered"] == 0 and shot.result["reused"] == len(names)
        assert await render_request_count(app) == before + 1

        # told that the versions' stored compiles are current (as `deckyard render` tells it),
        # the job renders them without compiling the deck again, to the same verdicts
        def compiled_again(*_args: object) -> object:
            raise AssertionError("deck.validate compiled the deck again")

        monkeypatch.setattr(deck_check, "compile_each", compiled_again)
        stored = await service.validate_deck("alice", deck_id, stored=True)
        done = await rt.wait(stored.id, timeout=180)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        found = await service.validations_of(done.id)
        assert {k: v.model_dump(mode="json") for k, v in found.items()} == one_by_one
        # and without that word it compiles the deck from its source
        plain = await service.validate_deck("alice", deck_id)
        done = await rt.wait(plain.id, timeout=180)
        assert done.status == "failed" and "compiled the deck again" in (done.error_message or "")


async def test_pictures_are_an_output_format(db_url: str) -> None:
    """`?format=png|jpeg|webp`: a ZIP of a picture per page. The PNGs are the pictures the
    deck's validation rendered (no render request more); JPEG and WebP are one deck render
    each, in Chromium's encoding, and leave the versions' PNG pointers as they were."""
    async with running_app(db_url, renderers=1) as (app, client):
        alice = await make_token(app, "alice")
        rt: Runtime = app.state.runtime
        made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**alice, **ZIP})
        deck_id = made.json()["id"]
        base = f"/v1/decks/{deck_id}"
        service = app.state.decks
        validated = await rt.wait((await service.validate_deck("alice", deck_id)).id, timeout=180)
        assert validated.status == "succeeded", (validated.error_code, validated.error_message)
        deck = await service.deck("alice", deck_id)
        names = [p.page_name for p in deck.pages]
        pointers = {p.page_name: p.screenshot for p in deck.pages}
        before = await render_request_count(app)

        async def export(fmt: str) -> tuple[dict[str, object], dict[str, bytes]]:
            job = await client.post(f"{base}/export?format={fmt}", headers=alice)
            assert job.status_code == 202, job.text
            done = await rt.wait(job.json()["id"], timeout=180)
            assert done.status == "succeeded", (done.error_code, done.error_message)
            art = await client.get(f"/v1/jobs/{done.id}/artifact", headers=alice)
            assert art.headers["content-type"] == "application/zip"
            with zipfile.ZipFile(io.BytesIO(art.content)) as archive:
                files = {n: archive.read(n) for n in archive.namelist()}
            manifest = json.loads(files.pop("manifest.json"))
            assert manifest["pages"] == done.result["pages"]
            assert done.result["format"] == fmt and done.result["page_count"] == len(names)
            return manifest, files

        manifest, files = await export("png")
        assert await render_request_count(app) == before  # the validation's own pictures
        assert [p["page"] for p in manifest["pages"]] == names
        for index, page in enumerate(manifest["pages"]):
            data = files[page["file"]]
            assert page["file"] == f"{page_stem(index, names[index])}.png"
            assert png_size(data) == (1920, 1080)
            assert hashlib.sha256(data).hexdigest() == pointers[names[index]]["sha256"]

        for fmt, magic, ext in (("jpeg", b"\xff\xd8\xff", "jpg"), ("webp", b"RIFF", "webp")):
            manifest, files = await export(fmt)
            assert await render_request_count(app) == before + 1, fmt  # one deck render
            before += 1
            assert sorted(files) == sorted(p["file"] for p in manifest["pages"])
            assert all(f.endswith(f".{ext}") and files[f].startswith(magic) for f in files)
        after = await service.deck("alice", deck_id)  # a version keeps its PNG
        assert {p.page_name: p.screenshot for p in after.pages} == pointers

        # with steps, the step pages (here one a slide: the deck has no steps) are rendered
        stepped = await client.post(
            f"{base}/export?format=png", json={"steps": True}, headers=alice
        )
        done = await rt.wait(stepped.json()["id"], timeout=180)
        assert done.status == "succeeded", (done.error_code, done.error_message)
        assert [p["page"] for p in done.result["pages"]] == names
        assert await render_request_count(app) == before + 1

        unknown = await client.post(f"{base}/export?format=gif", headers=alice)
        assert unknown.status_code == 422
        assert unknown.json()["error"]["code"] == "EXPORT_FORMAT_UNKNOWN"
        assert "png, jpeg, webp" in unknown.json()["error"]["message"]
