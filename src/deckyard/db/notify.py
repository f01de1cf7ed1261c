"""Wakeups: in-process always, and PostgreSQL LISTEN/NOTIFY across processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)


ANY_CHANNEL = "*"
"""Subscribe to this to be woken by every channel."""


class Subscription:
    """A subscriber's view of some channels: `wait()` returns once one of them was woken.

    A wake that arrives while the subscriber is busy is kept, so none is lost between waits;
    `take_hits()` says which channels woke it since it last asked.
    """

    def __init__(self, bus: WakeupBus, channels: tuple[str, ...]) -> None:
        self._bus = bus
        self.channels = channels
        self._event = asyncio.Event()
        self._hits: set[str] = set()

    def _set(self, channel: str) -> None:
        self._hits.add(channel)
        self._event.set()

    def poke(self) -> None:
        """Wake this subscription alone (no channel is hit): its owner has new work to look at."""
        self._event.set()

    def take_hits(self) -> set[str]:
        """The channels that woke this subscription since the last call."""
        hits, self._hits = self._hits, set()
        return hits

    async def wait(self, timeout: float | None) -> bool:
        """Wait up to `timeout` seconds for a wake; True when woken, False on timeout."""
        if not self._event.is_set():
            if timeout is not None and timeout <= 0:
                return False
            try:
                async with asyncio.timeout(timeout):
                    await self._event.wait()
            except TimeoutError:
                return False
        self._event.clear()
        return True

    def pending(self) -> bool:
        """True when a wake arrived that nobody has waited for yet."""
        return self._event.is_set()

    def close(self) -> None:
        """Stop receiving wakes."""
        for channel in self.channels:
            self._bus._subs[channel].discard(self)


class WakeupBus:
    """Channels of wakeups within one process."""

    def __init__(self) -> None:
        self._subs: defaultdict[str, set[Subscription]] = defaultdict(set)

    def subscribe(self, channel: str, *more: str) -> Subscription:
        """A new subscription to one or more channels (`ANY_CHANNEL` for all of them)."""
        sub = Subscription(self, (channel, *more))
        for name in sub.channels:
            self._subs[name].add(sub)
        return sub

    def wake(self, channel: str) -> None:
        """Wake every subscriber of `channel`, and those of `ANY_CHANNEL`."""
        for sub in [*self._subs.get(channel, ()), *self._subs.get(ANY_CHANNEL, ())]:
            sub._set(channel)

    def wake_all(self) -> None:
        """Wake every subscriber of every channel (after missing notifications, say)."""
        for channel, subs in list(self._subs.items()):
            for sub in list(subs):
                sub._set(channel)


class PgListener:
    """Forwards PostgreSQL NOTIFYs on one channel to the bus; reconnects after a drop.

    The channel's name is what `channel_sql` evaluates to on the listening connection (the
    schema's channel), read on every connect. Each notification's payload is the bus channel
    to wake. After a reconnect every channel is woken, because notifications sent while we
    were away are gone.
    """

    def __init__(
        self,
        conninfo: str,
        channel_sql: str,
        bus: WakeupBus,
        reconnect_delay: float,
        reconnect_max_delay: float,
    ) -> None:
        self._conninfo = conninfo
        self._channel_sql = channel_sql
        self.channel: str | None = None
        """The channel listened to, once connected."""
        self._bus = bus
        self._delay = reconnect_delay
        self._max_delay = reconnect_max_delay
        self._task: asyncio.Task[None] | None = None
        self._conn: psycopg.AsyncConnection[object] | None = None
        self.connected = asyncio.Event()
        self.reconnects = 0

    async def start(self) -> None:
        """Connect and start forwarding; returns once the first LISTEN is in place."""
        self._task = asyncio.create_task(self._run(), name="pg-listener")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._max_delay):
                await self.connected.wait()

    async def stop(self) -> None:
        """Stop forwarding and close the connection."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._close()

    async def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    async def _run(self) -> None:
        # imported here: only PostgreSQL listens, and a Lite process never loads the driver
        import psycopg
        from psycopg import sql

        delay = self._delay
        first = True
        while True:
            try:
                self._conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                cur = await self._conn.execute(f"SELECT {self._channel_sql}")
                row = await cur.fetchone()
                if row is None or not isinstance(row[0], str):
                    raise RuntimeError("no current schema to name the NOTIFY channel after")
                self.channel = row[0]
                await self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                if not first:
                    log.warning("LISTEN connection restored; waking every loop to catch up")
                    self._bus.wake_all()
                first = False
                delay = self._delay
                self.connected.set()
                async for note in self._conn.notifies():
                    self._bus.wake(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                self.reconnects += 1
                log.warning(
                    "LISTEN connection lost (%s); reconnecting in %.1fs",
                    str(exc).strip() or type(exc).__name__,
                    delay,
                )
                await self._close()
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._max_delay)
