"""Step-aware export: a deck with one page per step of each slide (`deckyard render --steps`).

`step_deck` is a pure function of the deck: every slide with K steps (reveal.js fragments,
Marp fragmented lists, Slidev clicks; `step_timing.py` has each tool's rule) becomes K + 1
pages, steps 0..K, in the slide's own order, as reveal.js's print view with
`pdfSeparateFragments` and `slidev export --with-clicks` do: step 0 shows what the slide
shows as it opens, step K everything. Marp CLI cannot export steps; Deckyard follows Marp's
own presenter (bespoke), which opens a slide with none of its fragments shown. A slide without
steps stays one page. Step 0 keeps the slide's page name; step k is `<name>.step-k`.

Each page's text starts with a mark (`<!--deckyard-step 2/3 slide 5-->`: step 2 of 3 of the
fifth slide), which the compiler reads and removes first (`split_step`): Marp and Slidev
pages get the elements not shown yet `visibility: hidden` (the layout does not move); a
reveal.js page lets reveal.js itself go to the fragment (`Reveal.slide(h, v, f)`), and its
print view separates fragments. The slide number shown (Marp's `paginate`, reveal.js's
`slideNumber`, a Markdown deck's `paginate`) counts slides, not steps, on every step.

Any output calls it the same way: `compile_deck(step_deck(deck, limits), limits)` gives the
step pages, `compile_print_document(step_deck(deck, limits), limits)` the stepped PDF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bs4 import BeautifulSoup

from deckyard.decks.compile.slide_markdown import render_slide
from deckyard.decks.compile.step_timing import (
    hide_until_shown,
    marp_timings,
    reveal_fragment_count,
    slidev_timings,
    step_count,
)
from deckyard.decks.source.deck_source import DeckSource, PageKind, PageSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.marp_deck import MARP_MARK
from deckyard.decks.source.reveal_html import SLIDE_MARK, reveal_slides

STEP_MARK = re.compile(
    r"^<!--deckyard-step (?P<step>\d+)/(?P<count>\d+) slide (?P<number>\d+)-->\n"
)
STEP_SUFFIX = ".step-"
"""Step k (k >= 1) of page `03-agenda` is the page `03-agenda.step-k`."""


@dataclass(frozen=True)
class StepMark:
    """Which step a page shows: `step` of `count` (0..count) of slide `number` (from 1)."""

    step: int
    count: int
    number: int

    def text(self) -> str:
        """The mark as it starts a page's text."""
        return f"<!--deckyard-step {self.step}/{self.count} slide {self.number}-->\n"


def split_step(page: PageSource) -> tuple[PageSource, StepMark | None]:
    """`page` without its step mark, and the mark (None for a page of an unstepped deck)."""
    found = STEP_MARK.match(page.text)
    if found is None:
        return page, None
    mark = StepMark(int(found["step"]), int(found["count"]), int(found["number"]))
    return page.model_copy(update={"text": page.text[found.end() :]}), mark


def step_name(name: str, step: int) -> str:
    """The page name of step `step` of the slide `name` (`name` itself for step 0)."""
    return name if step == 0 else f"{name}{STEP_SUFFIX}{step}"


def slide_name(name: str, mark: StepMark) -> str:
    """The slide's own page name, from the name of one of its steps."""
    return name.removesuffix(f"{STEP_SUFFIX}{mark.step}") if mark.step else name


def apply_step(soup: BeautifulSoup, step: int, *, marp: bool) -> None:
    """Hide what a Marp or Markdown (Slidev) slide does not show yet at `step`."""
    hide_until_shown(marp_timings(soup) if marp else slidev_timings(soup), step)


class _Counter:
    """Counts a page's steps; a reveal.js deck's HTML is parsed once for all its pages."""

    def __init__(self, limits: DeckLimits) -> None:
        self.limits = limits
        self.reveal: dict[str, dict[tuple[int, int], int]] = {}

    def _reveal(self, body: str, at: tuple[int, int]) -> int:
        counts = self.reveal.get(body)
        if counts is None:
            soup = BeautifulSoup(body, "html5lib")
            counts = {(h, v): reveal_fragment_count(s) for h, v, s in reveal_slides(soup)}
            self.reveal[body] = counts
        return counts.get(at, 0)

    def count(self, page: PageSource) -> int:
        if page.kind is PageKind.MARKDOWN:
            html = render_slide(
                page.text,
                allow_html=self.limits.markdown_html,
                extensions=self.limits.markdown_extensions,
            )
            return step_count(slidev_timings(BeautifulSoup(html, "html5lib")))
        reveal = SLIDE_MARK.match(page.text)
        if reveal is not None:
            if reveal["h"] is None:
                return 0
            return self._reveal(page.text[reveal.end() :], (int(reveal["h"]), int(reveal["v"])))
        if MARP_MARK.match(page.text):
            return step_count(marp_timings(BeautifulSoup(page.text, "html5lib")))
        return 0


def page_steps(page: PageSource, limits: DeckLimits) -> int:
    """How many steps the slide `page` has (0: it shows everything at once)."""
    return _Counter(limits).count(page)


def step_deck(deck: DeckSource, limits: DeckLimits) -> DeckSource:
    """`deck` with each slide as one page per step, in order (see the module docstring).

    Pages already marked (a deck this made) are returned as they are.
    """
    if any(STEP_MARK.match(page.text) for page in deck.pages):
        return deck
    counter = _Counter(limits)
    pages: list[PageSource] = []
    for number, page in enumerate(deck.pages, start=1):
        count = counter.count(page)
        for step in range(count + 1):
            mark = StepMark(step, count, number)
            update = {"name": step_name(page.name, step), "text": mark.text() + page.text}
            pages.append(page.model_copy(update=update))
    return deck.model_copy(update={"pages": pages})


def reveal_print_mark() -> str:
    """The mark that asks for a reveal.js print view with fragments on pages of their own."""
    return StepMark(0, 0, 0).text()
