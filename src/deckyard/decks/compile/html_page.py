"""Parses one page (HTML, or Markdown rendered to HTML) and inlines everything it references.

The page is parsed with html5lib through Beautiful Soup, the same tree a browser builds. Page
`<style>` and `<link rel=stylesheet>` become one scoped stylesheet; every `src`, `href`,
`srcset`, `poster` and inline `style` reference becomes a `data:` URI. Each problem found is
recorded with the line in the author's file: html5lib reports where a start tag ends, so the
locator searches back to where it begins and forward to the attribute's value.
"""

from __future__ import annotations

import base64
import bisect
import posixpath
import re
from dataclasses import dataclass, field

from bs4 import BeautifulSoup
from bs4.dammit import EntitySubstitution
from bs4.element import NavigableString, Tag
from bs4.formatter import HTMLFormatter

from deckyard.decks.compile.assets import (
    AssetResolver,
    ReferenceProblem,
    is_hyperlink,
    resolve_srcset,
)
from deckyard.decks.compile.css_scope import CssContext, rewrite_stylesheet, rewrite_values
from deckyard.decks.compile.markdown import LINE_ATTR, MARKER_TAG
from deckyard.decks.compile.reveal import REVEAL_SCRIPT, go_to_slide_script
from deckyard.decks.compile.slide_markdown import render_slide
from deckyard.decks.compile.steps import StepMark, apply_step, split_step
from deckyard.decks.errors import CompileErrorCode, CompileProblem
from deckyard.decks.source.assemble import ASSETS_DIR
from deckyard.decks.source.deck_source import PageKind, PageSource
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_directives import split_comments
from deckyard.decks.source.marp_deck import MARP_MARK
from deckyard.decks.source.remote import MISSING_IMAGE
from deckyard.decks.source.reveal_html import SLIDE_MARK, reveal_slides, section_notes
from deckyard.outputs.interface import NOTES_CLASS

FORMATTER = HTMLFormatter(
    entity_substitution=EntitySubstitution.substitute_xml, void_element_close_prefix=""
)
BLANK_IMAGE = "data:image/png;base64," + base64.b64encode(MISSING_IMAGE).decode("ascii")
"""What a reference that failed in a slide this page does not show becomes (`not_shown`)."""
_URL_ATTRS = ("src", "href", "xlink:href", "poster", "background")
_REVEAL_URL_ATTRS = ("data-src", "data-background-image", "data-background-video")
_SRCSET_ATTRS = ("srcset", "imagesrcset")
TEMPLATE_REFERENCE = re.compile(r"""(?P<lead>!\[[^\]\n]*\]\(|\bsrc=["'])(?P<ref>[^)"'\s]+)""")
"""An image in a `data-markdown` slide's text: Markdown's `![alt](ref)` or HTML's `src=`."""
_IMAGE_URL = re.compile(r"\.(svg|png|jpe?g|gif|bmp|webp|avif)([?#\s]|$)", re.IGNORECASE)


def is_image_url(value: str) -> bool:
    """Whether reveal.js reads a `data-background` value as an image (else it is a colour)."""
    return bool(_IMAGE_URL.search(value)) or value.startswith(("http:", "https:", "//", "file:"))


_HEAD_KEPT = ("script", "noscript", "template")
_LINK_TAGS = ("a", "area")
_REVEAL_INSTEAD = (
    "give the folder holding its index.html and dist/ as the deck (deckyard render deck/), "
    "which renders each slide through reveal.js, or render its Markdown as a one-file deck "
    "(deckyard render talk.md; docs/coming-from.md)"
)
_FRAMEWORKS = (
    ("reveal.js", ".reveal .slides", _REVEAL_INSTEAD),
    ("impress.js", "#impress", "put each step in its own page"),
    (
        "Marp HTML export",
        "[data-marpit-svg], .bespoke-marp-osc",
        "render the Marp .md file instead",
    ),
)


def scope_for(page_name: str) -> str:
    """The selector of the slide root of page `page_name`."""
    return f'.slide[data-page="{page_name}"]'


@dataclass
class PagePart:
    """A page ready to be placed in a document: its slide's inner HTML and its scoped CSS."""

    name: str
    kind: PageKind
    body_html: str
    css: str
    slide_classes: list[str]
    problems: list[CompileProblem] = field(default_factory=list)
    step: StepMark | None = None
    """The step of its slide the page shows, in a deck made by `step_deck`."""


