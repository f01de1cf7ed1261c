"""Process drills: a SIGKILLed renderer leaves no Chromium; a renderer without a secret refuses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from deckyard.render.protocol import HmacAuth
from tests.drills.conftest import LIVE
from tests.drills.support import (
    DECKYARD,
    SECRET,
    DrillSite,
    chromium_outside,
    one_page,
    processes,
)
from tests.helpers.eventually import eventually_sync, settled_sync

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

HARNESS = Path(__file__).with_name("harness_parent.py")


def test_sigkilled_renderer_takes_its_chromium_with_it(site: DrillSite) -> None:
    tmp_dir = Path(tempfile.mkdtemp(prefix="dyk-"))
    env = {
        **os.environ,
        "DECKYARD_RENDERER_SECRET": SECRET,
        "DECKYARD_RENDERER_TMP_DIR": str(tmp_dir),
        "DECKYARD_RENDERER_URL_ALLOW_HOSTS": f'["127.0.0.1:{site.port}"]',
    }
    harness = subprocess.Popen(
        [sys.executable, str(HARNESS), DECKYARD, "renderer", "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert harness.stdout is not None and harness.stdin is not None
    try:
        ready = json.loads(harness.stdout.readline())
        renderer_pid = ready["pid"]
        with httpx.Client(base_url=ready["url"], auth=HmacAuth(SECRET), timeout=30) as client:
            body = one_page({"attempt_id": "doomed", "url": f"{site.base}/hanging-page"})
            assert client.post("/v1/deck-attempts", json=body).status_code == 202
            eventually_sync(
                lambda: client.get("/v1/attempts/doomed").json()["status"] == "running",
                timeout=10,
                what="the doomed attempt running",
            )
        table = processes()
        assert any(exe.startswith("/usr/lib/chromium/") for _c, _s, _p, exe in table.values())
        os.kill(renderer_pid, signal.SIGKILL)
        left = settled_sync(lambda: [*chromium_outside(set(LIVE)), *tmp_dir.iterdir()], timeout=5)
        assert not left, f"left after SIGKILL: {left}"
        orphans = [
            pid
            for pid, (_c, state, ppid, _e) in processes().items()
            if ppid == harness.pid and state == "Z"
        ]
        left = settled_sync(lambda: [p for p in orphans if Path(f"/proc/{p}").exists()], 5)
        assert not left, f"zombies the harness never reaped: {left}"
    finally:
        harness.stdin.close()
        assert harness.wait(timeout=15) == 0
        harness.stdout.close()
    tmp_dir.rmdir()


def test_renderer_without_a_secret_refuses_to_start() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DECKYARD_RENDERER_SECRET"}
    result = subprocess.run(
        [DECKYARD, "renderer", "--port", "0"], env=env, capture_output=True, timeout=60
    )
    assert result.returncode == 2
    assert b"DECKYARD_RENDERER_SECRET" in result.stderr
    generated = subprocess.run(
        [DECKYARD, "renderer", "--generate-secret"], capture_output=True, timeout=60, check=True
    )
    assert len(generated.stdout.strip()) >= 32
