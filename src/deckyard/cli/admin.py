"""`deckyard migrate`, `deckyard token` and `deckyard jobs`: administering a database.

With `--token` (or `DECKYARD_TOKEN`) job commands go through a running server's API. Without
one they open the database directly, which a Lite server's SQLite file does not allow while it
runs: then they say so and how to proceed, instead of fighting over the file.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from deckyard.cli.common import err, fail, load_settings
from deckyard.clock import SYSTEM_CLOCK

if TYPE_CHECKING:
    from deckyard.config import Settings

T = TypeVar("T")
out = Console(highlight=False, soft_wrap=True)
token_app = typer.Typer(help="Create, list and revoke API tokens.", no_args_is_help=True)
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
            "that server's API (token commands too, with an admin token); or stop the server."
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


ROLES = ("admin", "editor", "viewer", "worker")


@token_app.command("create")
def token_create(
    workspace: Annotated[
        str | None, typer.Option(help="Workspace the token acts for (without --token).")
    ] = None,
    label: Annotated[str, typer.Option(help="A note to recognise the token by.")] = "",
    database_url: Annotated[str | None, typer.Option("--database", help="Database URL.")] = None,
    role: Annotated[
        str,
        typer.Option(
            help="admin (everything, tokens too), editor (read and write), viewer (read only) "
            "or worker (only claims queue jobs); 'member' is the old name of admin."
        ),
    ] = "admin",
    server: ServerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Create an API token and print it once.

    With `--token ADMIN_TOKEN` it goes through the server's API (into that token's workspace),
    which works while a Lite server owns the database; without, it opens the database (creating
    the workspace) and needs `--workspace`.
    """
    from deckyard.api.auth import TokenRole
    from deckyard.api.auth import token_create as create

    role = "admin" if role == "member" else role
    if role not in ROLES:
        fail(f"--role: {role!r} is not one of {', '.join(ROLES)}")
    if token:
        made = _api(server, token, "POST", "/v1/tokens", {"role": role, "label": label})
        typer.echo(made["token"])
        return
    if workspace is None:
        fail("--workspace: needed without --token (or pass an admin --token to use the API)")
    settings = load_settings(database_url=database_url)

    async def go(db: Any) -> str:
        return await create(db, workspace, SYSTEM_CLOCK.now(), label, TokenRole(role))

    try:
        made_token = _with_database(settings, "token create", go)
    except ValueError as exc:
        fail(f"--workspace: {exc}")
    typer.echo(made_token)


@token_app.command("list")
def token_list(
    workspace: Annotated[str | None, typer.Option(help="Workspace (without --token).")] = None,
    database_url: Annotated[str | None, typer.Option("--database", help="Database URL.")] = None,
    server: ServerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List a workspace's tokens (never their secrets), through the API with --token."""
    from deckyard.api.auth import token_list as listed

    if token:
        rows: list[dict[str, Any]] = _api(server, token, "GET", "/v1/tokens")
    else:
        if workspace is None:
            fail("--workspace: needed without --token")
        settings = load_settings(database_url=database_url)

        async def go(db: Any) -> list[dict[str, Any]]:
            return [
                {**r.__dict__, "created_at": str(r.created_at), "revoked_at": r.revoked_at}
                for r in await listed(db, workspace)
            ]

        rows = _with_database(settings, "token list", go)
    if as_json:
        typer.echo(json.dumps(rows, default=str))
        return
    table = Table("id", "role", "label", "created", "revoked")
    for r in rows:
        table.add_row(
            str(r["id"]),
            r["role"],
            r.get("label") or "",
            str(r["created_at"])[:19],
            str(r.get("revoked_at") or "")[:19],
        )
    out.print(table)


@token_app.command("revoke")
def token_revoke(
    token_id: int,
    workspace: Annotated[str | None, typer.Option(help="Workspace (without --token).")] = None,
    database_url: Annotated[str | None, typer.Option("--database", help="Database URL.")] = None,
    server: ServerOpt = "http://127.0.0.1:8000",
    token: TokenOpt = None,
) -> None:
    """Revoke a token by id: its next request answers 401."""
    from deckyard.api.auth import token_revoke as revoke

    if token:
        _api(server, token, "DELETE", f"/v1/tokens/{token_id}")
    else:
        if workspace is None:
            fail("--workspace: needed without --token")
        settings = load_settings(database_url=database_url)

        async def go(db: Any) -> bool:
            return await revoke(db, workspace, token_id, SYSTEM_CLOCK.now())

        if not _with_database(settings, "token revoke", go):
            fail(f"no token {token_id} in workspace {workspace}")
    typer.echo(f"revoked token {token_id}")


def _api(server: str, token: str, method: str, path: str, body: Any = None) -> Any:
    import httpx  # lazily: usage errors and --help stay fast

    try:
        response = httpx.request(
            method,
            f"{server.rstrip('/')}{path}",
            headers={"authorization": f"Bearer {token}"},
            json=body,
        )
    except httpx.HTTPError as exc:
        fail(f"cannot reach {server}: {exc}")
    if response.status_code >= 400:
        try:
            problem = response.json()["error"]
            fail(f"{response.status_code} {problem['code']}: {problem['message']}")
        except (ValueError, KeyError):
            fail(f"{response.status_code}: {response.text[:300]}")
    return response.json() if response.content else None


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
