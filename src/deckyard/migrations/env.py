"""Alembic environment: always runs on a connection handed over by `deckyard.db.migrate`."""

from __future__ import annotations

from alembic import context

from deckyard.migrations.models import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `deckyard migrate`, not the alembic command")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