class _Locator:
    """Maps a parsed element (and an attribute value in it) to a line of the source."""

    def __init__(self, source: str, kind: PageKind) -> None:
        self._source = source
        self._lower = source.lower()
        self._starts = [0] + [i + 1 for i, ch in enumerate(source) if ch == "\n"]
        self._markdown = kind is PageKind.MARKDOWN
        self._marker: tuple[int, int] | None = None

    def _html_line(self, tag: Tag, needle: str | None) -> int:
        if tag.sourceline is None:
            return 1
        row = min(max(tag.sourceline, 1), len(self._starts)) - 1
        end = min(self._starts[row] + (tag.sourcepos or 0) + 1, len(self._source))
        start = self._lower.rfind("<" + tag.name.lower(), 0, end)
        start = end if start < 0 else start
        if needle:
            found = self._source.find(needle, start, end + 1)
            if found >= 0:
                start = found
        return bisect.bisect_right(self._starts, start)

    def see_marker(self, tag: Tag) -> None:
        """Remember a Markdown line marker met in document order."""
        try:
            self._marker = (int(str(tag.get("n", "1"))), self._html_line(tag, None))
        except ValueError:
            self._marker = None

    def line(self, tag: Tag, needle: str | None = None) -> int:
        """The line of `tag` (of `needle` inside it, when found) in the author's file."""
        if not self._markdown:
            return self._html_line(tag, needle)
        own = tag.get(LINE_ATTR)
        if isinstance(own, str) and own.isdigit():
            return int(own)
        if self._marker is not None:
            markdown_line, html_line = self._marker
            return markdown_line + self._html_line(tag, needle) - html_line
        return 1


