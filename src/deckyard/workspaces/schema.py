"""Workspaces and their settings, API tokens, stored idempotent responses, and the audit log."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, Integer, LargeBinary, String, Table

from deckyard.db import JSONPayload, UTCDateTime, metadata
from deckyard.db.types import BigId

workspaces = Table(
    "workspaces",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("settings", JSONPayload),  # `api.workspace_settings`; null follows the server
)

api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column(
        "workspace_id",
        String(64),
        ForeignKey("workspaces.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("label", String(200)),
    Column("role", String(16), nullable=False, server_default="admin"),
    Column("created_at", UTCDateTime, nullable=False),
    Column("revoked_at", UTCDateTime),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("workspace_id", String(64), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("request_hash", String(64), nullable=False),
    Column("status_code", Integer),
    Column("response_headers", JSONPayload),
    Column("response_body", LargeBinary),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_idempotency_keys_created", "created_at"),
)

audit_events = Table(
    "audit_events",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("workspace_id", String(64), nullable=False),
    Column("token_id", BigId, nullable=False),
    Column("role", String(16), nullable=False),
    Column("method", String(10), nullable=False),
    Column("path", String(1000), nullable=False),
    Column("status", Integer, nullable=False),
    Column("location", String(1000)),
    Column("created_at", UTCDateTime, nullable=False),
    Index("ix_audit_events_workspace", "workspace_id", "id"),
)
