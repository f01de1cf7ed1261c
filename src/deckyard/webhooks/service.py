"""`WebhookService`: endpoints, deliveries and redelivery for the API; the delivery handler,
the job and render relays and the delivery prune as one node component (`start()`/`stop()`)."""

from __future__ import annotations

import contextlib
import ipaddress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.jobs import RetryPolicy, Runtime
from deckyard.loop import ACTIVE, IDLE, MORE, Loop, Tick
from deckyard.render.renderer.ssrf import Resolver, address_problem, system_resolver
from deckyard.webhooks.delivery import Deliverer
from deckyard.webhooks.events import enqueue_deliveries, ping
from deckyard.webhooks.models import (
    WEBHOOK_QUEUE,
    Attempt,
    Delivery,
    Endpoint,
    WebhookJobKind,
)
from deckyard.webhooks.relay import FinishedAfter, JobRelay, Relay, render_source
from deckyard.webhooks.signing import new_secret
from deckyard.webhooks.store import (
    attempts_of,
    deliveries_insert,
    deliveries_prunable,
    deliveries_prune,
    delivery_get,
    delivery_list,
    delivery_reopen,
    endpoint_count,
    endpoint_delete,
    endpoint_get,
    endpoint_insert,
    endpoint_list,
    endpoint_rotate_secret,
    endpoint_update,
)


