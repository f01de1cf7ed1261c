"""Running the CLI and `deckyard serve` as a user would: real subprocesses, always stopped."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from deckyard.api.auth import token_create
from deckyard.clock import SYSTEM_CLOCK
from deckyard.db import Database
from deckyard.db.migrate import upgrade
from tests.helpers.eventually import eventually_sync

DECKYARD = [sys.executable, "-m", "deckyard"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECKYARD_")}
    # tests/conftest.py: the page audit and the render cache are off unless a test asks
    for name in ("DECKYARD_RENDERER_PAGE_AUDIT", "DECKYARD_RENDER_RESULT_CACHE_MAX_BYTES"):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update({"DECKYARD_DATA_DIR": str(tmp_path / "data"), **extra})
    return env


class Server:
    """A `deckyard serve` subprocess that is always stopped."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # Output goes to a file, not a pipe: a pipe nobody reads fills at 64 KiB and then blocks
        # the server on its next log line, which looks exactly like a stalled job.
        self.log_path = cwd / f"serve-{self.port}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [*DECKYARD, "serve", "--port", str(self.port), *args],
                env=env,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        """What the server has printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout: float = 30.0) -> None:
        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: {self.output()}")
            try:
                return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        eventually_sync(healthy, timeout=timeout, every=0.1, what=f"{self.url}/healthz")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def create_token(env: dict[str, str], cwd: Path, workspace: str) -> str:
    """Run `deckyard token create` as a user would (before a Lite server owns the file)."""
    return subprocess.run(
        [*DECKYARD, "token", "create", "--workspace", workspace],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()


def workspace_tokens(db_url: str, workspaces: list[str]) -> dict[str, str]:
    """An admin token per workspace, written in process before a server owns the database.

    For modules whose tests share one server, each in a workspace of its own: one migration
    and a few inserts instead of a `deckyard token create` subprocess per test.
    """

    async def go() -> dict[str, str]:
        db = Database(db_url)
        try:
            await upgrade(db)
            now = SYSTEM_CLOCK.now()
            return {ws: await token_create(db, ws, now) for ws in workspaces}
        finally:
            await db.dispose()

    return asyncio.run(go())


def event_types(client: httpx.Client, url: str, headers: dict[str, str], job_id: int) -> list[str]:
    """The types of a job's events, read from its SSE stream (which ends with the job)."""
    stream = client.get(f"{url}/v1/jobs/{job_id}/events", headers=headers)
    return [
        json.loads(line[len("data: ") :])["type"]
        for line in stream.text.splitlines()
        if line.startswith("data: ")
    ]
