"""Waiting for rows to reach an end: one shared reader for every waiter of a kind of row.

A waiter that re-read its own row on every wake of a shared channel made N concurrent waiters
cost N reads per wake, so N jobs or render requests in flight (O(N) state changes) cost O(N^2)
reads. Here one task per `SharedWaiters` reads every waited row in one call per wake and
resolves the waiters whose row has ended: O(1) reads per wake.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db.engine import Database

T = TypeVar("T")


class SharedWaiters(Generic[T]):
    """Futures of waited rows, resolved with the ended row (or None when there is no row).

    `read_ended(conn, ids)` returns the rows of `ids` that have ended, by id, and the ids no
    row has. Every change that can end a row wakes `channel` at commit (in process, and
    through NOTIFY on PostgreSQL); `recheck_seconds` only bounds how long a missed wakeup could
    delay a waiter.
    """

    def __init__(
        self,
        db: Database,
        channel: str,
        read_ended: Callable[
            [AsyncConnection, Sequence[int]], Awaitable[tuple[dict[int, T], set[int]]]
        ],
        recheck_seconds: float,
        name: str,
    ) -> None:
        self.db = db
        self.channel = channel
        self.read_ended = read_ended
        self.recheck_seconds = recheck_seconds
        self.name = name
        self._futures: dict[int, list[asyncio.Future[T | None]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def wait(self, key: int) -> T | None:
        """The row once it has ended; None when no row has that id."""
        future: asyncio.Future[T | None] = asyncio.get_running_loop().create_future()
        self._futures.setdefault(key, []).append(future)
        try:
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._run(), name=self.name)
            # Registered first, then read: an end committed after this read wakes the reader.
            async with self.db.read_connection() as conn:
                ended, missing = await self.read_ended(conn, [key])
            if key in ended:
                return ended[key]
            if key in missing:
                return None
            return await future
        finally:
            self._discard(key, future)

    async def close(self) -> None:
        """Let the reader end before its owner stops (and the database with it).

        A reader still in a read when the last waiter left ends after that read: it is waited
        for, so its pooled connection is checked back in (a task left behind held it past the
        event loop's end, where the garbage collector found it checked out). A reader that
        still has waiters is cancelled: nothing will end their rows any more.
        """
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if self._futures:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def _discard(self, key: int, future: asyncio.Future[T | None]) -> None:
        waiting = self._futures.get(key)
        if waiting is not None:
            with contextlib.suppress(ValueError):
                waiting.remove(future)
            if not waiting:
                del self._futures[key]

    def _resolve(self, key: int, row: T | None) -> None:
        for future in self._futures.pop(key, []):
            if not future.done():
                future.set_result(row)

    async def _run(self) -> None:
        sub = self.db.bus.subscribe(self.channel)
        try:
            while self._futures:
                async with self.db.read_connection() as conn:
                    ended, missing = await self.read_ended(conn, list(self._futures))
                for key, row in ended.items():
                    self._resolve(key, row)
                for key in missing:
                    self._resolve(key, None)
                if self._futures:
                    await sub.wait(self.recheck_seconds)
        except Exception as exc:
            # The waiters see the failure (a database error, say); none hangs on a dead reader.
            for waiting in list(self._futures.values()):
                for future in waiting:
                    if not future.done():
                        future.set_exception(exc)
        finally:
            sub.close()
