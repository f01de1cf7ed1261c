"""With a provider configured, the AI worker and the catalog cron still write nothing idle."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import DECKYARD, clean_env

pytestmark = pytest.mark.processes


def test_idle_baseline_with_ai_configured_has_zero_writes(db_url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [*DECKYARD, "baseline", "--idle", "4", "--json", "--database", db_url],
        env=clean_env(
            tmp_path,
            DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS="0.5",
            DECKYARD_JOB_CLAIM_IDLE_CEILING_SECONDS="0.5",
            # never called while idle: the catalog cron is daily and no AI job is enqueued
            DECKYARD_AI_BASE_URL="http://127.0.0.1:9/v1",
            DECKYARD_AI_CATALOG_CRON="0 0 1 1 *",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    [idle] = json.loads(result.stdout)
    assert idle["totals"]["writes"] == 0
    assert idle["totals"]["write_tx_per_s"] == 0
    names = {row["loop"] for row in idle["loops"]}
    assert "periodic" in names, names
    assert any(n.startswith("worker[ai]") for n in names), names
