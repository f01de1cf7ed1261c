"""Scratch databases for `bench/queue_scale.py`, and the bulk SQL that fills their `jobs` table.

A scratch database is a WAL SQLite file in a temporary folder, or a PostgreSQL database created
for the run (not a schema: NOTIFY is per database, so other work on the server's `test`
database cannot wake this run's workers) and dropped with `WITH (FORCE)` at the end. Its schema
comes from Deckyard's own migrations.

The rows are written by one INSERT ... SELECT per block (`generate_series` on PostgreSQL, a
recursive CTE on SQLite) in the shapes the runtime writes: the same status, queue, kind, dedupe
key and timestamp columns, datetimes in each database's own form (`timestamptz`; naive UTC text
with microseconds on SQLite, as `UTCDateTime` stores them), so every index is what production
builds. The history covers the last seven days (the default `job_retention_seconds`), so
nothing in it is prunable until a run asks for a shorter retention.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

PG_URL = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
QUEUE, KIND = "bench", "noop"
"""The queue the measured workers serve, and its no-op kind."""
DAY_US = 86_400 * 1_000_000


@dataclass(frozen=True)
class Block:
    """A run of pending jobs one INSERT writes: `n` jobs of `kind` on `queue`.

    `run_at` starts at `run_from_us` (epoch microseconds) and steps by `run_step_us`; `attempt`
    1 marks retries waiting for their backoff (`started_at` and an error set, as `job_fail`
    leaves them). Every `dedupe_every`-th job has a dedupe key made unique by `tag`.
    """

    queue: str
    kind: str
    n: int
    run_from_us: int
    run_step_us: int
    attempt: int = 0
    dedupe_every: int = 0
    tag: str = "fill"


def pending_blocks(total: int, now_us: int, due_share: float = 0.5) -> list[Block]:
    """The pending part of the big table: `total` jobs, `due_share` of them due on `QUEUE`.

    The rest is what a busy node also holds: retries of the measured kind waiting for their
    backoff (up to a day ahead), and screenshot, deck and AI jobs on queues no measured worker
    serves (due and scheduled). Their claim-index entries sit next to the measured queue's.
    """
    due = round(total * due_share)
    retry = total // 10
    other = total - due - retry
    render, decks = other // 2, other // 4
    ai = other - render - decks
    minute = 60 * 1_000_000
    return [
        Block(QUEUE, KIND, due, now_us - 10 * minute, 10 * minute // max(due, 1), dedupe_every=5),
        Block(QUEUE, KIND, retry, now_us + minute, DAY_US // max(retry, 1), attempt=1),
        Block(
            "decks",
            "page.screenshot",
            render,
            now_us - 5 * minute,
            6 * minute // max(render, 1),
            0,
            2,
        ),
        Block("decks", "deck.build", decks, now_us - 5 * minute, DAY_US // max(decks, 1), 0, 3),
        Block("ai", "ai.page_edit", ai, now_us - 5 * minute, 10 * minute // max(ai, 1)),
    ]


class Scratch:
    """One scratch database for one dialect; `close()` removes it."""

    def __init__(self, dialect: str, label: str) -> None:
        self.dialect = dialect
        self._tmp = tempfile.TemporaryDirectory(prefix=f"dyscale-{label}-")
        if dialect == "sqlite":
            self.path = f"{self._tmp.name}/jobs.db"
            self.url = f"sqlite:///{self.path}"
            return
        self.name = f"dy_queue_scale_{label}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        params = conninfo_to_dict(PG_URL)
        params["dbname"] = self.name
        self.conninfo = make_conninfo(**{k: str(v) for k, v in params.items()})
        base = PG_URL.rsplit("/", 1)[0]
        self.url = f"{base}/{self.name}"

    def sql(self, statement: str, *, fetch: bool = False) -> list[tuple[Any, ...]]:
        """Run one statement on a connection of its own (autocommit); rows when `fetch`."""
        if self.dialect == "sqlite":
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                cur = conn.execute(statement)
                return cur.fetchall() if fetch else []
            finally:
                conn.close()
        with psycopg.connect(self.conninfo, autocommit=True) as pg:
            cur = pg.execute(statement)
            return cur.fetchall() if fetch else []

    def count(self, where: str) -> int:
        """Rows of `jobs` matching `where`."""
        return int(self.sql(f"SELECT count(*) FROM jobs WHERE {where}", fetch=True)[0][0])

    def close(self) -> None:
        if self.dialect != "sqlite":
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        self._tmp.cleanup()


# --- SQL ------------------------------------------------------------------------------------
# One text for both dialects, with a few functions spelled per dialect. Numbers are formatted
# in as integers; nothing else is interpolated.


def _rows(dialect: str, n: int) -> str:
    if dialect == "sqlite":
        return f"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n})"
    return f"WITH RECURSIVE g(i) AS (SELECT generate_series(CAST(1 AS bigint), {n}))"


def _ts(dialect: str, us: str) -> str:
    """A UTCDateTime value from an integer expression of epoch microseconds."""
    if dialect == "sqlite":
        return (
            f"(strftime('%Y-%m-%d %H:%M:%S', ({us}) / 1000000, 'unixepoch')"
            f" || printf('.%06d', ({us}) % 1000000))"
        )
    return f"(timestamptz 'epoch' + ({us}) * interval '1 microsecond')"


def _hex(dialect: str, salt: int) -> str:
    """64 hex digits derived from `i` and `salt`, spread like a content digest."""
    if dialect == "sqlite":
        parts = [f"((i + {salt}) * {m} % 4294967296)" for m in _MULTIPLIERS]
        return f"printf('{'%08x' * 8}', {', '.join(parts)})"
    return f"(md5((i + {salt})::text) || md5((-(i + {salt}))::text))"


_MULTIPLIERS = (2654435761, 2246822519, 3266489917, 668265263, 374761393, 1181783497, 40503, 97)


def _json(dialect: str) -> str:
    return "json_object" if dialect == "sqlite" else "jsonb_build_object"


def finished_sql(dialect: str, n: int, first_us: int, step_us: int) -> str:
    """`n` finished jobs created from `first_us` every `step_us`, oldest first.

    60 % screenshots (half with a dedupe key, results naming a PNG), 25 % deck builds, 10 % AI
    edits, 5 % the measured kind; 94 % succeeded, 4 % failed (attempts spent, error kept), 2 %
    cancelled. Each ran for 1-2.6 s on one of four nodes.
    """
    js, hx = _json(dialect), _hex(dialect, 0)
    t = _ts
    d = dialect
    return f"""
{_rows(d, n)},
h AS (
    SELECT i, i % 100 AS r, {hx} AS hex,
        {first_us} + i * {step_us} AS created,
        {first_us} + i * {step_us} + 1000000 + (i % 9) * 200000 AS finished,
        CASE WHEN (i / 100) % 50 < 47 THEN 'succeeded'
             WHEN (i / 100) % 50 < 49 THEN 'failed' ELSE 'cancelled' END AS status
    FROM g
)
INSERT INTO jobs (queue, kind, payload, status, priority, run_at, attempt, max_attempts,
    lease_owner, dedupe_key, workspace_id, result, error_code, error_message,
    created_at, updated_at, started_at, finished_at)
