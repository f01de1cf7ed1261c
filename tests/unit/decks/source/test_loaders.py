"""Loading decks from a folder, a ZIP and JSON, and the errors that name the file or field."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.deck_source import PageKind
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.json_body import load_deck_json
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.zip_archive import load_deck_zip
from tests.helpers.decks import PNG_1PX

MANIFEST = 'title = "T"\ntheme = "theme.css"\n[slide]\nwidth = 1280\nheight = 720\n'


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def _deck_files() -> dict[str, bytes]:
    return {
        "deck.toml": MANIFEST.encode(),
        "theme.css": b".slide { color: navy }",
        "pages/02-b.html": b"<p>B</p>",
        "pages/01-a.md": b"# A\r\n",
        "assets/img/p.png": PNG_1PX,
    }


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_folder_zip_and_top_folder_zip_load_the_same_deck(
    tmp_path: Path, limits: DeckLimits
) -> None:
    files = _deck_files()
    from_folder = load_deck_folder(_write(tmp_path, files), limits)
    from_zip = load_deck_zip(_zip(files), limits)
    nested = load_deck_zip(_zip({f"my-deck/{k}": v for k, v in files.items()}), limits)
    for deck in (from_folder, from_zip, nested):
        assert deck.manifest.title == "T"
        assert (deck.width, deck.height) == (1280, 720)
        assert [(p.name, p.kind) for p in deck.pages] == [
            ("01-a", PageKind.MARKDOWN),
            ("02-b", PageKind.HTML),
        ]
        assert deck.pages[0].text == "# A\n"
        assert deck.theme_css == ".slide { color: navy }"
        assert deck.assets["assets/img/p.png"].media_type == "image/png"
        assert deck.assets["assets/img/p.png"].data == PNG_1PX


def test_manifest_page_order_is_kept_and_must_be_complete(limits: DeckLimits) -> None:
    files = _deck_files()
    files["deck.toml"] = b'title = "T"\npages = ["02-b.html", "01-a.md"]\n'
    assert [p.name for p in load_deck_zip(_zip(files), limits).pages] == ["02-b", "01-a"]
    files["deck.toml"] = b'title = "T"\npages = ["02-b.html"]\n'
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_zip(_zip(files), limits)
    assert excinfo.value.code is Code.PAGE_NOT_LISTED and excinfo.value.file == "pages/01-a.md"
    files["deck.toml"] = b'title = "T"\npages = ["02-b.html", "01-a.md", "03-c.md"]\n'
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_zip(_zip(files), limits)
    assert excinfo.value.code is Code.PAGE_NOT_FOUND and excinfo.value.field == "pages[2]"


@pytest.mark.parametrize("layout", ["folder", "zip"])
def test_missing_deck_toml_is_named(tmp_path: Path, limits: DeckLimits, layout: str) -> None:
    files = _deck_files()
    del files["deck.toml"]
    with pytest.raises(DeckSourceError) as excinfo:
        if layout == "folder":
            load_deck_folder(_write(tmp_path, files), limits)
        else:
            load_deck_zip(_zip(files), limits)
    assert excinfo.value.code is Code.MANIFEST_MISSING
    assert excinfo.value.file == "deck.toml"
    assert "deck.toml" in str(excinfo.value)
    assert excinfo.value.http_status == 422


@pytest.mark.parametrize(
    ("toml", "code", "field"),
    [
        ('title = "T"\ncolour = "red"\n', Code.FIELD_UNKNOWN, "colour"),
        ('title = "T"\n[slide]\nwidth = "1920"\n', Code.FIELD_INVALID, "slide.width"),
        ('title = "T"\n[slide]\ndepth = 3\n', Code.FIELD_UNKNOWN, "slide.depth"),
        ("[slide]\nwidth = 100\n", Code.FIELD_MISSING, "title"),
        (
            'title = "T"\n[[fonts]]\nfamily = "F"\nfile = "assets/none.woff2"\n',
            Code.FONT_NOT_FOUND,
            "fonts[0].file",
        ),
        ('title = "T"\ntheme = "nope.css"\n', Code.THEME_NOT_FOUND, "theme"),
        ('title = "T"\ntheme = "../x.css"\n', Code.FIELD_INVALID, "theme"),
        ('title = "T"\n[slide]\nwidth = 100000\n', Code.SLIDE_TOO_LARGE, "slide.width"),
    ],
)
def test_manifest_errors_name_the_field(
    limits: DeckLimits, toml: str, code: Code, field: str
) -> None:
    files = _deck_files() | {"deck.toml": toml.encode()}
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_zip(_zip(files), limits)
    assert (excinfo.value.code, excinfo.value.field, excinfo.value.file) == (
        code,
        field,
        "deck.toml",
    )
    assert field in excinfo.value.message


def test_toml_syntax_error_names_the_file(limits: DeckLimits) -> None:
    files = _deck_files() | {"deck.toml": b"title = \n"}
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_zip(_zip(files), limits)
    assert excinfo.value.code is Code.MANIFEST_SYNTAX and excinfo.value.file == "deck.toml"


@pytest.mark.parametrize(
    ("extra", "code", "file"),
    [
        ({"pages/notes.txt": b"x"}, Code.PAGE_KIND_UNKNOWN, "pages/notes.txt"),
        ({"pages/01-a.html": b"x"}, Code.PAGE_DUPLICATE, "pages/01-a.md"),
        ({"pages/bad name.md": b"x"}, Code.PAGE_NAME_INVALID, "pages/bad name.md"),
        ({"pages/sub/x.md": b"x"}, Code.BAD_NAME, "pages/sub/x.md"),
        ({"pages/03-c.md": b"\xff\xfe"}, Code.NOT_UTF8, "pages/03-c.md"),
    ],
)
def test_page_file_errors_name_the_file(
    limits: DeckLimits, extra: dict[str, bytes], code: Code, file: str
) -> None:
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_zip(_zip(_deck_files() | extra), limits)
    assert excinfo.value.code is code
    assert excinfo.value.file in (file, "pages/01-a.html")


def test_a_deck_needs_pages(limits: DeckLimits) -> None:
    files = {k: v for k, v in _deck_files().items() if not k.startswith("pages/")}
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_zip(_zip(files), limits)
    assert excinfo.value.code is Code.NO_PAGES


def test_folder_symlinks_are_refused(tmp_path: Path, limits: DeckLimits) -> None:
    root = _write(tmp_path / "deck", _deck_files())
    (tmp_path / "secret.txt").write_text("secret")
    (root / "assets" / "leak.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_folder(root, limits)
    assert excinfo.value.code is Code.SYMLINK and excinfo.value.file == "assets/leak.txt"


def _json(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "manifest": {"title": "J", "slide": {"width": 800, "height": 600}},
        "pages": [
            {"name": "z-last", "kind": "md", "text": "# Z"},
            {"name": "a-first", "kind": "html", "text": '<img src="assets/p.png">'},
        ],
        "assets": [{"path": "assets/p.png", "data_base64": base64.b64encode(PNG_1PX).decode()}],
        "theme_css": "h1 { color: red }",
    }
    body.update(overrides)
    return body


def test_json_deck_keeps_page_order_and_decodes_assets(limits: DeckLimits) -> None:
    deck = load_deck_json(_json(), limits)
    assert [p.name for p in deck.pages] == ["z-last", "a-first"]
    assert deck.assets["assets/p.png"].data == PNG_1PX
    assert deck.theme_css == "h1 { color: red }"
    assert load_deck_json(json.dumps(_json()).encode(), limits) == deck


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        (_json(extra=1), Code.FIELD_UNKNOWN, "extra"),
        (_json(manifest={"title": "J", "colour": 1}), Code.FIELD_UNKNOWN, "manifest.colour"),
        (_json(manifest={"title": 5}), Code.FIELD_INVALID, "manifest.title"),
        (
            _json(manifest={"title": "J", "slide": {"width": "800"}}),
            Code.FIELD_INVALID,
            "manifest.slide.width",
        ),
        (
            _json(pages=[{"name": "a", "kind": "pdf", "text": ""}]),
            Code.FIELD_INVALID,
            "pages[0].kind",
        ),
        (
            _json(pages=[{"name": "a", "kind": "md", "text": 3}]),
            Code.FIELD_INVALID,
            "pages[0].text",
        ),
        (
            _json(pages=[{"name": "a b", "kind": "md", "text": ""}]),
            Code.FIELD_INVALID,
            "pages[0].name",
        ),
        (_json(pages=[{"name": "a", "kind": "md"}]), Code.FIELD_MISSING, "pages[0].text"),
        (
            _json(assets=[{"path": "assets/x", "data_base64": "!!"}]),
            Code.FIELD_INVALID,
            "assets[0].data_base64",
        ),
        (_json(assets=[{"path": "../x", "data_base64": ""}]), Code.FIELD_INVALID, "assets[0].path"),
        (
            _json(assets=[{"path": "img/x", "data_base64": ""}]),
            Code.ASSET_PATH_INVALID,
            "assets[0].path",
        ),
    ],
)
def test_json_errors_name_the_field(
    limits: DeckLimits, body: dict[str, Any], code: Code, field: str
) -> None:
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_json(body, limits)
    assert (excinfo.value.code, excinfo.value.field) == (code, field)
    assert field in excinfo.value.message


def test_json_body_over_the_limit_is_413(small_limits: DeckLimits) -> None:
    body = b'{"manifest": {"title": "' + b"x" * (3 * 1024 * 1024) + b'"}}'
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_json(body, small_limits)
    assert excinfo.value.code is Code.BODY_TOO_LARGE and excinfo.value.http_status == 413


def test_json_syntax_error(limits: DeckLimits) -> None:
    with pytest.raises(DeckSourceError) as excinfo:
        load_deck_json(b"{not json", limits)
    assert excinfo.value.code is Code.JSON_SYNTAX


def test_every_manifest_field_and_page_problem_comes_in_one_run(
    tmp_path: Path, limits: DeckLimits
) -> None:
    files = _deck_files() | {
        "deck.toml": b'title = 3\nlang = "x y"\ncolour = "red"\n',
        "pages/notes.txt": b"x",
    }
    for load in (
        lambda: load_deck_zip(_zip(files), limits),
        lambda: load_deck_folder(_write(tmp_path / "deck", files), limits),
    ):
        with pytest.raises(DeckSourceError) as excinfo:
            load()
        found = {(p.code, p.field or p.file) for p in excinfo.value.every()}
        assert found == {
            (Code.FIELD_INVALID, "title"),
            (Code.FIELD_INVALID, "lang"),
            (Code.FIELD_UNKNOWN, "colour"),
            (Code.PAGE_KIND_UNKNOWN, "pages/notes.txt"),
        }
