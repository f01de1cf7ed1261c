"""Retrying a write transaction that lost a lock race."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db.errors import is_transient_write_conflict

T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteRetryPolicy:
    """How often and how patiently a write is retried (settings `write_retry_*`)."""

    attempts: int = 8
    base_delay: float = 0.01
    max_delay: float = 0.5

    def delay(self, attempt: int) -> float:
        """Full-jitter exponential backoff for the given (1-based) failed attempt."""
        return random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


class ConflictCounter(Protocol):
    """Where retried conflicts are counted (`DbStats`)."""

    write_conflicts: int


class Writable(Protocol):
    """What a retried write needs (`Database` is one): a protocol, so no import cycle."""

    @property
    def stats(self) -> ConflictCounter:
        """Counters; `write_conflicts` counts each retry."""
        ...

    def write_transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction that commits on success."""
        ...


async def run_with_write_retry(
    db: Writable,
    fn: Callable[[AsyncConnection], Awaitable[T]],
    policy: WriteRetryPolicy,
) -> T:
    """Run `fn` in a write transaction, retrying the whole transaction on a transient conflict.

    `fn` must be safe to run again: everything it did is rolled back before a retry.
    """
    for attempt in range(1, policy.attempts + 1):
        try:
            async with db.write_transaction() as conn:
                return await fn(conn)
        except Exception as exc:
            if not is_transient_write_conflict(exc) or attempt == policy.attempts:
                raise
            db.stats.write_conflicts += 1
            wait = policy.delay(attempt)
            log.debug("write conflict (attempt %d), retrying in %.3fs: %s", attempt, wait, exc)
            await asyncio.sleep(wait)
    raise AssertionError("unreachable")
