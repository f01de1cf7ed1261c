"""Process start-up and exit without the cyclic garbage collector sweeping the imported modules.

Importing the pipeline (SQLAlchemy, psycopg, FastAPI, Playwright, the deck compiler) leaves
about 140,000 objects the collector tracks, and they live as long as the process. While they
are created the collector runs its generations over and over, and at exit the interpreter's
final collection walks them all once more: together about a third of `import
deckyard.cli.pipeline` followed by exit (docs/benchmarks.md, "Start-up without the
collector"). None of those objects is garbage, so `heavy_imports` pauses the collector while
they are made and then `gc.freeze()`s every object tracked so far (moved to the permanent
generation, which later collections skip). Collection stays on afterwards for everything the
process does; only the heap that existed when the imports ended is exempt. `before_exit`
freezes what is left, so the final collection at interpreter exit has nothing to walk. Frozen
objects are still freed by reference counting; only a reference cycle among them would
outlive its use, and the process ends right after `before_exit` anyway.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def heavy_imports() -> Iterator[None]:
    """Run the block (imports) with the collector paused, then freeze every tracked object."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def before_exit() -> None:
    """Freeze every tracked object, so the interpreter's last collection skips them."""
    gc.freeze()
