"""The static site's `index.html`: one slide at a time, scaled to the window, keyboard driven.

The current page is shown in an iframe at slide size, scaled to fit. Right arrow, Page Down and
Space go forward; left arrow and Page Up go back; Home and End jump to the ends; the location
hash (`#3`) keeps the position across reloads. Links in a slide can be clicked (they open in a
new tab); after a click the viewer takes the focus back so key presses still reach it. `P`
opens the presenter view (`presenter.py`) in a second window, which follows the viewer and
drives it. A small inline script, no network.
"""

from __future__ import annotations

import html
import json

from deckyard.outputs.site_presenter import PRESENTER

_STYLE = """
html, body { margin: 0; height: 100%; overflow: hidden; background: #111; }
#stage { position: absolute; left: 0; top: 0; width: __W__px; height: __H__px;
         transform-origin: 0 0; }
#frame { display: block; width: __W__px; height: __H__px; border: 0; background: #fff; }
#bar { position: fixed; right: 12px; bottom: 8px; display: flex; gap: 8px; align-items: center;
       font: 14px system-ui, sans-serif; color: #bbb; }
#bar button { font: inherit; color: inherit; background: #222; border: 1px solid #444;
              border-radius: 4px; padding: 2px 10px; cursor: pointer; }
"""

_SCRIPT = """
(function () {
  var pages = __PAGES__;
  var W = __W__, H = __H__;
  var frame = document.getElementById("frame");
  var stage = document.getElementById("stage");
  var pos = document.getElementById("pos");
  var current = 0;
  var presenter = null;
  function fromHash() {
    var n = parseInt(location.hash.slice(1), 10);
    return isNaN(n) ? 0 : n - 1;
  }
  function show(i) {
    current = Math.min(Math.max(i, 0), pages.length - 1);
    if (frame.getAttribute("src") !== pages[current]) frame.setAttribute("src", pages[current]);
    pos.textContent = (current + 1) + " / " + pages.length;
    if (presenter && !presenter.closed) {
      presenter.postMessage({ deckyard: "slide", index: current }, "*");
    }
    if (location.hash !== "#" + (current + 1)) {
      try {
        history.replaceState(null, "", "#" + (current + 1));
      } catch (e) {
        /* some file: URLs refuse it; the hash is only a nicety */
      }
    }
  }
  function fit() {
    var s = Math.min(innerWidth / W, innerHeight / H);
    var x = (innerWidth - W * s) / 2, y = (innerHeight - H * s) / 2;
    stage.style.transform = "translate(" + x + "px," + y + "px) scale(" + s + ")";
  }
  document.addEventListener("keydown", function (e) {
    var k = e.key;
    if (k === "ArrowRight" || k === "PageDown" || k === " ") show(current + 1);
    else if (k === "ArrowLeft" || k === "PageUp") show(current - 1);
    else if (k === "Home") show(0);
    else if (k === "End") show(pages.length - 1);
    else if (k === "p" || k === "P") openPresenter();
    else return;
    e.preventDefault();
  });
  function openPresenter() {
    presenter = window.open("__PRESENTER__#" + (current + 1), "deckyard-presenter",
                            "width=1280,height=760");
  }
  addEventListener("message", function (e) {
    if (e.data && e.data.deckyard === "go") show(e.data.index);
  });
  addEventListener("blur", function () {
    setTimeout(function () { if (document.activeElement === frame) window.focus(); }, 0);
  });
  document.getElementById("prev").addEventListener("click", function () { show(current - 1); });
  document.getElementById("next").addEventListener("click", function () { show(current + 1); });
  document.getElementById("present").addEventListener("click", openPresenter);
  addEventListener("hashchange", function () { show(fromHash()); });
  addEventListener("resize", fit);
  fit();
  show(fromHash());
})();
"""


def index_html(
    title: str, page_files: list[str], width: int, height: int, presenter: str = PRESENTER
) -> str:
    """The viewer page for `page_files` (site-relative paths, in order) of `width` x `height`."""
    pages_js = json.dumps(page_files).replace("</", "<\\/")
    size = {"__W__": str(width), "__H__": str(height)}
    style, script = _STYLE, _SCRIPT.replace("__PAGES__", pages_js)
    script = script.replace("__PRESENTER__", json.dumps(presenter)[1:-1])
    for key, value in size.items():
        style, script = style.replace(key, value), script.replace(key, value)
    first = html.escape(page_files[0])
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{style}</style>\n</head>\n<body>\n"
        f'<div id="stage"><iframe id="frame" title="Slide" tabindex="-1" src="{first}">'
        "</iframe></div>\n"
        '<div id="bar"><button id="prev" type="button" aria-label="Previous slide">&lsaquo;'
        f'</button><span id="pos">1 / {len(page_files)}</span><button id="next" type="button" '
        'aria-label="Next slide">&rsaquo;</button><button id="present" type="button" '
        'title="Presenter view (P)">Presenter</button></div>\n'
        f"<script>{script}</script>\n</body>\n</html>\n"
    )
