"""The built site's presenter view (`presenter.html`): notes, a timer, this slide and the next.

The viewer opens it in a second window (key `P`); the two follow each other with
`postMessage`, which works between `file://` pages too. The notes are read from the compiled
page documents (`.dy-notes`, hidden on the slide itself) when the site is built, so the
presenter page carries them and needs no network.
"""

from __future__ import annotations

import html
import json

from bs4 import BeautifulSoup

from deckyard.outputs.interface import NOTES_CLASS

PRESENTER = "presenter.html"

_STYLE = """
html, body { margin: 0; height: 100%; background: #16181d; color: #e8eaed;
             font: 16px "Noto Sans", system-ui, sans-serif; }
main { display: grid; grid-template-columns: 3fr 2fr; grid-template-rows: auto 1fr;
       gap: 12px; height: 100%; box-sizing: border-box; padding: 12px; }
.box { position: relative; overflow: hidden; background: #000; border-radius: 6px; }
.box iframe { position: absolute; left: 0; top: 0; border: 0; transform-origin: 0 0;
              width: __W__px; height: __H__px; pointer-events: none; background: #fff; }
#current { grid-row: 1 / 3; }
#side { display: grid; grid-template-rows: auto auto 1fr; gap: 12px; min-height: 0; }
#next { aspect-ratio: __W__ / __H__; }
#clock { display: flex; gap: 12px; align-items: center; font-size: 28px;
         font-variant-numeric: tabular-nums; }
#clock button { font: 14px system-ui, sans-serif; color: inherit; background: #2a2e36;
                border: 1px solid #444; border-radius: 4px; padding: 4px 10px; cursor: pointer; }
#notes { overflow: auto; font-size: 22px; line-height: 1.45; white-space: pre-wrap; }
#notes:empty::before { content: "No notes for this slide."; opacity: 0.5; }
"""

_SCRIPT = """
(function () {
  var pages = __PAGES__, notes = __NOTES__, W = __W__, H = __H__;
  var cur = document.getElementById("cur"), nxt = document.getElementById("nxt");
  var notesBox = document.getElementById("notes"), pos = document.getElementById("pos");
  var elapsed = document.getElementById("elapsed"), started = Date.now(), current = 0;
  function fitIn(frame) {
    var box = frame.parentNode, s = Math.min(box.clientWidth / W, box.clientHeight / H);
    frame.style.transform = "scale(" + s + ")";
  }
  function show(i) {
    current = Math.min(Math.max(i, 0), pages.length - 1);
    if (cur.getAttribute("src") !== pages[current]) cur.setAttribute("src", pages[current]);
    var n = current + 1 < pages.length ? pages[current + 1] : "about:blank";
    if (nxt.getAttribute("src") !== n) nxt.setAttribute("src", n);
    notesBox.textContent = (notes[current] || []).join("\\n\\n");
    pos.textContent = (current + 1) + " / " + pages.length;
  }
  function go(i) {
    show(i);
    if (window.opener) window.opener.postMessage({ deckyard: "go", index: current }, "*");
  }
  function tick() {
    var s = Math.floor((Date.now() - started) / 1000);
    var m = Math.floor(s / 60);
    elapsed.textContent = (m < 10 ? "0" : "") + m + ":" + (s % 60 < 10 ? "0" : "") + (s % 60);
  }
  addEventListener("message", function (e) {
    if (e.data && e.data.deckyard === "slide") show(e.data.index);
  });
  document.addEventListener("keydown", function (e) {
    var k = e.key;
    if (k === "ArrowRight" || k === "PageDown" || k === " ") go(current + 1);
    else if (k === "ArrowLeft" || k === "PageUp") go(current - 1);
    else if (k === "Home") go(0);
    else if (k === "End") go(pages.length - 1);
    else return;
    e.preventDefault();
  });
  document.getElementById("reset").addEventListener("click", function () {
    started = Date.now(); tick();
  });
  addEventListener("resize", function () { fitIn(cur); fitIn(nxt); });
  var n = parseInt(location.hash.slice(1), 10);
  show(isNaN(n) ? 0 : n - 1);
  fitIn(cur); fitIn(nxt); tick();
  setInterval(tick, 1000);
})();
"""


def page_notes(document: str) -> list[str]:
    """The speaker notes in a compiled page document, in order (empty when it has none)."""
    if NOTES_CLASS not in document:
        return []
    soup = BeautifulSoup(document, "html.parser")
    return [
        p.get_text()
        for aside in soup.find_all("aside", class_=NOTES_CLASS)
        for p in aside.find_all("p")
    ]


def presenter_html(
    title: str, page_files: list[str], notes: list[list[str]], width: int, height: int
) -> str:
    """The presenter page for `page_files` with each page's `notes`."""
    values = {
        "__PAGES__": json.dumps(page_files).replace("</", "<\\/"),
        "__NOTES__": json.dumps(notes, ensure_ascii=False).replace("</", "<\\/"),
        "__W__": str(width),
        "__H__": str(height),
    }
    style, script = _STYLE, _SCRIPT
    for key, value in values.items():
        style, script = style.replace(key, value), script.replace(key, value)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Presenter - {html.escape(title)}</title>\n<style>{style}</style>\n</head>\n"
        '<body>\n<main><div class="box" id="current"><iframe id="cur" title="Current slide" '
        'tabindex="-1"></iframe></div>\n<div id="side"><div class="box" id="next">'
        '<iframe id="nxt" title="Next slide" tabindex="-1"></iframe></div>\n'
        '<div id="clock"><span id="elapsed">00:00</span><span id="pos"></span>'
        '<button id="reset" type="button">Reset timer</button></div>\n'
        '<div id="notes" aria-live="polite"></div></div></main>\n'
        f"<script>{script}</script>\n</body>\n</html>\n"
    )
