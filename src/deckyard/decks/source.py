"""Loads a deck from a folder, from ZIP bytes or from a JSON body into a checked `DeckSource`.

The three forms share one layout (`deck.toml`, `pages/*.html|*.md`, `assets/**`, an optional
theme file) and one set of rules (`assemble.py`). A ZIP may hold the layout at its root or under
one top folder. Every refusal is a `DeckSourceError`; nothing partial is ever returned.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deckyard.decks.assemble import (
    ASSETS_DIR,
    PAGES_DIR,
    assemble_deck,
    decode_text,
    parse_manifest,
    raise_validation_error,
    safe_relative,
)
from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.limits import DeckLimits, ZipLimits
from deckyard.decks.model import DeckManifest, DeckSource, PageKind, PageSource
from deckyard.decks.zipsafe import read_zip

MANIFEST_FILE = "deck.toml"
_SKIPPED_TOP = ("__MACOSX/",)


def _manifest_from_toml(data: bytes) -> DeckManifest:
    text = decode_text(data, MANIFEST_FILE)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeckSourceError(
            Code.MANIFEST_SYNTAX, f"{MANIFEST_FILE}: {exc}", file=MANIFEST_FILE
        ) from None
    return parse_manifest(raw, file=MANIFEST_FILE, prefix="")


def _missing_manifest(where: str) -> DeckSourceError:
    return DeckSourceError(
        Code.MANIFEST_MISSING, f"{MANIFEST_FILE} not found {where}", file=MANIFEST_FILE
    )


def _check_sizes(count: int, total: int, limits: ZipLimits) -> None:
    if count > limits.max_entries:
        raise DeckSourceError(
            Code.TOO_MANY_FILES,
            f"the deck has {count} files; at most {limits.max_entries} are allowed",
        )
    if total > limits.max_total_bytes:
        raise DeckSourceError(
            Code.TOO_LARGE, f"the deck's files exceed {limits.max_total_bytes} bytes"
        )


def _read_folder_file(path: Path, relative: str, limits: ZipLimits) -> bytes:
    if path.is_symlink():
        raise DeckSourceError(Code.SYMLINK, f"{relative} is a symbolic link", file=relative)
    if not path.is_file():
        raise DeckSourceError(Code.SPECIAL_FILE, f"{relative} is not a regular file", file=relative)
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise DeckSourceError(
            Code.FILE_TOO_LARGE,
            f"{relative} is {size} bytes; at most {limits.max_file_bytes} are allowed",
            file=relative,
        )
    return path.read_bytes()


def load_deck_folder(folder: Path, limits: DeckLimits) -> DeckSource:
    """Load the deck in `folder`; only `deck.toml`, the theme, `pages/` and `assets/` are read.

    Symbolic links anywhere in those are refused, as in a ZIP.
    """
    if not folder.is_dir():
        raise DeckSourceError(Code.FOLDER_NOT_FOUND, f"{folder} is not a folder")
    manifest_path = folder / MANIFEST_FILE
    if not manifest_path.is_file():
        raise _missing_manifest(f"in {folder}")
    manifest = _manifest_from_toml(_read_folder_file(manifest_path, MANIFEST_FILE, limits.zip))
    files: dict[str, bytes] = {}
    total = 0
    for top in (PAGES_DIR, ASSETS_DIR):
        base = folder / top.rstrip("/")
        if base.is_symlink():
            raise DeckSourceError(Code.SYMLINK, f"{top} is a symbolic link", file=top)
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            for name in sorted(dirnames):
                if (here / name).is_symlink():
                    rel = (here / name).relative_to(folder).as_posix()
                    raise DeckSourceError(Code.SYMLINK, f"{rel} is a symbolic link", file=rel)
            for name in sorted(filenames):
                rel = (here / name).relative_to(folder).as_posix()
                files[rel] = _read_folder_file(here / name, rel, limits.zip)
                total += len(files[rel])
                _check_sizes(len(files), total, limits.zip)
    if manifest.theme is not None:
        theme = safe_relative(manifest.theme, file=MANIFEST_FILE, field="theme")
        if not (folder / theme).resolve().is_relative_to(folder.resolve()):
            raise DeckSourceError(
                Code.SYMLINK, f"{theme} leads outside the deck folder", file=theme, field="theme"
            )
        if (folder / theme).is_file() and theme not in files:
            files[theme] = _read_folder_file(folder / theme, theme, limits.zip)
    return assemble_deck(manifest, files, limits)


def _strip_top_folder(files: dict[str, bytes]) -> dict[str, bytes]:
    """The deck's files relative to its root: the archive root or its single top folder."""
    kept = {name: data for name, data in files.items() if not name.startswith(_SKIPPED_TOP)}
    if MANIFEST_FILE in kept:
        return kept
    tops = {name.split("/", 1)[0] for name in kept}
    if len(tops) == 1 and all("/" in name for name in kept):
        top = tops.pop() + "/"
        if top + MANIFEST_FILE in kept:
            return {name[len(top) :]: data for name, data in kept.items()}
    raise _missing_manifest("at the archive root or under a single top folder")


