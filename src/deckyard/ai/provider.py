"""`AiProvider`: the one client of an OpenAI-compatible API (chat, images, model list).

It wraps the official `openai` SDK with its own retries turned off: a failed call becomes a
`JobError` and the job runtime's retry policy decides (429 and 5xx retry, honouring
`Retry-After`; any other 4xx fails at once). Cancelling the calling task (a job cancel or its
deadline) aborts the HTTP request at once, because the SDK's transport is plain asyncio.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import email.utils
import logging
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from deckyard.ai.errors import AiErrorCode
from deckyard.config import Settings
from deckyard.jobs import JobError

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)


@dataclass
class Usage:
    """Token counts, summed over the calls of one job."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0

    def add(self, other: Usage) -> None:
        """Add another call's counts."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        self.calls += other.calls

    def as_dict(self) -> dict[str, int]:
        """The JSON form stored in job results."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "calls": self.calls,
        }


@dataclass(frozen=True)
class ChatAnswer:
    """A chat completion's text and what it cost."""

    text: str
    usage: Usage
    model: str
    finish_reason: str | None = None


@dataclass(frozen=True)
class ImageAnswer:
    """A generated image's bytes and what it cost."""

    data: bytes
    usage: Usage
    model: str


@dataclass(frozen=True)
class ModelInfo:
    """One entry of the provider's model list."""

    id: str
    owned_by: str | None = None
    created: int | None = None


@dataclass
class _Slots:
    """Per-workspace semaphores bounding concurrent provider calls on this node."""

    size: int
    by_workspace: dict[str, asyncio.Semaphore] = field(default_factory=dict)

    def of(self, workspace_id: str) -> asyncio.Semaphore:
        sem = self.by_workspace.get(workspace_id)
        if sem is None:
            sem = self.by_workspace[workspace_id] = asyncio.Semaphore(self.size)
        return sem


def retry_after_seconds(headers: Mapping[str, str], cap: float) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date), capped."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return min(max(float(raw_ms) / 1000, 0.0), cap)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return min(max(float(raw), 0.0), cap)
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(raw)
    if parsed is None:
        return None
    return min(max(email.utils.mktime_tz(parsed) - time.time(), 0.0), cap)


def provider_error(exc: Exception, retry_after_cap: float) -> JobError:
    """The job error for a failed provider call: retryable for 429, 5xx and transport faults."""
    import openai  # lazily, see AiProvider.__init__

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = f"provider answered {status}: {str(exc.message)[:300]}"
        wait = retry_after_seconds(exc.response.headers, retry_after_cap)
        if status == 429:
            return JobError(AiErrorCode.RATE_LIMITED, detail, retry_after=wait)
        if status >= 500:
            return JobError(AiErrorCode.PROVIDER_ERROR, detail, retry_after=wait)
        if status in (401, 403):
            return JobError(AiErrorCode.AUTH_FAILED, detail, retryable=False)
        return JobError(AiErrorCode.REQUEST_REJECTED, detail, retryable=False)
    if isinstance(exc, openai.APITimeoutError):
        return JobError(AiErrorCode.PROVIDER_TIMEOUT, "the provider did not answer in time")
    if isinstance(exc, openai.APIConnectionError):
        return JobError(AiErrorCode.PROVIDER_UNAVAILABLE, f"provider unreachable: {exc}")
    return JobError(AiErrorCode.BAD_RESPONSE, f"unusable provider answer: {exc}"[:500])


def _usage_of(raw: Any) -> Usage:
    if raw is None:
        return Usage(calls=1)
    prompt = int(getattr(raw, "prompt_tokens", None) or getattr(raw, "input_tokens", 0) or 0)
    completion = int(
        getattr(raw, "completion_tokens", None) or getattr(raw, "output_tokens", 0) or 0
    )
    total = int(getattr(raw, "total_tokens", 0) or prompt + completion)
    return Usage(prompt, completion, total, 1)


