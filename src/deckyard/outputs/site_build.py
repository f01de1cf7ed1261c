"""Builds a deck's static site as a ZIP (`decks.site.verify` checks such a ZIP against its
manifest).

The site is `index.html` (a viewer with keyboard navigation), `presenter.html` (speaker notes,
timer, next slide), `pages/<name>.<hash>.html` (each page's self-contained document, named by
its content hash so hosts can cache it immutably) and `manifest.json` (version, page count,
and size and SHA-256 of every other file). Nothing in it refers outside the site, so it works
from `file://` with no network. The ZIP is deterministic: the same pages and version give the
same bytes.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from typing import Any

from deckyard.outputs.interface import CompiledInput
from deckyard.outputs.site_presenter import PRESENTER, page_notes, presenter_html
from deckyard.outputs.site_viewer import index_html

MANIFEST = "manifest.json"
INDEX = "index.html"
SITE_FORMAT = "deckyard-site/1"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data` as the site manifest writes it."""
    return hashlib.sha256(data).hexdigest()


def page_file(name: str, document: bytes) -> str:
    """A page's file in the site: `pages/<name>.<first 16 hex of its SHA-256>.html`.

    The name carries the content's hash, so a host may cache a page for ever (a changed page
    is a new name, which the revalidated `index.html` and `presenter.html` point at).
    """
    return f"pages/{name}.{sha256_hex(document)[:16]}.html"


def default_version(pages: Sequence[CompiledInput]) -> str:
    """A version string derived from the pages' hashes, for callers without one."""
    digest = hashlib.sha256("".join(p.sha256 for p in pages).encode("ascii")).hexdigest()
    return f"sha256-{digest[:16]}"


def build_site(title: str, pages: Sequence[CompiledInput], version: str | None = None) -> bytes:
    """The static site ZIP for compiled `pages`, in showing order, titled `title`."""
    if not pages:
        raise ValueError("a site needs at least one page")
    version = version or default_version(pages)
    documents = [page.document.encode("utf-8") for page in pages]
    page_files = [page_file(page.name, doc) for page, doc in zip(pages, documents, strict=True)]
    files: dict[str, bytes] = dict(zip(page_files, documents, strict=True))
    width, height = pages[0].width, pages[0].height
    files[INDEX] = index_html(title, page_files, width, height).encode("utf-8")
    notes = [page_notes(page.document) for page in pages]
    files[PRESENTER] = presenter_html(title, page_files, notes, width, height).encode("utf-8")
    manifest: dict[str, Any] = {
        "format": SITE_FORMAT,
        "title": title,
        "version": version,
        "page_count": len(pages),
        "slide": {"width": pages[0].width, "height": pages[0].height},
        "entry": INDEX,
        "pages": [
            {"name": page.name, "file": file, "sha256": page.sha256}
            for page, file in zip(pages, page_files, strict=True)
        ],
        "files": [
            {"path": path, "size": len(data), "sha256": sha256_hex(data)}
            for path, data in sorted(files.items())
        ],
    }
    files[MANIFEST] = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            info = zipfile.ZipInfo(path, date_time=_ZIP_EPOCH)
            info.external_attr = 0o100644 << 16
            info.create_system = 3
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[path])
    return out.getvalue()