class WebhookError(Exception):
    """A webhook request refused: `code` is the API's error code, `field` the one to blame."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


def not_found(what: str) -> WebhookError:
    """The 404 for something the workspace does not have."""
    return WebhookError(404, "NOT_FOUND", f"no {what} in this workspace")


@dataclass(frozen=True)
class Created:
    """An endpoint with its secret, as a create or a rotation answers (the only time it shows)."""

    endpoint: Endpoint
    secret: str


@dataclass(frozen=True)
class Redelivered:
    """A delivery sent again, and the job that sends it."""

    delivery: Delivery
    job_id: int


class WebhookService:
    """Webhooks of every workspace on one node."""

    def __init__(
        self,
        db: Database,
        runtime: Runtime,
        settings: Settings,
        clock: Clock,
        *,
        resolver: Resolver = system_resolver,
        renders: FinishedAfter | None = None,
    ) -> None:
        self.db = db
        self.runtime = runtime
        self.settings = settings
        self.clock = clock
        self.resolver = resolver
        s = settings
        retry = RetryPolicy(
            max_attempts=s.webhook_max_attempts,
            base_delay=s.webhook_retry_base_delay_seconds,
            max_delay=s.webhook_retry_max_delay_seconds,
            jitter=s.job_retry_jitter,
        )
        runtime.handler(
            WebhookJobKind.DELIVER.value,
            queue=WEBHOOK_QUEUE,
            timeout=s.webhook_timeout_seconds + s.renderer_dns_timeout_seconds + 5.0,
            retry=retry,
        )(Deliverer(db, settings, clock, resolver))
        self.relay = JobRelay(db, runtime, settings, clock)
        self.render_relay = (
            Relay(db, runtime, settings, clock, render_source(renders))
            if renders is not None
            else None
        )
        """Announces finished screenshots (render requests no job opened), when given a
        reader of them."""
        self.pruned = 0
        self._loops: list[Loop] = []

    # --- component ----------------------------------------------------------------------------

    @property
    def loops(self) -> list[Loop]:
        """The job relay and the delivery prune, once started."""
        return self._loops

    def start(self) -> None:
        """Start the relay and prune loops."""
        s = self.settings
        self._loops = [
            Loop.configured(
                "webhooks.relay",
                self.relay_tick,
                s,
                poll_interval=s.webhook_relay_interval_seconds,
                idle_ceiling=s.webhook_relay_idle_seconds,
                clock=self.clock,
            ),
            Loop.every(
                "webhooks.prune",
                self.prune_tick,
                s,
                s.retention_prune_interval_seconds,
                clock=self.clock,
            ),
        ]
        for loop in self._loops:
            loop.start()

    async def stop(self) -> None:
        """Stop the loops after their current tick."""
        for loop in self._loops:
            await loop.stop()
        self._loops = []

    async def relay_tick(self) -> Tick:
        """One tick of the job relay, then of the render relay (when there is one)."""
        ticks = [await self.relay.tick()]
        if self.render_relay is not None:
            ticks.append(await self.render_relay.tick())
        if any(t.more for t in ticks):
            return MORE
        return ACTIVE if any(t.active for t in ticks) else IDLE

    async def prune_tick(self) -> Tick:
        """Delete one batch of settled deliveries older than the retention; read only if none."""
        s = self.settings
        cutoff = self.clock.now() - timedelta(seconds=s.webhook_delivery_retention_seconds)
        async with self.db.read_connection() as conn:
            ids = await deliveries_prunable(conn, cutoff, s.retention_batch_size)
        if not ids:
            return IDLE
        self.pruned += await self.db.write(lambda conn: deliveries_prune(conn, ids))
        return MORE if len(ids) == s.retention_batch_size else IDLE

    # --- endpoints ----------------------------------------------------------------------------

    def check_url(self, url: str) -> None:
        """Refuse a URL no delivery could reach: not http(s), with credentials, or naming a
        loopback, private or link-local address (as an IP, or `localhost`).

        A host name is not resolved here (an API request never waits on DNS): each attempt
        resolves and checks it with the SSRF guard, and a refused one is logged and given up.
        """
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise WebhookError(422, "INVALID_INPUT", f"not a URL: {exc}", "url") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise WebhookError(422, "INVALID_INPUT", "the URL must be http(s)://host/...", "url")
        if parsed.userinfo:
            raise WebhookError(
                422, "INVALID_INPUT", "put no credentials in the URL; verify signatures", "url"
            )
        if self.settings.webhook_allow_private_targets:
            return
        host = parsed.host.rstrip(".")
        problem = "a loopback name" if host == "localhost" or host.endswith(".localhost") else None
        with contextlib.suppress(ValueError):  # a name: checked as resolved, at each attempt
            problem = problem or address_problem(ipaddress.ip_address(host.split("%", 1)[0]))
        if problem:
            raise WebhookError(
                422,
                "WEBHOOK_URL_REFUSED",
                f"{host} is {problem}; private, loopback and link-local targets need "
                "DECKYARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
                "url",
            )

    async def create(
        self, workspace_id: str, url: str, events: list[str], description: str | None
    ) -> Created:
        """Add an endpoint (enabled) with a new secret."""
        self.check_url(url)
        now = self.clock.now()
        secret = new_secret()
        limit = self.settings.webhook_max_endpoints_per_workspace

        async def insert(conn: AsyncConnection) -> Endpoint:
            if await endpoint_count(conn, workspace_id) >= limit:
                raise WebhookError(
                    409, "WEBHOOK_LIMIT", f"a workspace has at most {limit} webhook endpoints"
                )
            return await endpoint_insert(
                conn,
                {
                    "workspace_id": workspace_id,
                    "url": url,
                    "description": description,
                    "events": sorted(set(events)),
                    "secret": secret,
                    "enabled": True,
                    "events_since": now,
                    "created_at": now,
                    "updated_at": now,
                },
            )

        return Created(await self.db.write(insert), secret)

    async def endpoints(self, workspace_id: str) -> list[Endpoint]:
        """A workspace's endpoints, oldest first."""
        async with self.db.read_connection() as conn:
            return await endpoint_list(conn, workspace_id)

    async def endpoint(self, workspace_id: str, endpoint_id: int) -> Endpoint:
        """One endpoint, or `WebhookError` 404."""
        async with self.db.read_connection() as conn:
            found = await endpoint_get(conn, workspace_id, endpoint_id)
        if found is None:
            raise not_found(f"webhook endpoint {endpoint_id}")
        return found

    async def update(
        self, workspace_id: str, endpoint_id: int, changes: dict[str, Any]
    ) -> Endpoint:
        """Change url, events, description or enabled; enabling starts its events anew."""
        if "url" in changes:
            self.check_url(changes["url"])
        now = self.clock.now()
        values = {**changes, "updated_at": now}
        if "events" in changes:
            values["events"] = sorted(set(changes["events"]))

        async def change(conn: AsyncConnection) -> Endpoint | None:
            current = await endpoint_get(conn, workspace_id, endpoint_id)
            if current is None:
                return None
            if changes.get("enabled") and not current.enabled:
                values["events_since"] = now
            return await endpoint_update(conn, workspace_id, endpoint_id, values)

        found = await self.db.write(change)
        if found is None:
            raise not_found(f"webhook endpoint {endpoint_id}")
        return found

    async def delete(self, workspace_id: str, endpoint_id: int) -> None:
        """Delete an endpoint with its deliveries; its pending jobs then send nothing."""
        if not await self.db.write(lambda conn: endpoint_delete(conn, workspace_id, endpoint_id)):
            raise not_found(f"webhook endpoint {endpoint_id}")

    async def rotate_secret(self, workspace_id: str, endpoint_id: int) -> Created:
        """Give an endpoint a new secret; the old one also signs for the grace period."""
        now = self.clock.now()
        grace = self.settings.webhook_secret_rotation_grace_seconds
        until = now + timedelta(seconds=grace) if grace > 0 else None
        secret = new_secret()

        async def rotate(conn: AsyncConnection) -> Endpoint | None:
            return await endpoint_rotate_secret(conn, workspace_id, endpoint_id, secret, until, now)

        found = await self.db.write(rotate)
        if found is None:
            raise not_found(f"webhook endpoint {endpoint_id}")
        return Created(found, secret)

    # --- deliveries ---------------------------------------------------------------------------

    async def deliveries(
        self,
        workspace_id: str,
        endpoint_id: int,
        *,
        status: str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[Delivery]:
        """An endpoint's deliveries, newest first (404 for an endpoint it does not have)."""
        await self.endpoint(workspace_id, endpoint_id)
        async with self.db.read_connection() as conn:
            return await delivery_list(
                conn, workspace_id, endpoint_id, status=status, before_id=before_id, limit=limit
            )

    async def delivery(
        self, workspace_id: str, endpoint_id: int, delivery_id: int
    ) -> tuple[Delivery, list[Attempt]]:
        """One delivery with its attempts."""
        async with self.db.read_connection() as conn:
            found = await delivery_get(conn, workspace_id, endpoint_id, delivery_id)
            attempts = [] if found is None else await attempts_of(conn, delivery_id)
        if found is None:
            raise not_found(f"delivery {delivery_id} of webhook endpoint {endpoint_id}")
        return found, attempts

    async def redeliver(self, workspace_id: str, endpoint_id: int, delivery_id: int) -> Redelivered:
        """Send a delivery again with a fresh budget of attempts (joins one already on its way)."""
        now = self.clock.now()

        async def reopen(conn: AsyncConnection) -> Redelivered:
            endpoint = await endpoint_get(conn, workspace_id, endpoint_id)
            found = await delivery_get(conn, workspace_id, endpoint_id, delivery_id)
            if endpoint is None or found is None:
                raise not_found(f"delivery {delivery_id} of webhook endpoint {endpoint_id}")
            if not endpoint.enabled:
                raise WebhookError(
                    409, "WEBHOOK_ENDPOINT_DISABLED", f"endpoint {endpoint_id} is disabled"
                )
            await delivery_reopen(conn, delivery_id, now)
            job = await self.runtime.enqueue(
                WebhookJobKind.DELIVER.value,
                {"delivery_id": delivery_id},
                queue=WEBHOOK_QUEUE,
                dedupe_key=f"webhook:{delivery_id}",
                workspace_id=workspace_id,
                conn=conn,
            )
            again = await delivery_get(conn, workspace_id, endpoint_id, delivery_id)
            assert again is not None
            return Redelivered(again, job.id)

        return await self.db.write(reopen)

    async def ping(self, workspace_id: str, endpoint_id: int) -> Delivery:
        """Send a `webhook.ping` to one endpoint (subscribed to it or not)."""
        now = self.clock.now()

        async def send(conn: AsyncConnection) -> Delivery:
            endpoint = await endpoint_get(conn, workspace_id, endpoint_id)
            if endpoint is None:
                raise not_found(f"webhook endpoint {endpoint_id}")
            if not endpoint.enabled:
                raise WebhookError(
                    409, "WEBHOOK_ENDPOINT_DISABLED", f"endpoint {endpoint_id} is disabled"
                )
            event = ping(workspace_id, endpoint_id, now)
            ids = await deliveries_insert(self.db, conn, event, [endpoint], now)
            await enqueue_deliveries(self.runtime, conn, workspace_id, ids)
            made = await delivery_get(conn, workspace_id, endpoint_id, ids[0])
            assert made is not None
            return made

        return await self.db.write(send)
