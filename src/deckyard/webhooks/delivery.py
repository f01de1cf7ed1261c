"""The `webhook.deliver` job: one signed POST of one delivery, through the SSRF guard, logged.

Each attempt checks the endpoint's URL with the SSRF guard of URL renders (public addresses
only, unless `webhook_allow_private_targets`) and connects to the address the guard checked,
not to whatever the name resolves to a moment later (DNS rebinding). Redirects are not
followed. A 2xx answer delivers; anything else, a timeout or a refused connection is retried
by the job runtime with exponential backoff (a `Retry-After` is honoured, capped); a target the
guard refuses fails at once. Every attempt is logged with its status code, duration and error.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard import __version__
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs import JobContext, JobError
from deckyard.render.protocol import RenderErrorCode
from deckyard.render.renderer.ssrf import Resolver, UrlGuard, pinned_request, system_resolver
from deckyard.tracing import inject
from deckyard.webhooks.models import DeliveryStatus, Signing, WebhookErrorCode
from deckyard.webhooks.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    EVENT_ID_HEADER,
    SIGNATURE_HEADER,
    signature_header,
)
from deckyard.webhooks.store import (
    attempt_record,
    delivery_by_id,
    delivery_give_up,
    endpoint_signing,
)

log = logging.getLogger(__name__)

USER_AGENT = f"Deckyard-Webhooks/{__version__}"
INTERRUPTED = "the job stopped before an answer came (cancel, lost lease or shutdown)"
REFUSED_VERDICTS = (RenderErrorCode.SSRF_BLOCKED, RenderErrorCode.INVALID_INPUT)
"""Guard verdicts that no retry changes (a DNS failure may pass later; these do not)."""


@dataclass(frozen=True)
class Sent:
    """How one attempt went."""

    status_code: int | None = None
    code: WebhookErrorCode | None = None
    error: str | None = None
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        """True for a 2xx answer."""
        return self.code is None

    @property
    def retryable(self) -> bool:
        """False when the guard refused the target: a retry would be refused again."""
        return self.code is not WebhookErrorCode.TARGET_REFUSED


def target_guard(url: str, settings: Settings, resolver: Resolver = system_resolver) -> UrlGuard:
    """The SSRF guard for a webhook URL: the renderer's, with the URL's own host allow-listed
    when `webhook_allow_private_targets` is on (tests, on-premises receivers)."""
    allow: list[str] = []
    if settings.webhook_allow_private_targets:
        host = httpx.URL(url).host
        allow = [f"[{host}]" if ":" in host else host]
    return UrlGuard(allow, settings.renderer_dns_timeout_seconds, resolver)


def body_bytes(payload: dict[str, Any]) -> bytes:
    """The exact bytes a delivery sends (and signs): compact JSON, UTF-8."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def delivery_headers(
    signing: Signing, delivery_id: int, event_type: str, event_id: str, body: bytes, now: float
) -> dict[str, str]:
    """A delivery's headers: content type, signature, delivery and event ids, `traceparent`."""
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        SIGNATURE_HEADER: signature_header(signing.secrets(), int(now), body),
        DELIVERY_HEADER: str(delivery_id),
        EVENT_HEADER: event_type,
        EVENT_ID_HEADER: event_id,
    }
    inject(headers)
    return headers


def _retry_after(response: httpx.Response, ceiling: float) -> float | None:
    value = response.headers.get("retry-after", "")
    return min(float(value), ceiling) if value.isdigit() else None