def load_deck_zip(data: bytes, limits: DeckLimits) -> DeckSource:
    """Load a deck from ZIP bytes after the checks in `zipsafe.read_zip`."""
    if len(data) > limits.max_body_bytes:
        raise DeckSourceError(
            Code.BODY_TOO_LARGE,
            f"the upload is {len(data)} bytes; at most {limits.max_body_bytes} are allowed",
        )
    files = _strip_top_folder(read_zip(data, limits.zip))
    manifest = _manifest_from_toml(files[MANIFEST_FILE])
    return assemble_deck(manifest, files, limits)


class _JsonPage(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    kind: PageKind = Field(strict=False)
    text: str


class _JsonAsset(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1, max_length=500)
    data_base64: str


class DeckJson(BaseModel):
    """The JSON form of a deck: the manifest's fields, pages in order, base64 assets."""

    model_config = ConfigDict(extra="forbid", strict=True)

    manifest: dict[str, Any]
    pages: list[_JsonPage]
    assets: list[_JsonAsset] = Field(default_factory=list)
    theme_css: str | None = None


def _json_pages(body: DeckJson) -> list[PageSource]:
    pages: list[PageSource] = []
    for i, page in enumerate(body.pages):
        try:
            pages.append(
                PageSource(
                    name=page.name,
                    kind=page.kind,
                    text=page.text.replace("\r\n", "\n").replace("\r", "\n"),
                )
            )
        except ValidationError as exc:
            raise_validation_error(exc, prefix=f"pages[{i}]")
    return pages


def _json_assets(body: DeckJson, limits: ZipLimits) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for i, asset in enumerate(body.assets):
        field = f"assets[{i}].path"
        path = safe_relative(asset.path, file=None, field=field)
        if not path.startswith(ASSETS_DIR):
            raise DeckSourceError(
                Code.ASSET_PATH_INVALID, f"{field}: {path!r} must start with assets/", field=field
            )
        if path in files:
            raise DeckSourceError(
                Code.ASSET_DUPLICATE, f"{field}: {path!r} is given twice", field=field
            )
        try:
            files[path] = base64.b64decode(asset.data_base64, validate=True)
        except (binascii.Error, ValueError):
            field = f"assets[{i}].data_base64"
            raise DeckSourceError(
                Code.FIELD_INVALID, f"{field} is not valid base64", field=field
            ) from None
        if len(files[path]) > limits.max_file_bytes:
            raise DeckSourceError(
                Code.FILE_TOO_LARGE,
                f"{path} is larger than {limits.max_file_bytes} bytes",
                file=path,
                field=field,
            )
        total += len(files[path])
        _check_sizes(len(files), total, limits)
    return files


def load_deck_json(payload: bytes | str | Mapping[str, Any], limits: DeckLimits) -> DeckSource:
    """Load a deck from its JSON form (`DeckJson`): raw body bytes, text or a parsed mapping.

    Pages keep the order given unless `manifest.pages` lists them; a theme comes either from
    `theme_css` or from an asset named by `manifest.theme`.
    """
    if isinstance(payload, bytes | str):
        size = len(payload.encode("utf-8") if isinstance(payload, str) else payload)
        if size > limits.max_body_bytes:
            raise DeckSourceError(
                Code.BODY_TOO_LARGE,
                f"the body is {size} bytes; at most {limits.max_body_bytes} are allowed",
            )
        try:
            payload = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DeckSourceError(Code.JSON_SYNTAX, f"the body is not JSON: {exc}") from None
    if not isinstance(payload, Mapping):
        raise DeckSourceError(Code.FIELD_INVALID, "the body must be a JSON object")
    try:
        body = DeckJson.model_validate(dict(payload))
    except ValidationError as exc:
        raise_validation_error(exc)
    manifest = parse_manifest(body.manifest, file=None, prefix="manifest")
    if manifest.theme is not None and body.theme_css is not None:
        raise DeckSourceError(
            Code.FIELD_INVALID,
            "give the theme either as manifest.theme or as theme_css, not both",
            field="theme_css",
        )
    files = _json_assets(body, limits.zip)
    return assemble_deck(
        manifest,
        files,
        limits,
        manifest_file=None,
        prefix="manifest",
        extra_pages=_json_pages(body),
        theme_css=body.theme_css,
    )
