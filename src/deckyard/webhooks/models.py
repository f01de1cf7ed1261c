"""Webhook vocabulary (event types, delivery states, error codes) and rows as plain values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

WEBHOOK_QUEUE = "webhooks"
"""The queue delivery jobs run on (a worker of its own, so a slow receiver holds no render
slot)."""


class WebhookJobKind(StrEnum):
    """The job kinds of the webhook package."""

    DELIVER = "webhook.deliver"


class WebhookEventType(StrEnum):
    """What an endpoint can subscribe to (`PING` is sent on request only, never subscribed)."""

    JOB_FINISHED = "job.finished"
    RENDER_FINISHED = "render.finished"
    TASK_FINISHED = "task.finished"
    PUBLICATION_LIVE = "publication.live"
    PING = "webhook.ping"


SUBSCRIBABLE: tuple[WebhookEventType, ...] = (
    WebhookEventType.JOB_FINISHED,
    WebhookEventType.RENDER_FINISHED,
    WebhookEventType.TASK_FINISHED,
    WebhookEventType.PUBLICATION_LIVE,
)
JOB_EVENTS = frozenset({WebhookEventType.JOB_FINISHED, WebhookEventType.RENDER_FINISHED})
"""The events the job relay derives from finished jobs (`relay.py`)."""

RENDER_JOB_KINDS = frozenset({"page.screenshot", "deck.screenshots", "deck.export"})
"""Job kinds whose end is also a `render.finished`: ad-hoc and page screenshots, a deck's
screenshots and its PDF (`render.control.models.SCREENSHOT_KIND` and `decks.jobs.names`; named
here because this package sits below both, and a test keeps the names in step)."""


class DeliveryStatus(StrEnum):
    """Where a delivery is: waiting for (another) attempt, answered 2xx, or given up."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class WebhookErrorCode(StrEnum):
    """Why a delivery attempt failed (the job's error code and the attempt's `error` prefix)."""

    HTTP_STATUS = "WEBHOOK_HTTP_STATUS"
    TIMEOUT = "WEBHOOK_TIMEOUT"
    CONNECT_FAILED = "WEBHOOK_CONNECT_FAILED"
    TARGET_REFUSED = "WEBHOOK_TARGET_REFUSED"
    ENDPOINT_DISABLED = "WEBHOOK_ENDPOINT_DISABLED"
    INTERRUPTED = "WEBHOOK_INTERRUPTED"


@dataclass(frozen=True)
class WebhookEvent:
    """One thing that happened in a workspace, as endpoints receive it.

    `id` is stable for the event: every delivery and redelivery of it carries the same one, so
    a receiver drops duplicates by it.
    """

    type: WebhookEventType
    workspace_id: str
    id: str
    occurred_at: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        """The JSON document a delivery sends."""
        return {
            "id": self.id,
            "type": self.type.value,
            "created_at": self.occurred_at.isoformat(),
            "workspace": self.workspace_id,
            "data": self.data,
        }


@dataclass(frozen=True)
class Endpoint:
    """One webhook endpoint of a workspace (its secrets stay in the store's rows)."""

    id: int
    workspace_id: str
    url: str
    description: str | None
    events: list[str]
    enabled: bool
    events_since: datetime
    created_at: datetime
    updated_at: datetime
    secret_rotated_at: datetime | None

    def subscribes(self, event: WebhookEvent) -> bool:
        """True when `event` goes to this endpoint: enabled, subscribed, not before its start."""
        return (
            self.enabled
            and event.type.value in self.events
            and event.occurred_at >= self.events_since
        )


@dataclass(frozen=True)
class Signing:
    """The secrets a delivery is signed with: the current one, and the previous one while a
    rotation's grace period lasts."""

    secret: str
    previous: str | None = None

    def secrets(self) -> list[str]:
        """Every secret to sign with, current first."""
        return [self.secret] if self.previous is None else [self.secret, self.previous]


@dataclass(frozen=True)
class Delivery:
    """One event for one endpoint, and how its sending went."""

    id: int
    endpoint_id: int
    workspace_id: str
    event_id: str
    event_type: str
    event_at: datetime
    payload: dict[str, Any]
    status: DeliveryStatus
    attempts: int
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt of a delivery."""

    id: int
    delivery_id: int
    number: int
    job_id: int | None
    started_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None
