"""Fixtures for the deck tests: limits from default settings and decks built in memory."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest

from deckyard.config import Settings
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.json_body import load_deck_json
from deckyard.decks.source.limits import DeckLimits, ZipLimits
from tests.helpers.decks import MakeDeck


@pytest.fixture
def limits() -> DeckLimits:
    return DeckLimits.from_settings(Settings.load())


@pytest.fixture
def small_zip_limits() -> ZipLimits:
    return ZipLimits(max_entries=20, max_total_bytes=1024 * 1024, max_file_bytes=512 * 1024)


@pytest.fixture
def small_limits(limits: DeckLimits, small_zip_limits: ZipLimits) -> DeckLimits:
    return dataclasses.replace(limits, zip=small_zip_limits, max_body_bytes=2 * 1024 * 1024)


@pytest.fixture
def make_deck(limits: DeckLimits) -> MakeDeck:
    """Build a deck from page texts (`{"01-a.md": "# Hi"}`), asset bytes and manifest fields."""

    def make(
        pages: dict[str, str],
        assets: dict[str, bytes] | None = None,
        theme_css: str | None = None,
        **manifest: Any,
    ) -> DeckSource:
        payload: dict[str, Any] = {
            "manifest": {"title": "Test deck", **manifest},
            "pages": [
                {"name": name.rsplit(".", 1)[0], "kind": name.rsplit(".", 1)[1], "text": text}
                for name, text in pages.items()
            ],
            "assets": [
                {"path": path, "data_base64": base64.b64encode(data).decode()}
                for path, data in (assets or {}).items()
            ],
        }
        if theme_css is not None:
            payload["theme_css"] = theme_css
        return load_deck_json(payload, limits)

    return make
