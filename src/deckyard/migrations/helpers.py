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
    "rename_constraint",
    "rename_id_sequence",
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


def rename_constraint(table: str, old: str, new: str) -> None:
    """Rename a constraint of `table` on PostgreSQL; on SQLite the old name stays.

    SQLite keeps a constraint's name only in the `CREATE TABLE` text of its table and never
    looks it up; changing it means rebuilding the table, and rebuilding a table that other
    rows refer to fails with foreign keys on.
    """
    if op.get_bind().dialect.name == "sqlite":
        return
    op.execute(sa.text(f'ALTER TABLE "{table}" RENAME CONSTRAINT "{old}" TO "{new}"'))


def rename_id_sequence(old_table: str, new_table: str) -> None:
    """Rename the sequence behind a renamed table's `id` (PostgreSQL; SQLite has none).

    `ALTER TABLE ... RENAME` leaves `<old_table>_id_seq` as it was; the column's default names
    the sequence by its oid, so it follows the new name.
    """
    if op.get_bind().dialect.name == "sqlite":
        return
    op.execute(sa.text(f'ALTER SEQUENCE "{old_table}_id_seq" RENAME TO "{new_table}_id_seq"'))