class _PageCompiler:
    def __init__(
        self,
        page: PageSource,
        resolver: AssetResolver,
        limits: DeckLimits,
        step: StepMark | None = None,
    ) -> None:
        self.page = page
        self.step = step
        self.resolver = resolver
        self.problems: list[CompileProblem] = []
        self.css: list[str] = []
        self.origin: tuple[str, int] | None = None
        mark = SLIDE_MARK.match(page.text) if page.kind is PageKind.HTML else None
        self.reveal = mark is not None
        marp = MARP_MARK.match(page.text) if page.kind is PageKind.HTML else None
        self.marp = marp is not None
        self.marp_origin = marp["origin"] if marp else None
        self.reveal_at = (int(mark["h"]), int(mark["v"])) if mark and mark["h"] else None
        self.elsewhere: set[int] = set()
        """`id()`s of the reveal.js `<section>`s this page does not show (`not_shown`)."""
        self.base = ASSETS_DIR.rstrip("/") if self.reveal else ""
        self.url_attrs = _URL_ATTRS + (_REVEAL_URL_ATTRS if self.reveal else ())
        if page.kind is PageKind.MARKDOWN:
            self.origin = split_comments(page.text).source()
            self.source = render_slide(
                page.text, allow_html=limits.markdown_html, extensions=limits.markdown_extensions
            )
        else:
            self.source = page.text
        self.locator = _Locator(self.source, page.kind)

    def problem(
        self, code: CompileErrorCode, message: str, line: int, reference: str | None = None
    ) -> None:
        """Record a problem of this page; a slide of a one-file deck names its line there too."""
        if self.origin is not None:
            file, first = self.origin
            message = f"{file}:{first + max(line, 1) - 1}: {message}"
        elif self.marp_origin:
            message = f"{self.marp_origin}: {message}"
        self.problems.append(CompileProblem(code, message, self.page.name, reference, line))

    def stylesheet(
        self, css: str, line: int, base_dir: str = "", origin: str | None = None
    ) -> None:
        """Scope and inline one stylesheet of this page; `origin` names a linked file."""
        scope = None if self.reveal or self.marp else scope_for(self.page.name)
        key = (origin, base_dir) if origin and scope is None else None
        known = self.resolver.sheets.get(key) if key else None
        if known is None:
            ctx = CssContext(self.resolver, base_dir=base_dir, first_line=1 if origin else line)
            known = (rewrite_stylesheet(css, ctx, scope), list(ctx.problems))
            if key:
                self.resolver.sheets[key] = known
        rewritten, problems = known
        self.css.append(rewritten)
        for p in problems:
            message = f"{origin}:{p.line}: {p.message}" if origin else p.message
            self.problem(p.code, message, line if origin else p.line, p.reference)

    def link(self, tag: Tag, line: int) -> None:
        """Inline the stylesheet a `<link rel=stylesheet>` names."""
        href = str(tag.get("href", ""))
        try:
            path = self.resolver.asset_path(href, self.base)
        except ReferenceProblem as exc:
            self.problem(exc.code, exc.message, line, href)
            return
        if path is None:
            self.problem(CompileErrorCode.INVALID_REFERENCE, "a stylesheet must be a file", line)
            return
        try:
            text = self.resolver.asset(path).data.decode("utf-8-sig")
        except UnicodeDecodeError:
            self.problem(CompileErrorCode.NOT_TEXT, f"{path} is not UTF-8 CSS", line, href)
            return
        self.stylesheet(text, line, posixpath.dirname(path), origin=path)

    def attributes(self, tag: Tag) -> None:
        """Inline every reference in `tag`'s attributes, inline style included."""
        for name in list(tag.attrs):
            value = tag.attrs[name]
            if not isinstance(value, str):
                continue
            key = str(name).lower()
            if key == "href" and tag.name in _LINK_TAGS and is_hyperlink(value):
                continue
            try:
                if self.reveal and key == "data-background" and is_image_url(value):
                    # Inlined, the URL no longer looks like an image to reveal.js's shorthand.
                    del tag.attrs[name]
                    tag.attrs["data-background-image"] = self.resolver.resolve(value, self.base)
                elif key in self.url_attrs or (key == "data" and tag.name == "object"):
                    tag.attrs[name] = self.resolver.resolve(value, self.base)
                elif key in _SRCSET_ATTRS:
                    tag.attrs[name] = resolve_srcset(value, self.resolver)
                elif key == "style":
                    ctx = CssContext(
                        self.resolver, base_dir=self.base, first_line=self.locator.line(tag, value)
                    )
                    tag.attrs[name] = rewrite_values(value, ctx)
                    for p in ctx.problems:
                        self.problem(p.code, p.message, p.line, p.reference)
            except ReferenceProblem as exc:
                if self.not_shown(tag):
                    # another slide's, reported on its own page: a blank image stands in
                    tag.attrs[name] = BLANK_IMAGE if key in self.url_attrs else ""
                    continue
                self.problem(exc.code, exc.message, self.locator.line(tag, exc.reference), value)

    def not_shown(self, tag: Tag) -> bool:
        """Whether `tag` is in a reveal.js slide this page does not show: another slide (its
        own page reports its problems) or a hidden one (reveal.js removes it, so a slide that
        failed and is left out of the print view costs no other slide its PDF page)."""
        return bool(self.elsewhere) and any(id(t) in self.elsewhere for t in (tag, *tag.parents))

    def reveal_sections(self, soup: BeautifulSoup) -> None:
        """Note the `<section>`s this reveal.js page does not show (see `not_shown`)."""
        hidden = soup.select("section[data-visibility=hidden]")
        others = [s for h, v, s in reveal_slides(soup) if (h, v) != self.reveal_at]
        shown = self.reveal_at is None
        self.elsewhere = {id(s) for s in hidden + ([] if shown else others)}

    def framework(self, soup: BeautifulSoup) -> None:
        """Refuse a whole slide-framework deck (reveal.js, impress.js, Marp's HTML) as a page.

        Such a page is many slides laid out by the framework's script, and scoped as one page
        its theme breaks (white text on white); saying so beats a wrong "passed".
        """
        for name, selector, fix in _FRAMEWORKS:
            found = soup.select_one(selector)
            if isinstance(found, Tag):
                self.problem(
                    CompileErrorCode.FRAMEWORK_DECK,
                    f"this page is a whole {name} deck; Deckyard renders each page as one slide "
                    f"and does not run {name}: {fix}",
                    self.locator.line(found),
                )
                return

    def reveal_notes(self, soup: BeautifulSoup, at: tuple[int, int]) -> None:
        """Copy slide `at`'s reveal.js notes into a hidden `.dy-notes` (the presenter view's)."""
        section = next((s for h, v, s in reveal_slides(soup) if (h, v) == at), None)
        if section is None or soup.body is None:
            return
        notes = section_notes(section)
        if not notes:
            return
        aside = soup.new_tag("aside", attrs={"class": NOTES_CLASS, "hidden": ""})
        aside["style"] = "display:none"
        for note in notes:
            paragraph = soup.new_tag("p")
            paragraph.string = note
            aside.append(paragraph)
        soup.body.append(aside)

    def markdown_templates(self, soup: BeautifulSoup) -> None:
        """Inline the files the Markdown of reveal.js's `data-markdown` slides refers to.

        reveal.js's Markdown plugin turns that text into HTML in the browser, after the
        compiler has inlined every attribute; an image written in it (`![x](assets/a.png)`,
        `<img src=…>`) is inlined in the text itself.
        """
        for script in soup.select("section[data-markdown] > script"):
            text = str(script.string or "")

            def inline(match: re.Match[str], line: int = self.locator.line(script)) -> str:
                ref = match.group("ref")
                try:
                    return match.group("lead") + self.resolver.resolve(ref, self.base)
                except ReferenceProblem as exc:
                    self.problem(exc.code, exc.message, line, ref)
                    return match.group(0)

            script.string = TEMPLATE_REFERENCE.sub(inline, text)

    def _fragment(self, at: tuple[int, int] | None) -> int | None:
        """The reveal.js fragment a stepped page goes to (-1: none yet; with `at` None, any
        value asks the print view for a page per fragment); None when not stepped."""
        if self.step is None:
            return None
        return self.step.step - 1 if at is not None else 0

    def reveal_slide(self, soup: BeautifulSoup, at: tuple[int, int] | None) -> None:
        """Add the lines that show slide `at` (every slide, to print: None) after reveal.js."""
        self.markdown_templates(soup)
        if at is not None:
            self.reveal_notes(soup, at)
        for tag in soup.find_all("script"):
            if isinstance(tag, Tag) and REVEAL_SCRIPT.search(str(tag.get("src", ""))):
                go = soup.new_tag("script")
                go.string = go_to_slide_script(at, self._fragment(at))
                tag.insert_after(go)
                return
        self.problem(
            CompileErrorCode.FRAMEWORK_DECK,
            "this reveal.js deck loads no reveal.js script; Deckyard runs reveal.js's classic "
            'bundle: <script src="dist/reveal.js"></script>',
            1,
        )

    def run(self) -> PagePart:
        """Parse the page and return it as a part with its problems."""
        soup = BeautifulSoup(self.source, "html5lib")
        if self.reveal:
            self.reveal_sections(soup)
            self.reveal_slide(soup, self.reveal_at)
        elif self.page.kind is PageKind.HTML and not self.marp:
            self.framework(soup)
        if self.step is not None and (self.marp or self.page.kind is PageKind.MARKDOWN):
            apply_step(soup, self.step.step, marp=self.marp)
        head_kept: list[Tag] = []
        for tag in list(soup.find_all(True)):
            if tag.decomposed:
                continue
            if tag.name == MARKER_TAG:
                self.locator.see_marker(tag)
                tag.decompose()
                continue
            if tag.name == "style":
                text = "".join(str(s) for s in tag.contents if isinstance(s, NavigableString))
                self.stylesheet(text, self.locator.line(tag), self.base)
                tag.decompose()
                continue
            rel = tag.get("rel")
            if tag.name == "link" and isinstance(rel, list) and "stylesheet" in rel:
                self.link(tag, self.locator.line(tag, str(tag.get("href", ""))))
                tag.decompose()
                continue
            self.attributes(tag)
            tag.attrs.pop(LINE_ATTR, None)
            parent = tag.parent
            if isinstance(parent, Tag) and parent.name == "head" and tag.name in _HEAD_KEPT:
                head_kept.append(tag)
        body = soup.body
        classes: list[str] = []
        inner = ""
        if body is not None:
            found = body.get("class")
            classes = [str(c) for c in found] if isinstance(found, list) else []
            inner = body.decode_contents(formatter=FORMATTER)
        head_html = "".join(tag.decode(formatter=FORMATTER) for tag in head_kept)
        return PagePart(
            name=self.page.name,
            kind=self.page.kind,
            body_html=head_html + inner,
            css="\n".join(part for part in self.css if part),
            slide_classes=classes,
            problems=self.problems,
            step=self.step,
        )


def compile_part(page: PageSource, resolver: AssetResolver, limits: DeckLimits) -> PagePart:
    """`page` parsed, with its CSS scoped and references inlined; problems are in the part.

    A page of a stepped deck (`steps.step_deck`) shows its step: its mark is read and removed
    before anything else.
    """
    page, step = split_step(page)
    return _PageCompiler(page, resolver, limits, step).run()