SELECT
    CASE WHEN r < 60 THEN 'render' WHEN r < 85 THEN 'decks'
         WHEN r < 95 THEN 'ai' ELSE '{QUEUE}' END,
    CASE WHEN r < 60 THEN 'screenshot' WHEN r < 85 THEN 'deck.build'
         WHEN r < 95 THEN 'ai.page_edit' ELSE '{KIND}' END,
    CASE WHEN r < 60 THEN {js}('page', hex, 'width', 1280, 'height', 720, 'format', 'png')
         WHEN r < 85 THEN {js}('deck_id', i % 5000, 'version', i % 37)
         WHEN r < 95 THEN {js}('page_id', i % 20000, 'prompt', 'tighten the title')
         ELSE {js}() END,
    status, 0, {t(d, "created")},
    CASE WHEN status = 'failed' THEN (CASE WHEN r < 60 THEN 5 WHEN r < 85 THEN 3 ELSE 4 END)
         ELSE 1 END,
    CASE WHEN r < 60 THEN 5 WHEN r < 85 THEN 3 ELSE 4 END,
    'node-' || (i % 4) || ':4242:5f3a9c1e',
    CASE WHEN r < 30 THEN 'screenshot:ws-' || (i % 200) || ':' || hex
         WHEN r >= 60 AND r < 70 THEN 'deck.build:ws-' || (i % 200) || ':' || substr(hex, 1, 16)
    END,
    'ws-' || (i % 200),
    CASE WHEN status <> 'succeeded' THEN NULL
         WHEN r < 60 THEN {js}('artifact_key', 'png/' || hex || '.png', 'bytes', 150000 + i % 9999)
         ELSE {js}('artifact_key', 'json/' || hex || '.json', 'bytes', 2000 + i % 999) END,
    CASE status WHEN 'failed' THEN 'HANDLER_ERROR' WHEN 'cancelled' THEN 'CANCELLED' END,
    CASE status WHEN 'failed' THEN 'renderer answered 500'
                WHEN 'cancelled' THEN 'cancelled by a client' END,
    {t(d, "created")}, {t(d, "finished")}, {t(d, "created + 40000")}, {t(d, "finished")}
