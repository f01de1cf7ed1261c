"""Token roles, `deckyard token create|list|revoke` against a running server, and the audit log.

On SQLite the server owns the database file, so the CLI goes through the server's API with an
admin token, as a user would; on PostgreSQL the same commands work the same way.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers.decks import json_deck
from tests.helpers.server import DECKYARD, Server, clean_env, create_token

pytestmark = pytest.mark.processes


@dataclass
class Running:
    url: str
    env: dict[str, str]
    cwd: Path
    admin: str

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*DECKYARD, "token", *args, "--server", self.url],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result


@pytest.fixture
def running(db_url: str, tmp_path: Path, servers: list[Server]) -> Running:
    env = clean_env(tmp_path, DECKYARD_DATABASE_URL=db_url, DECKYARD_RENDERERS="0")
    admin = create_token(env, tmp_path, "acme")
    server = Server([], env, tmp_path)
    servers.append(server)
    server.wait_ready(60)
    return Running(server.url, env, tmp_path, admin)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def test_roles_revocation_and_audit(running: Running) -> None:
    viewer = running.cli("create", "--token", running.admin, "--role", "viewer").stdout.strip()
    editor = running.cli(
        "create", "--token", running.admin, "--role", "editor", "--label", "ci"
    ).stdout.strip()
    assert viewer.startswith("dy_") and editor.startswith("dy_")
    url = running.url
    with httpx.Client(timeout=60) as client:
        # a viewer reads, never writes
        assert client.get(f"{url}/v1/decks", headers=bearer(viewer)).status_code == 200
        refused = client.post(f"{url}/v1/decks", json=json_deck(), headers=bearer(viewer))
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "ROLE_FORBIDDEN"
        assert client.get(f"{url}/v1/decks", headers=bearer(viewer)).json() == []
        # an editor writes, but does not manage tokens
        made = client.post(f"{url}/v1/decks", json=json_deck(), headers=bearer(editor))
        assert made.status_code == 201, made.text
        assert client.get(f"{url}/v1/tokens", headers=bearer(editor)).status_code == 403
        bad = client.post(f"{url}/v1/tokens", json={"role": "owner"}, headers=bearer(running.admin))
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "role"

        listed = json.loads(running.cli("list", "--token", running.admin, "--json").stdout)
        assert [t["role"] for t in listed] == ["editor", "viewer", "admin"]
        assert listed[0]["label"] == "ci" and all(t["revoked_at"] is None for t in listed)
        assert "token" not in listed[0]
        running.cli("revoke", str(listed[0]["id"]), "--token", running.admin)
        gone = client.get(f"{url}/v1/decks", headers=bearer(editor))
        assert gone.status_code == 401 and gone.json()["error"]["code"] == "UNAUTHENTICATED"
        again = client.get(f"{url}/v1/tokens", headers=bearer(running.admin)).json()
        assert again[0]["revoked_at"] is not None
        assert (
            client.delete(f"{url}/v1/tokens/999", headers=bearer(running.admin)).status_code == 404
        )

        # the audit log: every write, newest first, paginated
        first = client.get(f"{url}/v1/audit", params={"limit": 3}, headers=bearer(viewer))
        assert first.status_code == 200, first.text
        page = first.json()
        seen = [(e["method"], e["path"], e["status"], e["role"]) for e in page["events"]]
        assert seen == [
            ("DELETE", "/v1/tokens/999", 404, "admin"),
            ("DELETE", f"/v1/tokens/{listed[0]['id']}", 204, "admin"),
            ("POST", "/v1/tokens", 422, "admin"),
        ]
        rest = client.get(
            f"{url}/v1/audit", params={"before": page["next_before"]}, headers=bearer(viewer)
        ).json()
        older = [(e["method"], e["path"], e["status"], e["role"]) for e in rest["events"]]
        assert older == [
            ("POST", "/v1/decks", 201, "editor"),
            ("POST", "/v1/decks", 403, "viewer"),
            ("POST", "/v1/tokens", 201, "admin"),
            ("POST", "/v1/tokens", 201, "admin"),
        ]
        assert rest["events"][0]["location"] == f"/v1/decks/{made.json()['id']}"
        assert rest["next_before"] is None


def test_token_commands_without_a_token_on_a_served_lite_file(
    running: Running, db_url: str
) -> None:
    if not db_url.startswith("sqlite"):
        result = running.cli("list", "--workspace", "acme", "--json")
        assert [t["role"] for t in json.loads(result.stdout)] == ["admin"]
        return
    result = running.cli("list", "--workspace", "acme", check=False)
    assert result.returncode == 2
    assert "--token" in result.stderr and "Traceback" not in result.stderr


def test_openapi_describes_tokens_and_audit(running: Running) -> None:
    paths = httpx.get(f"{running.url}/openapi.json", timeout=30).json()["paths"]
    assert {"get", "post"} <= set(paths["/v1/tokens"])
    assert "delete" in paths["/v1/tokens/{token_id}"]
    assert "get" in paths["/v1/audit"]


def test_page_versions_record_their_actor(running: Running) -> None:
    url, admin = running.url, bearer(running.admin)
    with httpx.Client(timeout=60) as client:
        made = client.post(f"{url}/v1/tokens", json={"role": "editor"}, headers=admin).json()
        editor = bearer(made["token"])
        deck = client.post(f"{url}/v1/decks", json=json_deck(), headers=editor).json()
        page = f"{url}/v1/decks/{deck['id']}/pages/01-hello"
        edit = {"source": "# Edited", "skip_visual_verification": True}
        written = client.put(page, json=edit, headers=editor)
        assert written.status_code == 201, written.text
        assert written.json()["version"]["actor_token_id"] == made["id"]
        back = client.post(
            f"{page}/versions/1/revert", json={"skip_visual_verification": True}, headers=admin
        )
        assert back.status_code == 201, back.text
        admin_id = client.get(f"{url}/v1/tokens", headers=admin).json()[-1]["id"]
        versions = client.get(f"{page}/versions", headers=editor).json()
        assert [v["actor_token_id"] for v in versions] == [None, made["id"], admin_id]
