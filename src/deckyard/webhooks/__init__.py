"""Webhooks: signed deliveries of a workspace's events to its endpoints, as durable jobs.

Tasks and publications `announce` their events in the transaction that commits them (the
deliveries table is the outbox); finished jobs reach endpoints through the job relay. The API
manages endpoints and reads deliveries through `WebhookService`. See docs/webhooks.md.
"""

from deckyard.webhooks.events import announce, publication_live, task_finished
from deckyard.webhooks.models import (
    SUBSCRIBABLE,
    WEBHOOK_QUEUE,
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    WebhookEvent,
    WebhookEventType,
)
from deckyard.webhooks.service import Created, Redelivered, WebhookError, WebhookService

__all__ = [
    "SUBSCRIBABLE",
    "WEBHOOK_QUEUE",
    "Attempt",
    "Created",
    "Delivery",
    "DeliveryStatus",
    "Endpoint",
    "Redelivered",
    "WebhookError",
    "WebhookEvent",
    "WebhookEventType",
    "WebhookService",
    "announce",
    "publication_live",
    "task_finished",
]
