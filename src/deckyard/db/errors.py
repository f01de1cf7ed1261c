"""Classifying driver errors: the only place that looks inside them."""

from __future__ import annotations

import errno
import sqlite3
import sys
from collections.abc import Iterator
from types import ModuleType

SQLITE_BUSY = 5
SQLITE_LOCKED = 6
PG_SERIALIZATION_FAILURE = "40001"
PG_DEADLOCK_DETECTED = "40P01"
SQLITE_FULL = 13
PG_DISK_FULL = "53100"
PG_OUT_OF_MEMORY = "53200"
PG_CONNECTION_CLASS = "08"
PG_SHUTDOWN_STATES = ("57P01", "57P02", "57P03")
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


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


def _psycopg() -> ModuleType | None:
    """psycopg, once something loaded it; before that no psycopg error can exist (a Lite
    process never loads the driver)."""
    return sys.modules.get("psycopg")


def _pg_error(exc: BaseException, kind: str = "Error") -> bool:
    pg = _psycopg()
    return pg is not None and isinstance(exc, getattr(pg, kind))


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
        if _pg_error(cur) and getattr(cur, "sqlstate", None) in (
            PG_SERIALIZATION_FAILURE,
            PG_DEADLOCK_DETECTED,
        ):
            return True
    return False


def is_storage_full(exc: BaseException) -> bool:
    """True when a write failed because the disk (or quota) is full.

    SQLite: SQLITE_FULL ("database or disk is full"). PostgreSQL: disk_full (53100).
    The file system: ENOSPC or EDQUOT (an artefact write).
    """
    for cur in _chain(exc):
        if isinstance(cur, sqlite3.Error):
            code = getattr(cur, "sqlite_errorcode", None)
            if code is not None and code & 0xFF == SQLITE_FULL:
                return True
        if _pg_error(cur) and getattr(cur, "sqlstate", None) == PG_DISK_FULL:
            return True
        if isinstance(cur, OSError) and cur.errno in _FULL_ERRNOS:
            return True
    return False


def is_connection_lost(exc: BaseException) -> bool:
    """True when the database connection broke under a request (killed, failover, restart).

    PostgreSQL: a connection exception (class 08), an administrator or crash shutdown
    (57P01-57P03, what `pg_terminate_backend` sends), or a driver error with no server answer.
    A fresh connection may work, so the request may be retried.
    """
    for cur in _chain(exc):
        if getattr(cur, "connection_invalidated", False):
            return True
        if _pg_error(cur, "OperationalError"):
            state = getattr(cur, "sqlstate", None)
            if state is None or state.startswith(PG_CONNECTION_CLASS):
                return True
            if state in PG_SHUTDOWN_STATES:
                return True
        if _pg_error(cur, "InterfaceError"):
            return True
    return False
