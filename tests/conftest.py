"""Shared fixtures: the `db` fixture runs every storage test on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool

from deckyard.db import Database
from deckyard.db.migrate import upgrade
from tests.helpers.server import Server

if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    # Each pytest-xdist worker is its own session: the marker its Chromium processes inherit
    # (tests/drills/support.py) must not be the one the controller set for every worker.
    os.environ["DECKYARD_DRILL_SESSION"] = f"{worker}-{os.getpid()}"

# The page audit (axe-core, the glyph check) doubles every render's time; the tests that are about
# it turn it on (tests/drills/test_page_audit.py, tests/e2e/test_page_audit_cli.py), the others
# test what they are about within the CI budget. Subprocesses inherit it (clean_env passes it on).
os.environ.setdefault("DECKYARD_RENDERER_PAGE_AUDIT", "false")
# `deckyard render` keeps its renders across runs in the user cache; a test that rendered a
# deck would otherwise change what the next test's run renders, and leave the cache behind.
# The tests about it turn it on with a cache folder of their own (tests/e2e/test_render_cache.py).
os.environ.setdefault("DECKYARD_RENDER_RESULT_CACHE_MAX_BYTES", "0")

PG_URL = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
_pg_problem: list[str | None] = []


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Process and browser tests one at a time on one worker; see tests/helpers/parallel.py."""
    from tests.helpers.parallel import SerialProcessTests

    return SerialProcessTests(config, log)


def pg_problem() -> str | None:
    """Why PostgreSQL cannot be used for tests, or None when it can (checked once)."""
    if not _pg_problem:
        try:
            with psycopg.connect(PG_URL, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            _pg_problem.append(None)
        except Exception as exc:
            _pg_problem.append(f"PostgreSQL at {PG_URL} unreachable: {exc}".splitlines()[0])
    return _pg_problem[0]


def require_pg() -> None:
    """Skip (locally) or fail (in CI) when PostgreSQL is missing."""
    problem = pg_problem()
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"{problem} (CI needs PostgreSQL; set TEST_DATABASE_URL)")
    pytest.skip(problem)


@contextmanager
def fresh_pg_schema() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped on leaving."""
    require_pg()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped afterwards."""
    with fresh_pg_schema() as url:
        yield url


def schema_of(url: str) -> str:
    """The schema a `pg_schema_url` points at."""
    return url.rsplit("%3D", 1)[1]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database URL: a SQLite WAL file in tmp_path, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
    else:
        yield request.getfixturevalue("pg_schema_url")


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def module_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`db_url` for a module whose tests share one server: one empty database per dialect."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'test.db'}"
    else:
        with fresh_pg_schema() as url:
            yield url


@pytest.fixture
async def db(db_url: str) -> AsyncIterator[Database]:
    """A migrated database on each dialect."""
    database = Database(db_url, busy_timeout_seconds=10)
    await upgrade(database)
    try:
        yield database
    finally:
        await database.dispose()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """`deckyard serve` subprocesses a test starts; all stopped (with their groups) afterwards."""
    started: list[Server] = []
    yield started
    for s in started:
        s.stop()


@pytest.fixture(autouse=True, scope="session")
def _data_dir_outside_the_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Settings that name no data directory keep Lite's files in a temp dir, not in ./deckyard-data.

    The session fails when a test wrote ./deckyard-data anyway (a test must not leave files).
    """
    stray = Path("deckyard-data")
    existed = stray.exists()
    previous = os.environ.get("DECKYARD_DATA_DIR")
    os.environ["DECKYARD_DATA_DIR"] = str(tmp_path_factory.mktemp("deckyard-data"))
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DECKYARD_DATA_DIR", None)
        else:
            os.environ["DECKYARD_DATA_DIR"] = previous
    if not existed and stray.exists():
        pytest.fail(f"a test left {stray.resolve()} behind")


_checked_out: dict[int, str] = {}  # id of a pool's connection record -> the test that took it


def _on_checkout(dbapi_conn: object, record: object, proxy: object) -> None:
    _checked_out[id(record)] = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]


def _on_checkin(dbapi_conn: object, record: object) -> None:
    _checked_out.pop(id(record), None)


event.listen(Pool, "checkout", _on_checkout)
event.listen(Pool, "checkin", _on_checkin)


@pytest.fixture(autouse=True)
def _no_pooled_connection_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves an SQLAlchemy pool connection checked out.

    Such a connection is otherwise only noticed when the garbage collector reaches it, tests
    later (on another database, under another worker's timing); the pool's checkout and checkin
    events put the failure on the test that took it. Runs after the test's other fixtures are
    torn down (autouse fixtures are set up first).
    """
    yield
    mine = [key for key, test in _checked_out.items() if test == request.node.nodeid]
    for key in mine:
        del _checked_out[key]
    if mine:
        pytest.fail(f"{request.node.nodeid} left {len(mine)} pooled connection(s) checked out")


BACKGROUND_NICE = 10
"""How much lower the storage and unit tests run beside the serial group under pytest-xdist."""


@pytest.fixture(autouse=True)
def _storage_tests_yield_the_cpu(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under pytest-xdist, a test outside the serial group runs at a lower CPU priority.

    The drills and end-to-end tests (the serial group, `tests/helpers/parallel.py`) bound lease
    expiries and settle times as if they had the machine; beside them, storage tests at the same
    priority took enough of two cores that drills lost leases (load 7-10). Niced, those tests
    use what the serial group leaves idle (waiting on a browser, a process, a lease). Threads
    the test starts inherit the priority; the worker goes back to normal after it.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER") or os.geteuid() != 0:
        # Without root (CAP_SYS_NICE) the priority could not be raised back after the test.
        yield
        return
    from tests.helpers.parallel import serial_module

    if serial_module(request.config.rootpath, request.node.nodeid.split("::", 1)[0]):
        yield
        return
    os.setpriority(os.PRIO_PROCESS, 0, BACKGROUND_NICE)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
