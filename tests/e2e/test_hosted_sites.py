"""Hosted publishing through a `deckyard serve` subprocess with a real renderer, on SQLite and
PostgreSQL: publish, serve `/sites/...`, republish (the old site stays up until the new one is
live), private sites and share links, unpublish, and bad input that stores nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from deckyard.decks.site.hosting import share_token_sign
from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually_sync
from tests.helpers.server import Server, clean_env, workspace_tokens

pytestmark = [pytest.mark.chromium, pytest.mark.processes]
SIGNING_KEY = "k" * 40
SKIP = {"skip_visual_verification": True}


@dataclass
class Site:
    """A running server, its URL and an admin's headers."""

    url: str
    client: httpx.Client
    admin: dict[str, str]

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {**self.admin, **(kw.pop("headers", None) or {})}
        return self.client.request(method, self.url + path, headers=headers, **kw)

    def token(self, role: str) -> dict[str, str]:
        made = self.call("POST", "/v1/tokens", json={"role": role})
        assert made.status_code == 201, made.text
        return {"authorization": f"Bearer {made.json()['token']}"}


@pytest.fixture(scope="module")
def site(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """One server with a renderer per dialect, shared by the module's tests."""
    tmp = tmp_path_factory.mktemp("sites")
    env = clean_env(
        tmp,
        DECKYARD_DATABASE_URL=module_db_url,
        DECKYARD_RENDERERS="1",
        DECKYARD_RENDERER_SLOTS="2",
        DECKYARD_SITE_SIGNING_KEY=SIGNING_KEY,
    )
    token = workspace_tokens(module_db_url, ["alice"])["alice"]
    server = Server([], env, tmp)
    try:
        server.wait_ready(90)
        with httpx.Client(timeout=60) as client:
            yield Site(server.url, client, {"authorization": f"Bearer {token}"})
    finally:
        server.stop()


def published(site: Site, deck_id: int, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Publish and wait for the task to succeed; its final row."""
    started = site.call("POST", f"/v1/decks/{deck_id}/publish", json=body)
    assert started.status_code == 202, started.text
    task_id = started.json()["task_id"]

    def done() -> dict[str, Any] | None:
        task: dict[str, Any] = site.call("GET", f"/v1/tasks/{task_id}").json()
        assert task["status"] not in ("failed", "cancelled"), task
        return task if task["status"] == "succeeded" else None

    return eventually_sync(done, timeout=240, every=0.5, what=f"publish task {task_id}")


def test_publish_serve_republish_share_and_unpublish(site: Site) -> None:
    body = json_deck("# Hello\n\nfirst edition\n")
    body["pages"].append({"name": "02-end", "kind": "md", "text": "# End\n"})  # type: ignore[attr-defined]
    made = site.call("POST", "/v1/decks", json=body)
    assert made.status_code == 201, made.text
    deck_id = made.json()["id"]
    base = f"/sites/alice/{deck_id}"

    # Bad input names the field and stores nothing.
    bad = site.call("POST", f"/v1/decks/{deck_id}/publish", json={"visibility": "everyone"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "visibility", bad.text
    assert site.call("GET", f"/v1/decks/{deck_id}/publications").json() == []
    assert site.call("GET", "/v1/tasks").json() == []
    assert site.call("GET", f"/v1/decks/{deck_id}/site").json()["error"]["code"] == (
        "SITE_NOT_FOUND"
    )
    assert site.client.get(site.url + base + "/").status_code == 404

    task = published(site, deck_id, {"visibility": "public"})
    assert task["stages"] == ["validate", "screenshot", "build", "export", "live"]
    went_live = task["state"]["results"]["live"]["results"][0]
    assert went_live["status"] == "live" and went_live["url"] == base + "/"

    # The stable URL: a redirect to the folder, then the index with its headers.
    folder = site.client.get(site.url + base)
    assert folder.status_code == 308 and folder.headers["location"] == base + "/"
    index = site.client.get(site.url + base + "/")
    assert index.status_code == 200, index.text
    assert index.headers["content-type"] == "text/html; charset=utf-8"
    assert index.headers["cache-control"] == "no-cache"
    assert index.headers["content-security-policy"].startswith("sandbox")
    assert index.headers["x-content-type-options"] == "nosniff"
    first_publication = index.headers["x-deckyard-publication"]
    page_file = re.search(r'"(pages/01-[^"]+\.html)"', index.text)
    assert page_file, index.text
    page = site.client.get(f"{site.url}{base}/{page_file.group(1)}")
    assert page.status_code == 200 and "first edition" in page.text
    assert page.headers["cache-control"] == "public, max-age=31536000, immutable"
    manifest = site.client.get(f"{site.url}{base}/manifest.json")
    assert manifest.headers["content-type"] == "application/json"
    listed = {f["path"]: f["sha256"] for f in manifest.json()["files"]}
    assert page.headers["etag"] == f'"{listed[page_file.group(1)]}"'

    # Revalidation and HEAD.
    again = site.client.get(site.url + base + "/", headers={"if-none-match": index.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    head = site.client.head(f"{site.url}{base}/{page_file.group(1)}")
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len(page.content)
    assert head.headers["etag"] == page.headers["etag"]

    # Path safety: nothing outside the publication's own files, in any spelling.
    for sneaky in (
        "/%2e%2e/%2e%2e/v1/decks",
        "/pages/..%2f..%2fmanifest.json",
        "/pages/%2e%2e/manifest.json",
        "/..%5cmanifest.json",
        "/pages/",
        "/nope.html",
    ):
        refused = site.client.get(site.url + base + sneaky)
        assert refused.status_code == 404, (sneaky, refused.text)
        assert refused.json()["error"]["code"] in ("SITE_NOT_FOUND", "NOT_FOUND"), sneaky
    assert site.client.get(f"{site.url}/sites/bob/{deck_id}/").status_code == 404

    # Republish as private after an edit; the first site stays live until the second is.
    edit = site.call(
        "PUT", f"/v1/decks/{deck_id}/pages/01-hello", json={"source": "# Hello\n\nsecond\n", **SKIP}
    )
    assert edit.status_code == 201, edit.text
    started = site.call("POST", f"/v1/decks/{deck_id}/publish", json={"visibility": "private"})
    task_id = started.json()["task_id"]
    seen: set[str] = set()
    while True:
        task = site.call("GET", f"/v1/tasks/{task_id}").json()
        assert task["status"] not in ("failed", "cancelled"), task
        served = site.client.get(site.url + base + "/")
        if served.status_code == 200:
            seen.add(served.headers["x-deckyard-publication"])
        if task["status"] == "succeeded":
            break
        time.sleep(0.2)
    assert seen <= {first_publication}, seen
    gone = site.client.get(site.url + base + "/")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "SITE_NOT_FOUND"
    history = site.call("GET", f"/v1/decks/{deck_id}/publications").json()
    assert [(p["status"], p["visibility"]) for p in history] == [
        ("live", "private"),
        ("superseded", "public"),
    ]
    assert str(history[1]["id"]) == first_publication
    live = site.call("GET", f"/v1/decks/{deck_id}/site").json()
    assert live["id"] == history[0]["id"] and live["url"] == base + "/"

    # Share links: editors and admins only; bad input names the field and stores nothing.
    viewer, editor = site.token("viewer"), site.token("editor")
    links = f"/v1/decks/{deck_id}/share-links"
    assert site.call("POST", links, json={}, headers=viewer).status_code == 403
    assert site.call("GET", links, headers=viewer).status_code == 403
    short = site.call("POST", links, json={"expires_in_seconds": 5}, headers=editor)
    assert short.status_code == 422 and short.json()["error"]["field"] == "expires_in_seconds"
    long = site.call("POST", links, json={"expires_in_seconds": 10**9}, headers=editor)
    assert long.status_code == 422 and long.json()["error"]["field"] == "expires_in_seconds"
    for bad_body, field in (({"label": "x" * 201}, "label"), ({"expires": 60}, "expires")):
        refused = site.call("POST", links, json=bad_body, headers=editor)
        assert refused.status_code == 422 and refused.json()["error"]["field"] == field, field
    assert site.call("GET", links, headers=editor).json() == []
    link = site.call(
        "POST", links, json={"expires_in_seconds": 3600, "label": "board"}, headers=editor
    )
    assert link.status_code == 201, link.text
    shared = link.json()
    assert shared["url"].startswith(base + "/_share/") and shared["active"] is True
    opened = site.client.get(site.url + shared["url"])
    assert opened.status_code == 200 and opened.headers["cache-control"] == "private, no-cache"
    assert opened.headers["referrer-policy"] == "no-referrer"
    changed = re.search(r'"(pages/01-[^"]+\.html)"', opened.text)
    assert changed and changed.group(1) != page_file.group(1), "an edited page gets a new name"
    second_page = site.client.get(f"{site.url}{shared['url']}{changed.group(1)}")
    assert second_page.status_code == 200 and "second" in second_page.text
    old_name = site.client.get(f"{site.url}{shared['url']}{page_file.group(1)}")
    assert old_name.status_code == 404, "a public publication's pages are not served as private"
    assert site.client.head(site.url + shared["url"]).status_code == 200

    forged = shared["token"][:-2] + ("AA" if not shared["token"].endswith("AA") else "BB")
    refused = site.client.get(f"{site.url}{base}/_share/{forged}/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "SHARE_LINK_INVALID"
    expired = share_token_sign(SIGNING_KEY, shared["id"], deck_id, int(time.time()) - 1)
    refused = site.client.get(f"{site.url}{base}/_share/{expired}/")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "SHARE_LINK_EXPIRED"
    other_deck = share_token_sign(SIGNING_KEY, shared["id"], deck_id + 1, int(time.time()) + 99)
    assert site.client.get(
        f"{site.url}/sites/alice/{deck_id + 1}/_share/{other_deck}/"
    ).status_code in (403, 404)

    revoked = site.call("DELETE", f"{links}/{shared['id']}", headers=editor)
    assert revoked.status_code == 204
    refused = site.client.get(site.url + shared["url"])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "SHARE_LINK_REVOKED"
    listed_links = site.call("GET", links, headers=editor).json()
    assert [(x["id"], x["active"]) for x in listed_links] == [(shared["id"], False)]
    assert site.call("DELETE", f"{links}/999999", headers=editor).status_code == 404

    # Visibility without a republish, then unpublish.
    public = site.call("PATCH", f"/v1/decks/{deck_id}/site", json={"visibility": "public"})
    assert public.status_code == 200 and public.json()["visibility"] == "public"
    assert site.client.get(site.url + base + "/").status_code == 200
    wrong = site.call("PATCH", f"/v1/decks/{deck_id}/site", json={"visibility": "open"})
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "visibility"
    assert site.call("DELETE", f"/v1/decks/{deck_id}/site").status_code == 204
    down = site.client.get(site.url + base + "/")
    assert down.status_code == 404 and down.json()["error"]["code"] == "SITE_NOT_FOUND"
    assert site.client.head(site.url + base + "/").status_code == 404
    assert site.call("DELETE", f"/v1/decks/{deck_id}/site").status_code == 404
    statuses = [p["status"] for p in site.call("GET", f"/v1/decks/{deck_id}/publications").json()]
    assert statuses == ["unpublished", "superseded"]


def test_openapi_describes_the_site_routes(site: Site) -> None:
    doc = site.client.get(site.url + "/openapi.json").json()
    paths = doc["paths"]
    for path, methods in {
        "/v1/decks/{deck_id}/site": {"get", "patch", "delete"},
        "/v1/decks/{deck_id}/publications": {"get"},
        "/v1/decks/{deck_id}/share-links": {"get", "post"},
        "/v1/decks/{deck_id}/share-links/{link_id}": {"delete"},
        "/sites/{workspace}/{deck_id}/{path}": {"get", "head"},
        "/sites/{workspace}/{deck_id}/_share/{token}/{path}": {"get", "head"},
    }.items():
        assert path in paths, sorted(paths)
        assert methods <= set(paths[path]), (path, sorted(paths[path]))
    publish = paths["/v1/decks/{deck_id}/publish"]["post"]
    assert "requestBody" in publish
