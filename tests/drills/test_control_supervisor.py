"""Lite supervision: a SIGKILLed renderer comes back with a new epoch and leaves nothing behind."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.drills.control_fixtures import hygiene, nav, renderer_env
from tests.drills.control_support import (
    NavigationSite,
    browsers_below,
    descendants,
    tagged_processes,
    zombie_children,
)
from tests.helpers.eventually import eventually_sync, settled_sync

__all__ = ["hygiene", "nav"]
pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def read_event(proc: subprocess.Popen[bytes], name: str, timeout: float = 90) -> dict[str, Any]:
    """The next JSON line from the harness with this event name."""
    stdout = proc.stdout
    assert stdout is not None

    def next_event() -> dict[str, Any] | None:
        ready, _, _ = select.select([stdout], [], [], 0.5)
        if not ready:
            return None
        line = stdout.readline()
        if not line:
            raise AssertionError(f"the harness ended without saying {name!r}")
        event: dict[str, Any] = json.loads(line) if line.startswith(b"{") else {}
        return event if event.get("event") == name else None

    found = eventually_sync(next_event, timeout=timeout, every=0, what=f"harness event {name!r}")
    assert found is not None
    return found


def test_sigkilled_renderer_restarts_with_a_new_epoch_and_no_orphans(
    tmp_path: Path, nav: NavigationSite
) -> None:
    short_tmp = Path(tempfile.mkdtemp(prefix="dyc-"))
    env = {
        **os.environ,
        **{f"DECKYARD_{k.upper()}": v for k, v in renderer_env(nav).items()},
        "DECKYARD_RENDERER_TMP_DIR": str(short_tmp),
        "PYTHONPATH": str(ROOT),
    }
    harness = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.drills.control_harness",
            str(tmp_path / "data"),
            nav.url("sup"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        ready = read_event(harness, "ready")
        assert ready["subreaper"] is True
        [renderer] = ready["renderers"]
        first_epoch, pid = renderer["epoch"], renderer["pid"]
        read_event(harness, "render")
        eventually_sync(
            lambda: nav.hits.get("sup", 0) >= 1, timeout=30, what="the renderer navigating"
        )
        assert browsers_below(pid), "no Chromium under the supervised renderer"
        os.kill(pid, signal.SIGKILL)
        done = read_event(harness, "done")
        assert done["status"] == "succeeded", done
        [after] = done["renderers"]
        assert after["starts"] == 2
        assert after["epochs"][0] == first_epoch
        assert after["epoch"] != first_epoch
        statuses = [(a["status"], a["epoch"]) for a in done["attempts"]]
        assert statuses == [("lost", first_epoch), ("succeeded", after["epoch"])]
        assert done["result"]["epoch"] == after["epoch"]
        assert [w["occupancy"] for w in done["renderer_rows"]] == [0]
        assert not settled_sync(lambda: tagged_processes({first_epoch})), (
            "the old renderer left processes"
        )
        assert not settled_sync(lambda: zombie_children(harness.pid)), (
            "zombies under the supervisor"
        )
        assert harness.stdin is not None
        harness.stdin.close()
        read_event(harness, "stopped")
        assert harness.wait(timeout=30) == 0
        assert not settled_sync(lambda: tagged_processes({first_epoch, after["epoch"]}))
        assert descendants(harness.pid) == []
        assert list(short_tmp.iterdir()) == []
    finally:
        nav.release("sup")
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if harness.stdout is not None:
            harness.stdout.close()
        shutil.rmtree(short_tmp, ignore_errors=True)
