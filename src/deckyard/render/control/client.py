"""Where the renderers are, and a signed httpx client for their control API.

`RendererSources` holds how to reach each renderer (supervised local ones, whose URL changes on
restart, and configured remote ones) with its shared secret; `RendererClient` talks to them.

Every call returns a value instead of raising on renderer trouble: `None` means the renderer
did not answer usefully (connection refused, timeout, a 5xx or a body that is not what the API
promises), which the coordinator treats as "unreachable": no lease renewal, nothing written.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import ValidationError

from deckyard import tracing
from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.render.protocol import (
    ARTIFACT_SHA256_HEADER,
    ARTIFACT_SIZE_HEADER,
    Capabilities,
    ChangesAnswer,
    HmacAuth,
    Receipt,
    RenderErrorCode,
    is_retryable,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RendererSource:
    """How to reach one renderer: its stable name, its current URL and its shared secret."""

    name: str
    url: str
    secret: str


class RendererSources:
    """The renderers this process can talk to, by name; the supervisor updates URLs on restart."""

    def __init__(self) -> None:
        self._by_name: dict[str, RendererSource] = {}

    def put(self, source: RendererSource) -> None:
        """Add a renderer or replace how to reach it."""
        self._by_name[source.name] = source

    def remove(self, name: str) -> None:
        """Forget a renderer."""
        self._by_name.pop(name, None)

    def get(self, name: str) -> RendererSource | None:
        """The source called `name`, if this process knows it."""
        return self._by_name.get(name)

    def all(self) -> list[RendererSource]:
        """Every known source, by name."""
        return [self._by_name[n] for n in sorted(self._by_name)]

    def names(self) -> set[str]:
        """The names of every known source."""
        return set(self._by_name)


def configured_sources(urls: list[str], secret: str | None) -> list[RendererSource]:
    """Sources for `DECKYARD_RENDERER_URLS`, all under `DECKYARD_RENDERER_SECRET`."""
    if urls and not secret:
        raise ValueError(
            "DECKYARD_RENDERER_URLS needs DECKYARD_RENDERER_SECRET, the renderers' shared secret"
        )
    return [
        RendererSource(name=url.rstrip("/"), url=url.rstrip("/"), secret=secret or "")
        for url in urls
    ]


@dataclass(frozen=True)
class Rejection:
    """The renderer refused an attempt outright with an error body."""

    status: int
    code: str
    message: str
    missing: tuple[str, ...] = ()
    """With `RENDER_DOCUMENT_UNKNOWN`: the document keys the renderer does not hold."""

    @property
    def retryable(self) -> bool:
        """Whether another attempt (maybe elsewhere) could be accepted."""
        return is_retryable(self.code)


class RendererStatus(Capabilities):
    """`GET /v1/capabilities` with `draining` (sent beside the capabilities since renderers
    drain; absent, from an older renderer: not draining)."""

    draining: bool = False


class ArtifactMismatch(Exception):
    """The downloaded bytes do not match the size or sha256 the renderer promised."""


class RendererClient:
    """Talks to any number of renderers, each under its own shared secret."""

    def __init__(
        self,
        timeout: float,
        clock: Clock = SYSTEM_CLOCK,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._timeout = timeout
        self._clock = clock
        self._transport = transport
        self._clients: dict[tuple[str, str], httpx.AsyncClient] = {}

    def _client(self, url: str, secret: str) -> httpx.AsyncClient:
        key = (url, secret)
        client = self._clients.get(key)
        if client is None:
            client = httpx.AsyncClient(
                base_url=url,
                auth=HmacAuth(secret, self._clock),
                timeout=self._timeout,
                transport=self._transport,
            )
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        """Close every connection pool."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def _call(
        self, url: str, secret: str, method: str, path: str, **kwargs: Any
    ) -> httpx.Response | None:
        headers: dict[str, str] = {}
        tracing.inject(headers)  # the far side's spans join the current trace
        try:
            return await self._client(url, secret).request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            log.info("renderer %s unreachable on %s %s: %s", url, method, path, exc)
            return None

    async def capabilities(self, url: str, secret: str) -> RendererStatus | None:
        """Who the renderer is now (epoch, slots, draining), or None when it does not answer."""
        resp = await self._call(url, secret, "GET", "/v1/capabilities")
        if resp is None or resp.status_code != 200:
            return None
        try:
            return RendererStatus.model_validate_json(resp.content)
        except ValidationError:
            return None

    async def drain(self, url: str, secret: str, *, release: bool = False) -> bool:
        """Tell the renderer to drain (`release`: nothing of ours holds a slot there, so it
        may exit now); False when it did not take it."""
        resp = await self._call(url, secret, "POST", "/v1/drain", json={"release": release})
        return resp is not None and resp.status_code == 200

    async def submit(
        self, url: str, secret: str, body: dict[str, Any]
    ) -> Receipt | Rejection | None:
        """Post an attempt of N pages: its receipt, the renderer's refusal, or None when
        unreachable."""
        resp = await self._call(url, secret, "POST", "/v1/deck-attempts", json=body)
        tracing.annotate({tracing.ANSWER_STATUS: None if resp is None else resp.status_code})
        if resp is None:
            return None
        if resp.status_code in (200, 202):
            try:
                return Receipt.model_validate_json(resp.content)
            except ValidationError:
                return None
        if resp.status_code >= 500:
            return None
        try:
            data = resp.json()
            missing = tuple(str(key) for key in data.get("missing") or ())
            return Rejection(
                resp.status_code, str(data["error"]), str(data.get("message", "")), missing
            )
        except (ValueError, KeyError, TypeError):
            return Rejection(
                resp.status_code, RenderErrorCode.INTERNAL_ERROR.value, resp.text[:500]
            )

    async def receipts(self, url: str, secret: str, keys: list[str]) -> list[Receipt] | None:
        """Receipts for `keys` in one call, or None when the renderer did not answer."""
        resp = await self._call(url, secret, "GET", "/v1/attempts", params={"ids": ",".join(keys)})
        if resp is None or resp.status_code != 200:
            return None
        try:
            return [Receipt.model_validate(r) for r in resp.json()["receipts"]]
        except (ValueError, KeyError, TypeError, ValidationError):
            return None

    async def changes(self, url: str, secret: str, after: int, wait: float) -> ChangesAnswer | None:
        """Long-poll the renderer's count of finished attempts (`GET /v1/changes`).

        Answers once the count passes `after` or `wait` seconds went by, with the receipts
        (and small artefacts) of the attempts that ended past `after`; None when the renderer
        did not answer (the timed receipt poll still covers it).
        """
        params = {"after": str(after), "wait": f"{wait:g}", "receipts": "true"}
        resp = await self._call(
            url, secret, "GET", "/v1/changes", params=params, timeout=self._timeout + wait
        )
        if resp is None or resp.status_code != 200:
            return None
        try:
            return ChangesAnswer.model_validate_json(resp.content)
        except ValidationError:
            return None

    async def artifact(
        self, url: str, secret: str, key: str, size: int, sha256: str, page: int
    ) -> bytes:
        """Download one page's artefact of an attempt and check it against the receipt's size
        and sha256.

        Raises `ArtifactMismatch` on a wrong body and `httpx.HTTPError` when it cannot be had.
        """
        path = f"/v1/attempts/{key}/pages/{page}/artifact"
        resp = await self._client(url, secret).get(path)
        resp.raise_for_status()
        data = resp.content
        digest = hashlib.sha256(data).hexdigest()
        header_sha = resp.headers.get(ARTIFACT_SHA256_HEADER, sha256)
        header_size = resp.headers.get(ARTIFACT_SIZE_HEADER, str(size))
        if (
            len(data) != size
            or digest != sha256
            or header_sha != sha256
            or header_size != str(size)
        ):
            raise ArtifactMismatch(
                f"artefact of {key}: got {len(data)} bytes sha256 {digest}, "
                f"expected {size} bytes sha256 {sha256}"
            )
        return data

    async def cancel(self, url: str, secret: str, key: str) -> Receipt | None:
        """Ask the renderer to abort an attempt; its receipt, or None when unreachable."""
        resp = await self._call(url, secret, "DELETE", f"/v1/attempts/{key}")
        if resp is None or resp.status_code != 200:
            return None
        try:
            return Receipt.model_validate_json(resp.content)
        except ValidationError:
            return None
