"""`deckyard baseline`: the whole server, every loop running, writes nothing while idle."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import DECKYARD, clean_env

pytestmark = pytest.mark.processes


def _idle_baseline(db_url: str, tmp_path: Path, **env: str) -> dict[str, Any]:
    """The `idle` window of a 4-second `deckyard baseline --json` run with short idle ceilings."""
    result = subprocess.run(
        [*DECKYARD, "baseline", "--idle", "4", "--json", "--database", db_url],
        env=clean_env(
            tmp_path,
            DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS="0.5",
            DECKYARD_JOB_CLAIM_IDLE_CEILING_SECONDS="0.5",
            **env,
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    [idle] = json.loads(result.stdout)
    assert isinstance(idle, dict)
    return idle


def test_idle_baseline_has_zero_writes(db_url: str, tmp_path: Path) -> None:
    idle = _idle_baseline(db_url, tmp_path)
    assert idle["window"] == "idle"
    # the whole window in the message: which statement wrote, from which loop
    assert idle["totals"]["writes"] == 0, json.dumps(idle)[:4000]
    assert idle["totals"]["write_tx_per_s"] == 0
    assert idle["locked_errors"] == 0
    names = {row["loop"] for row in idle["loops"]}
    assert {"recovery", "prune", "reconciliation"} <= names
    assert sum(row["ticks"] for row in idle["loops"]) >= 8  # the loops really ran
    assert idle["totals"]["reads_per_s"] > 0


def test_idle_baseline_with_ai_configured_has_zero_writes(db_url: str, tmp_path: Path) -> None:
    """With a provider configured, the AI worker and the catalog cron still write nothing idle."""
    idle = _idle_baseline(
        db_url,
        tmp_path,
        # never called while idle: the catalog cron is daily and no AI job is enqueued
        DECKYARD_AI_BASE_URL="http://127.0.0.1:9/v1",
        DECKYARD_AI_CATALOG_CRON="0 0 1 1 *",
    )
    assert idle["totals"]["writes"] == 0, json.dumps(idle)[:4000]
    assert idle["totals"]["write_tx_per_s"] == 0
    names = {row["loop"] for row in idle["loops"]}
    assert "periodic" in names, names
    assert any(n.startswith("worker[ai]") for n in names), names
