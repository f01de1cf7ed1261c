"""Imports every package's table definitions so the shared metadata knows all of them.

Alembic's environment and the schema contract tests import this module; a new package that
declares tables adds its schema module here.
"""

from deckyard.ai import schema as ai_schema
from deckyard.db.schema import metadata
from deckyard.decks import schema as decks_schema
from deckyard.jobs import schema as jobs_schema
from deckyard.render.control import schema as render_schema
from deckyard.tasks import schema as tasks_schema
from deckyard.webhooks import schema as webhooks_schema
from deckyard.workspaces import schema as workspaces_schema

__all__ = [
    "ai_schema",
    "decks_schema",
    "jobs_schema",
    "metadata",
    "render_schema",
    "tasks_schema",
    "webhooks_schema",
    "workspaces_schema",
]
