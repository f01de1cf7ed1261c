"""The lines a reveal.js slide's page document runs to show one slide, as decktape does.

They go right after the page's `<script src=…reveal.js>`: `Reveal.initialize` is wrapped so
the deck's own options get no transitions, no URL hash or history (the document has no URL of
its own), no fragments (all of a slide shows), no controls or progress bar, and no
auto-sliding; once reveal.js has started, `Reveal.slide(h, v)` shows the slide. reveal.js
starts before the page's `load` event (its plugins load from `data:` URIs), so the `load`
listener moves to the slide before the renderer captures; the `ready` promise covers a deck
whose start comes later. Lazy media (`data-src`) and slide backgrounds are loaded before `load`,
so the capture waits for them (reveal.js itself loads them only near the shown slide). The
print document is one page of the deck in reveal.js's own print
view (`view: 'print'`), which lays every slide out as a page of the slide's size.
"""

from __future__ import annotations

import json
import re

REVEAL_SCRIPT = re.compile(r"(?:^|/)reveal(?:\.min)?\.js(?:[?#].*)?$")
"""A `<script src>` that loads reveal.js's classic (non-module) bundle."""

_GO = r"""
(() => {
  const at = %s;
  const overrides = {
    hash: false, history: false, respondToHashChanges: false, transition: 'none',
    backgroundTransition: 'none', fragments: false, controls: false, progress: false,
    autoSlide: 0, keyboard: false, touch: false, mouseWheel: false, pdfSeparateFragments: false,
  };
  if (!at) overrides.view = 'print';
  const go = () => {
    if (!Reveal.isReady()) return;
    if (at) Reveal.slide(at[0], at[1]);
    document.documentElement.dataset.deckyardSlide = at ? at.join('.') : 'print';
  };
  // reveal.js loads lazy media (`data-src`) and slide backgrounds only near the slide it
  // shows, and after the page's `load`: load them all now, so the capture waits for them and
  // no image of another slide counts as broken. A background's image (the compiler turns an
  // image `data-background` into `data-background-image`) is fetched by a hidden <img>, which
  // holds `load` and is reported when it fails. A background video is a comma-separated list
  // to reveal.js, which would cut an inlined `data:` URI in two: it becomes a `blob:` URL.
  let prepared = false;
  const asBlob = (uri) => {
    const comma = uri.indexOf(',');
    const head = uri.slice(5, comma), body = uri.slice(comma + 1);
    const bytes = head.endsWith(';base64')
      ? Uint8Array.from(atob(body), (c) => c.charCodeAt(0))
      : new TextEncoder().encode(decodeURIComponent(body));
    return URL.createObjectURL(new Blob([bytes], { type: head.split(';')[0] }));
  };
  const prepare = () => {
    if (prepared || !document.querySelector('.reveal .slides')) return;
    prepared = true;
    for (const el of document.querySelectorAll('.reveal .slides [data-src]')) {
      if (['IMG', 'VIDEO', 'AUDIO', 'SOURCE'].includes(el.tagName) && !el.getAttribute('src')) {
        el.setAttribute('src', el.getAttribute('data-src'));
      }
    }
    for (const slide of document.querySelectorAll('.reveal .slides section')) {
      const video = slide.getAttribute('data-background-video') || '';
      if (video.startsWith('data:')) slide.setAttribute('data-background-video', asBlob(video));
      const url = slide.getAttribute('data-background-image');
      if (!url) continue;
      const img = document.createElement('img');
      img.hidden = true;
      img.alt = '';
      img.dataset.deckyardBackground = '';
      img.src = url;
      document.body.appendChild(img);
    }
  };
  document.addEventListener('DOMContentLoaded', prepare);
  const initialize = Reveal.initialize;
  Reveal.initialize = (options) => {
    prepare();
    const ready = initialize.call(Reveal, Object.assign({}, options || {}, overrides));
    ready.then(go);
    return ready;
  };
  window.addEventListener('load', go);
})();
"""


_STEPPED = r"""
(() => {
  // A page of one step: no fragment animates, and on a printed page of a later step the
  // slide number stays the slide's (reveal.js adds ".k" for fragment k).
  const still = document.createElement('style');
  still.textContent = '.reveal .slides section .fragment { transition: none !important; }';
  document.head.appendChild(still);
  Reveal.on('pdf-ready', () => {
    for (const page of document.querySelectorAll('.pdf-page')) {
      const number = page.querySelector('.slide-number-pdf');
      if (number && page.querySelector('.current-fragment')) {
        number.innerHTML = number.innerHTML.replace(/\.\d+$/, '');
      }
    }
  });
})();
"""


def go_to_slide_script(at: tuple[int, int] | None, fragment: int | None = None) -> str:
    """The script (without its element) that shows slide `at` `(h, v)` of the page's deck.

    With `at` None, reveal.js's print view lays out every slide, one per printed page.
    With `fragment` (a page of a stepped deck, `steps.py`), fragments are on: the slide shows
    its fragments up to that index (-1: none), as `Reveal.slide(h, v, f)` does, and the print
    view prints each fragment step on a page of its own (`pdfSeparateFragments`).
    """
    script = _GO % json.dumps(list(at) if at else None)
    if fragment is None:
        return script
    stepped = (
        script.replace("fragments: false", "fragments: true")
        .replace("pdfSeparateFragments: false", "pdfSeparateFragments: true")
        .replace("Reveal.slide(at[0], at[1]);", f"Reveal.slide(at[0], at[1], {fragment:d});")
    )
    return stepped + _STEPPED