async def post_signed(
    url: str,
    headers: dict[str, str],
    body: bytes,
    settings: Settings,
    resolver: Resolver = system_resolver,
) -> Sent:
    """POST `body` to `url` once, through the SSRF guard, within `webhook_timeout_seconds`."""
    try:
        async with asyncio.timeout(settings.webhook_timeout_seconds):
            verdict = await target_guard(url, settings, resolver).check_url(url)
            if not verdict.allowed:
                code = (
                    WebhookErrorCode.TARGET_REFUSED
                    if verdict.code in REFUSED_VERDICTS
                    else WebhookErrorCode.CONNECT_FAILED
                )
                return Sent(code=code, error=f"refused by the SSRF guard: {verdict.reason}")
            # no proxy from the environment: the request must go to the address just checked
            timeout = settings.webhook_timeout_seconds
            async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
                request = pinned_request(
                    client,
                    url,
                    verdict.addresses[0],
                    method="POST",
                    headers=headers,
                    content=body,
                )
                response = await client.send(request, stream=True)
                await response.aclose()
    except (TimeoutError, httpx.TimeoutException):
        limit = settings.webhook_timeout_seconds
        return Sent(code=WebhookErrorCode.TIMEOUT, error=f"no answer within {limit:g} s")
    except httpx.HTTPError as exc:
        return Sent(code=WebhookErrorCode.CONNECT_FAILED, error=f"{type(exc).__name__}: {exc}")
    if 200 <= response.status_code < 300:
        return Sent(status_code=response.status_code)
    return Sent(
        status_code=response.status_code,
        code=WebhookErrorCode.HTTP_STATUS,
        error=f"HTTP {response.status_code}",
        retry_after=_retry_after(response, settings.webhook_retry_max_delay_seconds),
    )


class Deliverer:
    """The handler of `webhook.deliver`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        clock: Clock,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self.resolver = resolver

    async def __call__(self, ctx: JobContext) -> dict[str, Any]:
        """Send the payload's delivery once; raise `JobError` so the runtime retries a failure."""
        delivery_id = int(ctx.payload["delivery_id"])
        now = self.clock.now()
        async with self.db.read_connection() as conn:
            delivery = await delivery_by_id(conn, delivery_id)
            found = None
            if delivery is not None:
                found = await endpoint_signing(conn, delivery.endpoint_id, now)
        if delivery is None or found is None:
            return {"delivery_id": delivery_id, "skipped": "its endpoint was deleted"}
        endpoint, signing = found
        if not endpoint.enabled:
            message = f"endpoint {endpoint.id} is disabled; nothing was sent"
            await self.db.write(lambda conn: delivery_give_up(conn, delivery_id, message, now))
            raise JobError(WebhookErrorCode.ENDPOINT_DISABLED.value, message, retryable=False)
        body = body_bytes(delivery.payload)
        headers = delivery_headers(
            signing, delivery.id, delivery.event_type, delivery.event_id, body, now.timestamp()
        )
        began = self.clock.monotonic()
        try:
            sent = await post_signed(endpoint.url, headers, body, self.settings, self.resolver)
        except asyncio.CancelledError:
            # Stopped mid-send (cancel, lost lease, shutdown): the receiver may have had it.
            stopped = Sent(code=WebhookErrorCode.INTERRUPTED, error=INTERRUPTED)
            await asyncio.shield(self._record_quietly(ctx, delivery_id, now, began, stopped))
            raise
        number = await self._record(ctx, delivery_id, now, began, sent)
        if sent.ok:
            return {"delivery_id": delivery_id, "attempt": number, "status_code": sent.status_code}
        assert sent.code is not None
        log.info(
            "webhook delivery %d attempt %s to endpoint %d: %s",
            delivery_id,
            number,
            endpoint.id,
            sent.error,
        )
        raise JobError(
            sent.code.value,
            sent.error or sent.code.value,
            retryable=sent.retryable,
            retry_after=sent.retry_after,
        )

    async def _record(
        self, ctx: JobContext, delivery_id: int, started_at: datetime, began: float, sent: Sent
    ) -> int | None:
        """Log one attempt and move its delivery on: delivered, waiting, or given up."""
        duration_ms = round((self.clock.monotonic() - began) * 1000)
        last = not sent.retryable or ctx.attempt >= ctx.job.max_attempts
        if sent.ok:
            outcome = DeliveryStatus.SUCCEEDED
        else:
            outcome = DeliveryStatus.FAILED if last else DeliveryStatus.PENDING

        async def record(conn: AsyncConnection) -> int | None:
            return await attempt_record(
                conn,
                delivery_id,
                job_id=ctx.id,
                started_at=started_at,
                duration_ms=duration_ms,
                status_code=sent.status_code,
                error=sent.error,
                outcome=outcome,
                now=self.clock.now(),
            )

        return await self.db.write(record)

    async def _record_quietly(
        self, ctx: JobContext, delivery_id: int, started_at: datetime, began: float, sent: Sent
    ) -> None:
        try:
            await self._record(ctx, delivery_id, started_at, began, sent)
        except Exception:
            log.exception("webhook delivery %d: could not log an interrupted attempt", delivery_id)
