"""Verifies a built site ZIP: a safe extraction, then every file against the site's manifest.

The checks are of what landed on disk after extraction under the deck ZIP rules, so a site that
passes is one a browser can open from `file://` exactly as listed.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deckyard.decks.errors import DeckSourceError, SiteErrorCode, SiteVerificationError
from deckyard.decks.source.limits import ZipLimits
from deckyard.decks.source.zipsafe import extract_zip
from deckyard.outputs.site_build import INDEX, MANIFEST, SITE_FORMAT, sha256_hex


@dataclass(frozen=True)
class SiteFile:
    """One file of a verified site."""

    path: str
    size: int
    sha256: str


@dataclass(frozen=True)
class SiteCheck:
    """What `verify_site_zip` confirmed: the manifest's version, pages and files."""

    version: str
    page_count: int
    files: list[SiteFile]


def _manifest(files: dict[str, bytes]) -> dict[str, Any]:
    if MANIFEST not in files:
        raise SiteVerificationError(
            SiteErrorCode.MANIFEST_MISSING, f"{MANIFEST} is missing", file=MANIFEST
        )
    try:
        manifest = json.loads(files[MANIFEST])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SiteVerificationError(
            SiteErrorCode.MANIFEST_INVALID, f"{MANIFEST} is not JSON: {exc}", file=MANIFEST
        ) from None
    entries = manifest.get("files") if isinstance(manifest, dict) else None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != SITE_FORMAT
        or not isinstance(entries, list)
        or not all(
            isinstance(e, dict)
            and isinstance(e.get("path"), str)
            and isinstance(e.get("size"), int)
            and isinstance(e.get("sha256"), str)
            for e in entries
        )
        or not isinstance(manifest.get("version"), str)
        or not isinstance(manifest.get("page_count"), int)
        or not isinstance(manifest.get("pages"), list)
    ):
        raise SiteVerificationError(
            SiteErrorCode.MANIFEST_INVALID,
            f"{MANIFEST} lacks format {SITE_FORMAT!r}, version, page_count, pages or files",
            file=MANIFEST,
        )
    return manifest


def _check(files: dict[str, bytes]) -> SiteCheck:
    manifest = _manifest(files)
    listed: list[SiteFile] = []
    for entry in manifest["files"]:
        path, size, digest = entry["path"], entry["size"], entry["sha256"]
        if path not in files:
            raise SiteVerificationError(
                SiteErrorCode.FILE_MISSING, f"{path} is listed but missing", file=path
            )
        if len(files[path]) != size:
            raise SiteVerificationError(
                SiteErrorCode.SIZE_MISMATCH,
                f"{path} is {len(files[path])} bytes; the manifest says {size}",
                file=path,
            )
        if sha256_hex(files[path]) != digest:
            raise SiteVerificationError(
                SiteErrorCode.HASH_MISMATCH, f"{path} does not match its SHA-256", file=path
            )
        listed.append(SiteFile(path, size, digest))
    unlisted = sorted(set(files) - {f.path for f in listed} - {MANIFEST})
    if unlisted:
        raise SiteVerificationError(
            SiteErrorCode.FILE_UNLISTED,
            f"{unlisted[0]} is not in {MANIFEST}",
            file=unlisted[0],
        )
    if INDEX not in files:
        raise SiteVerificationError(SiteErrorCode.INDEX_MISSING, f"{INDEX} is missing", file=INDEX)
    pages = manifest["pages"]
    if manifest["page_count"] != len(pages) or not pages:
        raise SiteVerificationError(
            SiteErrorCode.PAGE_COUNT_MISMATCH,
            f"page_count is {manifest['page_count']} but {len(pages)} page(s) are listed",
            file=MANIFEST,
        )
    for page in pages:
        file = page.get("file") if isinstance(page, dict) else None
        if not isinstance(file, str) or file not in files:
            raise SiteVerificationError(
                SiteErrorCode.FILE_MISSING, f"page file {file!r} is missing", file=MANIFEST
            )
    return SiteCheck(manifest["version"], manifest["page_count"], listed)


def verify_site_zip(data: bytes, limits: ZipLimits, dest: Path | None = None) -> SiteCheck:
    """Safely extract the site ZIP `data` and check every file against its manifest.

    Extraction follows the deck ZIP rules (no escapes, absolute paths, symlinks, bombs,
    duplicates). With `dest` the site stays there (to load `index.html` in a browser next);
    without, it goes to a temporary folder removed before returning. Raises
    `SiteVerificationError`, whose code is a `DeckSourceErrorCode` for unsafe archives.
    """
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
        return _check(_extract_and_reread(data, limits, dest))
    with tempfile.TemporaryDirectory(prefix="deckyard-site-") as tmp:
        return _check(_extract_and_reread(data, limits, Path(tmp)))


def _extract_and_reread(data: bytes, limits: ZipLimits, root: Path) -> dict[str, bytes]:
    """Extract safely under `root`, then read the files back: the check is of what landed."""
    try:
        names = extract_zip(data, limits, root)
    except DeckSourceError as exc:
        raise SiteVerificationError(exc.code, exc.message, file=exc.file) from None
    return {name: (root / name).read_bytes() for name in names}
