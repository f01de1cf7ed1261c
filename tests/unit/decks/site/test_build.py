"""The static site ZIP: its layout and manifest, and verification catching tampering."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import zipfile
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from deckyard.decks.compile.documents import CompiledPage, compile_deck
from deckyard.decks.errors import DeckSourceErrorCode, SiteErrorCode, SiteVerificationError
from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.limits import DeckLimits, ZipLimits
from deckyard.outputs.site_build import build_site
from tests.helpers.decks import PNG_1PX, MakeDeck

SITE_LIMITS = ZipLimits(
    max_entries=50, max_total_bytes=10 * 1024 * 1024, max_file_bytes=4 * 1024 * 1024
)


@pytest.fixture
def pages(make_deck: MakeDeck, limits: DeckLimits) -> list[CompiledPage]:
    deck = make_deck(
        {"01-one.md": "# One\n\n![p](assets/p.png)", "02-two.html": "<h1>Two</h1>"},
        assets={"assets/p.png": PNG_1PX},
    )
    return compile_deck(deck, limits)


def _files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _key(files: dict[str, bytes], stem: str) -> str:
    """The site file of page `stem` (its name carries the content hash)."""
    return next(k for k in files if k.startswith(f"pages/{stem}."))


def _rezip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_site_layout_and_manifest(pages: list[CompiledPage]) -> None:
    data = build_site("My deck", pages, version="v7")
    files = _files(data)
    one = "pages/01-one." + hashlib.sha256(pages[0].document.encode()).hexdigest()[:16] + ".html"
    two = "pages/02-two." + hashlib.sha256(pages[1].document.encode()).hexdigest()[:16] + ".html"
    assert sorted(files) == ["index.html", "manifest.json", one, two, "presenter.html"]
    manifest = json.loads(files["manifest.json"])
    assert manifest["version"] == "v7" and manifest["page_count"] == 2
    assert [p["file"] for p in manifest["pages"]] == [one, two]
    for entry in manifest["files"]:
        assert entry["size"] == len(files[entry["path"]])
        assert entry["sha256"] == hashlib.sha256(files[entry["path"]]).hexdigest()
    assert files[one].decode() == pages[0].document
    assert build_site("My deck", pages, version="v7") == data


def test_index_navigates_by_keyboard_and_refers_to_nothing_outside(
    pages: list[CompiledPage],
) -> None:
    files = _files(build_site("My <deck>", pages))
    index = files["index.html"].decode()
    assert "<title>My &lt;deck&gt;</title>" in index
    for key in ("ArrowRight", "ArrowLeft", "Home", "End"):
        assert f'"{key}"' in index
    assert f'["{_key(files, "01-one")}", "{_key(files, "02-two")}"]' in index
    for name, content in files.items():
        if not name.endswith(".html"):
            continue
        soup = BeautifulSoup(content.decode(), "html5lib")
        for tag in soup.find_all(True):
            for attr in ("src", "href"):
                value = tag.get(attr)
                if isinstance(value, str):
                    assert value.startswith(("data:", "#", "pages/")), (name, value)
        assert "http://" not in content.decode() and "https://" not in content.decode()


def test_round_trip_through_verify(pages: list[CompiledPage], tmp_path: Path) -> None:
    data = build_site("Deck", pages, version="v1")
    check = verify_site_zip(data, SITE_LIMITS)
    assert (check.version, check.page_count) == ("v1", 2)
    files = _files(data)
    assert {f.path for f in check.files} == {
        "index.html",
        _key(files, "01-one"),
        _key(files, "02-two"),
        "presenter.html",
    }
    kept = verify_site_zip(data, SITE_LIMITS, dest=tmp_path / "site")
    assert kept == check
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        (
            lambda f: f.update({_key(f, "02-two"): f[_key(f, "02-two")].replace(b"Two", b"Owt")}),
            SiteErrorCode.HASH_MISMATCH,
        ),
        (
            lambda f: f.update({_key(f, "02-two"): f[_key(f, "02-two")] + b" "}),
            SiteErrorCode.SIZE_MISMATCH,
        ),
        (lambda f: f.pop(_key(f, "01-one")), SiteErrorCode.FILE_MISSING),
        (lambda f: f.update({"extra.js": b"alert(1)"}), SiteErrorCode.FILE_UNLISTED),
        (lambda f: f.pop("manifest.json"), SiteErrorCode.MANIFEST_MISSING),
        (lambda f: f.update({"manifest.json": b"{"}), SiteErrorCode.MANIFEST_INVALID),
    ],
)
def test_tampered_sites_are_detected(
    pages: list[CompiledPage], tamper: object, code: SiteErrorCode
) -> None:
    files = _files(build_site("Deck", pages))
    assert callable(tamper)
    tamper(files)
    with pytest.raises(SiteVerificationError) as excinfo:
        verify_site_zip(_rezip(files), SITE_LIMITS)
    assert excinfo.value.code is code


def test_unsafe_site_zips_are_refused_without_writing_outside(
    pages: list[CompiledPage], tmp_path: Path
) -> None:
    files = _files(build_site("Deck", pages))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        archive.writestr("../escape.txt", b"x")
    with pytest.raises(SiteVerificationError) as excinfo:
        verify_site_zip(out.getvalue(), SITE_LIMITS, dest=tmp_path / "site")
    assert excinfo.value.code is DeckSourceErrorCode.PATH_ESCAPE
    assert not (tmp_path / "escape.txt").exists()
    assert not (tmp_path / "site" / "index.html").exists()

    link = zipfile.ZipInfo("pages/link.html")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(link, b"/etc/passwd")
    with pytest.raises(SiteVerificationError) as excinfo:
        verify_site_zip(out.getvalue(), SITE_LIMITS)
    assert excinfo.value.code is DeckSourceErrorCode.SYMLINK


def test_presenter_view_carries_each_slides_notes(make_deck: MakeDeck, limits: DeckLimits) -> None:
    deck = make_deck(
        {"a.md": "# A\n\n<!-- Say <hello> first -->\n", "b.md": "# B\n", "c.html": "<p>C</p>"}
    )
    files = _files(build_site("Notes", compile_deck(deck, limits)))
    presenter = files["presenter.html"].decode()
    assert '[["Say <hello> first"], [], []]' in presenter
    index = files["index.html"].decode()
    assert "pointer-events: none" not in index
    assert "presenter.html" in index