class AiProvider:
    """Chat, image and model-list calls to the configured OpenAI-compatible API."""

    def __init__(self, settings: Settings) -> None:
        if settings.ai_base_url is None:
            raise ValueError("no AI provider is configured (DECKYARD_AI_BASE_URL)")
        # Imported here, not at module level: the SDK takes ~0.5 s to import (seconds on a busy
        # machine), and every `deckyard` command imports this module whether it uses AI or not.
        import openai

        self.settings = settings
        key = settings.ai_api_key.get_secret_value() if settings.ai_api_key else "unused"
        self.client: openai.AsyncOpenAI = openai.AsyncOpenAI(
            base_url=settings.ai_base_url,
            api_key=key,
            timeout=openai.Timeout(
                settings.ai_request_timeout_seconds, connect=settings.ai_connect_timeout_seconds
            ),
            max_retries=0,
        )
        self._slots = _Slots(settings.ai_workspace_concurrency)

    async def close(self) -> None:
        """Close the HTTP client's connections."""
        await self.client.close()

    def _timeout(self, remaining: float | None) -> float:
        limit = self.settings.ai_request_timeout_seconds
        return limit if remaining is None else max(min(limit, remaining), 0.001)

    @asynccontextmanager
    async def _call(self, workspace_id: str | None) -> AsyncIterator[None]:
        import openai  # lazily, see __init__

        sem = self._slots.of(workspace_id or "")
        async with sem:
            try:
                yield
            except (openai.OpenAIError, ValueError, TypeError, KeyError, AttributeError) as exc:
                raise provider_error(exc, self.settings.ai_retry_after_max_seconds) from exc

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        workspace_id: str | None,
        remaining: float | None = None,
        model: str | None = None,
    ) -> ChatAnswer:
        """One chat completion; `remaining` (the job's time left) bounds the call."""
        name = model or self.settings.ai_text_model
        async with self._call(workspace_id):
            completion = await self.client.chat.completions.create(
                model=name,
                messages=cast(Any, list(messages)),
                max_tokens=self.settings.ai_max_answer_tokens,
                temperature=self.settings.ai_temperature,
                timeout=self._timeout(remaining),
            )
            if not completion.choices:
                raise ValueError("the answer has no choices")
            choice = completion.choices[0]
            text = choice.message.content
            if not isinstance(text, str):
                raise ValueError("the answer has no text content")
            return ChatAnswer(text, _usage_of(completion.usage), name, choice.finish_reason)

    async def image(
        self,
        prompt: str,
        size: str,
        *,
        workspace_id: str | None,
        remaining: float | None = None,
    ) -> ImageAnswer:
        """Generate one image of `size` (`WIDTHxHEIGHT`), returned as the bytes the API sent."""
        name = self.settings.ai_image_model
        async with self._call(workspace_id):
            answer = await self.client.images.generate(
                model=name,
                prompt=prompt,
                size=cast(Any, size),
                n=1,
                timeout=self._timeout(remaining),
            )
            if answer.data and not answer.data[0].b64_json and answer.data[0].url:
                raise JobError(
                    AiErrorCode.IMAGE_URL_ONLY,
                    "the provider answered with an image URL instead of the image bytes; "
                    "URLs are not fetched: use a model or server that returns b64_json",
                    retryable=False,
                )
            if not answer.data or not answer.data[0].b64_json:
                raise ValueError("the answer carries no image")
            try:
                data = base64.b64decode(answer.data[0].b64_json, validate=True)
            except binascii.Error as exc:
                raise ValueError(f"the image is not valid base64: {exc}") from exc
            return ImageAnswer(data, _usage_of(answer.usage), name)

    async def models(self, remaining: float | None = None) -> list[ModelInfo]:
        """The provider's model list (`GET /models`), sorted by id."""
        async with self._call(None):
            page = await self.client.models.list(timeout=self._timeout(remaining))
            found = {
                m.id: ModelInfo(m.id, getattr(m, "owned_by", None), getattr(m, "created", None))
                async for m in page
            }
        return [found[k] for k in sorted(found)]
