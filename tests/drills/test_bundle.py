"""Document bundles: a document's own files load from its origin; nothing else does."""

from __future__ import annotations

import base64

import pytest

from tests.drills.support import RendererProcess, decode_png, pixel

pytestmark = pytest.mark.chromium

INNER = "<html><body style='margin:0;background:rgb(0,128,0)'></body></html>"
SITE = (
    "<html><body style='margin:0'>"
    "<iframe src='pages/a.html' style='border:0;width:200px;height:100px;display:block'></iframe>"
    "<img src='assets/missing.png' style='width:1px;height:1px'>"
    "</body></html>"
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_bundle_files_load_and_everything_else_is_blocked(renderer: RendererProcess) -> None:
    body = {
        "attempt_id": "bundle-site-1",
        "document": SITE,
        "files": {"pages/a.html": b64(INNER)},
        "width": 200,
        "height": 120,
        "wait": {"until": "load", "delay_ms": 200},
    }
    accepted = renderer.submit_one(body)
    assert accepted.status_code in (200, 202), accepted.text
    receipt, page = renderer.wait_page("bundle-site-1")
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    diagnostics = page["diagnostics"]
    blocked = [p["url"] for p in diagnostics["blocked_requests"]]
    assert any(url.endswith("/assets/missing.png") for url in blocked), blocked
    assert not any("pages/a.html" in url for url in blocked)
    assert not [p for p in diagnostics["failed_requests"] if "pages/a.html" in p["url"]]
    png = renderer.page_artifact("bundle-site-1")
    image = decode_png(png.content)
    assert pixel(image, 100, 50) == (0, 128, 0)  # the bundled page really loaded in the iframe


@pytest.mark.parametrize(
    "path", ["../escape.html", "/abs.html", "a/../../b", "c:\\\\x", "http://x/y"]
)
def test_bundle_paths_must_stay_inside(renderer: RendererProcess, path: str) -> None:
    body = {"document": SITE, "files": {path: b64(INNER)}, "width": 100, "height": 100}
    response = renderer.client.post("/v1/render", json=body)
    assert response.status_code == 422, response.text
    assert "files" in response.text


def test_files_need_a_document(renderer: RendererProcess) -> None:
    body = {"url": "https://example.com/", "files": {"a.html": b64(INNER)}}
    response = renderer.client.post("/v1/render", json=body)
    assert response.status_code == 422
