"""Applying Alembic migrations shipped inside the package."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection
from sqlalchemy.engine import URL

from deckyard.db.engine import Database

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic is imported where a migration runs: a process that starts on a migrated database
# (`deckyard render` copies one) never loads it.

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations, optionally bound to a connection."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


async def _run(url: str | URL, fn: str, revision: str) -> None:
    from alembic import command

    db = Database(url)
    try:
        async with db.engine.connect() as conn:
            await conn.run_sync(lambda c: getattr(command, fn)(alembic_config(c), revision))
            await conn.commit()
    finally:
        await db.dispose()


async def upgrade_to(url: str | URL, revision: str = "head") -> None:
    """Upgrade the database at `url` to `revision`."""
    await _run(url, "upgrade", revision)


async def downgrade_to(url: str | URL, revision: str = "base") -> None:
    """Downgrade the database at `url` to `revision`."""
    await _run(url, "downgrade", revision)


async def upgrade(db: Database, revision: str = "head") -> None:
    """Upgrade an open database to `revision`."""
    from alembic import command

    async with db.engine.connect() as conn:
        await conn.run_sync(lambda c: command.upgrade(alembic_config(c), revision))
        await conn.commit()


def head_revision() -> str:
    """The newest revision shipped with this package."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


async def current_revision(db: Database) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    async with db.engine.connect() as conn:
        return await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_revision())


async def database_status(url: str | URL) -> tuple[str | None, str]:
    """Connect and report (current revision, head revision); raises when unreachable.

    Read only: safe while a Lite server owns the SQLite file.
    """
    db = Database(url)
    try:
        if db.file is not None and not db.file.exists():
            return None, head_revision()
        return await current_revision(db), head_revision()
    finally:
        await db.dispose()
