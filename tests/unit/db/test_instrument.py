"""Which statements the instrumentation counts as writes."""

from __future__ import annotations

import pytest

from deckyard.db.instrument import is_write_statement


@pytest.mark.parametrize(
    ("sql", "write"),
    [
        ("UPDATE jobs SET a = 1", True),
        ("  insert into t values (1)", True),
        ("WITH x AS (SELECT 1) UPDATE jobs SET a = 1", True),
        ("\nWITH done AS (\n  UPDATE jobs SET a = 1 RETURNING id) SELECT * FROM done", True),
        ("WITH j AS (INSERT INTO t VALUES (1) RETURNING id) SELECT id FROM j", True),
        ("WITH x AS (SELECT 1) SELECT * FROM x", False),
        ("SELECT id FROM jobs WHERE id IN (SELECT id FROM t)", False),
    ],
)
def test_is_write_statement(sql: str, write: bool) -> None:
    assert is_write_statement(sql) is write
