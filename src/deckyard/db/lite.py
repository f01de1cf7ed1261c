"""The Lite boundary: a SQLite file database belongs to exactly one process."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import URL

from deckyard.db.engine import sqlite_file


class LiteLockError(Exception):
    """Another process owns this SQLite database file."""


def lock_path_for(db_file: Path) -> Path:
    """The lock file that sits next to a SQLite database file."""
    return db_file.with_name(db_file.name + ".lock")


@contextmanager
def lite_lock(url: str | URL, *, role: str) -> Iterator[Path | None]:
    """Hold an exclusive OS lock on the SQLite file behind `url` for the duration.

    Yields the lock file, or None when `url` is PostgreSQL or in-memory (no limit there). The
    lock is an `flock` on `<db>.lock`, so it vanishes with the process however it dies; the file
    records who holds it so the refusal can name them.
    """
    db_file = sqlite_file(url)
    if db_file is None:
        yield None
        return
    db_file.parent.mkdir(parents=True, exist_ok=True)
    path = lock_path_for(db_file)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip() or "unknown process"
            raise LiteLockError(
                f"the SQLite database {db_file} is already owned by another Deckyard process "
                f"({holder}). A SQLite file belongs to one process: stop that process, use its "
                f"HTTP API instead, or move to PostgreSQL to run more than one process."
            ) from None
        info = f"pid {os.getpid()}, {role}, since {time.strftime('%Y-%m-%d %H:%M:%S')}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, info.encode(), 0)
        yield path
    finally:
        os.close(fd)


def seal_sqlite_file(db_file: Path) -> None:
    """Fold a closed SQLite database's write-ahead log into its file and switch the log off,
    leaving one self-contained file that can be copied (the next opening turns WAL back on)."""
    conn = sqlite3.connect(db_file)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        db_file.with_name(db_file.name + suffix).unlink(missing_ok=True)
