"""Content errors in a deck's theme, fonts and page set, through the HTTP API (no renderer).

A theme that does not parse and a font whose file is deleted are problems of the deck's
content: named with their file and line, refused at the write gate with 422, never a crash
answered 500 or a 503 that asks to retry. The manifest's `pages` follows the pages, and a page
version's id is never handed out again after its page is deleted.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from deckyard.decks.store_assets import deck_asset_delete
from deckyard.decks.validation.page_check import PageValidator
from tests.helpers.api import ROOMY_LEASE, make_token, running_app
from tests.helpers.decks import counts, folder_zip, make_zip

ZIP = {"content-type": "application/zip"}
FONT = "assets/fonts/NotoSerifDisplay-Italic.ttf"
SKIP = {"skip_visual_verification": True}


async def _example_deck(client: httpx.AsyncClient, headers: dict[str, str]) -> int:
    made = await client.post("/v1/decks/zip", content=folder_zip(), headers={**headers, **ZIP})
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


def _diagnostics(pages: dict[str, Any]) -> set[tuple[str, str, int | None]]:
    return {
        (d["code"], d["page"], d["line"])
        for result in pages.values()
        for d in result["diagnostics"]
    }


async def test_a_theme_that_does_not_parse_is_a_content_error_naming_file_and_line(
    db_url: str,
) -> None:
    async with running_app(db_url, **ROOMY_LEASE) as (app, client):
        alice = await make_token(app, "alice")
        stray = {"code": "COMPILE_CSS_SYNTAX", "page": "assets/theme.css", "line": 1}

        body = {
            "manifest": {"title": "T", "theme": "assets/theme.css"},
            "pages": [{"name": "01-a", "kind": "md", "text": "# A"}],
            "assets": [{"path": "assets/theme.css", "data_base64": "fQ=="}],
        }
        made = await client.post("/v1/decks", json=body, headers=alice)
        assert made.status_code == 201, made.text
        problems = made.json()["problems"]
        assert [{k: p[k] for k in stray} for p in problems] == [stray]
        assert made.json()["pages"][0]["compiled"] is False

        theme = b"h1 { color: red }\n}\n"
        deck_zip = make_zip(
            {
                "deck.toml": b'title = "T"\ntheme = "theme.css"\n',
                "theme.css": theme,
                "pages/01-a.md": b"# A",
            }
        )
        made = await client.post("/v1/decks/zip", content=deck_zip, headers={**alice, **ZIP})
        assert made.status_code == 201, made.text
        assert [(p["code"], p["page"], p["line"]) for p in made.json()["problems"]] == [
            ("COMPILE_CSS_SYNTAX", "theme.css", 2)
        ]

        checked = await client.post("/v1/validate", content=deck_zip, headers={**alice, **ZIP})
        assert checked.status_code == 200, checked.text
        assert checked.json()["valid"] is False
        assert checked.json()["status"] == "failed"
        assert _diagnostics(checked.json()["pages"]) == {("COMPILE_CSS_SYNTAX", "theme.css", 2)}

        deck_id = await _example_deck(client, alice)
        before = await counts(app)
        version = (await client.get(f"/v1/decks/{deck_id}", headers=alice)).json()["version"]
        for edit in ({"css": "}"}, {"css": "}", **SKIP}):
            put = await client.put(f"/v1/decks/{deck_id}/theme", json=edit, headers=alice)
            assert put.status_code == 422, put.text
            error = put.json()["error"]
            assert error["code"] == "VALIDATION_FAILED"
            assert _diagnostics(error["pages"]) == {("COMPILE_CSS_SYNTAX", "theme.css", 1)}
        assert await counts(app) == before
        after = (await client.get(f"/v1/decks/{deck_id}", headers=alice)).json()
        assert after["version"] == version


async def test_a_font_in_the_manifest_is_in_use_and_a_forced_delete_keeps_the_deck_working(
    db_url: str,
) -> None:
    async with running_app(db_url, **ROOMY_LEASE) as (app, client):
        alice = await make_token(app, "alice")
        deck_id = await _example_deck(client, alice)
        url = f"/v1/decks/{deck_id}/assets/{FONT.removeprefix('assets/')}"

        refused = await client.delete(url, headers=alice)
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["code"] == "ASSET_IN_USE"
        assert [(r["page"], r["reference"]) for r in error["references"]] == [("deck.toml", FONT)]
        assert (await client.get(url, headers=alice)).status_code == 200

        forced = await client.delete(f"{url}?force=true", headers=alice)
        assert forced.status_code == 204, forced.text
        deck = (await client.get(f"/v1/decks/{deck_id}", headers=alice)).json()
        assert deck["manifest"]["fonts"] == []

        page = f"/v1/decks/{deck_id}/pages/02-agenda"
        put = await client.put(page, json={"source": "# Agenda\n\nNew\n", **SKIP}, headers=alice)
        assert put.status_code == 201, put.text
        assert put.json()["version"]["compiled"] is True

        # declaring a font whose file is not there is refused as content, not retried
        gone = {"family": "Gone", "file": FONT}
        patch = await client.patch(
            f"/v1/decks/{deck_id}/manifest", json={"fonts": [gone], **SKIP}, headers=alice
        )
        assert patch.status_code == 422, patch.text
        references = {
            (d["code"], d["page"], d["reference"])
            for result in patch.json()["error"]["pages"].values()
            for d in result["diagnostics"]
        }
        assert references == {("COMPILE_MISSING_ASSET", "deck.toml", FONT)}


async def test_a_deck_whose_font_file_went_before_this_fix_answers_422_and_can_be_mended(
    db_url: str,
) -> None:
    async with running_app(db_url, **ROOMY_LEASE) as (app, client):
        alice = await make_token(app, "alice")
        deck_id = await _example_deck(client, alice)
        # what a forced delete left behind before it dropped the font: the file gone, the
        # manifest still naming it
        await app.state.db.write(lambda conn: deck_asset_delete(conn, deck_id, FONT))
        page = f"/v1/decks/{deck_id}/pages/02-agenda"
        edit = {"source": "# Agenda\n\nNew\n", **SKIP}
        put = await client.put(page, json=edit, headers=alice)
        assert put.status_code == 422, put.text
        diagnostics = put.json()["error"]["validation"]["diagnostics"]
        assert [(d["code"], d["page"], d["reference"]) for d in diagnostics] == [
            ("COMPILE_MISSING_ASSET", "deck.toml", FONT)
        ]
        mended = await client.patch(
            f"/v1/decks/{deck_id}/manifest", json={"fonts": [], **SKIP}, headers=alice
        )
        assert mended.status_code == 201, mended.text
        put = await client.put(page, json=edit, headers=alice)
        assert put.status_code == 201, put.text


async def test_a_crashed_gate_job_is_a_server_error_not_a_retry(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in validation")

    async with running_app(db_url, **ROOMY_LEASE) as (app, client):
        alice = await make_token(app, "alice")
        deck_id = await _example_deck(client, alice)
        monkeypatch.setattr(PageValidator, "check", crash)
        for url, edit in (
            (f"/v1/decks/{deck_id}/theme", {"css": "h1 {}"}),
            (f"/v1/decks/{deck_id}/pages/02-agenda", {"source": "# A"}),
        ):
            answer = await client.put(url, json={**edit, **SKIP}, headers=alice)
            assert answer.status_code == 500, answer.text
            error = answer.json()["error"]
            assert error["code"] == "INTERNAL_ERROR"
            assert "retry" not in error["message"]
            assert "job_id" in error


async def _manifest_pages(client: httpx.AsyncClient, h: dict[str, str], deck: int) -> list[str]:
    got = await client.get(f"/v1/decks/{deck}", headers=h)
    assert got.status_code == 200, got.text
    pages = [p["page"] for p in got.json()["pages"]]
    listed: list[str] = got.json()["manifest"]["pages"]
    assert [name.rsplit(".", 1)[0] for name in listed] == pages
    return listed


async def test_manifest_pages_follow_added_renamed_reordered_and_deleted_pages(
    db_url: str,
) -> None:
    async with running_app(db_url, **ROOMY_LEASE) as (app, client):
        alice = await make_token(app, "alice")
        deck_id = await _example_deck(client, alice)
        base = f"/v1/decks/{deck_id}"

        added = await client.put(
            f"{base}/pages/07-extra",
            json={"source": "<h1>Extra</h1>", "kind": "html", **SKIP},
            headers=alice,
        )
        assert added.status_code == 201, added.text
        renamed = await client.post(
            f"{base}/pages/02-agenda/rename", json={"name": "02-plan"}, headers=alice
        )
        assert renamed.status_code == 200, renamed.text
        assert renamed.json()["manifest"]["pages"][1] == "02-plan.md"
        order = [
            "07-extra",
            "01-cover",
            "02-plan",
            "03-growth",
            "04-roadmap",
            "05-fine-print",
            "06-thanks",
        ]
        moved = await client.put(f"{base}/order", json={"pages": order}, headers=alice)
        assert moved.status_code == 200, moved.text
        deleted = await client.delete(f"{base}/pages/05-fine-print", headers=alice)
        assert deleted.status_code == 204, deleted.text

        expected = [
            "07-extra.html",
            "01-cover.html",
            "02-plan.md",
            "03-growth.html",
            "04-roadmap.md",
            "06-thanks.html",
        ]
        assert await _manifest_pages(client, alice, deck_id) == expected
        # a manifest edit writes the manifest back: still the pages as they are
        patched = await client.patch(
            f"{base}/manifest", json={"title": "Renamed", **SKIP}, headers=alice
        )
        assert patched.status_code == 201, patched.text
        assert patched.json()["manifest"]["pages"] == expected
        assert await _manifest_pages(client, alice, deck_id) == expected


async def test_a_deleted_pages_version_ids_are_never_handed_out_again(db_url: str) -> None:
    async with running_app(db_url, **ROOMY_LEASE) as (app, client):
        alice = await make_token(app, "alice")
        body = {
            "manifest": {"title": "T"},
            "pages": [
                {"name": "01-a", "kind": "md", "text": "# A"},
                {"name": "02-b", "kind": "md", "text": "# B"},
            ],
        }
        made = await client.post("/v1/decks", json=body, headers=alice)
        assert made.status_code == 201, made.text
        base = f"/v1/decks/{made.json()['id']}"
        for text in ("# B2", "# B3"):
            put = await client.put(
                f"{base}/pages/02-b", json={"source": text, **SKIP}, headers=alice
            )
            assert put.status_code == 201, put.text
        versions = await client.get(f"{base}/pages/02-b/versions", headers=alice)
        seen = {v["id"] for v in versions.json()}
        assert len(seen) == 3

        assert (await client.delete(f"{base}/pages/02-b", headers=alice)).status_code == 204
        fresh = set()
        for name in ("02-b", "03-c", "02-b"):
            put = await client.put(
                f"{base}/pages/{name}", json={"source": "# New", **SKIP}, headers=alice
            )
            assert put.status_code == 201, put.text
            fresh.add(put.json()["version"]["id"])
        assert len(fresh) == 3
        assert min(fresh) > max(seen)
