"""A migrated, empty SQLite database kept in the cache and copied for every `deckyard render`.

A run works on a throwaway database. Migrating a fresh one from nothing took about 0.8 s of
every run on 2 cores, on the path before the first page can render (the node starts only
once it is migrated); copying a database migrated once takes milliseconds. The template is
named after the migrations it holds (a hash of the package version and every migration file),
so a changed chain builds a new one, and the older ones are deleted when it is written. It is
built beside its final name and renamed into place, so runs racing to build it never see half
a file. `--database` runs migrate their own database as before.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from deckyard import __version__
from deckyard.db import Database
from deckyard.db.lite import seal_sqlite_file
from deckyard.db.migrate import upgrade

PREFIX = "schema-"
VERSIONS = Path(__file__).resolve().parent.parent / "migrations" / "versions"


def migrations_key() -> str:
    """What the template holds: the package version and every migration file's name and bytes."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(VERSIONS.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def template_path(cache: Path) -> Path:
    """Where the template for the current migrations lives under `cache`."""
    return cache / f"{PREFIX}{migrations_key()}.db"


async def copy_migrated(cache: Path, dest: Path) -> None:
    """Put a migrated, empty SQLite database at `dest`, building the cached template first if
    there is none for the current migrations."""
    template = template_path(cache)
    if not template.exists():
        await _build(template)
    shutil.copyfile(template, dest)


async def _build(template: Path) -> None:
    building = template.with_name(f".{template.stem}-{os.getpid()}.building")
    for leftover in _files_of(building):
        leftover.unlink(missing_ok=True)
    db = Database(f"sqlite:///{building}")
    try:
        await upgrade(db)
    finally:
        await db.dispose()
    seal_sqlite_file(building)
    os.replace(building, template)
    for stale in template.parent.glob(f"{PREFIX}*.db"):
        if stale != template:
            stale.unlink(missing_ok=True)


def _files_of(database: Path) -> list[Path]:
    return [database, *(database.with_name(database.name + s) for s in ("-wal", "-shm"))]
