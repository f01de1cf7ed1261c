"""The picture formats: one file per page in a ZIP, named as `deckyard render` names pages."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest

from deckyard.outputs import OUTPUTS, DeckInput, Needs, PageImage
from deckyard.outputs.images import JPEG, MANIFEST, PNG, WEBP, ImagesFormat, page_stem


def test_a_page_is_numbered_unless_its_name_already_is() -> None:
    assert page_stem(0, "cover") == "01-cover"
    assert page_stem(11, "thanks") == "12-thanks"
    assert page_stem(3, "07-agenda") == "07-agenda"
    assert page_stem(3, "2_intro") == "2_intro"


def test_the_picture_formats_are_registered_outputs() -> None:
    for fmt in (PNG, JPEG, WEBP):
        assert OUTPUTS[fmt.name] is fmt
        assert fmt.needs is Needs.PAGE_IMAGES and fmt.unpacked == "pages" and fmt.stepped
        assert fmt.picture == {"format": fmt.name, "scale": 1.0}
    # every other format is written as one file
    assert {n for n, o in OUTPUTS.items() if o.unpacked is None} == {"pdf", "pptx", "zip"}


@pytest.mark.parametrize("fmt", [PNG, JPEG, WEBP], ids=lambda f: f.name)
async def test_the_zip_holds_each_page_and_its_manifest(fmt: ImagesFormat) -> None:
    images = [PageImage("cover", 0, b"one"), PageImage("03-growth", 2, b"three")]
    deck = DeckInput("Talk", None, "en", 1280, 720, 2, images=images, version="7.3")
    made = await fmt.make(deck)
    ext = {"png": "png", "jpeg": "jpg", "webp": "webp"}[fmt.name]
    with zipfile.ZipFile(io.BytesIO(made.data)) as archive:
        assert archive.namelist() == [f"01-cover.{ext}", f"03-growth.{ext}", MANIFEST]
        assert archive.read(f"03-growth.{ext}") == b"three"
        manifest = json.loads(archive.read(MANIFEST))
    assert (manifest["title"], manifest["version"], manifest["format"]) == ("Talk", "7.3", ext)
    assert (manifest["width"], manifest["height"]) == (1280, 720)
    assert manifest["pages"] == made.pages
    assert made.pages[0] == {
        "page": "cover",
        "file": f"01-cover.{ext}",
        "size": 3,
        "sha256": hashlib.sha256(b"one").hexdigest(),
    }
    assert made.warnings == []
