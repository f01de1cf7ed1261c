"""End-to-end helpers (they live in `tests.helpers.server`; re-exported for the e2e tests)."""

from tests.helpers.server import DECKYARD, Server, clean_env, free_port

__all__ = ["DECKYARD", "Server", "clean_env", "free_port"]
