"""The token (actor) on whose behalf the current code runs, recorded on every job and task.

The API sets it once it knows the caller's token; a worker sets it to a job's actor while the
handler runs, and the task executor to a task's actor while it enqueues the task's stage jobs,
so the jobs a job or task starts carry the same actor. Code running for nobody (a periodic
tick, a maintenance loop) has none.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

current_actor: ContextVar[int | None] = ContextVar("deckyard_actor", default=None)


@contextmanager
def acting_as(token_id: int | None) -> Iterator[None]:
    """Run the block on behalf of `token_id` (None: nobody)."""
    reset = current_actor.set(token_id)
    try:
        yield
    finally:
        current_actor.reset(reset)
