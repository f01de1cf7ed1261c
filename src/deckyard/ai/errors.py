"""AI job kinds, queues, event types and error codes (one module, no scattered literals)."""

from __future__ import annotations

from enum import StrEnum

AI_QUEUE = "ai"
"""The queue every in-process AI job runs on."""


class AiJobKind(StrEnum):
    """The durable job kinds of AI authoring."""

    PAGE_EDIT = "ai.page_edit"
    PAGE_CREATE = "ai.page_create"
    DECK_OUTLINE = "ai.deck_outline"
    IMAGE = "ai.image"
    CATALOG_SYNC = "ai.catalog_sync"


class AiErrorCode(StrEnum):
    """Why an AI call or job failed; infrastructure codes are retryable, content codes not."""

    NOT_CONFIGURED = "AI_NOT_CONFIGURED"
    RATE_LIMITED = "AI_RATE_LIMITED"
    PROVIDER_ERROR = "AI_PROVIDER_ERROR"
    PROVIDER_UNAVAILABLE = "AI_PROVIDER_UNAVAILABLE"
    PROVIDER_TIMEOUT = "AI_PROVIDER_TIMEOUT"
    AUTH_FAILED = "AI_AUTH_FAILED"
    REQUEST_REJECTED = "AI_REQUEST_REJECTED"
    BAD_RESPONSE = "AI_BAD_RESPONSE"
    NO_SOURCE = "AI_NO_PAGE_SOURCE"
    VALIDATION_FAILED = "AI_VALIDATION_FAILED"
    IMAGE_INVALID = "AI_IMAGE_INVALID"
    IMAGE_WRONG_SIZE = "AI_IMAGE_WRONG_SIZE"
    IMAGE_TOO_LARGE = "AI_IMAGE_TOO_LARGE"
    IMAGE_URL_ONLY = "AI_IMAGE_URL_ONLY"
    PAGE_EXISTS = "AI_PAGE_EXISTS"
    SLIDE_FAILED = "AI_SLIDE_FAILED"


RETRYABLE = frozenset(
    {
        AiErrorCode.RATE_LIMITED,
        AiErrorCode.PROVIDER_ERROR,
        AiErrorCode.PROVIDER_UNAVAILABLE,
        AiErrorCode.PROVIDER_TIMEOUT,
        AiErrorCode.BAD_RESPONSE,
    }
)


class AiEvent(StrEnum):
    """Event types AI jobs emit on their job's stream."""

    ROUND = "ai_round"
    USAGE = "ai_usage"
    IMAGE = "ai_image"
    SLIDE = "ai_slide"
