"""The persistence seam on both databases: pragmas, types, contention, conflicts, wakeups."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import Column, Integer, MetaData, Table, insert, select, text, update
from sqlalchemy.exc import StatementError

from deckyard.db import (
    Database,
    JSONPayload,
    UTCDateTime,
    WriteRetryPolicy,
    is_transient_write_conflict,
    run_with_write_retry,
)
from tests.conftest import PG_URL, require_pg
from tests.helpers.db import drop_listen_connection
from tests.helpers.eventually import eventually

side_md = MetaData()
things = Table(
    "things",
    side_md,
    Column("id", Integer, primary_key=True),
    Column("at", UTCDateTime),
    Column("doc", JSONPayload),
    Column("n", Integer, default=0),
)


async def _create_things(db: Database) -> None:
    async with db.engine.begin() as conn:
        await conn.run_sync(side_md.create_all)


async def test_sqlite_file_pragmas(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'p.db'}", busy_timeout_seconds=2.5)
    try:
        async with db.read_transaction() as conn:
            mode = (await conn.execute(text("PRAGMA journal_mode"))).scalar()
            busy = (await conn.execute(text("PRAGMA busy_timeout"))).scalar()
            fks = (await conn.execute(text("PRAGMA foreign_keys"))).scalar()
            sync = (await conn.execute(text("PRAGMA synchronous"))).scalar()
        assert (mode, busy, fks, sync) == ("wal", 2500, 1, 1)
    finally:
        await db.dispose()


async def test_sqlite_memory_has_no_wal() -> None:
    db = Database("sqlite:///:memory:")
    try:
        async with db.read_transaction() as conn:
            mode = (await conn.execute(text("PRAGMA journal_mode"))).scalar()
        assert mode == "memory"
    finally:
        await db.dispose()


async def test_sqlite_reads_open_no_transaction_and_read_transactions_do(tmp_path: Path) -> None:
    """A read connection's statement runs in the driver's autocommit (no BEGIN, no isolation
    level set on the driver); a read transaction is a `BEGIN` snapshot."""
    db = Database(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        async with db.read_connection() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
            raw = await conn.get_raw_connection()
            assert raw.driver_connection.in_transaction is False
            assert raw.driver_connection.isolation_level is None
        async with db.read_transaction() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
            raw = await conn.get_raw_connection()
            assert raw.driver_connection.in_transaction is True
    finally:
        await db.dispose()


async def test_utc_datetime_and_json_round_trip(db: Database) -> None:
    await _create_things(db)
    plus_two = timezone(timedelta(hours=2))
    at = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=plus_two)
    async with db.write_transaction() as conn:
        await conn.execute(insert(things).values(id=1, at=at, doc={"a": [1, "二", None]}))
    async with db.read_connection() as conn:
        row = (await conn.execute(select(things.c.at, things.c.doc))).one()
        earlier = (
            await conn.execute(select(things.c.id).where(things.c.at > at - timedelta(seconds=1)))
        ).scalar()
    assert row.at == at and row.at.tzinfo is not None and row.at.utcoffset() == timedelta(0)
    assert row.doc == {"a": [1, "二", None]}
    assert earlier == 1


async def test_naive_datetime_is_refused(db: Database) -> None:
    await _create_things(db)
    with pytest.raises(StatementError, match="aware"):
        async with db.write_transaction() as conn:
            await conn.execute(insert(things).values(id=1, at=datetime(2026, 1, 1)))


async def test_concurrent_writers_never_see_locked(db: Database) -> None:
    """8 writers x 200 write transactions complete with no `database is locked` reaching us."""
    await _create_things(db)
    async with db.write_transaction() as conn:
        await conn.execute(insert(things).values(id=1, n=0))

    async def writer() -> None:
        for _ in range(200):
            async with db.write_transaction() as conn:
                stmt = select(things.c.n).where(things.c.id == 1).with_for_update()
                n = (await conn.execute(stmt)).scalar_one()
                await conn.execute(update(things).where(things.c.id == 1).values(n=n + 1))

    await asyncio.gather(*(writer() for _ in range(8)))
    async with db.read_connection() as conn:
        assert (await conn.execute(select(things.c.n))).scalar_one() == 1600


def test_sqlite_busy_is_a_transient_conflict(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    a = sqlite3.connect(path, timeout=0, isolation_level=None)
    b = sqlite3.connect(path, timeout=0, isolation_level=None)
    a.execute("PRAGMA journal_mode=WAL")
    a.execute("CREATE TABLE t (x)")
    a.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError) as info:
        b.execute("BEGIN IMMEDIATE")
    a.execute("ROLLBACK")
    a.close()
    b.close()
    assert is_transient_write_conflict(info.value)
    assert not is_transient_write_conflict(sqlite3.OperationalError("no such table: x"))
    assert not is_transient_write_conflict(ValueError("database is locked"))


@pytest.mark.postgres
def test_pg_serialization_failure_is_a_transient_conflict() -> None:
    require_pg()
    with psycopg.connect(PG_URL, autocommit=True) as setup:
        setup.execute("DROP TABLE IF EXISTS conflict_probe")
        setup.execute("CREATE TABLE conflict_probe (id int primary key, n int)")
        setup.execute("INSERT INTO conflict_probe VALUES (1, 0)")
    try:
        a = psycopg.connect(PG_URL)
        b = psycopg.connect(PG_URL)
        a.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        b.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        a.execute("SELECT n FROM conflict_probe WHERE id = 1").fetchone()
        b.execute("SELECT n FROM conflict_probe WHERE id = 1").fetchone()
        a.execute("UPDATE conflict_probe SET n = 1 WHERE id = 1")
        a.commit()
        with pytest.raises(psycopg.Error) as info:
            b.execute("UPDATE conflict_probe SET n = 2 WHERE id = 1")
        b.rollback()
        a.close()
        b.close()
        assert info.value.sqlstate == "40001"
        assert is_transient_write_conflict(info.value)
        with psycopg.connect(PG_URL) as c, pytest.raises(psycopg.Error) as bad:
            c.execute("SELECT * FROM no_such_table_here")
        assert not is_transient_write_conflict(bad.value)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as setup:
            setup.execute("DROP TABLE IF EXISTS conflict_probe")


async def test_run_with_write_retry_retries_only_conflicts(db: Database, tmp_path: Path) -> None:
    await _create_things(db)
    path = tmp_path / "src.db"
    a = sqlite3.connect(path, timeout=0, isolation_level=None)
    b = sqlite3.connect(path, timeout=0, isolation_level=None)
    a.execute("BEGIN IMMEDIATE")
    try:
        b.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        busy = exc
    a.execute("ROLLBACK")
    a.close()
    b.close()
    calls = 0

    async def flaky(conn: object) -> int:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise busy
        return calls

    policy = WriteRetryPolicy(attempts=5, base_delay=0.001, max_delay=0.002)
    assert await run_with_write_retry(db, flaky, policy) == 3
    assert db.stats.write_conflicts == 2

    async def broken(conn: object) -> int:
        raise ValueError("not a conflict")

    with pytest.raises(ValueError, match="not a conflict"):
        await run_with_write_retry(db, broken, policy)


async def test_in_process_wakeup_fires_after_commit_only(db: Database) -> None:
    await _create_things(db)
    sub = db.bus.subscribe("things")
    with pytest.raises(RuntimeError):
        async with db.write_transaction() as conn:
            db.notify(conn, "things")
            raise RuntimeError("roll back")
    assert not await sub.wait(0.05)
    async with db.write_transaction() as conn:
        await conn.execute(insert(things).values(id=5))
        db.notify(conn, "things")
    assert await sub.wait(1.0)


@pytest.mark.postgres
async def test_notify_reaches_another_process_and_survives_a_drop(pg_schema_url: str) -> None:
    sender = Database(pg_schema_url)
    receiver = Database(pg_schema_url, notify_reconnect_delay=0.05)
    try:
        await receiver.start_listening()
        sub = receiver.bus.subscribe("things")
        async with sender.write_transaction() as conn:
            sender.notify(conn, "things")
        assert await sub.wait(5.0)
        listener = receiver._listener
        assert listener is not None
        drop_listen_connection(listener)

        async def reconnected() -> bool:
            return listener.reconnects >= 1 and listener.connected.is_set()

        await eventually(reconnected, what="the listener reconnected")
        sub.pending() and await sub.wait(0)  # the catch-up wake after reconnecting
        async with sender.write_transaction() as conn:
            sender.notify(conn, "things")
        assert await sub.wait(5.0)
    finally:
        await sender.dispose()
        await receiver.dispose()


@pytest.fixture
def other_schema_url(pg_schema_url: str) -> Iterator[str]:
    """A second fresh schema in the same database, its name too long for a channel name."""
    schema = f"t_{uuid.uuid4().hex}{uuid.uuid4().hex}"[:60]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield pg_schema_url.rsplit("%3D", 1)[0] + f"%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.mark.postgres
async def test_notify_wakes_its_own_schema_only(pg_schema_url: str, other_schema_url: str) -> None:
    sender_a, sender_b = Database(pg_schema_url), Database(other_schema_url)
    receiver_a, receiver_b = Database(pg_schema_url), Database(other_schema_url)
    try:
        await receiver_a.start_listening()
        await receiver_b.start_listening()
        assert receiver_a._listener is not None and receiver_b._listener is not None
        assert receiver_a._listener.channel != receiver_b._listener.channel
        things_a, things_b = receiver_a.bus.subscribe("things"), receiver_b.bus.subscribe("things")
        marker_b = receiver_b.bus.subscribe("marker")
        async with sender_a.write_transaction() as conn:
            sender_a.notify(conn, "things")
        assert await things_a.wait(5.0)
        # Notifications reach a listener in commit order: once B's later marker arrived, a
        # wake from A's commit would have arrived before it.
        async with sender_b.write_transaction() as conn:
            sender_b.notify(conn, "marker")
        assert await marker_b.wait(5.0)
        assert not things_b.pending()
        async with sender_b.write_transaction() as conn:
            sender_b.notify(conn, "things")
        assert await things_b.wait(5.0)
        assert not things_a.pending()
    finally:
        for database in (sender_a, sender_b, receiver_a, receiver_b):
            await database.dispose()


@pytest.mark.postgres
async def test_job_statements_notify_their_own_schema_only(
    pg_schema_url: str, other_schema_url: str
) -> None:
    """The jobs store's one-statement writes (`pg_notify` inside a CTE) name their schema too."""
    from deckyard.db.migrate import upgrade
    from deckyard.jobs.store import WAKE_EVENTS, NewJob, job_hand_off

    writer, receiver_a = Database(pg_schema_url), Database(pg_schema_url)
    receiver_b, marker = Database(other_schema_url), Database(other_schema_url)
    try:
        await upgrade(writer)
        await receiver_a.start_listening()
        await receiver_b.start_listening()
        events_a, events_b = (r.bus.subscribe(WAKE_EVENTS) for r in (receiver_a, receiver_b))
        marker_b = receiver_b.bus.subscribe("marker")
        now = datetime.now(UTC)
        new = NewJob(kind="k", queue="q", payload={}, max_attempts=1, run_at=now)
        await job_hand_off(writer, new, now, "owner", 30.0)
        assert await events_a.wait(5.0)
        async with marker.write_transaction() as conn:
            marker.notify(conn, "marker")
        assert await marker_b.wait(5.0)
        assert not events_b.pending()
    finally:
        for database in (writer, receiver_a, receiver_b, marker):
            await database.dispose()


