"""Two external workers (`examples/external_worker.py`) on one queue; one is SIGKILLed mid-job.

Every job must complete exactly once: succeeded, one `succeeded` event; the killed worker's
job is recovered when its lease expires and finished by the other worker on attempt 2.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.drills.support import zombies
from tests.helpers.eventually import eventually_sync, settled_sync
from tests.helpers.server import Server, clean_env, event_types

pytestmark = [pytest.mark.processes, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
N = 6
ENV = {
    "DECKYARD_RENDERERS": "0",
    "DECKYARD_EXTERNAL_LEASE_SECONDS": "2",
    "DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS": "1",
    "DECKYARD_JOB_RECOVERY_BACKOFF_SECONDS": "0",
}


def token(env: dict[str, str], cwd: Path, role: str) -> str:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "deckyard",
            "token",
            "create",
            "--workspace",
            "drill",
            "--role",
            role,
        ],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()


class Agent:
    """An example worker subprocess whose output lines are read as they come."""

    def __init__(self, url: str, tok: str, name: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-u",
                str(ROOT / "examples" / "external_worker.py"),
                *("--url", url, "--token", tok, "--queue", "drill", "--worker", name),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def wait_line(self, prefix: str, timeout: float = 60) -> str:
        stdout = self.proc.stdout
        assert stdout is not None

        def next_line() -> str | None:
            line = stdout.readline()
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"worker exited {self.proc.returncode}")
            return line if line.startswith(prefix) else None

        return eventually_sync(next_line, timeout=timeout, every=0, what=f"a {prefix!r} line")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        if self.proc.stdout:
            self.proc.stdout.close()


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    started: list[Agent] = []
    yield started
    for a in started:
        a.stop()


@pytest.fixture(autouse=True)
def hygiene() -> Iterator[None]:
    """Scoped to this drill's own processes: other tests may run Chromium on the machine."""
    before = zombies()
    yield
    new = settled_sync(lambda: zombies() - before, timeout=5)  # one about to be reaped is fine
    assert not new, f"new zombie processes that nobody reaps: {new}"


def test_killed_external_worker_every_job_once(
    tmp_path: Path, servers: list[Server], agents: list[Agent]
) -> None:
    env = clean_env(tmp_path, **ENV)
    member = {"authorization": f"Bearer {token(env, tmp_path, 'member')}"}
    worker_token = token(env, tmp_path, "worker")
    server = Server([], env, tmp_path)
    servers.append(server)
    server.wait_ready(60)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        first = client.post(
            "/v1/queues/drill/jobs",
            json={"kind": "demo", "payload": {"seconds": 5}},
            headers=member,
        )
        assert first.status_code == 201, first.text
        ids = [first.json()["id"]]
        doomed = Agent(server.url, worker_token, "doomed", env)
        agents.append(doomed)
        assert doomed.wait_line("claimed ").split()[1] == str(ids[0])
        os.killpg(doomed.proc.pid, signal.SIGKILL)  # mid-job: it sleeps 5 s before completing
        doomed.proc.wait(10)
        for i in range(N - 1):
            r = client.post(
                "/v1/queues/drill/jobs",
                json={"kind": "demo", "payload": {"seconds": 0.1, "i": i}},
                headers=member,
            )
            ids.append(r.json()["id"])
        survivor = Agent(server.url, worker_token, "survivor", env)
        agents.append(survivor)

        def job(i: int) -> dict[str, object]:
            out: dict[str, object] = client.get(f"/v1/jobs/{i}", headers=member).json()
            return out

        eventually_sync(
            lambda: all(job(i)["status"] in ("succeeded", "failed") for i in ids),
            timeout=120,
            every=0.2,
            what="every job finished",
        )
        jobs = [job(i) for i in ids]
        assert [j["status"] for j in jobs] == ["succeeded"] * N
        assert all(j["result"]["worker"] == "survivor" for j in jobs)  # type: ignore[index]
        assert jobs[0]["attempt"] == 2
        for i in ids:
            assert event_types(client, server.url, member, i).count("succeeded") == 1
