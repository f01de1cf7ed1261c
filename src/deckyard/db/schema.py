"""The shared metadata, the partial-index helper, and the tables the db layer itself owns."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, ColumnElement, Index, Integer, MetaData, String, Table, text

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)


def partial_index(
    name: str,
    *columns: Any,
    where: str | ColumnElement[bool],
    unique: bool = False,
) -> Index:
    """An index over the rows matching `where`, emitted for both SQLite and PostgreSQL.

    Models call this instead of writing `sqlite_where=` / `postgresql_where=` themselves, so the
    predicate is written once and both dialects always agree.
    """
    predicate = text(where) if isinstance(where, str) else where
    return Index(name, *columns, unique=unique, sqlite_where=predicate, postgresql_where=predicate)


scheduler_lock = Table(
    "scheduler_lock",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(64), nullable=False),
)
"""A singleton row that `acquire_admission_lock` locks on PostgreSQL."""
