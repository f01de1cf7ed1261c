"""Webhooks: signed deliveries of a workspace's events to its endpoints, as durable jobs.

Tasks and publications `announce` their events in the transaction that commits them (the
deliveries table is the outbox); finished jobs reach endpoints through the job relay. The API
manages endpoints and reads deliveries through `WebhookService` (`deckyard.webhooks.service`:
not imported here, so the tasks and deck jobs that announce events do not load the delivery
machinery with them). See docs/webhooks.md.
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

__all__ = [
    "SUBSCRIBABLE",
    "WEBHOOK_QUEUE",
    "Attempt",
    "Delivery",
    "DeliveryStatus",
    "Endpoint",
    "WebhookEvent",
    "WebhookEventType",
    "announce",
    "publication_live",
    "task_finished",
]
