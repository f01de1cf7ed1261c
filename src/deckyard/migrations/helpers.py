"""Migration helpers: the only place in migrations allowed to know about dialects."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from deckyard.db.types import BigId, JSONPayload, UTCDateTime

__all__ = [
    "BigId",
    "JSONPayload",
    "UTCDateTime",
    "create_partial_index",
    "drop_index",
    "set_sqlite_autoincrement",
]


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


def set_sqlite_autoincrement(table: str, *, enabled: bool = True) -> None:
    """Make `table`'s integer key never hand out a deleted row's id again (or stop, on downgrade).

    On SQLite an `INTEGER PRIMARY KEY` without `AUTOINCREMENT` takes the largest id plus one,
    so deleting the newest row frees its id for the next insert; the table is rebuilt with (or
    without) `AUTOINCREMENT`, and copying the rows over seeds `sqlite_sequence` with the largest
    id still there. A table other tables refer to must not be rebuilt this way: with foreign
    keys on, dropping it cascades. PostgreSQL's sequences never go back: nothing to do there.
    """
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(
        table, recreate="always", table_kwargs={"sqlite_autoincrement": enabled}
    ):
        pass
