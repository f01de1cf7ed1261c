"""SIGKILL `deckyard serve` while a model is answering a page edit; start it again.

The edit must end with exactly one new version: nothing is written by the killed attempt
(the version is written only inside the finish compare-and-set), and the recovered job's
second attempt writes it once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.drills.support import zombies
from tests.helpers.decks import json_deck
from tests.helpers.fake_openai import Reply, ThreadedFakeOpenAI
from tests.helpers.server import Server, clean_env, create_token, event_types

pytestmark = [pytest.mark.processes, pytest.mark.slow]
FIXED = "```markdown\n# Agenda\n\n- one\n```"


def until(check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def hygiene() -> Iterator[None]:
    """Scoped to this drill's own processes: other tests may run Chromium on the machine."""
    before = zombies()
    yield
    until(lambda: not (zombies() - before), 5)  # a zombie about to be reaped is fine


def test_sigkill_mid_model_call_writes_one_version(tmp_path: Path, servers: list[Server]) -> None:
    with ThreadedFakeOpenAI() as fake:
        env = clean_env(
            tmp_path,
            DECKYARD_RENDERERS="0",
            DECKYARD_AI_BASE_URL=fake.base_url,
            DECKYARD_AI_CATALOG_CRON="",
            DECKYARD_JOB_LEASE_SECONDS="3",
            DECKYARD_JOB_HEARTBEAT_INTERVAL_SECONDS="0.5",
            DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS="1",
            DECKYARD_JOB_RECOVERY_BACKOFF_SECONDS="0",
        )
        headers = {"authorization": f"Bearer {create_token(env, tmp_path, 'drill')}"}
        fake.chat.extend([Reply(FIXED, delay=120), Reply(FIXED)])
        first = Server([], env, tmp_path)
        servers.append(first)
        first.wait_ready(60)
        with httpx.Client(base_url=first.url, timeout=30) as client:
            deck = client.post("/v1/decks", json=json_deck("# Hello"), headers=headers).json()["id"]
            r = client.post(
                f"/v1/decks/{deck}/pages/01-hello/ai-edit",
                json={"instruction": "make it an agenda", "skip_visual_verification": True},
                headers=headers,
            )
            assert r.status_code == 202, r.text
            job_id = r.json()["id"]
            until(lambda: len(fake.seen("/v1/chat/completions")) == 1, 60)
        os.killpg(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)

        second = Server([], env, tmp_path)
        servers.append(second)
        second.wait_ready(60)
        with httpx.Client(base_url=second.url, timeout=30) as client:

            def job() -> dict[str, object]:
                out: dict[str, object] = client.get(f"/v1/jobs/{job_id}", headers=headers).json()
                return out

            until(lambda: job()["status"] in ("succeeded", "failed", "cancelled"), 120)
            done = job()
            assert done["status"] == "succeeded", done
            assert done["attempt"] == 2
            versions = client.get(f"/v1/decks/{deck}/pages/01-hello/versions", headers=headers)
            assert [v["number"] for v in versions.json()] == [1, 2]
            assert event_types(client, second.url, headers, job_id).count("succeeded") == 1
        assert len(fake.seen("/v1/chat/completions")) == 2
