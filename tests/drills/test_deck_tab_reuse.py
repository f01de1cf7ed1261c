"""A deck attempt's pages share their slot's tab: no reset after a page that runs no script.

Each page's PNG shows only that page; a page that ran script still gets the full reset before the
next page, so nothing it left behind reaches the next page of the same deck.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from deckyard.render.renderer.browser.tabs import runs_script
from tests.drills.support import RendererProcess, decode_png, pixel
from tests.drills.test_render_output import READER, WRITER, renderer_processes

pytestmark = pytest.mark.chromium

RED_LEFT = """<html><body style="margin:0;background:#fff">
<div style="position:absolute;left:0;top:0;width:100px;height:100px;background:rgb(255,0,0)">
</div></body></html>"""
BLUE_RIGHT = """<html><body style="margin:0;background:#fff">
<div style="position:absolute;left:100px;top:0;width:100px;height:100px;background:rgb(0,0,255)">
</div></body></html>"""


def deck(renderer: RendererProcess, attempt_id: str, documents: list[str]) -> dict[str, Any]:
    pages: list[dict[str, Any]] = [
        {"index": i, "document": doc, "width": 200, "height": 100}
        for i, doc in enumerate(documents)
    ]
    for page in pages:
        if "<script" in page["document"]:
            page["wait"] = {"expression": "window.done === true"}
    body = {"attempt_id": attempt_id, "pages": pages}
    assert renderer.client.post("/v1/deck-attempts", json=body).status_code == 202
    receipt = renderer.wait_terminal(attempt_id)
    assert receipt["status"] == "succeeded", receipt
    assert [p["status"] for p in receipt["pages"]] == ["succeeded"] * len(pages)
    return receipt


def png(renderer: RendererProcess, attempt_id: str, index: int) -> Any:
    response = renderer.client.get(f"/v1/attempts/{attempt_id}/pages/{index}/artifact")
    assert response.status_code == 200
    return decode_png(response.content)


def test_pages_written_over_each_other_show_only_themselves(one_tab: RendererProcess) -> None:
    deck(one_tab, "reuse-deck-warm", [RED_LEFT])
    before = renderer_processes(one_tab)
    deck(one_tab, "reuse-deck-inert", [RED_LEFT, BLUE_RIGHT, RED_LEFT])
    red, blue, red_again = (png(one_tab, "reuse-deck-inert", i) for i in range(3))
    assert pixel(red, 50, 50) == (255, 0, 0) and pixel(red, 150, 50) == (255, 255, 255)
    assert pixel(blue, 50, 50) == (255, 255, 255) and pixel(blue, 150, 50) == (0, 0, 255)
    assert pixel(red_again, 50, 50) == (255, 0, 0)
    assert pixel(red_again, 150, 50) == (255, 255, 255)
    # one tab (one Chromium renderer process) served the whole deck
    assert renderer_processes(one_tab) == before


def test_a_page_that_ran_script_leaves_nothing_for_the_next_page(
    one_tab: RendererProcess,
) -> None:
    receipt = deck(one_tab, "reuse-deck-writer", [RED_LEFT, READER, WRITER, READER, RED_LEFT])
    states = {p["index"]: " ".join(p["diagnostics"]["console_errors"]) for p in receipt["pages"]}
    first = json.loads(states[1].removeprefix("STATE "))
    assert first["url"] == "http://document.deckyard.invalid/"
    assert (first["cookie"], first["local"], first["databases"]) == ("", 0, [])
    assert states[3] == states[1]
    last = png(one_tab, "reuse-deck-writer", 4)
    assert pixel(last, 50, 50) == (255, 0, 0)


@pytest.mark.parametrize(
    ("document", "scripted"),
    [
        (RED_LEFT, False),
        ("<p>button=1, condition = on</p>", False),
        ("<script>1</script>", True),
        ("<SCRIPT src=x>", True),
        ('<img src="x" onerror="1">', True),
        ('<svg><set onbegin="1"/></svg>', True),
        ('<iframe srcdoc="&lt;script&gt;"></iframe>', True),
        ('<a href="javascript:1">x</a>', True),
        ("<object data=x></object>", True),
        ('<meta http-equiv="refresh" content="0;url=x">', True),
        ("<META HTTP-EQUIV=Refresh content=1>", True),
        ('<meta http-equiv="content-type" content="text/html">', False),
    ],
)
def test_runs_script_is_conservative(document: str, scripted: bool) -> None:
    assert runs_script(document) is scripted
