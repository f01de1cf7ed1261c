"""A real renderer keeps documents by key: an unknown key is refused, a known one is not resent."""

from __future__ import annotations

import hashlib
import os

import pytest

from tests.drills.support import RendererProcess

pytestmark = pytest.mark.chromium


def page() -> str:
    return (
        f"<html><body style='margin:0;background:#2a6'><h1>{os.urandom(8).hex()}</h1></body></html>"
    )


def key_of(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()


def render(renderer: RendererProcess, **source: str) -> bytes:
    attempt = f"bykey-{os.urandom(6).hex()}"
    body = {"attempt_id": attempt, "width": 320, "height": 180, **source}
    accepted = renderer.submit_one(body)
    assert accepted.status_code == 202, accepted.text
    receipt, page = renderer.wait_page(attempt)
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    return renderer.page_artifact(attempt).content


def test_an_unknown_key_is_refused_with_its_key_then_renders_once_sent(
    renderer: RendererProcess,
) -> None:
    document = page()
    key = key_of(document)
    body = {"attempt_id": f"bykey-{os.urandom(6).hex()}", "document_key": key}
    refused = renderer.submit_one(body)
    assert refused.status_code == 422
    error = refused.json()
    assert error["error"] == "RENDER_DOCUMENT_UNKNOWN"
    assert error["field"] == "pages.0.document_key" and error["missing"] == [key]
    assert renderer.client.get(f"/v1/attempts/{body['attempt_id']}").json()["status"] == "unknown"

    by_value = render(renderer, document=document)
    by_key = render(renderer, document_key=key)
    assert by_key == by_value


def test_a_malformed_key_is_invalid_input_and_a_deck_names_its_missing_page(
    renderer: RendererProcess,
) -> None:
    bad = renderer.submit_one({"attempt_id": "bykey-bad", "document_key": "ABC"})
    assert bad.status_code == 422
    assert bad.json()["error"] == "RENDER_INVALID_INPUT"
    assert bad.json()["field"] == "pages.0.document_key"

    known = page()
    render(renderer, document=known)
    missing = key_of(page())
    deck = {
        "attempt_id": f"bykey-deck-{os.urandom(6).hex()}",
        "pages": [
            {"index": 0, "document_key": key_of(known), "width": 320, "height": 180},
            {"index": 1, "document_key": missing, "width": 320, "height": 180},
        ],
    }
    refused = renderer.client.post("/v1/deck-attempts", json=deck)
    assert refused.status_code == 422
    assert refused.json()["error"] == "RENDER_DOCUMENT_UNKNOWN"
    assert refused.json()["field"] == "pages.1.document_key"
    assert refused.json()["missing"] == [missing]
