"""/openapi.json stands on its own: every `$ref` resolves inside the document (issue 14)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.helpers.api import make_token, running_app


def resolves(doc: dict[str, Any], ref: str) -> bool:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_openapi_has_no_dangling_refs(db_url: str) -> None:
    async with running_app(db_url, background_loops=False) as (_app, client):
        r = await client.get("/openapi.json")
        assert r.status_code == 200
        doc = r.json()
    refs = set(re.findall(r'"\$ref": "([^"]+)"', json.dumps(doc)))
    assert refs, "no $ref at all: the check would prove nothing"
    assert sorted(ref for ref in refs if not resolves(doc, ref)) == []
    bodies = [
        doc["paths"][path][method]["requestBody"]
        for path, method in (("/v1/decks", "post"), ("/v1/validate", "post"))
    ]
    assert all("$defs" not in json.dumps(b) for b in bodies)


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_every_error_answer_is_documented_in_the_error_shape(db_url: str) -> None:
    async with running_app(db_url, background_loops=False) as (_app, client):
        doc = (await client.get("/openapi.json")).json()
    assert "HTTPValidationError" not in json.dumps(doc), "FastAPI's 422 shape is never sent"
    assert doc["components"]["schemas"]["ErrorBody"]["required"] == ["error"]
    missing = []
    for path, method, op in operations(doc):
        codes = set(op["responses"])
        expected = {"500", "503"}
        if path.startswith("/v1/"):
            expected |= {"401", "403"}
        if "{" in path:
            expected.add("404")
        if method != "get":
            expected |= {"413", "422", "507"}
        missing += [f"{method.upper()} {path}: {c}" for c in sorted(expected - codes)]
        for code, response in op["responses"].items():
            if int(code) >= 400:
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, code)
    assert missing == []


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_every_v1_operation_answers_a_missing_token_with_a_documented_401(
    db_url: str,
) -> None:
    async with running_app(db_url, background_loops=False) as (_app, client):
        doc = (await client.get("/openapi.json")).json()
        v1 = [(p, m, op) for p, m, op in operations(doc) if p.startswith("/v1/")]
        assert len(v1) > 40
        for path, method, op in v1:
            url = re.sub(r"\{[^}]+\}", "1", path)
            r = await client.request(method.upper(), url)
            assert r.status_code == 401, (method, path, r.status_code, r.text[:200])
            assert r.json()["error"]["code"] == "UNAUTHENTICATED"
            assert "401" in op["responses"], (method, path)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_head_answers_what_get_would_without_a_body(db_url: str) -> None:
    async with running_app(db_url, background_loops=False) as (app, client):
        alice = await make_token(app, "alice")
        job = await app.state.runtime.enqueue("k", queue="q", workspace_id="alice")
        shot = {"html": "<p>x</p>", "width": 100, "height": 50}
        render = (await client.post("/v1/screenshots", json=shot, headers=alice)).json()
        paths = ("/v1/jobs", f"/v1/jobs/{job.id}", "/v1/renders", f"/v1/renders/{render['id']}")
        for path in (*paths, "/openapi.json", "/healthz"):
            get = await client.get(path, headers=alice)
            head = await client.head(path, headers=alice)
            assert (head.status_code, head.content) == (get.status_code, b""), path
            assert head.headers["content-type"] == get.headers["content-type"], path
            assert head.headers["content-length"] == get.headers["content-length"], path
        # an event stream that would follow a running job (a queued render) ends after its headers
        for events in (f"/v1/jobs/{job.id}/events", f"/v1/renders/{render['id']}/events"):
            head = await client.head(events, headers=alice)
            assert head.status_code == 200 and head.content == b"", events
            assert head.headers["content-type"].startswith("text/event-stream"), events
        for gone in ("/v1/jobs/999999", "/v1/renders/999999"):
            missing = await client.head(gone, headers=alice)
            assert (missing.status_code, missing.content) == (404, b""), gone
        assert (await client.head("/v1/jobs")).status_code == 401


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_full_render_queue_is_a_documented_429(db_url: str) -> None:
    async with running_app(db_url, background_loops=False, render_workspace_queue_limit=1) as (
        app,
        client,
    ):
        alice = await make_token(app, "alice")
        doc = (await client.get("/openapi.json")).json()
        body = {"html": "<p>x</p>", "width": 100, "height": 50}
        first = await client.post("/v1/screenshots?dedupe=false", json=body, headers=alice)
        assert first.status_code == 202, first.text
        assert first.headers["location"] == f"/v1/renders/{first.json()['id']}"
        full = await client.post("/v1/screenshots?dedupe=false", json=body, headers=alice)
    assert full.status_code == 429, full.text
    assert full.json()["error"]["code"] == "RENDER_QUEUE_FULL"
    assert int(full.headers["retry-after"]) >= 1
    assert "429" in doc["paths"]["/v1/screenshots"]["post"]["responses"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_the_document_is_valid_openapi(db_url: str) -> None:
    from openapi_spec_validator import validate

    async with running_app(db_url, background_loops=False) as (_app, client):
        doc = (await client.get("/openapi.json")).json()
    assert doc["openapi"].startswith("3.1.")
    validate(doc)
    events = doc["paths"]["/v1/jobs/{job_id}/events"]["get"]["responses"]["200"]["content"]
    assert events["text/event-stream"]["x-itemSchema"]["properties"]["data"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_site_files_are_documented_with_their_own_content_types(db_url: str) -> None:
    async with running_app(db_url, background_loops=False) as (_app, client):
        doc = (await client.get("/openapi.json")).json()
    sites = [(p, m, op) for p, m, op in operations(doc) if p.startswith("/sites/")]
    assert sites
    for path, method, op in sites:
        content = op["responses"]["200"]["content"]
        assert "application/json" not in content, (method, path)
        assert {"text/html", "*/*"} <= set(content), (method, path)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_docs_load_only_assets_of_this_server(db_url: str) -> None:
    from bs4 import BeautifulSoup

    async with running_app(db_url, background_loops=False) as (_app, client):
        docs = await client.get("/docs")
        assert docs.status_code == 200
        html = BeautifulSoup(docs.text, "html.parser")
        urls = [tag.get("src") or tag.get("href") for tag in html.find_all(["script", "link"])]
        urls = [u for u in urls if u]
        assert len(urls) == 3, urls
        assert "http" not in docs.text.replace("http-equiv", ""), "no absolute URL on the page"
        for url in urls:
            assert url.startswith("/") and not url.startswith("//"), url
            asset = await client.get(url)
            assert asset.status_code == 200, url
            assert len(asset.content) > 500, url
        assert (await client.get("/docs/assets/index.html")).status_code == 404
        assert (await client.get("/redoc")).status_code == 404
        assert "/docs" not in json.dumps((await client.get("/openapi.json")).json()["paths"])