async def test_instrumentation_counts_per_loop(db_url: str) -> None:
    from deckyard.db import current_loop

    db = Database(db_url, instrument=True)
    try:
        await _create_things(db)
        assert db.counter is not None
        db.counter.reset()
        token = current_loop.set("probe")
        try:
            async with db.write_transaction() as conn:
                await conn.execute(insert(things).values(id=1))
                await conn.execute(update(things).where(things.c.id == 99).values(n=1))
            async with db.read_connection() as conn:
                await conn.execute(select(things))
        finally:
            current_loop.reset(token)
        probe = db.counter.snapshot()["probe"]
        assert probe["writes"] == 2
        assert probe["zero_row_writes"] == 1
        assert probe["write_transactions"] == 1
        assert probe["reads"] == 1
    finally:
        await db.dispose()


async def test_admission_lock_serialises_writers(db: Database) -> None:
    order: list[str] = []
    first_has_lock = asyncio.Event()

    async def first() -> None:
        async with db.write_transaction() as conn:
            await db.acquire_admission_lock(conn)
            first_has_lock.set()
            order.append("first-in")
            await asyncio.sleep(0.2)
            order.append("first-out")

    async def second() -> None:
        await first_has_lock.wait()
        async with db.write_transaction() as conn:
            await db.acquire_admission_lock(conn)
            order.append("second-in")

    await asyncio.gather(first(), second())
    assert order == ["first-in", "first-out", "second-in"]


async def test_admission_lock_needs_a_write_transaction(db: Database) -> None:
    async with db.read_transaction() as conn:
        with pytest.raises(RuntimeError, match="write_transaction"):
            await db.acquire_admission_lock(conn)


async def test_check_writable(db: Database) -> None:
    await db.check_writable()


async def test_now_helpers_are_utc() -> None:
    assert datetime.now(UTC).tzinfo is UTC
