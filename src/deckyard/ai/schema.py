"""The `ai_models` table: the provider's model catalog as last synced."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, String, Table

from deckyard.db import UTCDateTime, metadata

ai_models = Table(
    "ai_models",
    metadata,
    Column("model_id", String(200), primary_key=True),
    Column("owned_by", String(200)),
    Column("created", BigInteger),
    Column("first_seen_at", UTCDateTime, nullable=False),
)
