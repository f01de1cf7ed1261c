"""Webhook endpoints, their deliveries (the outbox) and each delivery's attempts."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from deckyard.db import JSONPayload, UTCDateTime, metadata
from deckyard.db.types import BigId

webhook_endpoints = Table(
    "webhook_endpoints",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "workspace_id", String(64), ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
    ),
    Column("url", String(2000), nullable=False),
    Column("description", String(200)),
    Column("events", JSONPayload, nullable=False),
    Column("secret", String(100), nullable=False),
    Column("previous_secret", String(100)),
    Column("previous_secret_expires_at", UTCDateTime),
    Column("secret_rotated_at", UTCDateTime),
    Column("enabled", Boolean, nullable=False),
    Column("events_since", UTCDateTime, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Index("ix_webhook_endpoints_workspace", "workspace_id", "id"),
)
"""A workspace's endpoints. The secret is kept as it is (it signs every delivery); the API
shows it once, at creation and at each rotation. Events that happen before `events_since`
(creation, or the last enable) are never sent to it."""

webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "endpoint_id",
        BigId,
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("workspace_id", String(64), nullable=False),
    Column("event_id", String(200), nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("event_at", UTCDateTime, nullable=False),
    Column("payload", JSONPayload, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_status_code", Integer),
    Column("last_error", Text),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("delivered_at", UTCDateTime),
    UniqueConstraint("endpoint_id", "event_id", name="uq_webhook_deliveries_endpoint_id_event_id"),
    Index("ix_webhook_deliveries_endpoint", "endpoint_id", "id"),
    Index("ix_webhook_deliveries_type_at", "event_type", "event_at"),
    Index("ix_webhook_deliveries_created", "created_at"),
    sqlite_autoincrement=True,
)
"""One event for one endpoint, written in the transaction that commits the event (or, for jobs,
by the relay) together with its delivery job: the outbox. An event reaches an endpoint once
(the unique key); a delivery id is never handed out twice, even after its endpoint was
deleted (receivers may log it)."""

webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "delivery_id",
        BigId,
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("number", Integer, nullable=False),
    Column("job_id", BigId),
    Column("started_at", UTCDateTime, nullable=False),
    Column("duration_ms", Integer, nullable=False),
    Column("status_code", Integer),
    Column("error", Text),
    Index("ix_webhook_attempts_delivery", "delivery_id", "number"),
)
"""Every HTTP attempt of a delivery, numbered from 1 across redeliveries."""
