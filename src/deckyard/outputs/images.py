"""`png`, `jpeg`, `webp`: every page's picture, one file per page, in a ZIP with its manifest.

The pictures come from `Needs.PAGE_IMAGES`: a PNG at scale 1 is the picture each page's
validation rendered (no second render; a page never validated is rendered, and its picture kept
on its version for the next time); JPEG and WebP are rendered by Chromium in that format (its
encoder, as a screenshot of that format is), every page in one deck render (a version keeps
one picture, its PNG).

The ZIP holds `NN-name.<ext>` per page (`page_stem`, the names `deckyard render` gives its
pages) and `manifest.json`: the deck's facts and, per page, its name, file, size and sha256.
`deckyard render` unpacks it into `pages/`.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import re
import zipfile
from typing import Any

from deckyard.outputs.interface import DeckInput, Needs, OutputFile, PageImage, Verify

ZIP_MEDIA_TYPE = "application/zip"
MANIFEST = "manifest.json"
_NUMBERED = re.compile(r"^\d+[-_]")


def page_stem(index: int, name: str) -> str:
    """`NN-name` for the page at `index` (0-based), unless its name already starts with a
    number: the name of its picture without the extension."""
    return name if _NUMBERED.match(name) else f"{index + 1:02d}-{name}"


def _zip(deck: DeckInput, images: list[PageImage], ext: str) -> tuple[bytes, list[dict[str, Any]]]:
    """The ZIP (pictures stored as they are: they are compressed already) and its pages."""
    pages: list[dict[str, Any]] = []
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for image in images:
            file = f"{page_stem(image.index, image.name)}.{ext}"
            archive.writestr(file, image.data)
            pages.append(
                {
                    "page": image.name,
                    "file": file,
                    "size": len(image.data),
                    "sha256": hashlib.sha256(image.data).hexdigest(),
                }
            )
        manifest = {
            "title": deck.title,
            "version": deck.version,
            "width": deck.width,
            "height": deck.height,
            "format": ext,
            "pages": pages,
        }
        archive.writestr(MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))
    return buffer.getvalue(), pages


class ImagesFormat:
    """One picture format: `png`, `jpeg` or `webp`."""

    def __init__(self, name: str, ext: str) -> None:
        self.name = name
        self.ext = ext
        self.file_name = f"pages-{name}.zip"
        self.picture: dict[str, Any] = {"format": name, "scale": 1.0}

    media_type = ZIP_MEDIA_TYPE
    needs = Needs.PAGE_IMAGES
    verify = Verify.NONE
    stepped = True
    unpacked = "pages"

    async def make(self, deck: DeckInput) -> OutputFile:
        """Zip the pictures in a thread."""
        data, pages = await asyncio.to_thread(_zip, deck, deck.images, self.ext)
        return OutputFile(data, pages=pages)


PNG = ImagesFormat("png", "png")
JPEG = ImagesFormat("jpeg", "jpg")
WEBP = ImagesFormat("webp", "webp")
