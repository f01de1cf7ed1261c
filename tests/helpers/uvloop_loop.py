"""pytest plugin: every async test on uvloop, as `event_loop = "uvloop"` runs Deckyard.

`pytest -p tests.helpers.uvloop_loop tests/unit/jobs tests/integration/jobs tests/integration/db`
runs the job and storage suites on uvloop (aiosqlite's thread hand-offs, psycopg's async
connections, LISTEN/NOTIFY) instead of the standard loop the suite uses by default.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
import uvloop
from pytest_asyncio.plugin import LoopFactory


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, LoopFactory] | None:
    return {"uvloop": uvloop.new_event_loop}
