"""Workspaces and what the API keeps per workspace: settings, tokens, idempotency keys, audit log.

Its tables (`schema.py`) are read and written only by `store.py`; `api/` asks the store.
"""
