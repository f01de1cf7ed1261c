"""A scriptable OpenAI-compatible server on loopback for the AI tests (no internet, ever).

A raw asyncio HTTP/1.1 server, so a test can also drop a connection mid-request. Each endpoint
answers from its script (a queue of `Reply`); with an empty script it answers its default. Every
request is recorded (`requests`), and a client that hangs up while a slow reply waits is
counted in `disconnects`.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PIL import Image


@dataclass
class Reply:
    """One scripted answer."""

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    raw: bytes | None = None
    delay: float = 0.0
    drop: bool = False
    hold: asyncio.Event | None = None
    """Answer only once this is set (the test's go-ahead)."""


def png_bytes(width: int, height: int, color: tuple[int, int, int] = (40, 120, 200)) -> bytes:
    """A real PNG of the given size."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def chat_body(content: str, model: str = "fake-text") -> dict[str, Any]:
    """A chat completion carrying `content`."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def image_body(data: bytes) -> dict[str, Any]:
    """An images answer carrying `data` base64-encoded."""
    return {
        "created": 1_700_000_000,
        "data": [{"b64_json": base64.b64encode(data).decode()}],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 50,
            "total_tokens": 60,
            "input_tokens_details": {"image_tokens": 0, "text_tokens": 10},
        },
    }


@dataclass
class Seen:
    """A request the server received."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]


class FakeOpenAI:
    """Serve `/v1/chat/completions`, `/v1/images/generations` and `/v1/models` on 127.0.0.1."""

    def __init__(self) -> None:
        self.chat: deque[Reply] = deque()
        self.images: deque[Reply] = deque()
        self.models: list[str] = ["fake-image", "fake-text"]
        self.models_script: deque[Reply] = deque()
        self.requests: list[Seen] = []
        self.disconnects = 0
        self.on_chat: Callable[[Seen], Reply | None] | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        """The URL to configure as `DECKYARD_AI_BASE_URL`."""
        return f"http://127.0.0.1:{self.port}/v1"

    def seen(self, path: str) -> list[Seen]:
        """Requests received on `path`."""
        return [r for r in self.requests if r.path == path]

    async def start(self) -> FakeOpenAI:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and end every open connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # a hang-up, or `stop()` ending the connection
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        path = target.split("?", 1)[0]
        body = json.loads(raw) if raw else None
        seen = Seen(method, path, body, headers)
        self.requests.append(seen)
        reply = self._reply_for(seen)
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.delay and not await self._wait_or_hangup(reader, reply.delay):
            self.disconnects += 1
            return False
        if reply.drop:
            return False
        payload = reply.raw
        if payload is None:
            payload = json.dumps(reply.body).encode()
            reply.headers.setdefault("content-type", "application/json")
        out = [f"HTTP/1.1 {reply.status} X", f"content-length: {len(payload)}"]
        out += [f"{k}: {v}" for k, v in reply.headers.items()]
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + payload)
        await writer.drain()
        return True

    async def _wait_or_hangup(self, reader: asyncio.StreamReader, delay: float) -> bool:
        """Wait `delay` seconds; False as soon as the client closes the connection."""
        try:
            data = await asyncio.wait_for(reader.read(1), timeout=delay)
        except TimeoutError:
            return True
        return bool(data)

    def _reply_for(self, seen: Seen) -> Reply:
        if seen.path.endswith("/chat/completions"):
            custom = self.on_chat(seen) if self.on_chat is not None else None
            reply = custom or (self.chat.popleft() if self.chat else Reply("# Fine\n"))
            if reply.body is None and reply.raw is None:
                reply.body = chat_body(reply.content or "")
            return reply
        if seen.path.endswith("/images/generations"):
            reply = self.images.popleft() if self.images else Reply()
            if reply.body is None and reply.raw is None:
                width, height = (int(x) for x in str(seen.body.get("size", "64x64")).split("x"))
                reply.body = image_body(png_bytes(width, height))
            return reply
        if seen.path.endswith("/models"):
            reply = self.models_script.popleft() if self.models_script else Reply()
            if reply.body is None and reply.raw is None:
                reply.body = {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 1, "owned_by": "fake"}
                        for m in self.models
                    ],
                }
            return reply
        return Reply(status=404, body={"error": {"message": f"no route {seen.path}"}})


class ThreadedFakeOpenAI:
    """A `FakeOpenAI` on its own event loop in a thread, for tests that block (drills)."""

    def __init__(self) -> None:
        import threading

        self.fake = FakeOpenAI()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.fake.start(), self._loop).result(10)
        return self.fake

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.fake.stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
