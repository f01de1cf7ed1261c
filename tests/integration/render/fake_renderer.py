"""An in-process renderer double speaking the renderer's HTTP API through `httpx.MockTransport`.

Integration tests use it to control receipts exactly (live, succeeded, unknown, another epoch,
unreachable); the drills use real renderer processes and real Chromium instead.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from deckyard.render.protocol import SIGNATURE_HEADER

PNG = b"\x89PNG\r\n\x1a\n" + b"fake-image-bytes" * 8


@dataclass
class FakeRenderer:
    """One renderer: its epoch, slots, attempts and whether it answers at all."""

    url: str
    slots: int = 2
    epoch: str = "epoch-1"
    up: bool = True
    attempts: dict[str, str] = field(default_factory=dict)
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    documents: set[str] | None = None
    """With a set: a renderer that keeps documents by key (refuses keys it was never sent)."""

    def set_all(self, status: str) -> None:
        """Make every known attempt report `status`."""
        for key in self.attempts:
            self.attempts[key] = status

    def restart(self, epoch: str) -> None:
        """Come back under a new epoch, knowing nothing."""
        self.epoch = epoch
        self.attempts.clear()
        self.up = True

    def receipt(self, key: str) -> dict[str, Any]:
        """The attempt's receipt: its status, and once it ended every page's outcome (each
        page ends as the attempt does: rendered, checked only, or failed for its content)."""
        status = self.attempts.get(key, "unknown")
        body: dict[str, Any] = {
            "attempt_id": key,
            "status": status,
            "renderer_id": self.url,
            "epoch": self.epoch,
        }
        if status == "unknown":
            return body
        ended = status in ("succeeded", "failed")
        pages = self.bodies.get(key, {}).get("pages", [])
        body["pages"] = [self._page(page, status) for page in pages] if ended else []
        if status == "failed":
            body.update(error_code="RENDER_PAGE_ERROR", error_kind="content", retryable=False)
        return body

    @staticmethod
    def _page(page: dict[str, Any], status: str) -> dict[str, Any]:
        body: dict[str, Any] = {"index": page["index"], "status": status}
        if status == "failed":
            body.update(error_code="RENDER_PAGE_ERROR", message="the page threw")
            return body
        body["diagnostics"] = {"console_errors": []}
        if page.get("capture", True):
            body["artifact"] = {
                "format": "png",
                "content_type": "image/png",
                "size": len(PNG),
                "sha256": hashlib.sha256(PNG).hexdigest(),
            }
        return body

    def _unknown_document(self, body: dict[str, Any]) -> httpx.Response | None:
        if self.documents is None:
            return None
        missing: list[str] = []
        for page in body["pages"]:
            if "document" in page:
                self.documents.add(hashlib.sha256(page["document"].encode()).hexdigest())
            wanted = page.get("document_key")
            if wanted is not None and wanted not in self.documents:
                missing.append(wanted)
        if not missing:
            return None
        return httpx.Response(
            422,
            json={
                "error": "RENDER_DOCUMENT_UNKNOWN",
                "message": f"{len(missing)} document(s) not held here; send them by value",
                "field": "pages.0.document_key",
                "missing": missing,
            },
        )

    def handle(self, request: httpx.Request) -> httpx.Response:
        if not self.up:
            raise httpx.ConnectError("connection refused", request=request)
        assert request.headers.get(SIGNATURE_HEADER), "unsigned call"
        path = request.url.path
        self.calls.append(f"{request.method} {path}")
        if path == "/v1/capabilities":
            return httpx.Response(
                200,
                json={
                    "renderer_id": self.url,
                    "epoch": self.epoch,
                    "slots": self.slots,
                    "free_slots": self.slots,
                    "browser_version": "fake",
                    "browser_generation": 1,
                    "formats": ["png"],
                    "max_dimension": 8192,
                    "max_pixels": 8192 * 8192,
                    "max_scale": 4.0,
                    "max_timeout_seconds": 300.0,
                },
            )
        if path == "/v1/deck-attempts" and request.method == "POST":
            body = json.loads(request.content)
            key = body["attempt_id"]
            refusal = self._unknown_document(body)
            if refusal is not None:
                return refusal
            self.bodies[key] = body
            self.attempts.setdefault(key, "accepted")
            return httpx.Response(202, json=self.receipt(key))
        if path == "/v1/attempts":
            ids = request.url.params["ids"].split(",")
            return httpx.Response(200, json={"receipts": [self.receipt(i) for i in ids]})
        if path == "/v1/changes":  # a renderer from before the change long-poll
            return httpx.Response(404, json={"error": "RENDER_INVALID_INPUT"})
        key = path.split("/")[3]
        if path.endswith("/artifact"):
            index = int(path.split("/")[5])
            page = next(p for p in self.bodies[key]["pages"] if p["index"] == index)
            if self.attempts.get(key) != "succeeded" or not page.get("capture", True):
                return httpx.Response(404, json={"error": "RENDER_RESULT_LOST"})
            sha = hashlib.sha256(PNG).hexdigest()
            return httpx.Response(
                200,
                content=PNG,
                headers={
                    "X-Deckyard-Artifact-Sha256": sha,
                    "X-Deckyard-Artifact-Size": str(len(PNG)),
                },
            )
        if request.method == "DELETE":
            if key in self.attempts:
                self.attempts[key] = "cancelled"
            return httpx.Response(200, json=self.receipt(key))
        return httpx.Response(404, json={"error": "RENDER_INVALID_INPUT"})


class FakeFleet:
    """Routes each call to the fake renderer whose URL it targets."""

    def __init__(self, *renderers: FakeRenderer) -> None:
        self.by_host = {urlsplit(r.url).netloc: r for r in renderers}
        self.transport = httpx.MockTransport(self._route)

    def _route(self, request: httpx.Request) -> httpx.Response:
        return self.by_host[request.url.netloc.decode()].handle(request)
