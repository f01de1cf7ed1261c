"""Engines, transactions and the admission lock: every dialect difference of connecting lives here.

SQLite notes, since they explain most of this module:

- Python's sqlite3 module begins transactions lazily and as DEFERRED, so a transaction that reads
  then writes must upgrade its lock mid-way, which is where `database is locked` comes from under
  contention. We turn the driver's own transaction handling off and emit `BEGIN` ourselves:
  `BEGIN IMMEDIATE` for write transactions (the writer lock is taken up front, and `busy_timeout`
  queues us fairly) and a plain `BEGIN` for reads.
- Within one process, writers also queue on an `asyncio.Lock` before asking SQLite, so they wait
  on the event loop instead of in SQLite's busy handler. A SQLite file belongs to one process
  (see `deckyard.db.lite`), so this lock is the writer lock in practice.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import logging
import os
import re
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from sqlalchemy import Table, create_engine, event, select, text
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from deckyard.db.errors import is_transient_write_conflict
from deckyard.db.instrument import StatementCounter
from deckyard.db.notify import PgListener, WakeupBus
from deckyard.db.retry import WriteRetryPolicy, run_with_write_retry
from deckyard.db.schema import scheduler_lock

if TYPE_CHECKING:
    import psycopg

    from deckyard.config import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

NOTIFY_CHANNEL_SQL = (
    "'deckyard.' || CASE WHEN octet_length(current_schema()) <= 54 "
    "THEN current_schema() ELSE md5(current_schema()) END"
)
"""SQL for the NOTIFY channel of the connection's schema: `deckyard.<schema>`.

Per schema, so deployments (or test runs) in different schemas of one database do not wake
each other. A channel name has at most 63 bytes, so a longer schema name is replaced by its
md5. Evaluated by the connection that writes, so a NOTIFY always names the schema its rows
went to; the listener evaluates it on its own connection (same URL, same `search_path`).
"""
_WRITE_OPTION = "deckyard_write"
_READ_OPTION = "deckyard_read"


def normalize_url(url: str | URL) -> URL:
    """Pick our async driver for a plain `sqlite://` or `postgresql://` URL."""
    u = make_url(url)
    backend = u.get_backend_name()
    if backend == "sqlite":
        return u.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres"):
        return u.set(drivername="postgresql+psycopg")
    raise ValueError(f"unsupported database URL {u.render_as_string()!r}")


def sqlite_file(url: str | URL) -> Path | None:
    """The file behind a SQLite URL, or None for PostgreSQL and in-memory databases."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite":
        return None
    name = u.database or ""
    if name in ("", ":memory:") or u.query.get("mode") == "memory":
        return None
    return Path(name).resolve()


_NAMED = re.compile(r"(?<![:\w]):(\w+)")


@dataclass(frozen=True)
class PgStatement:
    """A PostgreSQL statement for `Database.write_statement`: psycopg's `%(name)s` parameters.

    `constants` are parameters fixed when the statement is built (status names and the like).
    """

    sql: str
    constants: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def named(cls, sql: str, **constants: Any) -> PgStatement:
        """From SQL with `:name` parameters (as `text()` takes them); no `%` may appear in it."""
        if "%" in sql:
            raise ValueError("a literal % would be read as a parameter")
        return cls(_NAMED.sub(r"%(\1)s", sql), constants)


@dataclass
class DbStats:
    """Counters the db layer keeps whether or not statement instrumentation is on."""

    write_conflicts: int = 0
    """Write transactions retried by `Database.write` after a transient conflict."""
    locked_errors: int = 0
    """Statements that failed with SQLite BUSY/LOCKED or a PostgreSQL serialization failure."""


