"""Loads a deck from its JSON form (`DeckJson`): manifest fields, pages in order, base64 assets."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.assemble import (
    ASSETS_DIR,
    assemble_deck,
    check_file_totals,
    parse_manifest,
    raise_validation_error,
    safe_relative,
)
from deckyard.decks.source.deck_source import MAX_PATH_LENGTH, DeckSource, PageKind, PageSource
from deckyard.decks.source.limits import DeckLimits, ZipLimits


class _JsonPage(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str
    kind: PageKind = Field(strict=False)
    text: str


class _JsonAsset(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    path: str = Field(min_length=1, max_length=MAX_PATH_LENGTH)
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
        check_file_totals(len(files), total, limits)
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
        except RecursionError:
            raise DeckSourceError(Code.JSON_SYNTAX, "the body is nested too deeply") from None
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
