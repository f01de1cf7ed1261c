"""Migration helpers: the only place in migrations allowed to know about dialects."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from deckyard.db.types import BigId, JSONPayload, UTCDateTime

__all__ = ["BigId", "JSONPayload", "UTCDateTime", "create_partial_index", "drop_index"]


def create_partial_index(
    name: str, table: str, columns: list[str], where: str, *, unique: bool = False
) -> None:
    """Create an index over the rows matching `where` on SQLite and PostgreSQL alike."""
    predicate = sa.text(where)
    op.create_index(
        name,
        table,
        columns,
        unique=unique,
        sqlite_where=predicate,
        postgresql_where=predicate,
    )


def drop_index(name: str, table: str) -> None:
    """Drop an index by name."""
    op.drop_index(name, table_name=table)


def insert_rows(table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Seed rows into a table during a migration."""
    op.bulk_insert(table, rows)
