"""Names shared by the deck service, its job handlers, the API and the CLI: kinds, codes, events."""

from __future__ import annotations

from enum import StrEnum

DECK_QUEUE = "decks"
PUBLISH_TASK = "publish"


class DeckJobKind(StrEnum):
    """The durable job kinds of the deck domain."""

    PAGE_VALIDATE = "page.validate"
    PAGE_EDIT = "page.edit"
    PAGE_SCREENSHOT = "page.screenshot"
    DECK_BUILD = "deck.build"
    """The site ZIP before it became the `zip` export format; only jobs queued by an older
    version still have it."""
    DECK_EXPORT = "deck.export"
    DECK_STYLE = "deck.style"
    SITE_GO_LIVE = "site.go_live"
    DECK_VALIDATE = "deck.validate"
    DECK_SCREENSHOTS = "deck.screenshots"


class DeckJobErrorCode(StrEnum):
    """Error codes deck jobs fail with when no validation or renderer code applies."""

    DECK_NOT_FOUND = "DECK_NOT_FOUND"
    PAGE_NOT_FOUND = "PAGE_NOT_FOUND"
    VERSION_NOT_FOUND = "PAGE_VERSION_NOT_FOUND"
    NOT_COMPILED = "PAGE_NOT_COMPILED"
    DECK_COMPILE_FAILED = "DECK_COMPILE_FAILED"
    SITE_INVALID = "DECK_SITE_INVALID"
    EDIT_CONFLICT = "EDIT_CONFLICT"
    TOO_MANY_PAGES = "DECK_TOO_MANY_PAGES"
    ASSET_GONE = "ASSET_GONE"
    ARTIFACT_MISSING = "DECK_EXPORT_ARTIFACT_MISSING"
    UNKNOWN_FORMAT = "DECK_EXPORT_FORMAT_UNKNOWN"
    OPTION_UNSUPPORTED = "DECK_EXPORT_OPTION_UNSUPPORTED"


class DeckEvent(StrEnum):
    """Event types deck jobs emit (besides the runtime's own)."""

    VALIDATION = "validation"
    SKIPPED_VISUAL_VERIFICATION = "skipped_visual_verification"
    RENDER = "render"
    SCREENSHOT_REUSED = "screenshot_reused"
    SITE_VERIFIED = "site_verified"
    SITE_LOADED = "site_loaded"
    SITE_LIVE = "site_live"
    UNCONDITIONAL_WRITE = "unconditional_write"
    OUTPUT_WARNING = "output_warning"


class BrowserCheck(StrEnum):
    """Whether a built site was loaded in a browser after building."""

    PASSED = "passed"


PDF_FORMAT = "pdf"
"""The export format `deck.export` makes itself (the print document); the others are in
`deckyard.outputs`."""