FROM h
"""


def pending_sql(dialect: str, block: Block, now_us: int) -> str:
    """The pending jobs of `block`, created an hour to a minute before `now_us`."""
    js, hx = _json(dialect), _hex(dialect, zlib.crc32(block.tag.encode()) % 1_000_003)
    t, d = _ts, dialect
    created = f"{now_us - 3600 * 1_000_000} + i * {3540 * 1_000_000 // max(block.n, 1)}"
    retry = block.attempt > 0
    dedupe = (
        f"CASE WHEN i % {block.dedupe_every} = 0 THEN "
        f"'{block.kind}:ws-' || (i % 200) || ':{block.tag}:' || hex END"
        if block.dedupe_every
        else "NULL"
    )
    return f"""
{_rows(d, block.n)},
h AS (SELECT i, {hx} AS hex, {block.run_from_us} + i * {block.run_step_us} AS run_us FROM g)
INSERT INTO jobs (queue, kind, payload, status, priority, run_at, attempt, max_attempts,
    lease_owner, dedupe_key, workspace_id, error_code, error_message,
    created_at, updated_at, started_at)
SELECT '{block.queue}', '{block.kind}', {js}('page', hex, 'width', 1280, 'height', 720),
    'pending', 0, {t(d, "run_us")}, {block.attempt}, 3,
    {"'node-' || (i % 4) || ':4242:5f3a9c1e'" if retry else "NULL"},
    {dedupe}, 'ws-' || (i % 200),
    {"'HANDLER_ERROR'" if retry else "NULL"}, {"'renderer answered 500'" if retry else "NULL"},
    {t(d, created)}, {t(d, created + " + 30000000" if retry else created)},
    {t(d, created + " + 1000000") if retry else "NULL"}
FROM h
"""


def events_sql(dialect: str) -> str:
    """The events the runtime writes for the filled jobs: `started` for every attempt begun,
    then the terminal status, or `retry_scheduled` for a retry waiting; by job, in order."""
    js = _json(dialect)
    return f"""
INSERT INTO job_events (job_id, created_at, type, data)
SELECT j.id,
    CASE x.k WHEN 0 THEN j.started_at ELSE COALESCE(j.finished_at, j.updated_at) END,
    CASE x.k WHEN 0 THEN 'started' WHEN 1 THEN
        CASE WHEN j.status = 'pending' THEN 'retry_scheduled' ELSE j.status END END,
    {js}('attempt', j.attempt)
FROM jobs j CROSS JOIN (SELECT 0 AS k UNION ALL SELECT 1) AS x
WHERE j.started_at IS NOT NULL
ORDER BY j.id, x.k
"""


def fill(scratch: Scratch, finished: int, pending: int, now_us: int) -> dict[str, float]:
    """Write the big table: `finished` jobs over the last 7 days, then `pending` (see
    `pending_blocks`), then their events; returns seconds per step.

    PostgreSQL: the events INSERT runs with `session_replication_role = replica` (no
    foreign-key trigger per row: every row names a job just written), and the tables are
    `VACUUM ANALYZE`d afterwards, as autovacuum would have left a table this old; the
    statistics are what the planner needs to see a 1.1M-row table as one. SQLite: nothing
    runs ANALYZE in Deckyard, so nothing does here either.
    """
    d = scratch.dialect
    step = (7 * DAY_US - 3600 * 1_000_000) // max(finished, 1)
    first = now_us - 7 * DAY_US + 1800 * 1_000_000
    took: dict[str, float] = {}
    began = time.perf_counter()
    scratch.sql(finished_sql(d, finished, first, step))
    took["finished_s"] = time.perf_counter() - began
    began = time.perf_counter()
    for block in pending_blocks(pending, now_us):
        scratch.sql(pending_sql(d, block, now_us))
    took["pending_s"] = time.perf_counter() - began
    began = time.perf_counter()
    if d == "sqlite":
        scratch.sql(events_sql(d))
    else:
        with psycopg.connect(scratch.conninfo, autocommit=True) as pg:
            pg.execute("SET session_replication_role = replica")
            pg.execute(events_sql(d))
    took["events_s"] = time.perf_counter() - began
    if d != "sqlite":
        began = time.perf_counter()
        scratch.sql("VACUUM ANALYZE jobs")
        scratch.sql("VACUUM ANALYZE job_events")
        took["vacuum_analyze_s"] = time.perf_counter() - began
    return took


DUE_ON_QUEUE = f"queue = '{QUEUE}' AND status = 'pending' AND attempt = 0"


def top_up(scratch: Scratch, due: int, now_us: int, tag: str) -> int:
    """Add due jobs on `QUEUE` until `due` of them wait; returns how many were added."""
    missing = due - scratch.count(DUE_ON_QUEUE)
    if missing > 0:
        block = Block(QUEUE, KIND, missing, now_us - 1_000_000, 0, dedupe_every=5, tag=tag)
        scratch.sql(pending_sql(scratch.dialect, block, now_us))
    return max(missing, 0)
