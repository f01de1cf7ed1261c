"""Idle is silent: with no work, no loop writes (instrumented and black-box), on both databases."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import psycopg

from deckyard.db import Database
from deckyard.db.migrate import upgrade
from deckyard.jobs import JobContext, JobStatus, Runtime
from tests.conftest import PG_URL, schema_of
from tests.helpers.runtime import fast_settings

IDLE_SECONDS = 5.0


def _black_box_reader(url: str) -> tuple[object, ...]:
    """A reading that changes whenever anything writes to the database."""
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        conn = sqlite3.connect(path)
        try:
            return (conn.execute("PRAGMA data_version").fetchone()[0],)
        finally:
            conn.close()
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
            " WHERE schemaname = %s",
            (schema_of(url),),
        ).fetchone()
        return (row[0] if row else None,)


class _Watcher:
    """Keeps one SQLite connection open so `data_version` compares across the window."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn = (
            sqlite3.connect(url.removeprefix("sqlite:///")) if url.startswith("sqlite") else None
        )

    def read(self) -> tuple[object, ...]:
        if self.conn is not None:
            return (self.conn.execute("PRAGMA data_version").fetchone()[0],)
        return _black_box_reader(self.url)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


async def test_idle_runtime_writes_nothing(db_url: str, tmp_path: Path) -> None:
    setup = Database(db_url)
    await upgrade(setup)
    await setup.dispose()  # closing its connections also flushes PostgreSQL's table statistics
    await asyncio.sleep(0.6)

    settings = fast_settings(
        instrument_sql=True,
        job_poll_interval_seconds=0.05,
        job_idle_poll_ceiling_seconds=0.05,
        job_claim_idle_ceiling_seconds=0.05,
    )
    db = Database.from_settings(settings, url=db_url)
    rt = Runtime(db, settings=settings, migrate=False)
    started = asyncio.Event()

    @rt.handler("a", queue="alpha")
    async def a(ctx: JobContext) -> None:
        started.set()

    @rt.handler("b", queue="beta")
    async def b(ctx: JobContext) -> None:
        return None

    rt.periodic("0 0 1 1 *", "b", name="new-year")
    rt.worker(["alpha"], concurrency=2)
    rt.worker(["beta"], concurrency=2)
    watcher = _Watcher(db_url)
    try:
        before = watcher.read()
        await rt.start()
        await asyncio.sleep(IDLE_SECONDS)
        assert db.counter is not None
        counts = db.counter.snapshot()
        ticks = sum(loop.stats.ticks for loop in rt.loops)
        for name, c in counts.items():
            assert c["writes"] == 0, f"{name} wrote while idle: {c}"
            assert c["write_transactions"] == 0 and c["write_begins"] == 0, (name, c)
        assert ticks >= 200, f"only {ticks} ticks: the loops did not really run"
        assert all(loop.alive for loop in rt.loops)
        reads_per_minute = db.counter.total("reads") * 60 / IDLE_SECONDS
        assert reads_per_minute > 0  # the loops did look (the benchmark reports defaults)

        db.counter.reset()
        job = await rt.enqueue("a", queue="alpha")
        await asyncio.wait_for(started.wait(), 1.0)
        done = await rt.wait(job.id, timeout=5)
        assert done.status == JobStatus.SUCCEEDED
        assert db.counter.total("writes") > 0
        await rt.stop()
        await db.dispose()
        await asyncio.sleep(0.6)
        after = watcher.read()
        assert after != before  # the black box does see real writes
    finally:
        if rt.started:
            await rt.stop()
        await db.dispose()
        watcher.close()


async def test_idle_window_is_silent_in_the_black_box(db_url: str) -> None:
    """The same idle window, judged only from outside the process."""
    setup = Database(db_url)
    await upgrade(setup)
    await setup.dispose()
    await asyncio.sleep(0.6)
    settings = fast_settings(
        job_poll_interval_seconds=0.05,
        job_idle_poll_ceiling_seconds=0.05,
        job_claim_idle_ceiling_seconds=0.05,
    )
    rt = Runtime(db_url, settings=settings, migrate=False)

    @rt.handler("a", queue="alpha")
    async def a(ctx: JobContext) -> None:
        return None

    rt.worker(["alpha"])
    watcher = _Watcher(db_url)
    try:
        before = watcher.read()
        async with rt:
            await asyncio.sleep(2.0)
        await asyncio.sleep(0.6)
        assert watcher.read() == before
    finally:
        watcher.close()
