"""`deckyard baseline`: the whole server, every loop running, writes nothing while idle."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import DECKYARD, clean_env

pytestmark = pytest.mark.processes


def test_idle_baseline_has_zero_writes(db_url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [*DECKYARD, "baseline", "--idle", "4", "--json", "--database", db_url],
        env=clean_env(
            tmp_path,
            DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS="0.5",
            DECKYARD_JOB_CLAIM_IDLE_CEILING_SECONDS="0.5",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    [idle] = json.loads(result.stdout)
    assert idle["window"] == "idle"
    assert idle["totals"]["writes"] == 0
    assert idle["totals"]["write_tx_per_s"] == 0
    assert idle["locked_errors"] == 0
    names = {row["loop"] for row in idle["loops"]}
    assert {"recovery", "prune", "reconciliation"} <= names
    assert sum(row["ticks"] for row in idle["loops"]) >= 8  # the loops really ran
    assert idle["totals"]["reads_per_s"] > 0
