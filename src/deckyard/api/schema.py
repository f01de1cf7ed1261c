"""Workspaces, their API tokens, and stored idempotent responses."""

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
    Column("role", String(16), nullable=False, server_default="member"),
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
