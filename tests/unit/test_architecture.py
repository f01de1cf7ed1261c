"""Architecture rules checked on the syntax tree of `src/deckyard` (never on comment text)."""

from __future__ import annotations

import ast
from pathlib import Path

from sqlalchemy import DateTime

import deckyard.migrations.models  # noqa: F401
from deckyard.db import UTCDateTime, metadata

SRC = Path(__file__).resolve().parents[2] / "src" / "deckyard"
DRIVERS = {"sqlite3", "aiosqlite", "psycopg", "psycopg_pool", "asyncpg"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (p.relative_to(SRC).as_posix(), ast.parse(p.read_text(), str(p)))
        for p in sorted(SRC.rglob("*.py"))
    ]


def _in_db(rel: str) -> bool:
    return rel.startswith("db/")


def test_only_the_db_package_imports_drivers() -> None:
    offenders = []
    for rel, tree in _modules():
        if _in_db(rel):
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{rel}: {n}" for n in names if n.split(".")[0] in DRIVERS]
    assert offenders == []


def test_only_db_and_migration_helpers_ask_for_the_dialect() -> None:
    offenders = []
    for rel, tree in _modules():
        if _in_db(rel) or rel == "migrations/helpers.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                if node.attr == "driver_connection":
                    offenders.append(f"{rel}:{node.lineno} driver_connection")
                base = node.value
                base_name = getattr(base, "attr", getattr(base, "id", ""))
                if node.attr == "name" and base_name == "dialect":
                    offenders.append(f"{rel}:{node.lineno} dialect.name")
            if isinstance(node, ast.keyword) and node.arg in ("sqlite_where", "postgresql_where"):
                offenders.append(f"{rel}:{node.value.lineno} {node.arg}")
    assert offenders == []


def test_transient_conflict_check_is_defined_once() -> None:
    defs = [
        rel
        for rel, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name == "is_transient_write_conflict"
    ]
    assert defs == ["db/errors.py"]


def test_no_model_column_uses_a_bare_datetime() -> None:
    bare = [
        f"{t.name}.{c.name}"
        for t in metadata.sorted_tables
        for c in t.columns
        if isinstance(c.type, DateTime) and not isinstance(c.type, UTCDateTime)
    ]
    assert bare == []
    assert any(isinstance(c.type, UTCDateTime) for t in metadata.sorted_tables for c in t.columns)
