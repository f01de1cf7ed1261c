"""Waiting for rows to reach an end, and following them: one shared reader for every waiter.

A waiter that re-read its own row on every wake of a shared channel made N concurrent waiters
cost N reads per wake, so N jobs or render requests in flight (O(N) state changes) cost O(N^2)
reads. Here one task per `SharedWaiters` reads every waited row in one call per wake and
resolves the waiters whose row has ended: O(1) reads per wake. `SharedFollowers` does the same
for streams (a job's events, a render's states): one reader task fills every follower's inbox.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db.engine import Database
from deckyard.db.notify import Subscription

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


@dataclass(eq=False)
class Follower(Generic[T]):
    """One stream's inbox: items, then None at its end (or the reader's failure)."""

    inbox: asyncio.Queue[T | BaseException | None] = field(
        default_factory=asyncio.Queue, kw_only=True
    )


F = TypeVar("F", bound=Follower[Any])


class SharedFollowers(Generic[F, T]):
    """Streams fed by one reader task: `_stream` registers a follower and yields what the
    reader puts in its inbox; the reader (`_read_once`, a subclass's) reads for every follower
    at once per wake of `channels`, at most `recheck_seconds` apart, and ends a stream with
    None. A newcomer pokes the reader, so its first read comes at once."""

    def __init__(
        self, db: Database, channels: tuple[str, ...], recheck_seconds: float, name: str
    ) -> None:
        self.db = db
        self.channels = channels
        self.recheck_seconds = recheck_seconds
        self.name = name
        self._followers: set[F] = set()
        self._task: asyncio.Task[None] | None = None
        self._sub: Subscription | None = None

    async def _stream(self, follower: F) -> AsyncGenerator[T]:
        self._followers.add(follower)
        try:
            if self._task is None or self._task.done():
                self._task = asyncio.create_task(self._run(), name=self.name)
            elif self._sub is not None:
                self._sub.poke()  # a read that includes the newcomer, now
            while True:
                item = await follower.inbox.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._followers.discard(follower)

    def _end(self, follower: F) -> None:
        """End `follower`'s stream after what its inbox holds (the reader stops reading for it)."""
        self._followers.discard(follower)
        follower.inbox.put_nowait(None)

    async def close(self) -> None:
        """Stop the reader (streams still open end with an error: their owner is stopping)."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        self._sub = sub = self.db.bus.subscribe(*self.channels)
        try:
            while self._followers:
                more = await self._read_once(list(self._followers))
                if self._followers and not more:
                    await sub.wait(self.recheck_seconds)
        except Exception as exc:
            # The streams see the failure (a database error, say); none hangs on a dead reader.
            for follower in list(self._followers):
                follower.inbox.put_nowait(exc)
            self._followers.clear()
        finally:
            sub.close()
            self._sub = None

    async def _read_once(self, followers: list[F]) -> bool:
        """One read for `followers`, filling their inboxes; True to read again at once."""
        raise NotImplementedError
