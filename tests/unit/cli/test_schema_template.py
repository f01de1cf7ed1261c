"""`deckyard render`'s cached migrated database: built once per migration chain, copied per run."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from deckyard.cli import schema_template
from deckyard.cli.schema_template import copy_migrated, migrations_key, template_path
from deckyard.db.migrate import head_revision


def _revision(database: Path) -> str:
    with closing(sqlite3.connect(database)) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return str(revision)


async def test_the_template_is_built_once_and_each_run_gets_a_migrated_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    builds: list[Path] = []
    build = schema_template._build

    async def counted(template: Path) -> None:
        builds.append(template)
        await build(template)

    monkeypatch.setattr(schema_template, "_build", counted)
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    await copy_migrated(cache, first)
    await copy_migrated(cache, second)

    assert builds == [template_path(cache)]
    assert _revision(first) == _revision(second) == head_revision()
    with closing(sqlite3.connect(first)) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"jobs", "render_requests", "decks", "page_versions"} <= tables
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    # one self-contained file: no log beside it, nothing half-built left
    assert sorted(p.name for p in cache.iterdir()) == [template_path(cache).name]


async def test_a_changed_migration_chain_gets_a_new_template_and_the_old_one_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    await copy_migrated(cache, tmp_path / "a.db")
    old = template_path(cache)

    versions = tmp_path / "versions"
    shutil.copytree(schema_template.VERSIONS, versions, ignore=shutil.ignore_patterns("__py*"))
    monkeypatch.setattr(schema_template, "VERSIONS", versions)
    assert template_path(cache) == old  # same files, same key
    (versions / "9999_later.py").write_text('"""A migration added later."""\n')
    new_key = migrations_key()

    await copy_migrated(cache, tmp_path / "b.db")
    assert [p.name for p in cache.iterdir()] == [f"schema-{new_key}.db"]
    assert old.name != f"schema-{new_key}.db"
