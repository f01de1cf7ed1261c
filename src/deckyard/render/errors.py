"""Render error codes, and which of them are infrastructure, content or cancellation.

The control plane retries infrastructure failures on another attempt and never retries content
failures; a cancellation is neither. Keeping the split in one table means the two kinds cannot be
confused by a caller matching on strings.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    """Who is to blame for a failed render."""

    INFRASTRUCTURE = "infrastructure"
    CONTENT = "content"
    CANCELLED = "cancelled"


class RenderErrorCode(StrEnum):
    """Every error code a renderer can report in a receipt or an HTTP error body."""

    SERVICE_UNAVAILABLE = "RENDER_SERVICE_UNAVAILABLE"
    NO_FREE_SLOT = "RENDER_NO_FREE_SLOT"
    RESULT_LOST = "RENDER_RESULT_LOST"
    DEADLINE_EXCEEDED = "RENDER_DEADLINE_EXCEEDED"
    BROWSER_CRASHED = "RENDER_BROWSER_CRASHED"
    WORKER_STOPPED = "RENDER_WORKER_STOPPED"
    INTERNAL_ERROR = "RENDER_INTERNAL_ERROR"
    UNAUTHORIZED = "RENDER_UNAUTHORIZED"
    CANCELLED = "RENDER_CANCELLED"
    PAGE_ERROR = "RENDER_PAGE_ERROR"
    NAVIGATION_FAILED = "RENDER_NAVIGATION_FAILED"
    SSRF_BLOCKED = "RENDER_SSRF_BLOCKED"
    INVALID_INPUT = "RENDER_INVALID_INPUT"
    SELECTOR_NOT_FOUND = "RENDER_SELECTOR_NOT_FOUND"
    WAIT_FAILED = "RENDER_WAIT_FAILED"
    OUTPUT_TOO_LARGE = "RENDER_OUTPUT_TOO_LARGE"
    ATTEMPT_CONFLICT = "RENDER_ATTEMPT_CONFLICT"


_KIND: dict[RenderErrorCode, ErrorKind] = {
    RenderErrorCode.SERVICE_UNAVAILABLE: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.NO_FREE_SLOT: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.RESULT_LOST: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.DEADLINE_EXCEEDED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.BROWSER_CRASHED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.WORKER_STOPPED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.INTERNAL_ERROR: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.UNAUTHORIZED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.CANCELLED: ErrorKind.CANCELLED,
    RenderErrorCode.PAGE_ERROR: ErrorKind.CONTENT,
    RenderErrorCode.NAVIGATION_FAILED: ErrorKind.CONTENT,
    RenderErrorCode.SSRF_BLOCKED: ErrorKind.CONTENT,
    RenderErrorCode.INVALID_INPUT: ErrorKind.CONTENT,
    RenderErrorCode.SELECTOR_NOT_FOUND: ErrorKind.CONTENT,
    RenderErrorCode.WAIT_FAILED: ErrorKind.CONTENT,
    RenderErrorCode.OUTPUT_TOO_LARGE: ErrorKind.CONTENT,
    RenderErrorCode.ATTEMPT_CONFLICT: ErrorKind.CONTENT,
}

_NOT_RETRYABLE_INFRASTRUCTURE = frozenset({RenderErrorCode.UNAUTHORIZED})


def error_kind(code: RenderErrorCode | str) -> ErrorKind:
    """The kind of `code`; an unrecognised code counts as infrastructure, the safe guess."""
    try:
        return _KIND[RenderErrorCode(code)]
    except ValueError:
        return ErrorKind.INFRASTRUCTURE


def is_infrastructure(code: RenderErrorCode | str) -> bool:
    """Whether `code` blames the renderer or its surroundings rather than the page."""
    return error_kind(code) is ErrorKind.INFRASTRUCTURE


def is_retryable(code: RenderErrorCode | str) -> bool:
    """Whether another attempt could succeed: infrastructure failures except bad credentials.

    A deadline counts as retryable; the control plane bounds retries by the request's own
    deadline, so a page that always hangs still ends as `RENDER_DEADLINE_EXCEEDED`.
    """
    if not is_infrastructure(code):
        return False
    try:
        return RenderErrorCode(code) not in _NOT_RETRYABLE_INFRASTRUCTURE
    except ValueError:
        return True
