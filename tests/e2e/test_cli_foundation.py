"""The Lite guard and settings validation, met as a user meets them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import DECKYARD, Server, clean_env

pytestmark = pytest.mark.processes


def run_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DECKYARD, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_second_serve_on_one_sqlite_file_is_refused(tmp_path: Path, servers: list[Server]) -> None:
    env = clean_env(tmp_path)
    first = Server([], env, tmp_path)
    servers.append(first)
    first.wait_ready()
    second = run_cli(["serve", "--port", "0"], env, tmp_path)
    assert second.returncode == 2
    db_file = (tmp_path / "data" / "deckyard.db").resolve()
    assert str(db_file) in second.stderr
    assert f"pid {first.proc.pid}" in second.stderr
    assert "Traceback" not in second.stderr
    migrate = run_cli(["migrate"], env, tmp_path)
    assert migrate.returncode == 2 and "already owned" in migrate.stderr
    ready = httpx.get(f"{first.url}/readyz", timeout=5)
    assert ready.status_code == 200 and ready.json()["checks"]["database"]["ok"] is True


def test_workers_above_one_need_postgresql(tmp_path: Path) -> None:
    result = run_cli(["serve", "--workers", "2"], clean_env(tmp_path), tmp_path)
    assert result.returncode == 2
    assert "needs PostgreSQL" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.postgres
def test_workers_get_every_command_line_flag(
    tmp_path: Path, pg_schema_url: str, servers: list[Server]
) -> None:
    """Issue 14: uvicorn's workers used to build the app from the environment only."""
    env = clean_env(tmp_path, DECKYARD_READYZ_PUBLIC_DETAILS="true")
    flags = ["--workers", "2", "--database", pg_schema_url, "--no-background-loops"]
    server = Server([*flags, "--renderers", "0"], env, tmp_path)
    servers.append(server)
    server.wait_ready(60)
    for _ in range(6):
        body = httpx.get(f"{server.url}/readyz", timeout=10).json()
        assert body["checks"]["database"]["url"].startswith("postgresql"), body
        assert body["checks"]["loops"]["background_loops"] is False, body
    assert not (tmp_path / "data" / "deckyard.db").exists()


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"DECKYARD_PORT": "not-a-port"}, "DECKYARD_PORT"),
        (
            {"DECKYARD_JOB_LEASE_SECONDS": "6", "DECKYARD_JOB_HEARTBEAT_INTERVAL_SECONDS": "5"},
            "DECKYARD_JOB_LEASE_SECONDS: must be at least 3 x",
        ),
        ({"DECKYARD_JOB_POLL_INTERVAL_SECONDS": "-1"}, "DECKYARD_JOB_POLL_INTERVAL_SECONDS"),
        ({"DECKYARD_DATABASE_URL": "mysql://x"}, "DECKYARD_DATABASE_URL"),
    ],
)
def test_bad_setting_exits_2_with_a_readable_line(
    tmp_path: Path, env: dict[str, str], needle: str
) -> None:
    result = run_cli(["serve"], clean_env(tmp_path, **env), tmp_path)
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr and "pydantic" not in result.stderr.lower()


def test_two_bad_settings_give_two_lines(tmp_path: Path) -> None:
    env = clean_env(tmp_path, DECKYARD_PORT="x", DECKYARD_DB_POOL_SIZE="0")
    result = run_cli(["migrate"], env, tmp_path)
    assert result.returncode == 2
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("deckyard: ")]
    assert len(lines) == 2


def test_help_lists_the_commands(tmp_path: Path) -> None:
    result = run_cli(["--help"], clean_env(tmp_path), tmp_path)
    assert result.returncode == 0
    for command in ("serve", "migrate", "renderer", "doctor"):
        assert command in result.stdout


def test_reconciliation_and_loop_flags(tmp_path: Path, servers: list[Server]) -> None:
    def env(name: str) -> dict[str, str]:
        return clean_env(tmp_path / name, DECKYARD_READYZ_PUBLIC_DETAILS="true")

    plain = Server(["--reconciliation-interval-seconds", "7"], env("a"), tmp_path)
    disabled = Server(["--disable-reconciliation-loop"], env("b"), tmp_path)
    quiet = Server(["--no-background-loops"], env("c"), tmp_path)
    servers.extend([plain, disabled, quiet])
    for s in servers:
        s.wait_ready()

    def loops(server: Server) -> dict[str, object]:
        body = httpx.get(f"{server.url}/readyz", timeout=5).json()
        return {lp["name"]: lp["alive"] for lp in body["checks"]["loops"]["loops"]}

    assert loops(plain).get("reconciliation") is True
    assert "reconciliation" not in loops(disabled)
    assert loops(disabled).get("recovery") is True
    assert loops(quiet) == {} or all(v is None for v in loops(quiet).values())
    assert httpx.get(f"{quiet.url}/readyz", timeout=5).status_code == 200
