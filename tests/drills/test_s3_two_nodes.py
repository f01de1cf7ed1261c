"""Two `deckyard serve` nodes as on two hosts: separate data directories, one PostgreSQL and one
S3 (moto's server on loopback), issue 33.

Node A has the renderer; node B has none (an API-only node). A deck published through A is
served by B: the page's PNG, the PDF export and the hosted site under `/sites/...`, all read
from the bucket; neither data directory holds an artefact. When S3 goes away, B answers 503
`ARTIFACT_STORE_UNAVAILABLE` for the site, and serves it again once S3 is back, unrestarted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually_sync
from tests.helpers.s3 import PREFIX, S3Server, s3_env, s3_server
from tests.helpers.server import Server, clean_env, workspace_tokens

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.postgres, pytest.mark.slow]

FAST = {
    "DECKYARD_RENDERER_SLOTS": "2",
    "DECKYARD_RENDER_RECEIPT_POLL_SECONDS": "0.2",
    "DECKYARD_JOB_IDLE_POLL_CEILING_SECONDS": "1",
}


@pytest.fixture
def s3() -> Iterator[S3Server]:
    """Requested before `servers`, so the nodes stop before S3 does."""
    with s3_server() as server:
        yield server


def node(tmp_path: Path, name: str, renderers: int, common: dict[str, str]) -> Server:
    home = tmp_path / name
    home.mkdir()
    env = clean_env(home, DECKYARD_RENDERERS=str(renderers), **common)
    return Server([], env, home)


def test_a_deck_published_on_one_node_is_served_by_the_other(
    pg_schema_url: str, tmp_path: Path, s3: S3Server, servers: list[Server]
) -> None:
    bucket = s3.create_bucket()
    common = {"DECKYARD_DATABASE_URL": pg_schema_url, **s3_env(s3, bucket), **FAST}
    token = workspace_tokens(pg_schema_url, ["alice"])["alice"]
    headers = {"authorization": f"Bearer {token}"}
    a = node(tmp_path, "a", 1, common)
    b = node(tmp_path, "b", 0, common)
    servers.extend([a, b])
    a.wait_ready(60)
    b.wait_ready(60)

    with httpx.Client(timeout=30, headers=headers) as client:
        made = client.post(f"{a.url}/v1/decks", json=json_deck("# Shared\n\nfrom node A\n"))
        assert made.status_code == 201, made.text
        deck_id = made.json()["id"]
        page = made.json()["pages"][0]["page"]
        started = client.post(f"{a.url}/v1/decks/{deck_id}/publish", json={"visibility": "public"})
        assert started.status_code == 202, started.text
        task_id = started.json()["task_id"]

        def finished() -> dict[str, Any] | None:
            task: dict[str, Any] = client.get(f"{b.url}/v1/tasks/{task_id}").json()
            assert task["status"] not in ("failed", "cancelled"), task
            return task if task["status"] == "succeeded" else None

        task = eventually_sync(finished, timeout=120, every=0.5, what=f"publish {task_id}")

        # the page's PNG (a screenshot job through A) and the PDF export, through B
        shot = client.post(f"{a.url}/v1/decks/{deck_id}/pages/{page}/screenshot", json={})
        assert shot.status_code == 202, shot.text

        def shot_done() -> dict[str, Any] | None:
            job: dict[str, Any] = client.get(f"{b.url}/v1/jobs/{shot.json()['id']}").json()
            assert job["status"] not in ("failed", "cancelled"), job
            return job if job["status"] == "succeeded" else None

        shot_job = eventually_sync(shot_done, timeout=60, every=0.2, what="page screenshot")
        assert task is not None and shot_job is not None
        png = client.get(f"{b.url}/v1/jobs/{shot_job['id']}/artifact")
        assert png.status_code == 200, png.text
        assert png.content.startswith(b"\x89PNG")
        assert hashlib.sha256(png.content).hexdigest() == shot_job["result"]["sha256"]
        export = task["state"]["jobs"]["export"][0]
        pdf = client.get(f"{b.url}/v1/jobs/{export}/artifact")
        assert pdf.status_code == 200, pdf.text
        assert pdf.content.startswith(b"%PDF")

        # the hosted site, from B as from A
        site = f"/sites/alice/{deck_id}/"
        index = {n.url: client.get(n.url + site) for n in (a, b)}
        for answer in index.values():
            assert answer.status_code == 200, answer.text
        assert index[a.url].content == index[b.url].content
        page_file = re.search(r'"(pages/01-[^"]+\.html)"', index[b.url].text)
        assert page_file, index[b.url].text
        served = client.get(f"{b.url}{site}{page_file.group(1)}")
        assert served.status_code == 200 and "from node A" in served.text

        # S3 lost: a 503 in the error shape; S3 back: the same node serves again
        s3.stop()
        lost = client.get(f"{b.url}{site}{page_file.group(1)}")
        assert lost.status_code == 503, lost.text
        assert lost.json()["error"]["code"] == "ARTIFACT_STORE_UNAVAILABLE"
        assert lost.headers["retry-after"] == "1"
        s3.start()
        again = client.get(f"{b.url}{site}{page_file.group(1)}")
        assert again.status_code == 200 and again.content == served.content

    # every artefact is in the bucket; neither node kept one in its data directory
    keys = s3.object_keys(bucket)
    assert any(k.endswith(".png") for k in keys) and any(k.endswith(".pdf") for k in keys), keys
    assert all(k.startswith(f"{PREFIX}/") and ".tmp-" not in k for k in keys), keys
    for name in ("a", "b"):
        local = tmp_path / name / "data" / "artifacts"
        assert not local.exists() or not any(p.is_file() for p in local.rglob("*")), name
