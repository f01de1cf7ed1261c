"""The provider client against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import time

import pytest

from deckyard.ai.errors import AiErrorCode
from deckyard.ai.provider import AiProvider, retry_after_seconds
from deckyard.jobs import JobError
from tests.helpers.eventually import eventually
from tests.helpers.fake_openai import FakeOpenAI, Reply, png_bytes
from tests.helpers.runtime import fast_settings


def provider(fake: FakeOpenAI, **over: object) -> AiProvider:
    return AiProvider(fast_settings(ai_base_url=fake.base_url, ai_api_key="sk-test", **over))


MSG = [{"role": "user", "content": "hi"}]


async def test_chat_answer_and_usage() -> None:
    async with FakeOpenAI() as fake:
        fake.chat.append(Reply("# Hello"))
        p = provider(fake, ai_text_model="fake-text")
        try:
            answer = await p.chat(MSG, workspace_id="w")
        finally:
            await p.close()
        assert answer.text == "# Hello"
        assert answer.usage.as_dict() == {
            "prompt_tokens": 100,
            "completion_tokens": 20,
            "total_tokens": 120,
            "calls": 1,
        }
        sent = fake.seen("/v1/chat/completions")[0]
        assert sent.body["model"] == "fake-text"
        assert sent.headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("reply", "code", "retryable", "after"),
    [
        (Reply(status=429, headers={"retry-after": "7"}, body={"error": {}}), "RATE", True, 7.0),
        (Reply(status=500, body={"error": {"message": "boom"}}), "ERROR", True, None),
        (Reply(status=503, headers={"retry-after-ms": "1500"}, body={}), "ERROR", True, 1.5),
        (Reply(status=400, body={"error": {"message": "bad"}}), "REJECTED", False, None),
        (Reply(status=401, body={"error": {"message": "key"}}), "AUTH", False, None),
        (Reply(drop=True), "UNAVAILABLE", True, None),
        (Reply(raw=b"not json", headers={"content-type": "application/json"}), "BAD", True, None),
        (Reply(body={"id": "x", "choices": []}), "BAD", True, None),
    ],
)
async def test_failures_map_to_job_errors(
    reply: Reply, code: str, retryable: bool, after: float | None
) -> None:
    codes = {
        "RATE": AiErrorCode.RATE_LIMITED,
        "ERROR": AiErrorCode.PROVIDER_ERROR,
        "REJECTED": AiErrorCode.REQUEST_REJECTED,
        "AUTH": AiErrorCode.AUTH_FAILED,
        "UNAVAILABLE": AiErrorCode.PROVIDER_UNAVAILABLE,
        "BAD": AiErrorCode.BAD_RESPONSE,
    }
    async with FakeOpenAI() as fake:
        fake.chat.append(reply)
        p = provider(fake)
        try:
            with pytest.raises(JobError) as caught:
                await p.chat(MSG, workspace_id="w")
        finally:
            await p.close()
        assert caught.value.code == codes[code]
        assert caught.value.retryable is retryable
        assert caught.value.retry_after == after
        assert len(fake.seen("/v1/chat/completions")) == 1, "the SDK must not retry on its own"


async def test_cancel_aborts_the_http_call_at_once() -> None:
    async with FakeOpenAI() as fake:
        fake.chat.append(Reply("late", delay=30))
        p = provider(fake)
        try:
            call = asyncio.create_task(p.chat(MSG, workspace_id="w"))
            await eventually(lambda: _true(len(fake.requests) == 1))
            started = time.monotonic()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert time.monotonic() - started < 5
            await eventually(lambda: _true(fake.disconnects == 1))
        finally:
            await p.close()


async def test_remaining_time_bounds_the_call() -> None:
    async with FakeOpenAI() as fake:
        fake.chat.append(Reply("late", delay=30))
        p = provider(fake)
        try:
            with pytest.raises(JobError) as caught:
                await p.chat(MSG, workspace_id="w", remaining=0.3)
        finally:
            await p.close()
        assert caught.value.code == AiErrorCode.PROVIDER_TIMEOUT


async def test_workspace_concurrency_cap() -> None:
    async with FakeOpenAI() as fake:
        for _ in range(4):
            fake.chat.append(Reply("x", delay=30))
        p = provider(fake, ai_workspace_concurrency=2)

        def sent() -> list[str]:
            return [r.body["messages"][0]["content"] for r in fake.requests]

        def ask(text: str, workspace: str) -> asyncio.Task[object]:
            msg = [{"role": "user", "content": text}]
            return asyncio.create_task(p.chat(msg, workspace_id=workspace))

        try:
            calls = {t: ask(t, "w") for t in ("w0", "w1", "w2")}
            calls["o"] = ask("o", "other")
            await eventually(lambda: _true(len(sent()) == 3 and "o" in sent()))
            waiting = ({"w0", "w1", "w2"} - set(sent())).pop()
            first = next(t for t in sent() if t != "o")
            calls[first].cancel()
            await eventually(lambda: _true(waiting in sent()))
            assert len(sent()) == 4
            for c in calls.values():
                c.cancel()
            await asyncio.gather(*calls.values(), return_exceptions=True)
        finally:
            await p.close()


async def test_images_and_models() -> None:
    async with FakeOpenAI() as fake:
        p = provider(fake, ai_image_model="fake-image")
        try:
            image = await p.image("a cat", "256x256", workspace_id="w")
            models = await p.models()
        finally:
            await p.close()
        assert image.data == png_bytes(256, 256)
        assert image.usage.total_tokens == 60
        assert [m.id for m in models] == ["fake-image", "fake-text"]


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "3"}, 300) == 3
    assert retry_after_seconds({"retry-after": "9999"}, 300) == 300
    assert retry_after_seconds({"retry-after-ms": "250"}, 300) == 0.25
    assert retry_after_seconds({}, 300) is None
    dated = retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 300)
    assert dated == 0


async def _true(value: bool) -> bool:
    return value


async def test_an_image_url_instead_of_bytes_is_a_content_answer_not_retried() -> None:
    async with FakeOpenAI() as fake:
        fake.images.append(
            Reply(body={"created": 1, "data": [{"url": "http://127.0.0.1:9/a.png"}]})
        )
        p = provider(fake)
        try:
            with pytest.raises(JobError) as caught:
                await p.image("a cat", "256x256", workspace_id="w")
        finally:
            await p.close()
        assert caught.value.code == AiErrorCode.IMAGE_URL_ONLY
        assert caught.value.retryable is False
        assert "URL" in str(caught.value)
        assert len(fake.seen("/v1/images/generations")) == 1
