"""SSRF drills: every private, loopback or non-http target is refused before any connection."""

from __future__ import annotations

import pytest

from tests.drills.support import DrillSite, RendererProcess

pytestmark = pytest.mark.chromium


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://[::1]/",
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/",
        "http://localhost/",
        "http://2130706433/",
        "FILE:///etc/passwd",
        "view-source:http://example.com/",
        "javascript:alert(1)",
    ],
)
def test_private_and_non_http_targets_are_refused(renderer: RendererProcess, url: str) -> None:
    response = renderer.client.post("/v1/render", json={"url": url})
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "RENDER_SSRF_BLOCKED"
    assert response.json()["field"] == "url"


def test_redirect_from_allowed_host_to_private_is_refused(
    renderer: RendererProcess, site: DrillSite
) -> None:
    body = {"attempt_id": "ssrf-redirect", "url": f"{site.base}/to-private"}
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page("ssrf-redirect")
    assert page["status"] == "failed"
    assert page["error_code"] == "RENDER_SSRF_BLOCKED"
    assert page["error_kind"] == "content"
    assert page["artifact"] is None
    assert (receipt["status"], receipt["error_code"]) == ("succeeded", None), receipt
    blocked = page["diagnostics"]["blocked_requests"]
    assert blocked[0]["url"] == "http://10.0.0.1/secret"


def test_allow_listed_port_does_not_open_other_ports(renderer: RendererProcess) -> None:
    response = renderer.client.post("/v1/render", json={"url": "http://127.0.0.1:9/"})
    assert response.status_code == 422
    assert response.json()["error"] == "RENDER_SSRF_BLOCKED"
