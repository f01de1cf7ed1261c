"""Classifying driver errors: the only place that looks inside them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import psycopg

SQLITE_BUSY = 5
SQLITE_LOCKED = 6
PG_SERIALIZATION_FAILURE = "40001"
PG_DEADLOCK_DETECTED = "40P01"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        todo.extend([getattr(cur, "orig", None), cur.__cause__, cur.__context__])


def is_transient_write_conflict(exc: BaseException) -> bool:
    """True when a write failed only because another writer held the lock; retrying may work.

    SQLite: SQLITE_BUSY or SQLITE_LOCKED (by error code, including extended codes).
    PostgreSQL: serialization failure (40001) or deadlock (40P01).
    """
    for cur in _chain(exc):
        if isinstance(cur, sqlite3.Error):
            code = getattr(cur, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED):
                return True
        if isinstance(cur, psycopg.Error) and cur.sqlstate in (
            PG_SERIALIZATION_FAILURE,
            PG_DEADLOCK_DETECTED,
        ):
            return True
    return False
