"""Editing a deck through a `deckyard serve` subprocess, on SQLite and on PostgreSQL.

Pages are created, edited, renamed, reordered, deleted and reverted over HTTP with ETags and
If-Match, as a client would; no renderer runs, so content edits pass the gate with
`skip_visual_verification` (compiled, recorded as skipped).
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests.helpers.decks import PNG_1PX, json_deck
from tests.helpers.server import Server, clean_env, create_token, event_types, workspace_tokens

pytestmark = pytest.mark.processes
SKIP = {"skip_visual_verification": True}
WORKSPACES = 12
"""More than the module's tests that use `node` (each takes a workspace of its own)."""


@dataclass
class Node:
    """A running server and an authorised client for it."""

    url: str
    client: httpx.Client
    headers: dict[str, str]

    def call(self, method: str, path: str, **kw: object) -> httpx.Response:
        extra = kw.pop("headers", None) or {}
        return self.client.request(
            method,
            self.url + path,
            headers={**self.headers, **extra},  # type: ignore[dict-item]
            **kw,  # type: ignore[arg-type]
        )


@dataclass
class Shared:
    """The module's server, one client, and an unused workspace token per test."""

    url: str
    client: httpx.Client
    tokens: list[str]


@pytest.fixture(scope="module")
def shared(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    """One server per dialect for the module; each test edits in a workspace of its own."""
    tmp = tmp_path_factory.mktemp("editing")
    env = clean_env(
        tmp,
        DECKYARD_DATABASE_URL=module_db_url,
        DECKYARD_RENDERERS="0",
        DECKYARD_DECK_MAX_FILE_BYTES="4096",
    )
    tokens = workspace_tokens(module_db_url, [f"ws{i}" for i in range(WORKSPACES)])
    server = Server([], env, tmp)
    try:
        server.wait_ready(60)
        with httpx.Client(timeout=120) as client:
            yield Shared(server.url, client, list(tokens.values()))
    finally:
        server.stop()


@pytest.fixture
def node(shared: Shared) -> Node:
    """The shared server, as a client of a workspace no other test has used."""
    token = shared.tokens.pop()
    return Node(shared.url, shared.client, {"authorization": f"Bearer {token}"})


def png_bytes(size: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (size, size), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


def two_page_deck(node: Node) -> int:
    body = json_deck("# Hello\n\nfirst\n")
    body["pages"].append({"name": "02-end", "kind": "md", "text": "# End\n"})  # type: ignore[attr-defined]
    made = node.call("POST", "/v1/decks", json=body)
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


def test_pages_and_history_with_etags(node: Node) -> None:
    deck_id = two_page_deck(node)
    base = f"/v1/decks/{deck_id}"
    deck = node.call("GET", base)
    assert deck.headers["etag"] == '"1"'

    # create: PUT on a new name, through the gate, If-Match = the deck's ETag
    stale = node.call(
        "PUT", f"{base}/pages/03-new", json={"source": "# New", **SKIP}, headers={"if-match": '"7"'}
    )
    assert stale.status_code == 409 and stale.json()["error"]["current_version"] == 1
    made = node.call(
        "PUT", f"{base}/pages/03-new", json={"source": "# New", **SKIP}, headers={"if-match": '"1"'}
    )
    assert made.status_code == 201, made.text
    assert made.json()["created"] is True and made.json()["version"]["number"] == 1
    assert made.headers["etag"] == '"1"'
    deck = node.call("GET", base)
    assert [p["page"] for p in deck.json()["pages"]] == ["01-hello", "02-end", "03-new"]
    assert deck.headers["etag"] == '"2"'

    # edit with If-Match; a stale one is 409 naming the current version and writes nothing
    page = node.call("GET", f"{base}/pages/01-hello")
    assert page.headers["etag"] == '"1"'
    edit = {"source": "# Hello\n\nsecond\n", **SKIP}
    ok = node.call("PUT", f"{base}/pages/01-hello", json=edit, headers={"if-match": '"1"'})
    assert ok.status_code == 201, ok.text
    assert ok.headers["etag"] == '"2"'
    again = node.call("PUT", f"{base}/pages/01-hello", json=edit, headers={"if-match": '"1"'})
    assert again.status_code == 409, again.text
    err = again.json()["error"]
    assert err["code"] == "EDIT_CONFLICT" and err["current_version"] == 2
    assert err["field"] == "If-Match" and again.headers["etag"] == '"2"'

    # unconditional writes are allowed and recorded
    blind = node.call(
        "PUT", f"{base}/pages/01-hello", json={"source": "# Hello\n\nthird\n", **SKIP}
    )
    assert blind.status_code == 201, blind.text
    assert "unconditional_write" in event_types(
        node.client, node.url, node.headers, blind.json()["job_id"]
    )

    # history: list, show, diff, revert (a new version through the gate)
    versions = node.call("GET", f"{base}/pages/01-hello/versions")
    assert [v["number"] for v in versions.json()] == [1, 2, 3]
    assert versions.headers["etag"] == '"3"'
    first = node.call("GET", f"{base}/pages/01-hello/versions/1")
    assert first.json()["source"] == "# Hello\n\nfirst\n"
    diff = node.call("GET", f"{base}/pages/01-hello/diff", params={"from": 1, "to": 3})
    assert diff.status_code == 200, diff.text
    assert diff.json()["diff"] == (
        "--- 01-hello@1\n+++ 01-hello@3\n@@ -1,3 +1,3 @@\n # Hello\n \n-first\n+third\n"
    )
    revert = node.call(
        "POST", f"{base}/pages/01-hello/versions/1/revert", json=SKIP, headers={"if-match": '"3"'}
    )
    assert revert.status_code == 201, revert.text
    assert revert.json()["version"]["number"] == 4
    current = node.call("GET", f"{base}/pages/01-hello")
    assert current.json()["source"] == "# Hello\n\nfirst\n" and current.headers["etag"] == '"4"'
    assert len(node.call("GET", f"{base}/pages/01-hello/versions").json()) == 4

    # rename (history kept), reorder, delete
    renamed = node.call(
        "POST",
        f"{base}/pages/03-new/rename",
        json={"name": "00-intro"},
        headers={"if-match": '"1"'},
    )
    assert renamed.status_code == 200, renamed.text
    assert [p["page"] for p in renamed.json()["pages"]] == ["01-hello", "02-end", "00-intro"]
    etag = renamed.headers["etag"]
    order = {"pages": ["00-intro", "01-hello", "02-end"]}
    stale = node.call("PUT", f"{base}/order", json=order, headers={"if-match": '"1"'})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "EDIT_CONFLICT"
    moved = node.call("PUT", f"{base}/order", json=order, headers={"if-match": etag})
    assert moved.status_code == 200, moved.text
    assert [p["page"] for p in moved.json()["pages"]] == order["pages"]
    gone = node.call("DELETE", f"{base}/pages/02-end", headers={"if-match": '"1"'})
    assert gone.status_code == 204, gone.text
    assert node.call("GET", f"{base}/pages/02-end").status_code == 404
    assert [p["page"] for p in node.call("GET", base).json()["pages"]] == ["00-intro", "01-hello"]


def test_bad_page_edits_name_the_field_and_store_nothing(node: Node) -> None:
    deck_id = two_page_deck(node)
    base = f"/v1/decks/{deck_id}"
    before = node.call("GET", base).json()
    cases = [
        ("PUT", f"{base}/pages/.hidden", {"source": "# x", **SKIP}, {}, 422, "page"),
        (
            "PUT",
            f"{base}/pages/01-hello",
            {"source": "# x", **SKIP},
            {"if-match": "x"},
            422,
            "If-Match",
        ),
        ("PUT", f"{base}/pages/01-hello", {"src": "# x"}, {}, 422, "source"),
        ("POST", f"{base}/pages/01-hello/rename", {"name": "a b"}, {}, 422, "name"),
        ("POST", f"{base}/pages/01-hello/rename", {"name": "02-end"}, {}, 409, "name"),
        ("PUT", f"{base}/order", {"pages": ["01-hello"]}, {}, 422, "pages"),
        ("PUT", f"{base}/order", {"pages": ["01-hello", "01-hello"]}, {}, 422, "pages"),
    ]
    for method, path, body, headers, status, field in cases:
        r = node.call(method, path, json=body, headers=headers)
        assert r.status_code == status, (path, body, r.text)
        assert r.json()["error"]["field"] == field, r.json()
    # one page left cannot go
    assert node.call("DELETE", f"{base}/pages/02-end").status_code == 204
    last = node.call("DELETE", f"{base}/pages/01-hello")
    assert last.status_code == 409 and last.json()["error"]["code"] == "DECK_LAST_PAGE"
    missing = node.call("GET", f"{base}/pages/01-hello/diff", params={"from": 1, "to": 9})
    assert missing.status_code == 404
    after = node.call("GET", base).json()
    assert [p["page"] for p in after["pages"]] == ["01-hello"]
    assert after["pages"][0]["number"] == before["pages"][0]["number"] == 1


def test_twenty_concurrent_writers_one_wins_per_base_version(node: Node) -> None:
    deck_id = two_page_deck(node)
    page = f"/v1/decks/{deck_id}/pages/01-hello"
    for round_ in range(2):
        etag = node.call("GET", page).headers["etag"]

        def write(i: int, etag: str = etag, round_: int = round_) -> httpx.Response:
            body = {"source": f"# Writer {i} in round {round_}\n", **SKIP}
            return node.call("PUT", page, json=body, headers={"if-match": etag})

        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(write, range(20)))
        statuses = Counter(r.status_code for r in answers)
        assert statuses == {201: 1, 409: 19}, [r.text for r in answers if r.status_code != 409]
        conflicts = [r.json()["error"] for r in answers if r.status_code == 409]
        assert {e["code"] for e in conflicts} == {"EDIT_CONFLICT"}
        assert {e["current_version"] for e in conflicts} == {round_ + 2}
    versions = node.call("GET", f"{page}/versions").json()
    assert [v["number"] for v in versions] == [1, 2, 3]


def test_openapi_describes_the_editing_routes(node: Node) -> None:
    spec = node.client.get(f"{node.url}/openapi.json").json()
    paths = spec["paths"]
    expected = {
        "/v1/decks/{deck_id}/pages/{page}": {"get", "put", "delete"},
        "/v1/decks/{deck_id}/pages/{page}/rename": {"post"},
        "/v1/decks/{deck_id}/order": {"put"},
        "/v1/decks/{deck_id}/pages/{page}/versions": {"get"},
        "/v1/decks/{deck_id}/pages/{page}/versions/{number}": {"get"},
        "/v1/decks/{deck_id}/pages/{page}/versions/{number}/revert": {"post"},
        "/v1/decks/{deck_id}/pages/{page}/diff": {"get"},
        "/v1/decks/{deck_id}": {"get", "delete"},
        "/v1/decks/{deck_id}/copy": {"post"},
        "/v1/decks/{deck_id}/assets": {"get"},
        "/v1/decks/{deck_id}/theme": {"put"},
        "/v1/decks/{deck_id}/manifest": {"patch"},
        "/v1/decks/{deck_id}/assets/{path}": {"get", "put", "delete"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
    put = paths["/v1/decks/{deck_id}/pages/{page}"]["put"]
    assert "If-Match" in {p["name"] for p in put["parameters"]}
    assert "409" in put["responses"]


def test_copy_and_delete_a_deck(node: Node) -> None:
    deck_id = two_page_deck(node)
    base = f"/v1/decks/{deck_id}"
    edit = {"source": "# Hello\n\nedited\n", **SKIP}
    assert node.call("PUT", f"{base}/pages/01-hello", json=edit).status_code == 201
    bad = node.call("POST", f"{base}/copy", json={"title": ""})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "title"
    copy = node.call("POST", f"{base}/copy", json={"title": "Copy"})
    assert copy.status_code == 201, copy.text
    copied = copy.json()
    assert copied["title"] == "Copy" and copied["id"] != deck_id
    assert [(p["page"], p["number"]) for p in copied["pages"]] == [("01-hello", 1), ("02-end", 1)]
    page = node.call("GET", f"/v1/decks/{copied['id']}/pages/01-hello").json()
    assert page["source"] == edit["source"]
    assert page["validation"]["stages"]["render"]["status"] == "skipped"

    stale = node.call("DELETE", base, headers={"if-match": '"1"'})
    assert stale.status_code == 409 and stale.json()["error"]["current_version"] == 2
    assert node.call("DELETE", base, headers={"if-match": '"2"'}).status_code == 204
    assert node.call("GET", base).status_code == 404
    assert node.call("DELETE", base).status_code == 404
    assert node.call("GET", f"/v1/decks/{copied['id']}/pages/01-hello").status_code == 200
    listed = [d["id"] for d in node.call("GET", "/v1/decks").json()]
    assert listed == [copied["id"]]


def asset_deck(node: Node) -> int:
    body = {
        "manifest": {"title": "Assets"},
        "pages": [
            {"name": "01-logo", "kind": "md", "text": "# Logo\n\n![logo](assets/img/logo.png)\n"},
            {"name": "02-plain", "kind": "md", "text": "# Plain\n"},
        ],
        "assets": [
            {"path": "assets/img/logo.png", "data_base64": base64.b64encode(PNG_1PX).decode()}
        ],
    }
    made = node.call("POST", "/v1/decks", json=body)
    assert made.status_code == 201, made.text
    return int(made.json()["id"])


def test_assets_upload_replace_delete(node: Node) -> None:
    deck_id = asset_deck(node)
    base = f"/v1/decks/{deck_id}/assets"
    svg = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'
    up = node.call("PUT", f"{base}/img/mark.svg", content=svg)
    assert up.status_code == 201, up.text
    assert up.json()["media_type"] == "image/svg+xml"
    assert up.json()["path"] == "assets/img/mark.svg"
    got = node.call("GET", f"{base}/img/mark.svg")
    assert got.content == svg and got.headers["content-type"].startswith("image/svg+xml")

    # replace: a page uses logo.png, so the replacement goes through the write gate; with no
    # renderer the page cannot be verified: 503, nothing written, the old bytes stay
    original = node.call("GET", f"{base}/img/logo.png").content
    other = png_bytes(3)
    unverified = node.call("PUT", f"{base}/img/logo.png", content=other)
    assert unverified.status_code == 503, unverified.text
    assert "01-logo" in unverified.json()["error"]["pages"]
    assert node.call("GET", f"{base}/img/logo.png").content == original
    # skip_visual_verification replaces after compiling the page (recorded in its new version);
    # the type comes from the bytes, whatever Content-Type says
    page_before = node.call("GET", f"/v1/decks/{deck_id}/pages/01-logo").json()["number"]
    replaced = node.call(
        "PUT",
        f"{base}/img/logo.png",
        content=other,
        headers={"content-type": "text/plain"},
        params={"skip_visual_verification": "true"},
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["media_type"] == "image/png"
    assert node.call("GET", f"{base}/img/logo.png").content == other
    page = node.call("GET", f"/v1/decks/{deck_id}/pages/01-logo").json()
    assert page["number"] == page_before + 1 and page["skipped_visual_verification"] is True

    before = node.call("GET", base).json()
    bad = [
        ("img/notes.png", b"just text", 415, "ASSET_TYPE_UNKNOWN", "body"),
        ("img/photo.jpg", PNG_1PX, 415, "ASSET_TYPE_MISMATCH", "body"),
        ("img/.hidden.png", PNG_1PX, 422, "ASSET_PATH_INVALID", "path"),
        ("img/tool.exe", PNG_1PX, 415, "ASSET_TYPE_UNSUPPORTED", "path"),
        ("img/big.png", PNG_1PX + b"\0" * 5000, 413, "ASSET_TOO_LARGE", "body"),
        ("img/empty.css", b"", 422, "ASSET_EMPTY", "body"),
    ]
    for path, data, status, code, field in bad:
        r = node.call("PUT", f"{base}/{path}", content=data)
        assert r.status_code == status, (path, r.text)
        assert (r.json()["error"]["code"], r.json()["error"]["field"]) == (code, field)
    stale = node.call("PUT", f"{base}/img/x.svg", content=svg, headers={"if-match": '"1"'})
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "EDIT_CONFLICT"
    assert node.call("GET", base).json() == before

    # delete: refused while referenced (page, line, reference), unless forced
    used = node.call("DELETE", f"{base}/img/logo.png")
    assert used.status_code == 409, used.text
    err = used.json()["error"]
    assert err["code"] == "ASSET_IN_USE"
    assert [(r["page"], r["line"], r["reference"]) for r in err["references"]] == [
        ("01-logo", 3, "assets/img/logo.png")
    ]
    assert node.call("DELETE", f"{base}/img/mark.svg").status_code == 204
    forced = node.call("DELETE", f"{base}/img/logo.png", params={"force": "true"})
    assert forced.status_code == 204, forced.text
    assert node.call("GET", base).json() == []
    assert node.call("DELETE", f"{base}/img/logo.png").status_code == 404


def test_theme_and_manifest_edits_through_the_gate(node: Node) -> None:
    deck_id = two_page_deck(node)
    base = f"/v1/decks/{deck_id}"

    def numbers() -> list[int]:
        return [p["number"] for p in node.call("GET", base).json()["pages"]]

    broken = {"css": "h1 { background: url(assets/nope.png); }", **SKIP}
    refused = node.call("PUT", f"{base}/theme", json=broken)
    assert refused.status_code == 422, refused.text
    assert set(refused.json()["error"]["pages"]) == {"01-hello", "02-end"}
    assert numbers() == [1, 1]
    bad = node.call("PATCH", f"{base}/manifest", json={"slide": {"width": "wide"}})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "slide.width"
    stale = node.call(
        "PUT", f"{base}/theme", json={"css": "h1{}", **SKIP}, headers={"if-match": '"9"'}
    )
    assert stale.status_code == 409 and stale.json()["error"]["current_version"] == 1
    assert numbers() == [1, 1]

    themed = node.call(
        "PUT",
        f"{base}/theme",
        json={"css": "h1 { color: red; }", **SKIP},
        headers={"if-match": '"1"'},
    )
    assert themed.status_code == 201, themed.text
    assert numbers() == [2, 2]
    page = node.call("GET", f"{base}/pages/01-hello/versions/2").json()
    assert page["skipped_visual_verification"] is True
    renamed = node.call("PATCH", f"{base}/manifest", json={"title": "Renamed", **SKIP})
    assert renamed.status_code == 201, renamed.text
    assert renamed.json()["title"] == "Renamed" and numbers() == [3, 3]
    assert renamed.json()["manifest"]["theme"] == "theme.css"


def test_a_server_that_requires_if_match_refuses_blind_writes(
    tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(tmp_path, DECKYARD_RENDERERS="0", DECKYARD_DECK_REQUIRE_IF_MATCH="true")
    token = create_token(env, tmp_path, "alice")
    server = Server([], env, tmp_path)
    servers.append(server)
    server.wait_ready(60)
    with httpx.Client(timeout=60) as client:
        node = Node(server.url, client, {"authorization": f"Bearer {token}"})
        deck_id = two_page_deck(node)
        page = f"/v1/decks/{deck_id}/pages/01-hello"
        blind = node.call("PUT", page, json={"source": "# x", **SKIP})
        assert blind.status_code == 428, blind.text
        assert blind.json()["error"]["code"] == "IF_MATCH_REQUIRED"
        assert blind.json()["error"]["field"] == "If-Match"
        assert node.call("DELETE", f"/v1/decks/{deck_id}/pages/02-end").status_code == 428
        assert len(node.call("GET", f"{page}/versions").json()) == 1
        any_version = node.call(
            "PUT", page, json={"source": "# x", **SKIP}, headers={"if-match": "*"}
        )
        assert any_version.status_code == 201, any_version.text
