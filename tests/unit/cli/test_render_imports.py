"""What `deckyard render` loads before its first page: no PostgreSQL driver, no Alembic.

A run works on a copy of the cached migrated SQLite database (`cli/schema_template.py`), so
neither is needed; they were a sixth of the run's import time on 2 cores.
"""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import deckyard.cli.early_renderer, deckyard.cli.pipeline, deckyard.cli.render
from deckyard.db import errors
boom = RuntimeError("x")
assert not errors.is_connection_lost(boom) and not errors.is_transient_write_conflict(boom)
print(sorted(m for m in ("psycopg", "alembic") if m in sys.modules))
"""


def test_the_render_pipeline_imports_neither_psycopg_nor_alembic() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
