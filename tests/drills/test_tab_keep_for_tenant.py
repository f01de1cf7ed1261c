"""Single renders (one-page attempts) of one tenant share a tab without a reset; anyone else
gets a reset tab.

A document render that runs no script and brings no files leaves its tab to the next render of
the same tenant (the control plane sends the workspace): no navigation and no clears between
them. A render of another tenant, one without a tenant, and the render after a scripted page
get the tab reset and verified, as before. Counted through the renderer's `/healthz`.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest

from deckyard.render.renderer.browser.tabs import DOCUMENT_URL, INLINE_PREFIX
from tests.drills.support import RendererProcess, decode_png, pixel
from tests.drills.test_deck_tab_reuse import BLUE_RIGHT, RED_LEFT
from tests.drills.test_render_output import READER, WRITER
from tests.helpers.eventually import eventually_sync

pytestmark = pytest.mark.chromium

FONT = Path(__file__).resolve().parents[2] / "examples/launch-deck/assets/fonts"
FONT_BYTES = (FONT / "NotoSerifDisplay-Italic.ttf").read_bytes()
FONT_URL = DOCUMENT_URL + INLINE_PREFIX + hashlib.sha256(FONT_BYTES).hexdigest()

# Uses the font inline (the renderer serves it from the page's origin at FONT_URL): no script.
WITH_FONT = (
    "<html><head><style>@font-face{font-family:Inline;src:url(data:font/ttf;base64,"
    + base64.b64encode(FONT_BYTES).decode("ascii")
    + ")}</style></head><body style='margin:0'><p style='font-family:Inline'>Aa</p></body></html>"
)
# Asks for that URL without having the font: only a tab that kept the first page can serve it.
FONT_PROBE = f"""<html><head><style>@font-face{{font-family:Probe;src:url("{FONT_URL}")}}</style>
</head><body><p style="font-family:Probe">Aa</p><script>
document.fonts.load('16px Probe').then(
  (faces) => {{ console.error('FONT ' + faces.length); window.done = true; }},
  () => {{ console.error('FONT error'); window.done = true; }});
</script></body></html>"""


def tabs(renderer: RendererProcess) -> dict[str, int]:
    counts: dict[str, int] = renderer.client.get("/healthz").json()["tabs"]
    return counts


def render(
    renderer: RendererProcess, attempt_id: str, document: str, tenant: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"attempt_id": attempt_id, "document": document}
    body |= {"width": 200, "height": 100, "tenant": tenant}
    if "<script" in document:
        body["wait"] = {"expression": "window.done === true"}
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page(attempt_id)
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    return page


def png(renderer: RendererProcess, attempt_id: str) -> Any:
    response = renderer.page_artifact(attempt_id)
    assert response.status_code == 200
    return decode_png(response.content)


def console(receipt: dict[str, Any]) -> str:
    return " ".join(receipt["diagnostics"]["console_errors"])


def settled_resets(renderer: RendererProcess) -> int:
    """The reset count once the background reset of the last render (if any) is done."""
    seen: list[int] = []

    def steady() -> bool:
        seen.append(tabs(renderer)["resets"])
        return len(seen) > 3 and seen[-1] == seen[-4]

    eventually_sync(steady, timeout=10, every=0.1)
    return seen[-1]


def test_one_tenants_inert_renders_follow_each_other_without_a_reset(
    one_tab: RendererProcess,
) -> None:
    render(one_tab, "keep-warm", RED_LEFT, "a")
    before, kept = settled_resets(one_tab), tabs(one_tab)["kept"]
    render(one_tab, "keep-blue", BLUE_RIGHT, "a")
    render(one_tab, "keep-red", RED_LEFT, "a")
    assert settled_resets(one_tab) == before
    assert tabs(one_tab)["kept"] == kept + 2
    blue, red = png(one_tab, "keep-blue"), png(one_tab, "keep-red")
    assert pixel(blue, 50, 50) == (255, 255, 255) and pixel(blue, 150, 50) == (0, 0, 255)
    assert pixel(red, 50, 50) == (255, 0, 0) and pixel(red, 150, 50) == (255, 255, 255)


def test_another_tenant_or_none_gets_the_tab_reset_first(one_tab: RendererProcess) -> None:
    fresh = console(render(one_tab, "other-fresh", READER, "b"))
    for n, tenant in enumerate(["c", None]):
        render(one_tab, f"other-inert-{n}", RED_LEFT, "a")
        before = settled_resets(one_tab)
        render(one_tab, f"other-blue-{n}", BLUE_RIGHT, tenant)
        # one reset, before the render: an inert page of "c" is kept after, one without a
        # tenant is reset after too
        assert settled_resets(one_tab) == before + (1 if tenant else 2)
        blue = png(one_tab, f"other-blue-{n}")
        assert pixel(blue, 50, 50) == (255, 255, 255) and pixel(blue, 150, 50) == (0, 0, 255)
        render(one_tab, f"other-inert-again-{n}", RED_LEFT, "a")
        assert console(render(one_tab, f"other-reader-{n}", READER, tenant)) == fresh


def test_a_scripted_page_is_reset_after_even_for_its_own_tenant(
    one_tab: RendererProcess,
) -> None:
    fresh = console(render(one_tab, "script-fresh", READER, "a"))
    kept = tabs(one_tab)["kept"]
    before = settled_resets(one_tab)
    render(one_tab, "script-writer", WRITER, "a")
    assert settled_resets(one_tab) == before + 1
    assert console(render(one_tab, "script-after", READER, "a")) == fresh
    assert tabs(one_tab)["kept"] == kept


def test_a_render_with_files_is_reset_after(one_tab: RendererProcess) -> None:
    render(one_tab, "files-warm", RED_LEFT, "a")
    before = settled_resets(one_tab)
    body = {
        "attempt_id": "files-page",
        "document": '<img src="dot.svg">',
        "files": {
            "dot.svg": base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode()
        },
        "width": 200,
        "height": 100,
        "tenant": "a",
    }
    assert one_tab.submit_one(body).status_code == 202
    receipt, page = one_tab.wait_page("files-page")
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    assert settled_resets(one_tab) == before + 1


def test_a_kept_page_leaves_no_font_to_the_next_page(one_tab: RendererProcess) -> None:
    """The next page of the same tenant, written over a page that used a font inline, cannot
    load that font by its URL: the tab serves a render's files during that render only, and
    Chromium does not answer the URL from its cache either."""
    for tenant in ("a", "b"):
        render(one_tab, f"font-{tenant}", WITH_FONT, "a")
        probe = console(render(one_tab, f"font-probe-{tenant}", FONT_PROBE, tenant))
        assert probe in ("FONT 0", "FONT error"), probe
