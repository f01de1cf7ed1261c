"""A document that navigates its page away fails with RENDER_NAVIGATION_BLOCKED (issue 14).

Without the check, a `location =`, a link click or a form submit ended as a succeeded render
of Chromium's "blocked" page, and a meta refresh failed with "Execution context was destroyed".
"""

from __future__ import annotations

import pytest

from tests.drills.support import RendererProcess

pytestmark = pytest.mark.chromium

AWAY = "https://example.com/elsewhere"
PAGES = {
    "location": f"<p>x</p><script>location = '{AWAY}'</script>",
    "link-click": f'<a id="a" href="{AWAY}">go</a><script>document.getElementById("a").click()'
    "</script>",
    "form-submit": f'<form id="f" action="{AWAY}" method="post"><input name="q" value="1">'
    '</form><script>document.getElementById("f").submit()</script>',
    "meta-refresh": f'<meta http-equiv="refresh" content="0;url={AWAY}"><p>x</p>',
    "bundled-page": '<p>x</p><script>location = "other.html"</script>',
}


@pytest.mark.parametrize("how", sorted(PAGES))
def test_navigating_away_is_blocked(renderer: RendererProcess, how: str) -> None:
    body = {
        "attempt_id": f"nav-{how}",
        "document": PAGES[how],
        "files": {"other.html": "PHA+b3RoZXI8L3A+"},
        "width": 200,
        "height": 100,
        "wait": {"until": "load", "delay_ms": 300},
    }
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page(f"nav-{how}")
    assert page["status"] == "failed", receipt
    assert page["error_code"] == "RENDER_NAVIGATION_BLOCKED", receipt
    assert page["error_kind"] == "content"
    # the page's content failed, not the attempt: it gave its page a verdict
    assert (receipt["status"], receipt["error_code"]) == ("succeeded", None), receipt


def test_same_document_navigation_is_fine(renderer: RendererProcess) -> None:
    page = (
        '<a id="a" href="#part">go</a><p id="part">part</p><script>'
        'document.getElementById("a").click(); history.pushState({}, "", "/step-2")</script>'
    )
    body = {"attempt_id": "nav-fragment", "document": page, "width": 200, "height": 100}
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page("nav-fragment")
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
