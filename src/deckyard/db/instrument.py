"""Opt-in statement counters per loop: reads, writes, write transactions, zero-row writes, time.

The loop a statement belongs to comes from the `current_loop` context variable, which the `Loop`
runner sets around each tick. Nothing is attached to the engine unless instrumentation is on,
so it costs nothing when off.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

current_loop: ContextVar[str] = ContextVar("deckyard_current_loop", default="request")

_WRITE = re.compile(r"^\s*(?:INSERT|UPDATE|DELETE|REPLACE|UPSERT)\b", re.IGNORECASE)
_CTE_WRITE = re.compile(r"[()]\s*(?:INSERT|UPDATE|DELETE)\b", re.IGNORECASE)
"""A write behind a `WITH`: the main statement (`) UPDATE`) or a data-modifying CTE (`( UPDATE`)."""
_CONTROL = re.compile(r"^\s*(?:BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA)\b", re.IGNORECASE)
_NOTIFY = re.compile(r"pg_notify\s*\(", re.IGNORECASE)


def is_write_statement(sql: str) -> bool:
    """True for INSERT/UPDATE/DELETE statements, including those behind or inside a `WITH`."""
    if _WRITE.match(sql):
        return True
    return sql.lstrip()[:4].upper() == "WITH" and bool(_CTE_WRITE.search(sql))


@dataclass
class LoopCounters:
    """Statement counts for one loop."""

    reads: int = 0
    writes: int = 0
    zero_row_writes: int = 0
    write_transactions: int = 0
    write_begins: int = 0
    notifies: int = 0
    seconds: float = 0.0


class StatementCounter:
    """Counts statements per loop on an engine once `attach`ed."""

    def __init__(self) -> None:
        self.by_loop: dict[str, LoopCounters] = defaultdict(LoopCounters)
        self._window = 0
        """Bumped by `reset`: a transaction counts in the window where its writes ran."""

    def attach(self, engine: Engine) -> None:
        """Start counting statements on `engine`."""
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        event.listen(engine, "commit", self._commit)
        event.listen(engine, "rollback", self._rollback)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """A copy of the counters, keyed by loop name."""
        return {name: asdict(c) for name, c in self.by_loop.items()}

    def total(self, field: str, *, exclude: tuple[str, ...] = ()) -> float:
        """The sum of one counter across loops, optionally leaving some loops out."""
        return float(sum(getattr(c, field) for n, c in self.by_loop.items() if n not in exclude))

    def reset(self) -> None:
        """Forget everything counted so far.

        A transaction that wrote before the reset and commits after it is not counted after it:
        its writes were counted (and forgotten) before, so a quiet window cannot show a write
        transaction without a write (as a warm-up's last write committing late once did).
        """
        self.by_loop.clear()
        self._window += 1

    def note_write_begin(self) -> None:
        """Record that a write transaction began (called by `Database.write_transaction`)."""
        self.by_loop[current_loop.get()].write_begins += 1

    def _before(self, conn: Connection, cursor: Any, sql: str, *args: Any) -> None:
        conn.info["dy_t0"] = time.perf_counter()

    def _after(self, conn: Connection, cursor: Any, sql: str, *args: Any) -> None:
        seconds = time.perf_counter() - conn.info.pop("dy_t0", time.perf_counter())
        if self.note_statement(sql, cursor.rowcount, seconds):
            conn.info["dy_wrote"] = self._window

    def note_statement(self, sql: str, rowcount: int, seconds: float) -> bool:
        """Count one statement run outside the engine's events; True when it is a write.

        `Database.write_statement` runs its statements on plain psycopg connections and counts
        them here (each one is its own transaction, so a write also counts as one).
        """
        counters = self.by_loop[current_loop.get()]
        counters.seconds += seconds
        if _CONTROL.match(sql):
            return False
        if is_write_statement(sql):
            counters.writes += 1
            if rowcount == 0:
                counters.zero_row_writes += 1
            return True
        if _NOTIFY.search(sql):
            counters.notifies += 1
        else:
            counters.reads += 1
        return False

    def note_write_transaction(self) -> None:
        """Count a committed write transaction that the engine's events did not see."""
        self.by_loop[current_loop.get()].write_transactions += 1

    def _commit(self, conn: Connection) -> None:
        if conn.info.pop("dy_wrote", None) == self._window:
            self.by_loop[current_loop.get()].write_transactions += 1

    def _rollback(self, conn: Connection) -> None:
        conn.info.pop("dy_wrote", None)
