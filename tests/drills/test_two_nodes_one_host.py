"""Two `deckyard serve` nodes on one host, each supervising its own renderer (issue 14).

Both used to name their renderer `{hostname}-lite-0`: each node read the other's epoch as a
restart of its own renderer and every render failed with RENDER_RESULT_LOST. Names are unique
per process now; every screenshot (a render request) succeeds, on both nodes, and two renderers
are listed.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.helpers.renders import assert_rendered_once_each
from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.postgres, pytest.mark.slow]
SHOTS = 6


def test_two_nodes_on_one_host_each_with_a_renderer(
    pg_schema_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(
        tmp_path,
        DECKYARD_DATABASE_URL=pg_schema_url,
        DECKYARD_RENDERERS="1",
        DECKYARD_RENDER_RECEIPT_POLL_SECONDS="0.2",
    )
    token = create_token(env, tmp_path, "pair")
    headers = {"authorization": f"Bearer {token}"}
    nodes = [Server([], env, tmp_path) for _ in range(2)]
    servers.extend(nodes)
    for node in nodes:
        node.wait_ready(90)
    with httpx.Client(timeout=30) as client:
        deadline = time.monotonic() + 90
        while True:
            listed = client.get(f"{nodes[0].url}/v1/renderers", headers=headers).json()
            if sum(r["state"] == "up" for r in listed) == 2:
                break
            assert time.monotonic() < deadline, listed
            time.sleep(0.2)
        assert len({r["name"] for r in listed}) == 2, listed
        ids = []
        for i in range(SHOTS):
            r = client.post(
                f"{nodes[i % 2].url}/v1/screenshots",
                headers=headers,
                json={"html": f"<h1>pair {i}</h1>", "width": 200, "height": 100},
            )
            assert r.status_code == 202, r.text
            ids.append(r.json()["id"])
        deadline = time.monotonic() + 120
        while True:
            states = {
                i: client.get(f"{nodes[1].url}/v1/renders/{i}", headers=headers).json() for i in ids
            }
            if all(s["status"] == "succeeded" for s in states.values()):
                break
            bad = [s for s in states.values() if s["status"] in ("failed", "cancelled")]
            assert not bad, bad
            assert time.monotonic() < deadline, states
            time.sleep(0.2)
        for i in ids:  # either node serves any render's picture
            art = client.get(f"{nodes[i % 2].url}/v1/renders/{i}/artifact", headers=headers)
            assert art.status_code == 200 and art.content[:4] == b"\x89PNG", art.text
    assert_rendered_once_each(pg_schema_url, ids)