class Database:
    """One database: its engine, its wakeup bus, and the transaction helpers.

    Capability questions (`supports_listen_notify`, `is_single_process`) are answered here so
    nothing outside `deckyard.db` ever asks which database it is talking to.
    """

    def __init__(
        self,
        url: str | URL,
        *,
        busy_timeout_seconds: float = 5.0,
        pool_size: int = 10,
        connect_timeout_seconds: float = 10.0,
        instrument: bool = False,
        notify_reconnect_delay: float = 1.0,
        notify_reconnect_max_delay: float = 30.0,
        write_retry: WriteRetryPolicy | None = None,
        sqlite_inline_writes: bool = True,
    ) -> None:
        self.url = normalize_url(url)
        self._sqlite = self.url.get_backend_name() == "sqlite"
        self.file = sqlite_file(self.url)
        self.bus = WakeupBus()
        self.stats = DbStats()
        self.counter: StatementCounter | None = StatementCounter() if instrument else None
        self.write_retry = write_retry or WriteRetryPolicy()
        self.sqlite_inline_writes = sqlite_inline_writes
        self._busy_ms = int(busy_timeout_seconds * 1000)
        """SQLite: `write_in_thread` runs its function on the event loop's own thread."""
        self._inline: Engine | None = None
        self._writer_lock = asyncio.Lock()
        self._listener: PgListener | None = None
        self._notify_delays = (notify_reconnect_delay, notify_reconnect_max_delay)
        self._conninfo = self.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._connect_timeout = max(1, int(connect_timeout_seconds))
        self._statement_idle: list[psycopg.AsyncConnection[dict[str, Any]]] = []
        self._statement_slots = asyncio.Semaphore(pool_size)
        """`write_statement`'s own psycopg connections (PostgreSQL), at most `pool_size`."""
        self._statement_generation = 0
        """Bumped by `dispose`: a connection checked out before it is closed when it returns."""
        self.engine: AsyncEngine = self._make_engine(
            busy_timeout_seconds, pool_size, connect_timeout_seconds
        )
        if self.counter is not None:
            self.counter.attach(self.engine.sync_engine)
        event.listen(self.engine.sync_engine, "handle_error", self._count_conflict)

    def _count_conflict(self, context: Any) -> None:
        if is_transient_write_conflict(context.original_exception):
            self.stats.locked_errors += 1

    @classmethod
    def from_settings(cls, settings: Settings, *, url: str | None = None) -> Database:
        """A database configured from settings."""
        return cls(
            url or settings.resolved_database_url,
            busy_timeout_seconds=settings.sqlite_busy_timeout_seconds,
            pool_size=settings.db_pool_size,
            connect_timeout_seconds=settings.db_connect_timeout_seconds,
            instrument=settings.instrument_sql,
            notify_reconnect_delay=settings.notify_reconnect_delay_seconds,
            notify_reconnect_max_delay=settings.notify_reconnect_max_delay_seconds,
            write_retry=WriteRetryPolicy(
                attempts=settings.write_retry_attempts,
                base_delay=settings.write_retry_base_delay_seconds,
                max_delay=settings.write_retry_max_delay_seconds,
            ),
            sqlite_inline_writes=settings.job_sqlite_inline_writes,
        )

    # --- capabilities -------------------------------------------------------------------------

    @property
    def supports_listen_notify(self) -> bool:
        """True when other processes can be woken through the database (PostgreSQL)."""
        return not self._sqlite

    @property
    def is_single_process(self) -> bool:
        """True when only one process may use this database (a SQLite file)."""
        return self._sqlite

    @property
    def display_name(self) -> str:
        """The URL without its password, for logs and readiness."""
        return self.url.render_as_string(hide_password=True)

    # --- engine -------------------------------------------------------------------------------

    def _make_engine(
        self, busy_timeout: float, pool_size: int, connect_timeout: float
    ) -> AsyncEngine:
        if not self._sqlite:
            return create_async_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=pool_size,
                pool_pre_ping=False,
                connect_args={"connect_timeout": max(1, int(connect_timeout))},
            )
        if self.file is not None:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            engine = create_async_engine(self.url, pool_size=pool_size, max_overflow=0)
        else:
            engine = create_async_engine(self.url, poolclass=StaticPool)
        is_file = self.file is not None
        busy_ms = int(busy_timeout * 1000)

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves, see module docstring
            _sqlite_pragmas(dbapi_conn, is_file=is_file, busy_ms=busy_ms)

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: Connection) -> None:
            opts = conn.get_execution_options()
            if opts.get(_READ_OPTION):
                return  # single-statement reads: the driver runs each in its own transaction
            conn.exec_driver_sql("BEGIN IMMEDIATE" if opts.get(_WRITE_OPTION) else "BEGIN")

        return engine

    async def dispose(self) -> None:
        """Stop listening and close every pooled connection."""
        await self.stop_listening()
        if self._inline is not None:
            self._inline.dispose()
            self._inline = None
        self._statement_generation += 1
        while self._statement_idle:
            await self._statement_idle.pop().close()
        await self.engine.dispose()

    # --- transactions -------------------------------------------------------------------------

    @asynccontextmanager
    async def write_transaction(self) -> AsyncIterator[AsyncConnection]:
        """A transaction meant to write; commits on success, rolls back on error.

        On SQLite it begins as `BEGIN IMMEDIATE` after queueing on the in-process writer lock.
        In-process wakeups requested with `notify()` fire only after the commit.
        """
        if self.counter is not None:
            self.counter.note_write_begin()
        if self._sqlite:
            async with self._writer_lock, self._write_conn() as conn:
                yield conn
        else:
            async with self._write_conn() as conn:
                yield conn

    async def write(self, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run `fn(conn)` in a write transaction, retried on transient conflicts; return its result.

        A conflict is SQLite BUSY/LOCKED or a PostgreSQL serialization failure or deadlock
        (40001/40P01): the whole transaction is rolled back and `fn` runs anew after a jittered
        backoff (`write_retry_*` settings), so `fn` must touch nothing but `conn` (or be safe to
        repeat). Each retry counts in `stats.write_conflicts`.
        """
        return await run_with_write_retry(self, fn, self.write_retry)

    @property
    def supports_writable_ctes(self) -> bool:
        """True when one statement may settle, claim and log together (PostgreSQL)."""
        return not self._sqlite

    async def write_statement(
        self, stmt: PgStatement, params: dict[str, Any], *, wake: tuple[str, ...] = ()
    ) -> list[dict[str, Any]]:
        """PostgreSQL: run one statement as its own transaction, in one round trip.

        On a plain psycopg connection in autocommit mode (a small pool of its own, apart from
        the engine's): there is no BEGIN or COMMIT to wait for, the statement commits as a
        whole or not at all (data-modifying CTEs included), and none of SQLAlchemy's per-call
        work (checkout, isolation switch, compile-cache lookup, type processing) is paid; psycopg
        prepares the statement server-side after a few runs. Rows come back as dicts of
        psycopg's values (timestamps aware, JSON parsed). A NOTIFY for other processes belongs
        inside the statement (`pg_notify`); `wake` names the local channels to wake after it.
        Retried on transient conflicts like `write`.
        """
        if self._sqlite:
            raise RuntimeError("write_statement is for PostgreSQL; use write_in_thread")
        values = {**stmt.constants, **params}
        policy = self.write_retry
        for attempt in range(1, policy.attempts + 1):
            try:
                if self.counter is not None:
                    self.counter.note_write_begin()
                began = time.perf_counter()
                rows, rowcount = await self._run_statement(stmt.sql, values)
                if self.counter is not None:
                    took = time.perf_counter() - began
                    if self.counter.note_statement(stmt.sql, rowcount, took):
                        self.counter.note_write_transaction()
                break
            except Exception as exc:
                if not is_transient_write_conflict(exc):
                    raise
                self.stats.locked_errors += 1
                if attempt == policy.attempts:
                    raise
                self.stats.write_conflicts += 1
                await asyncio.sleep(policy.delay(attempt))
        for channel in wake:
            self.bus.wake(channel)
        return rows

    async def _run_statement(
        self, sql: str, params: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], int]:
        # imported here: PostgreSQL only, and a Lite process never loads the driver
        import psycopg
        from psycopg.rows import dict_row

        async with self._statement_slots:
            generation = self._statement_generation
            conn = None
            while self._statement_idle and conn is None:
                conn = self._statement_idle.pop()
                if conn.closed or conn.broken:
                    conn = None
            if conn is None:
                conn = await psycopg.AsyncConnection.connect(
                    self._conninfo,
                    autocommit=True,
                    row_factory=dict_row,
                    connect_timeout=self._connect_timeout,
                )
            reusable = False
            try:
                cur = await conn.execute(sql, params)
                rows = await cur.fetchall()
                reusable = True
                return rows, cur.rowcount
            finally:
                # A statement still running when `dispose` ran closes its connection: pooled
                # now, nothing would ever close it (psycopg warns when it is collected).
                idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                current = generation == self._statement_generation
                if current and not conn.closed and not conn.broken and (reusable or idle):
                    self._statement_idle.append(conn)
                else:
                    await conn.close()

    @property
    def has_db_thread(self) -> bool:
        """True when `write_in_thread` runs a transaction on the driver's thread (SQLite)."""
        return self._sqlite

    async def write_in_thread(self, fn: Callable[[Connection], T]) -> T:
        """SQLite: run `fn(conn)` in one write transaction as one synchronous call.

        aiosqlite runs every driver call on its connection's thread, so a transaction of
        statements costs a hand-off per call (cursor, execute, fetch, close). Here the whole
        transaction, `BEGIN IMMEDIATE` to `COMMIT`, is one synchronous function: by default
        (`sqlite_inline_writes`) run on the event loop's own thread, with no hand-off at all,
        else queued on the connection's thread (one hand-off). Inline, it holds the loop for
        the transaction's CPU time, which on the database thread it would mostly spend holding
        the GIL anyway, and a loaded machine no longer adds two thread wake-ups (and GIL
        switch intervals) to every write. It cannot wait on another writer: the in-process
        writer lock is taken first, as for `write_transaction`, and a SQLite file belongs to
        one process. `fn` gets a synchronous connection on the pooled SQLite connection, must
        touch nothing but it (it may run again after a conflict, like `write`), and may call
        `notify()` with it.
        """
        if not self._sqlite:
            raise RuntimeError("write_in_thread is for SQLite; use write or write_statement")
        policy = self.write_retry
        for attempt in range(1, policy.attempts + 1):
            try:
                result, wake = await self._write_in_thread_once(fn)
                break
            except Exception as exc:
                if not is_transient_write_conflict(exc) or attempt == policy.attempts:
                    raise
                self.stats.write_conflicts += 1
                await asyncio.sleep(policy.delay(attempt))
        for channel in wake:
            self.bus.wake(channel)
        return result

    async def _write_in_thread_once(self, fn: Callable[[Connection], T]) -> tuple[T, set[str]]:
        if self.counter is not None:
            self.counter.note_write_begin()
        async with self._writer_lock:
            if self.file is None or not self.sqlite_inline_writes:
                return await self._write_on_pool_thread(fn)
            engine = self._inline_engine()
            inline = _run_sync_write(engine, fn, nowait_busy_ms=self._busy_ms)
            if inline is not None:
                return inline
            # Another connection holds SQLite's write lock (a second `Database` on this file):
            # wait for it on a worker thread, never in a busy handler on the loop's.
            return await asyncio.to_thread(_run_sync_write, engine, fn)

    def _inline_engine(self) -> Engine:
        """A synchronous engine over this database's own SQLite connection for inline writes.

        Apart from the pool: checking a pooled aiosqlite connection out and back in costs a
        thread hand-off (the reset on return), which is what inline writes avoid. Used only
        under the writer lock, so by one caller at a time.
        """
        if self._inline is None:
            path, busy_ms = str(self.file), self._busy_ms

            def connect() -> sqlite3.Connection:
                raw = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
                _sqlite_pragmas(raw, is_file=True, busy_ms=busy_ms)
                return raw

            engine = create_engine(
                "sqlite://", creator=connect, poolclass=StaticPool, pool_reset_on_return=None
            )
            if self.counter is not None:
                self.counter.attach(engine)
            event.listen(engine, "handle_error", self._count_conflict)
            self._inline = engine
        return self._inline

    async def _write_on_pool_thread(self, fn: Callable[[Connection], T]) -> tuple[T, set[str]]:
        """`fn` as one call on a pooled aiosqlite connection's thread (in-memory databases)."""
        async with self.engine.connect() as aconn:
            fairy = await aconn.get_raw_connection()
            aio: Any = fairy.driver_connection  # the aiosqlite.Connection
            sync_engine = fairy.info.get("dy_thread_engine")
            if sync_engine is None:
                sync_engine = self._thread_engine(aio)
                fairy.info["dy_thread_engine"] = sync_engine
            ctx = contextvars.copy_context()  # the statement counter reads `current_loop`
            out: tuple[T, set[str]] = await aio._execute(ctx.run, _run_sync_write, sync_engine, fn)
            return out

    def _thread_engine(self, aio: Any) -> Any:
        """A synchronous engine over one aiosqlite connection's sqlite3 connection.

        Used only from that connection's own thread, while the async side holds it checked out;
        it never opens or closes the connection itself.
        """
        engine = create_engine(
            "sqlite://", creator=lambda: aio._conn, poolclass=StaticPool, pool_reset_on_return=None
        )
        if self.counter is not None:
            self.counter.attach(engine)
        event.listen(engine, "handle_error", self._count_conflict)
        return engine

    @asynccontextmanager
    async def _write_conn(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.connect() as conn:
            await conn.execution_options(**{_WRITE_OPTION: True})
            conn.info.pop("dy_wake", None)
            async with conn.begin():
                yield conn
                await self._send_notifies(conn)
            wake: set[str] = conn.info.pop("dy_wake", set())
        for channel in wake:
            self.bus.wake(channel)

    @asynccontextmanager
    async def read_transaction(self) -> AsyncIterator[AsyncConnection]:
        """A read-only transaction giving one consistent snapshot.

        Leave it before awaiting anything on the network: an open transaction pins a snapshot
        (and on SQLite holds back WAL checkpoints).
        """
        async with self.engine.connect() as conn, conn.begin():
            yield conn

    @asynccontextmanager
    async def read_connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection in autocommit mode for single-statement reads: one round trip each.

        On SQLite the driver is in autocommit mode already (we emit `BEGIN` ourselves): a read
        connection only skips that `BEGIN`, where setting SQLAlchemy's `AUTOCOMMIT` isolation
        level set it on the driver's connection and reset it on release, two more trips
        through aiosqlite's thread for every read (about a fifth of a read's CPU).
        """
        async with self.engine.connect() as conn:
            if self._sqlite:
                await conn.execution_options(**{_READ_OPTION: True})
            else:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn

    def notify(self, conn: AsyncConnection | Connection, channel: str) -> None:
        """Wake `channel`'s subscribers when the current write transaction commits.

        Local subscribers are woken right after the commit; on PostgreSQL a NOTIFY is sent just
        before it, so other processes are woken by the same commit (and never by a rollback).
        """
        wake: set[str] = conn.info.setdefault("dy_wake", set())
        wake.add(channel)

    async def _send_notifies(self, conn: AsyncConnection) -> None:
        if self._sqlite:
            return
        channels = sorted(conn.info.get("dy_wake", ()))
        if channels:
            calls = ", ".join(
                f"pg_notify({NOTIFY_CHANNEL_SQL}, :p{i})" for i in range(len(channels))
            )
            params = {f"p{i}": ch for i, ch in enumerate(channels)}
            await conn.execute(text(f"SELECT {calls}"), params)

    def insert_ignoring_conflicts(
        self, table: Table, *, index_elements: list[str], index_where: Any = None
    ) -> Any:
        """An INSERT that does nothing when it would violate the named (partial) unique index.

        Add `.values(...)` and usually `.returning(...)`: no returned row means a conflict.
        """
        module = sqlite_dialect if self._sqlite else pg_dialect
        return module.insert(table).on_conflict_do_nothing(
            index_elements=index_elements, index_where=index_where
        )

    async def acquire_admission_lock(self, conn: AsyncConnection) -> None:
        """Serialise admission decisions across every process that shares this database.

        PostgreSQL: `SELECT ... FOR UPDATE` on the singleton `scheduler_lock` row, held until the
        transaction ends. SQLite: the write transaction's `BEGIN IMMEDIATE` already holds the
        database's only writer lock, so there is nothing more to take; that is the point.
        Must be called inside `write_transaction()`.
        """
        if not conn.sync_connection or not conn.sync_connection.get_execution_options().get(
            _WRITE_OPTION
        ):
            raise RuntimeError("acquire_admission_lock needs a write_transaction()")
        if self._sqlite:
            return
        stmt = select(scheduler_lock.c.id).where(scheduler_lock.c.id == 1).with_for_update()
        if (await conn.execute(stmt)).first() is None:
            raise RuntimeError("scheduler_lock row is missing: run `deckyard migrate`")

    async def check_writable(self, min_free_bytes: int = 0) -> None:
        """Raise unless this process could write now; writes nothing itself.

        On SQLite a disk with less than `min_free_bytes` free counts as full (`OSError`
        ENOSPC): writes would fail with "database or disk is full".
        """
        if self._sqlite:
            if self.file is not None and not self.file.exists():
                raise FileNotFoundError(f"the database file {self.file} is gone")
            if self.file is not None and not os.access(self.file, os.W_OK):
                raise PermissionError(f"{self.file} is not writable")
            if self.file is not None:
                free = shutil.disk_usage(self.file.parent).free
                if free < min_free_bytes:
                    raise OSError(
                        errno.ENOSPC, f"only {free} bytes free for {self.file} (disk full)"
                    )
            async with self.engine.connect() as conn:
                await conn.execution_options(**{_WRITE_OPTION: True})
                async with conn.begin() as tx:
                    await conn.execute(text("SELECT 1"))
                    await tx.rollback()
            return
        async with self.read_connection() as conn:
            row = (
                await conn.execute(
                    text("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
                )
            ).one()
        if row[0] or row[1] == "on":
            raise PermissionError("PostgreSQL is read-only (in recovery or read-only mode)")

    # --- cross-process wakeups ----------------------------------------------------------------

    async def start_listening(self) -> None:
        """Receive other processes' NOTIFYs on a dedicated connection (PostgreSQL only)."""
        if self._sqlite or self._listener is not None:
            return
        self._listener = PgListener(
            self._conninfo, NOTIFY_CHANNEL_SQL, self.bus, *self._notify_delays
        )
        await self._listener.start()

    async def stop_listening(self) -> None:
        """Close the LISTEN connection."""
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None


def _sqlite_pragmas(dbapi_conn: Any, *, is_file: bool, busy_ms: int) -> None:
    """Every SQLite connection's settings: WAL (for files), busy timeout, foreign keys."""
    cur = dbapi_conn.cursor()
    if is_file:
        cur.execute("PRAGMA journal_mode=WAL")
    cur.execute(f"PRAGMA busy_timeout={busy_ms}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _begin_immediate_nowait(raw: sqlite3.Connection, busy_ms: int) -> bool:
    """`BEGIN IMMEDIATE` without waiting: False when another connection holds the write lock."""
    raw.execute("PRAGMA busy_timeout=0")
    try:
        raw.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_transient_write_conflict(exc):
            return False
        raise
    finally:
        raw.execute(f"PRAGMA busy_timeout={busy_ms}")
    return True


@overload
def _run_sync_write(
    engine: Any, fn: Callable[[Connection], T], *, nowait_busy_ms: None = None
) -> tuple[T, set[str]]: ...
@overload
def _run_sync_write(
    engine: Any, fn: Callable[[Connection], T], *, nowait_busy_ms: int
) -> tuple[T, set[str]] | None: ...
def _run_sync_write(
    engine: Any, fn: Callable[[Connection], T], *, nowait_busy_ms: int | None = None
) -> tuple[T, set[str]] | None:
    """`BEGIN IMMEDIATE`, `fn(conn)`, `COMMIT` (ROLLBACK on error).

    With `nowait_busy_ms` the BEGIN does not wait for another connection's write lock: None
    comes back at once instead (and the busy timeout is set back to `nowait_busy_ms`).
    """
    with engine.connect() as conn:
        conn.info.pop("dy_wake", None)
        if nowait_busy_ms is None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        elif not _begin_immediate_nowait(conn.connection.driver_connection, nowait_busy_ms):
            return None
        try:
            result = fn(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        wake: set[str] = conn.info.pop("dy_wake", set())
    return result, wake
