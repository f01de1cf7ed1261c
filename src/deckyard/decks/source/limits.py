"""Limits a deck source, a compiled document and a built site must respect, read from settings.

The functions in `decks` take these small frozen objects instead of `Settings`, so a caller (or a
test) can tighten one limit without building a whole configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

from deckyard.config import Settings


@dataclass(frozen=True)
class ZipLimits:
    """Bounds on a ZIP archive: entry count, unpacked total and unpacked size of one file."""

    max_entries: int
    max_total_bytes: int
    max_file_bytes: int


@dataclass(frozen=True)
class DeckLimits:
    """Bounds on a deck source and on what compiling it produces."""

    max_body_bytes: int
    zip: ZipLimits
    max_pages: int
    max_slide_dimension: int
    max_document_bytes: int
    markdown_html: bool
    markdown_extensions: tuple[str, ...]
    marp_timeout_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> DeckLimits:
        """The limits configured in `settings` (the `deck_*` fields)."""
        return cls(
            max_body_bytes=settings.deck_max_body_bytes,
            zip=ZipLimits(
                max_entries=settings.deck_max_zip_entries,
                max_total_bytes=settings.deck_max_uncompressed_bytes,
                max_file_bytes=settings.deck_max_file_bytes,
            ),
            max_pages=settings.deck_max_pages,
            max_slide_dimension=settings.deck_max_slide_dimension,
            max_document_bytes=settings.deck_max_document_bytes,
            markdown_html=settings.deck_markdown_html,
            markdown_extensions=tuple(settings.deck_markdown_extensions),
            marp_timeout_seconds=settings.deck_marp_timeout_seconds,
        )


def site_zip_limits(settings: Settings) -> ZipLimits:
    """Bounds for verifying a built site: every page inlines its fonts, so totals run larger."""
    return ZipLimits(
        max_entries=settings.deck_max_pages + 16,
        max_total_bytes=settings.deck_site_max_uncompressed_bytes,
        max_file_bytes=settings.deck_max_document_bytes,
    )
