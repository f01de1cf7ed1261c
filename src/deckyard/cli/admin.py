"""`deckyard migrate`, `deckyard token` and `deckyard jobs`: administering a database.

With `--token` (or `DECKYARD_TOKEN`) job commands go through a running server's API. Without
one they open the database directly, which a Lite server's SQLite file does not allow while it
runs: then they say so and how to proceed, instead of fighting over the file.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import httpx
import typer
from rich.console import Console
from rich.table import Table

from deckyard.cli.common import err, fail, load_settings
from deckyard.clock import SYSTEM_CLOCK
from deckyard.config import Settings

T = TypeVar("T")
out = Console(highlight=False, soft_wrap=True)
token_app = typer.Typer(help="Create API tokens.", no_args_is_help=True)
jobs_app = typer.Typer(help="List, show and cancel jobs.", no_args_is_help=True)

ServerOpt = Annotated[
    str, typer.Option("--server", envvar="DECKYARD_SERVER_URL", help="A running server's URL.")
]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", envvar="DECKYARD_TOKEN", help="Go through the server's API."),
]


def _with_database(settings: Settings, role: str, fn: Callable[[Any], Awaitable[T]]) -> T:
    """Run `fn(db)` on the database, holding the Lite lock; a clear exit 2 when it is owned."""
    from deckyard.db import Database
    from deckyard.db.lite import LiteLockError, lite_lock
    from deckyard.db.migrate import upgrade

    async def go() -> T:
        db = Database.from_settings(settings)
        try:
            await upgrade(db)
            return await fn(db)
        finally:
            await db.dispose()

    try:
        with lite_lock(settings.resolved_database_url, role=role):
            return asyncio.run(go())
    except LiteLockError as exc:
        fail(
            f"{exc} For job commands, pass --token (or set DECKYARD_TOKEN) to go through "
            "that server's API; to create a token, stop the server first."
        )


def migrate(
    database_url: Annotated[str | None, typer.Option("--database", help="Database URL.")] = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
    downgrade: Annotated[bool, typer.Option(help="Downgrade to the revision instead.")] = False,
) -> None:
    """Apply (or undo) database migrations."""
    from deckyard.db.lite import LiteLockError, lite_lock
    from deckyard.db.migrate import downgrade_to, upgrade_to

    settings = load_settings(database_url=database_url)
    url = settings.resolved_database_url
    try:
        with lite_lock(url, role="migrate"):
            if downgrade:
                asyncio.run(downgrade_to(url, revision))
            else:
                asyncio.run(upgrade_to(url, revision))
    except LiteLockError as exc:
        fail(str(exc))
    err.print(f"database at {revision}" if not downgrade else f"downgraded to {revision}")


@token_app.command("create")
def token_create(
    workspace: Annotated[str, typer.Option(help="Workspace the token acts for.")],
    label: Annotated[str, typer.Option(help="A note to recognise the token by.")] = "",
    database_url: Annotated[str | None, typer.Option("--database", help="Database URL.")] = None,
    role: Annotated[
        str, typer.Option(help="member (everything) or worker (only claims queue jobs).")
    ] = "member",
) -> None:
    """Create an API token for a workspace (creating the workspace) and print it once."""
    from deckyard.api.auth import TokenRole
    from deckyard.api.auth import token_create as create

    if role not in {r.value for r in TokenRole}:
        fail(f"--role: {role!r} is not one of member, worker")

    settings = load_settings(database_url=database_url)

    async def go(db: Any) -> str:
        return await create(db, workspace, SYSTEM_CLOCK.now(), label, TokenRole(role))

    try:
        token = _with_database(settings, "token create", go)
    except ValueError as exc:
        fail(f"--workspace: {exc}")
    typer.echo(token)


def _api(server: str, token: str, method: str, path: str) -> Any:
    try:
        response = httpx.request(
            method, f"{server.rstrip('/')}{path}", headers={"authorization": f"Bearer {token}"}
        )
    except httpx.HTTPError as exc:
        fail(f"cannot reach {server}: {exc}")
    if response.status_code >= 400:
        try:
            problem = response.json()["error"]
            fail(f"{response.status_code} {problem['code']}: {problem['message']}")
        except (ValueError, KeyError):
            fail(f"{response.status_code}: {response.text[:300]}")
    return response.json()


def _print_jobs(rows: list[dict[str, Any]]) -> None:
    table = Table("id", "queue", "kind", "status", "attempt", "error", "created")
    for j in rows:
        table.add_row(
            str(j["id"]),
            j["queue"],
            j["kind"],
            j["status"],
            f"{j['attempt']}/{j['max_attempts']}",
            j.get("error_code") or "",
            str(j["created_at"])[:19],
        )
    out.print(table)


@jobs_app.command("list")
def jobs_list(
    server: ServerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    status: Annotated[str | None, typer.Option(help="Only jobs in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List recent jobs."""
    if token:
        query = f"?limit={limit}" + (f"&status={status}" if status else "")
        rows = _api(server, token, "GET", f"/v1/jobs{query}")["jobs"]
    else:
        settings = load_settings()

        async def go(db: Any) -> list[dict[str, Any]]:
            from deckyard.jobs import Runtime

            jobs = await Runtime(db, settings=settings, migrate=False).list(
                status=status, limit=limit
            )
            return [j.to_dict() for j in jobs]

        rows = _with_database(settings, "jobs list", go)
    if as_json:
        typer.echo(json.dumps(rows, default=str, indent=2))
    else:
        _print_jobs(rows)


@jobs_app.command("show")
def jobs_show(
    job_id: int, server: ServerOpt = "http://127.0.0.1:8000", token: TokenOpt = None
) -> None:
    """Show one job as JSON."""
    if token:
        row = _api(server, token, "GET", f"/v1/jobs/{job_id}")
    else:
        settings = load_settings()

        async def go(db: Any) -> dict[str, Any] | None:
            from deckyard.jobs import Runtime

            job = await Runtime(db, settings=settings, migrate=False).get(job_id)
            return job.to_dict() if job else None

        row = _with_database(settings, "jobs show", go)
        if row is None:
            fail(f"no job {job_id}", code=1)
    typer.echo(json.dumps(row, default=str, indent=2))


@jobs_app.command("cancel")
def jobs_cancel(
    job_id: int, server: ServerOpt = "http://127.0.0.1:8000", token: TokenOpt = None
) -> None:
    """Cancel a job and its active children."""
    if token:
        row = _api(server, token, "POST", f"/v1/jobs/{job_id}/cancel")
    else:
        settings = load_settings()

        async def go(db: Any) -> dict[str, Any] | None:
            from deckyard.jobs import JobNotFound, Runtime

            try:
                job = await Runtime(db, settings=settings, migrate=False).cancel(job_id)
            except JobNotFound:
                return None
            return job.to_dict()

        row = _with_database(settings, "jobs cancel", go)
        if row is None:
            fail(f"no job {job_id}", code=1)
    typer.echo(f"job {job_id}: {row['status']}")
