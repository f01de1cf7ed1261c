"""ETags and If-Match: a deck's or page's version as a strong entity tag, and checking it."""

from __future__ import annotations

from deckyard.api.errors import ApiError
from deckyard.config import Settings

IF_MATCH_DESCRIPTION = (
    'The ETag the edit is based on (a version, e.g. `"3"`). A stale one answers 409 '
    "`EDIT_CONFLICT` naming the current version; without it the last writer wins (unless "
    "`DECKYARD_DECK_REQUIRE_IF_MATCH` is set, then 428)."
)


def etag(version: int) -> str:
    """The strong ETag of a version number."""
    return f'"{version}"'


def if_match(header: str | None, settings: Settings) -> int | None:
    """The version an `If-Match` header names; None for an unconditional write.

    `*` matches any current version, so it is unconditional too, but explicit: it passes
    when If-Match is required.
    """
    if header is None:
        if settings.deck_require_if_match:
            raise ApiError(
                428,
                "IF_MATCH_REQUIRED",
                "send If-Match with the ETag you read (this server refuses blind writes)",
                field="If-Match",
            )
        return None
    value = header.strip()
    if value == "*":
        return None
    value = value.removeprefix("W/").strip('"')
    if not value.isdigit() or len(value) > 12:
        raise ApiError(
            422,
            "INVALID_INPUT",
            f'If-Match: expected one ETag like "3", got {header[:40]!r}',
            field="If-Match",
        )
    return int(value)


def conflict(what: str, current: int, base: int) -> ApiError:
    """409 `EDIT_CONFLICT`: `what` is at version `current`, not at the client's `base`."""
    return ApiError(
        409,
        "EDIT_CONFLICT",
        f"{what} is at version {current}, not {base}; reload and edit again",
        field="If-Match",
        headers={"ETag": etag(current)},
        extra={"current_version": current},
    )
