"""Which statements the instrumentation counts as writes, and in which window."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine

from deckyard.db.instrument import StatementCounter, is_write_statement


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


def test_a_transaction_counts_in_the_window_where_it_wrote() -> None:
    engine = create_engine("sqlite://")
    counter = StatementCounter()
    counter.attach(engine)
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        conn.commit()
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        counter.reset()  # a window opens between a write and its commit
        conn.commit()
        assert counter.total("write_transactions") == 0
        assert counter.total("writes") == 0
        conn.exec_driver_sql("INSERT INTO t VALUES (2)")
        conn.commit()
        assert counter.total("write_transactions") == 1
        assert counter.total("writes") == 1
    engine.dispose()
