"""Retention, the artefact sweep, content-addressed assets and actors through a `deckyard serve`
subprocess, on SQLite and on PostgreSQL, as a client would see them over HTTP."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.helpers.decks import json_deck
from tests.helpers.eventually import eventually_sync
from tests.helpers.renders import sse_events
from tests.helpers.server import Server, clean_env, create_token

pytestmark = pytest.mark.processes


@dataclass
class Running:
    url: str
    data: Path
    admin: dict[str, str]
    client: httpx.Client

    def call(self, method: str, path: str, headers: dict[str, str], **kw: Any) -> httpx.Response:
        return self.client.request(method, self.url + path, headers=headers, **kw)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def start(db_url: str, tmp_path: Path, servers: list[Server], **env: str) -> Running:
    environment = clean_env(tmp_path, DECKYARD_DATABASE_URL=db_url, **env)
    admin = create_token(environment, tmp_path, "acme")
    server = Server([], environment, tmp_path)
    servers.append(server)
    server.wait_ready(90)
    return Running(server.url, tmp_path / "data", bearer(admin), httpx.Client(timeout=120))


def png(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), colour).save(out, format="PNG")
    return out.getvalue()


def test_actors_shared_asset_blobs_and_bad_input(
    db_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    node = start(
        db_url,
        tmp_path,
        servers,
        DECKYARD_RENDERERS="0",
        DECKYARD_ARTIFACT_SWEEP_GRACE_SECONDS="0.001",
    )
    with node.client:
        made = node.call("POST", "/v1/tokens", node.admin, json={"role": "editor"}).json()
        editor, editor_id = bearer(made["token"]), made["id"]

        # every job and task records the token that caused it, and so do the jobs a task starts
        deck = node.call("POST", "/v1/decks", editor, json=json_deck()).json()["id"]
        build = node.call("POST", f"/v1/decks/{deck}/build", editor)
        assert build.status_code == 202, build.text
        assert build.json()["actor_token_id"] == editor_id
        job = node.call("GET", f"/v1/jobs/{build.json()['id']}", editor).json()
        assert job["actor_token_id"] == editor_id
        task_id = node.call("POST", f"/v1/decks/{deck}/publish", editor).json()["task_id"]

        def ended() -> dict[str, Any] | None:
            task: dict[str, Any] = node.call("GET", f"/v1/tasks/{task_id}", editor).json()
            return task if task["status"] in ("succeeded", "failed", "cancelled") else None

        task = eventually_sync(ended, timeout=60, what="the publish task ends")
        assert task["actor_token_id"] == editor_id
        stage_jobs = [j for ids in task["state"]["jobs"].values() for j in ids]
        assert stage_jobs
        for j in stage_jobs:
            assert node.call("GET", f"/v1/jobs/{j}", editor).json()["actor_token_id"] == editor_id
        audit = node.call("GET", "/v1/audit", node.admin, params={"limit": 50}).json()["events"]
        by_path = {(e["method"], e["path"]): e for e in audit}
        assert by_path[("POST", f"/v1/decks/{deck}/build")]["token_id"] == editor_id
        assert by_path[("POST", f"/v1/decks/{deck}/build")]["location"] == f"/v1/jobs/{job['id']}"
        assert by_path[("POST", f"/v1/decks/{deck}/publish")]["token_id"] == editor_id

        # the same bytes in two decks are one blob; deleting one asset keeps the other's
        other = node.call("POST", "/v1/decks", editor, json=json_deck()).json()["id"]
        logo = png((10, 20, 30))
        blobs = node.call("GET", "/v1/storage", node.admin).json()["asset_blobs"]
        for d in (deck, other):
            put = node.call("PUT", f"/v1/decks/{d}/assets/logo.png", editor, content=logo)
            assert put.status_code == 201, put.text
        assert node.call("GET", "/v1/storage", node.admin).json()["asset_blobs"] == blobs + 1
        gone = node.call("DELETE", f"/v1/decks/{deck}/assets/logo.png", editor)
        assert gone.status_code == 204
        swept = node.call("POST", "/v1/storage/sweep", node.admin)
        assert swept.status_code == 200, swept.text
        assert swept.json()["blobs_deleted"] == 0
        assert swept.json()["storage"]["asset_blobs"] == blobs + 1
        kept = node.call("GET", f"/v1/decks/{other}/assets/logo.png", editor)
        assert kept.status_code == 200 and kept.content == logo
        node.call("DELETE", f"/v1/decks/{other}/assets/logo.png", editor)
        swept = node.call("POST", "/v1/storage/sweep", node.admin).json()
        assert swept["blobs_deleted"] == 1 and swept["storage"]["asset_blobs"] == blobs

        # bad input is a clear 4xx naming what was wrong, and stores nothing
        bad = node.call(
            "PUT",
            f"/v1/decks/{other}/assets/logo.png",
            editor,
            content=logo,
            params={"skip_visual_verification": "maybe"},
        )
        assert bad.status_code == 422, bad.text
        assert "skip_visual_verification" in bad.text
        assert node.call("GET", f"/v1/decks/{other}/assets", editor).json() == []
        forbidden = node.call("GET", "/v1/storage", editor)
        assert forbidden.status_code == 403
        assert forbidden.json()["error"]["code"] == "ROLE_FORBIDDEN"
        assert node.call("POST", "/v1/storage/sweep", {}).status_code == 401


@pytest.mark.chromium
def test_a_short_retention_prunes_rows_and_their_artefacts(
    db_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    node = start(
        db_url,
        tmp_path,
        servers,
        DECKYARD_RENDERERS="1",
        DECKYARD_JOB_RETENTION_SECONDS="3",
        DECKYARD_JOB_PRUNE_INTERVAL_SECONDS="0.5",
        DECKYARD_RENDER_RETENTION_SECONDS="3",
        DECKYARD_TASK_RETENTION_SECONDS="3",
        DECKYARD_RETENTION_PRUNE_INTERVAL_SECONDS="0.5",
        DECKYARD_ARTIFACT_SWEEP_INTERVAL_SECONDS="0.5",
        DECKYARD_ARTIFACT_SWEEP_GRACE_SECONDS="2",
    )
    with node.client:
        before = node.call("GET", "/v1/storage", node.admin).json()
        assert before["retention"]["render_requests"] == 3
        orphan = node.data / "artifacts" / "leftovers" / "crashed.png"
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_bytes(b"no row refers to this")
        renders = []
        artefacts = []
        for i in range(3):
            body = {"html": f"<h1>shot {i}</h1>", "width": 160, "height": 90}
            made = node.call("POST", "/v1/screenshots", node.admin, json=body)
            assert made.status_code == 202, made.text
            render_id = made.json()["id"]
            renders.append(render_id)
            # followed from its submission: a finished render is pruned after the (short)
            # retention, so it is waited for before the next one is asked
            stream = node.call("GET", f"/v1/renders/{render_id}/events", node.admin)
            assert stream.status_code == 200, stream.text
            status, done = sse_events(stream.text)[-1]
            assert status == "succeeded", done
            art = node.call("GET", f"/v1/renders/{render_id}/artifact", node.admin)
            if art.status_code == 200:  # a short retention may have pruned it already
                assert art.headers["x-deckyard-sha256"] == done["result"]["sha256"]
                artefacts.append(art.content)
        assert artefacts, "no artefact could be read before the retention passed"
        assert node.call("GET", "/v1/jobs", node.admin).json()["jobs"] == []  # no job for them

        def back_to_start() -> dict[str, Any] | None:
            now: dict[str, Any] = node.call("GET", "/v1/storage", node.admin).json()
            same = now["rows"] == before["rows"] and now["store_objects"] == 0
            return now if same else None

        end = eventually_sync(back_to_start, timeout=90, every=0.5, what="storage back to start")
        assert end["store_bytes"] == 0
        assert not orphan.exists()
        assert node.call("GET", "/v1/renders", node.admin).json()["renders"] == []
        for r in renders:
            gone = node.call("GET", f"/v1/renders/{r}", node.admin)
            assert gone.status_code == 404
            assert node.call("GET", f"/v1/renders/{r}/artifact", node.admin).status_code == 404
