"""Dashboard sign-in and the session cookie: bearer unchanged, cookie POSTs need the CSRF token."""

from __future__ import annotations

from deckyard.api.auth import SESSION_COOKIE, csrf_token
from deckyard.jobs import Runtime
from tests.helpers.api import make_token, running_app


async def parked_job(rt: Runtime, workspace: str) -> int:
    job = await rt.enqueue("k", queue="parked", run_at=3600, workspace_id=workspace)
    return job.id


async def test_bearer_tokens_work_as_before(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        alice = await make_token(app, "alice")
        job_id = await parked_job(app.state.runtime, "alice")
        assert (await client.get("/v1/jobs", headers=alice)).status_code == 200
        cancelled = await client.post(f"/v1/jobs/{job_id}/cancel", headers=alice)
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "cancelled"


async def test_signing_in_sets_a_strict_httponly_cookie_that_the_api_accepts(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        token = (await make_token(app, "alice"))["authorization"].split()[1]
        job_id = await parked_job(app.state.runtime, "alice")
        resp = await client.post(
            "/ui/session",
            content=f"token={token}&next=/ui/jobs",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert resp.status_code == 303
        assert resp.headers["location"] == "/ui/jobs"
        cookie = resp.headers["set-cookie"].lower()
        assert f"{SESSION_COOKIE}=" in cookie
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        listed = await client.get("/v1/jobs")
        assert [j["id"] for j in listed.json()["jobs"]] == [job_id]
        page = await client.get("/ui/jobs")
        assert page.status_code == 200
        assert f"#{job_id}" in page.text


async def test_cookie_post_needs_the_csrf_token(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        token = (await make_token(app, "alice"))["authorization"].split()[1]
        rt: Runtime = app.state.runtime
        job_id = await parked_job(rt, "alice")
        client.cookies.set(SESSION_COOKIE, token)
        refused = await client.post(f"/v1/jobs/{job_id}/cancel")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "CSRF_TOKEN_REQUIRED"
        assert (await rt.get(job_id)).status == "pending"  # type: ignore[union-attr]
        csrf = {"x-deckyard-csrf": csrf_token(token)}
        accepted = await client.post(f"/v1/jobs/{job_id}/cancel", headers=csrf)
        assert accepted.status_code == 200
        assert accepted.json()["status"] == "cancelled"


async def test_a_bad_cookie_is_unauthenticated_and_pages_ask_to_sign_in(db_url: str) -> None:
    async with running_app(db_url) as (_app, client):
        client.cookies.set(SESSION_COOKIE, "dy_nope")
        assert (await client.get("/v1/jobs")).status_code == 401
        for path in ["/", "/ui/jobs", "/ui/jobs/1", "/ui/tasks", "/ui/tasks/1"]:
            resp = await client.get(path)
            assert resp.status_code == 303, path
            assert resp.headers["location"].startswith("/ui/sign-in?next=")


async def test_sign_in_refuses_bad_tokens_and_other_sites_and_sign_out_clears(db_url: str) -> None:
    async with running_app(db_url) as (app, client):
        token = (await make_token(app, "alice"))["authorization"].split()[1]
        form = {"content-type": "application/x-www-form-urlencoded"}
        bad = await client.post("/ui/session", content="token=dy_wrong", headers=form)
        assert bad.status_code == 401
        assert "unknown or revoked" in bad.text
        assert "set-cookie" not in bad.headers
        cross = await client.post(
            "/ui/session",
            content=f"token={token}",
            headers={**form, "origin": "https://evil.example"},
        )
        assert cross.status_code == 403
        assert "set-cookie" not in cross.headers
        good = await client.post(
            "/ui/session",
            content=f"token={token}&next=//evil.example/",
            headers={**form, "origin": "http://deckyard.test"},
        )
        assert good.status_code == 303
        assert good.headers["location"] == "/"
        assert (await client.get("/")).status_code == 200
        out = await client.post("/ui/sign-out")
        assert out.status_code == 303
        assert (await client.get("/")).status_code == 303
        assert (await client.get("/v1/jobs")).status_code == 401
