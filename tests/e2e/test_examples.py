"""The README's runnable examples run as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.processes
def test_jobs_quickstart_runs(db_url: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "jobs_quickstart.py"), db_url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "resize: succeeded {" in result.stdout
    assert "'resized': 'a.png'" in result.stdout
    assert "flaky: succeeded worked on attempt 2" in result.stdout
    assert "resize: failed BAD_IMAGE" in result.stdout
    assert "events: ['started', 'progress', 'succeeded']" in result.stdout
