"""Column types that behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Dialect, Integer
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator, TypeEngine


class UTCDateTime(TypeDecorator[datetime]):
    """An instant: aware UTC in Python, `timestamptz` on PostgreSQL, UTC text on SQLite.

    Naive datetimes are refused on the way in: a naive value is a bug waiting to compare wrong.
    SQLite stores the naive UTC form so text comparison orders instants correctly.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"UTCDateTime needs an aware datetime, got naive {value!r}")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class JSONPayload(TypeDecorator[Any]):
    """A JSON document: JSONB on PostgreSQL, JSON text on SQLite."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())


BigId = BigInteger().with_variant(Integer(), "sqlite")
"""A 64-bit surrogate key; on SQLite an INTEGER PRIMARY KEY, so it is the fast rowid."""

BIG_ID_MAX = 2**63 - 1
"""The largest value a `BigId` column holds (a signed 64-bit integer on both databases)."""
