"""Issue 29, items 4 and 6: remote files fetched (not fatal), local references resolved as the
source tool does, images with empty alt text kept, unclosed fences and comments reported.

Remote files come from a loopback HTTP server this module starts; the SSRF guard lets it
through only because its host:port is in `renderer_url_allow_hosts`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from PIL import Image

from deckyard.api.remote_fetch import guarded_download, guarded_fetch
from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck_report
from deckyard.decks.errors import CompileErrorCode
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.folder import load_markdown_file
from deckyard.decks.source.importer import import_markdown_deck
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.marp_engine import marp_available
from deckyard.decks.source.remote import MISSING_IMAGE, fetch_remote_assets
from deckyard.decks.validation.rules import render_outcome_from_diagnostics
from deckyard.render.renderer.ssrf import UrlGuard
from tests.helpers.decks import PNG_1PX
from tests.helpers.loopback_http import loopback_server

PNG_B64_HEAD = "data:image/png;base64,"


class _Files(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        _Files.hits.append(self.path)
        body = {"/pic.png": PNG_1PX, "/badge": b'<svg xmlns="http://www.w3.org/2000/svg"/>'}
        found = body.get(self.path)
        self.send_response(200 if found is not None else 404)
        self.end_headers()
        self.wfile.write(found or b"")

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def files_server() -> Iterator[str]:
    with loopback_server(_Files) as host:
        yield host


def _deck(tmp_path: Path, text: str) -> DeckSource:
    talk = tmp_path / "talk.md"
    talk.write_text(text, encoding="utf-8")
    return load_markdown_file(talk, DeckLimits.from_settings(Settings.load()))


async def test_remote_images_are_fetched_and_a_failed_fetch_is_a_warning(
    tmp_path: Path, files_server: str
) -> None:
    base = f"http://{files_server}"
    source = _deck(
        tmp_path,
        f"# A\n\n![logo]({base}/pic.png)\n\n![badge]({base}/badge)\n\n[a link]({base}/page)\n"
        f"\n---\n\n# B\n\n![gone]({base}/gone.png)\n",
    )
    settings = Settings.load(renderer_url_allow_hosts=[files_server])
    limits = DeckLimits.from_settings(settings)
    offline = compile_deck_report(source, limits)
    assert {p.code for p in offline.problems} == {CompileErrorCode.EXTERNAL_REFERENCE}
    assert all(
        "--offline" in p.message and "deckyard import --fetch-remote" in p.message
        for p in offline.problems
    )

    fetched = await fetch_remote_assets(source, guarded_fetch(settings), max_files=10)
    report = compile_deck_report(fetched, limits)
    assert report.problems == []
    first, second = report.pages
    assert PNG_B64_HEAD in first.document and "data:image/svg+xml;base64," in first.document
    assert f'href="{base}/page"' in first.document  # a hyperlink is not fetched
    assert "/page" not in _Files.hits
    # the failed fetch: a warning naming the URL, and the slide renders it missing
    assert [w.file for w in fetched.warnings if "gone.png" in w.message] == ["slide-02"]
    assert fetched.assets[
        next(
            p
            for p in fetched.assets
            if p.endswith(".png") and fetched.assets[p].data == MISSING_IMAGE
        )
    ]
    assert PNG_B64_HEAD in second.document
    # what a failed image shows is nothing: every pixel fully transparent (it was a
    # half-transparent blue square across a Marp background's place)
    with Image.open(io.BytesIO(MISSING_IMAGE)) as missing:
        assert missing.convert("RGBA").getchannel("A").getextrema() == (0, 0)


async def test_a_marp_background_image_is_fetched(tmp_path: Path, files_server: str) -> None:
    """marp-core writes `![bg](url)` as `style="background-image:url(&quot;url&quot;)"`: the
    image is fetched like any other (it was refused as an external reference: a public deck's
    cover and closing slides failed)."""
    if not marp_available():
        pytest.fail("vendor/js has no marp-core: run scripts/setup")
    _Files.hits.clear()
    base = f"http://{files_server}"
    source = _deck(tmp_path, f"---\nmarp: true\n---\n\n![bg 60%]({base}/pic.png)\n\n# Cover\n")
    settings = Settings.load(renderer_url_allow_hosts=[files_server])
    fetched = await fetch_remote_assets(source, guarded_fetch(settings), max_files=10)
    assert "/pic.png" in _Files.hits and fetched.warnings == source.warnings
    report = compile_deck_report(fetched, DeckLimits.from_settings(settings))
    assert report.problems == []
    assert PNG_B64_HEAD in report.pages[0].document
    assert f"{base}/pic.png" not in report.pages[0].document


async def test_remote_fetch_is_refused_by_the_ssrf_guard_for_loopback(
    tmp_path: Path, files_server: str
) -> None:
    source = _deck(tmp_path, f"# A\n\n![logo](http://{files_server}/pic.png)\n")
    fetched = await fetch_remote_assets(source, guarded_fetch(Settings.load()), max_files=10)
    assert any("SSRF guard" in w.message for w in fetched.warnings)
    assert compile_deck_report(fetched, DeckLimits.from_settings(Settings.load())).problems == []


async def test_remote_fetch_count_limit(tmp_path: Path, files_server: str) -> None:
    base = f"http://{files_server}"
    source = _deck(tmp_path, f"# A\n\n![a]({base}/pic.png)\n\n![b]({base}/badge)\n")
    settings = Settings.load(renderer_url_allow_hosts=[files_server])
    fetched = await fetch_remote_assets(source, guarded_fetch(settings), max_files=1)
    assert [w.message for w in fetched.warnings if "more than 1 remote" in w.message]


def test_local_references_resolve_as_marp_and_slidev_do(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir()
    (tmp_path / "images/x.png").write_bytes(PNG_1PX)
    (tmp_path / "public").mkdir()
    (tmp_path / "public/y.png").write_bytes(PNG_1PX)
    text = "# A\n\n![x](./images/x.png)\n\n---\n\n# B\n\n![y](/y.png)\n"
    source = _deck(tmp_path, text)
    report = compile_deck_report(source, DeckLimits.from_settings(Settings.load()))
    assert report.problems == []
    assert all(PNG_B64_HEAD in page.document for page in report.pages)
    # and import accepts the same references, the same way
    imported = import_markdown_deck(
        tmp_path / "talk.md", tmp_path / "out", DeckLimits.from_settings(Settings.load())
    )
    assert sorted(imported.copied) == ["assets/images/x.png", "assets/y.png"]
    assert sorted(source.assets) == ["assets/images/x.png", "assets/y.png"]


def test_an_image_with_empty_alt_text_is_rendered_and_a_missing_one_fails(
    tmp_path: Path,
) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets/x.png").write_bytes(PNG_1PX)
    limits = DeckLimits.from_settings(Settings.load())
    report = compile_deck_report(_deck(tmp_path, "# A\n\n![](assets/x.png)\n"), limits)
    assert report.problems == []
    document = report.pages[0].document
    assert "<img" in document and f'src="{PNG_B64_HEAD}' in document
    missing = compile_deck_report(_deck(tmp_path, "# A\n\n![](assets/nothere.png)\n"), limits)
    assert [p.code for p in missing.problems] == [CompileErrorCode.MISSING_ASSET]


def test_an_unclosed_fence_that_swallows_slides_is_a_warning_with_its_line(
    tmp_path: Path,
) -> None:
    source = _deck(tmp_path, "# A\n\n```python\nx = 1\n\n---\n\n# B\n\n---\n\n# C\n")
    found = [w for w in source.warnings if "never closed" in w.message]
    assert [(w.line, "2 slide separator" in w.message) for w in found] == [(3, True)]
    comment = _deck(tmp_path, "# A\n\n---\n\n<!-- note\n\n# B\n")
    assert [w.line for w in comment.warnings if "comment" in w.message] == [5]


def test_overflow_is_one_warning_per_slide_naming_the_element() -> None:
    items = [f"span at 10,{1100 + i} 20x20 (outside viewport)" for i in range(40)]
    stage = render_outcome_from_diagnostics({"overflow": items})
    overflow = [d for d in stage.diagnostics if d.code == "RENDER_OVERFLOW"]
    assert len(overflow) == 1
    assert overflow[0].message.startswith("overflows the slide: span at 10,1100")
    assert "39 more" in overflow[0].message
    assert stage.stage.warnings == 1


def test_a_slidev_slides_image_setting_resolves_from_public(tmp_path: Path) -> None:
    (tmp_path / "public").mkdir()
    (tmp_path / "public/photo.png").write_bytes(PNG_1PX)
    text = (
        "---\ntheme: default\n---\n\n# A\n\n"
        "---\nlayout: image-right\nimage: /photo.png\n---\n\n# B\n"
    )
    source = _deck(tmp_path, text)
    report = compile_deck_report(source, DeckLimits.from_settings(Settings.load()))
    assert report.problems == []
    assert sorted(source.assets) == ["assets/photo.png"]
    assert PNG_B64_HEAD in report.pages[1].document


async def test_a_slidev_slides_remote_background_is_fetched(
    tmp_path: Path, files_server: str
) -> None:
    """A slide's front matter `background: https://...` (Slidev's starter has one on its cover
    and on a later slide) is fetched; it failed the slide as an external reference."""
    _Files.hits.clear()
    base = f"http://{files_server}"
    text = (
        f"---\ntheme: default\nlayout: cover\nbackground: {base}/pic.png\n---\n\n# A\n\n"
        f"---\nlayout: cover\nbackground: {base}/pic.png\n---\n\n# B\n"
    )
    source = _deck(tmp_path, text)
    settings = Settings.load(renderer_url_allow_hosts=[files_server])
    fetched = await fetch_remote_assets(source, guarded_fetch(settings), max_files=10)
    assert _Files.hits == ["/pic.png"]  # once for both slides
    report = compile_deck_report(fetched, DeckLimits.from_settings(settings))
    assert report.problems == []
    assert all(PNG_B64_HEAD in page.document for page in report.pages)


class _Styles(BaseHTTPRequestHandler):
    hosts: list[str] = []

    def do_GET(self) -> None:
        _Styles.hosts.append(self.headers.get("host", ""))
        body = {
            "/css/font.css": b"@font-face{font-family:Remote;src:url(../fonts/r.woff2)}",
            "/css/theme.css": b"h1{background:url('/img/bg.png')}",
            "/fonts/r.woff2": b"wOF2" + b"\0" * 60,
            "/img/bg.png": PNG_1PX,
        }.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args: object) -> None:
        return


async def test_a_fetched_stylesheet_brings_the_files_it_loads(tmp_path: Path) -> None:
    """A remote stylesheet (a `<link>` in a page, an `@import` in the theme) is fetched, and so
    are the fonts and images its own relative `url()`s load: the deck compiles offline after."""
    with loopback_server(_Styles) as host:
        base = f"http://{host}"
        source = _deck(
            tmp_path,
            f'<link rel="stylesheet" href="{base}/css/font.css">\n\n# A\n\n'
            '<p style="font-family: Remote">text</p>\n',
        )
        source = source.model_copy(
            update={"theme_css": f'@import "default";\n@import "{base}/css/theme.css";\n'}
        )
        settings = Settings.load(renderer_url_allow_hosts=[host])
        fetched = await fetch_remote_assets(source, guarded_fetch(settings), max_files=10)
    assert fetched.warnings == source.warnings
    kinds = sorted(a.media_type for p, a in fetched.assets.items() if p.startswith("assets/remote"))
    assert kinds == ["font/woff2", "image/png", "text/css", "text/css"]
    report = compile_deck_report(fetched, DeckLimits.from_settings(settings))
    assert report.problems == []
    (page,) = report.pages
    assert "data:font/woff2;base64," in page.document
    assert PNG_B64_HEAD in page.document


async def test_the_fetch_connects_to_the_address_the_guard_checked() -> None:
    """DNS rebinding: the host is resolved once, by the guard, and the download connects to
    that address (`rebind.test` has no address in the system's DNS; only the guard's resolver
    knows it), with the original name in `Host`."""
    asked: list[str] = []

    async def resolver(name: str, port: int) -> list[str]:
        asked.append(name)
        return ["127.0.0.1"]

    with loopback_server(_Styles) as host:
        port = int(host.rsplit(":", 1)[1])
        settings = Settings.load(renderer_url_allow_hosts=[f"rebind.test:{port}"])
        guard = UrlGuard(settings.renderer_url_allow_hosts, 5.0, resolver=resolver)
        _Styles.hosts.clear()
        data = await guarded_download(f"http://rebind.test:{port}/img/bg.png", guard, settings)
    assert data == PNG_1PX
    assert asked == ["rebind.test"]
    assert _Styles.hosts == [f"rebind.test:{port}"]
