"""A Lite data directory on a full disk: 507 STORAGE_FULL, not ready, no temp files (issue 14).

The data directory is a small tmpfs the test mounts (the test machine runs as root); a filler
file takes the rest of its space. When the filler goes, service resumes and the SQLite file
passes `PRAGMA integrity_check`.
"""

from __future__ import annotations

import base64
import errno
import logging
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.api import make_token, running_app
from tests.helpers.eventually import eventually

SIZE = "24m"
MIN_FREE = 256 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of SIZE mounted at a fresh directory, unmounted afterwards."""
    mount_point = tmp_path / "data"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the full-disk test: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(path: Path) -> None:
    """Write `path` until the file system refuses another byte."""
    with path.open("wb", buffering=0) as out:
        for size in (64 * 1024, 1):
            with pytest.raises(OSError, match="No space left"):
                while True:
                    out.write(b"\0" * size)


def temp_files(path: Path) -> list[Path]:
    """Temporary artefact files anywhere under `path`."""
    return list(path.rglob(".tmp-*"))


def deck(asset_bytes: int) -> dict[str, object]:
    blob = base64.b64encode(os.urandom(asset_bytes)).decode()
    return {
        "manifest": {"title": "Full"},
        "pages": [{"name": "01-a", "kind": "md", "text": "# A"}],
        "assets": [{"path": "assets/blob.bin", "data_base64": blob}],
    }


@pytest.mark.processes
async def test_full_disk(small_disk: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{small_disk / 'deckyard.db'}"
    over = {"data_dir": small_disk, "storage_min_free_bytes": MIN_FREE}
    async with running_app(url, **over) as (app, client):
        alice = await make_token(app, "alice")
        assert (await client.post("/v1/decks", json=deck(1024), headers=alice)).status_code == 201
        filler = small_disk / "filler"
        fill(filler)
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="deckyard.api.errors"):
            for _ in range(3):
                r = await client.post("/v1/decks", json=deck(2 * 1024 * 1024), headers=alice)
                assert r.status_code == 507, r.text
                assert r.json()["error"]["code"] == "STORAGE_FULL"
        full_lines = [rec for rec in caplog.records if "storage is full" in rec.getMessage()]
        assert len(full_lines) == 1, [rec.getMessage() for rec in caplog.records]

        # item 17: readiness says so, naming the component but nothing else
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["database"] == {"ok": False}

        # item 18: a failed artefact write leaves no temp file
        store = app.state.render.store
        with pytest.raises(OSError, match="No space left") as failed:
            await store.put("renders/alice/big.png", os.urandom(4 * 1024 * 1024))
        assert failed.value.errno == errno.ENOSPC
        assert [k for k in await store.keys() if ".tmp-" in k] == []
        assert temp_files(small_disk) == []

        # item 19: space returns, service resumes
        filler.unlink()

        async def ready_again() -> bool:
            return (await client.get("/readyz")).status_code == 200

        await eventually(ready_again, timeout=20, every=0.2)
        resumed = await client.post("/v1/decks", json=deck(1024), headers=alice)
        assert resumed.status_code == 201, resumed.text
        await store.put("renders/alice/ok.png", b"png")
        assert await store.get("renders/alice/ok.png") == b"png"
    with sqlite3.connect(small_disk / "deckyard.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert temp_files(small_disk) == []
