"""Renderer drain drills (issue 33 item 2): real renderers, real Chromium.

- A renderer told to drain by SIGTERM refuses new attempts, lets its running page finish, hands
  back the one still running at its bound, waits until those outcomes were fetched, says
  `drained` and exits 0.
- A rolling restart under steady load: `deckyard serve` with two supervised renderers and a
  stream of screenshots; one renderer is drained through `POST /v1/renderers/{id}/drain`, then
  the other by SIGTERM, each while a slow page runs on it. Every screenshot succeeds exactly
  once: one render request (no job), one succeeded attempt, an artefact; what the drains
  handed back cost no attempt; nothing was lost on the way out; the supervisor replaced each
  renderer without a crash backoff.
"""

from __future__ import annotations

import json
import os
import select
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from sqlalchemy import select as sql_select

from deckyard.render.control.schema import render_attempts, render_requests, renderers
from tests.drills.conftest import LIVE, start_renderer, stop_renderer
from tests.drills.support import DrillSite, RendererProcess, one_page, zombies
from tests.helpers.eventually import eventually_sync, settled_sync
from tests.helpers.renders import assert_rendered_once_each, query
from tests.helpers.server import Server, clean_env, create_token

pytestmark = [pytest.mark.chromium, pytest.mark.processes, pytest.mark.slow]

DRAIN_TIMEOUT = 3.0
SLOW_MS = 8000
"""A slow page outlasts the drain's bound: it is handed back and rendered elsewhere."""
IN_FLIGHT = 4
"""Screenshots the load keeps submitted and unfinished at any moment."""


@pytest.fixture(autouse=True)
def hygiene() -> Iterator[None]:
    """No new zombie (each drill checks its own processes and Chromium when it stops them)."""
    before = zombies()
    yield
    new = settled_sync(lambda: zombies() - before, timeout=5)
    assert not new, f"new zombie processes that nobody reaps: {new}"


def html(label: str) -> str:
    return f"<!doctype html><body style='margin:0'><h1>{label}</h1></body>"


def attempt(attempt_id: str, delay_ms: int = 0) -> dict[str, Any]:
    """A one-page renderer attempt of a small page that waits `delay_ms` before its capture."""
    wait = {"delay_ms": delay_ms}
    body = {"document": html(attempt_id), "width": 200, "height": 100, "wait": wait}
    return one_page({**body, "attempt_id": attempt_id})


def read_event(renderer: RendererProcess, timeout: float) -> dict[str, Any]:
    """The renderer's next stdout line (its lifecycle events)."""
    assert renderer.proc.stdout is not None
    readable, _, _ = select.select([renderer.proc.stdout], [], [], timeout)
    assert readable, f"no event within {timeout}s"
    event: dict[str, Any] = json.loads(renderer.proc.stdout.readline())
    return event


def test_sigterm_drains_a_renderer_then_it_exits(site: DrillSite) -> None:
    renderer = start_renderer(
        site,
        slots=2,
        renderer_drain_timeout_seconds=str(DRAIN_TIMEOUT),
        renderer_drain_collect_seconds="120",  # it waits for us, not for this bound
    )
    client = renderer.client
    assert client.post("/v1/deck-attempts", json=attempt("warm")).status_code == 202
    warm, page = renderer.wait_page("warm")
    assert (warm["status"], page["status"]) == ("succeeded", "succeeded"), warm
    assert renderer.page_artifact("warm").status_code == 200
    quick = client.post("/v1/deck-attempts", json=attempt("quick", 300))
    slow = client.post("/v1/deck-attempts", json=attempt("slow", SLOW_MS))
    assert (quick.status_code, slow.status_code) == (202, 202), (quick.text, slow.text)

    renderer.proc.send_signal(signal.SIGTERM)
    assert read_event(renderer, 10)["event"] == "draining"
    assert client.get("/healthz").json()["draining"] is True
    caps = client.get("/v1/capabilities").json()
    assert (caps["draining"], caps["free_slots"]) == (True, 0)
    refused = client.post("/v1/deck-attempts", json=attempt("late"))
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"] == "RENDER_NO_FREE_SLOT"

    finished, page = renderer.wait_page("quick")  # in flight: it finishes
    assert (finished["status"], page["status"]) == ("succeeded", "succeeded"), finished
    handed = renderer.wait_terminal("slow")  # still running at the bound: handed back
    assert (handed["status"], handed["error_code"]) == ("failed", "RENDER_WORKER_STOPPED")
    assert handed["retryable"] is True and "draining" in handed["message"]
    assert handed["pages"] == []  # its page never finished

    # the quick page's picture has not been fetched: it waits for that, then exits at once
    assert client.get("/healthz").json()["draining"] is True
    assert renderer.page_artifact("quick").content[:4] == b"\x89PNG"
    drained = read_event(renderer, 10)
    assert (drained["event"], drained["handed_back"]) == ("drained", 1)
    assert renderer.proc.wait(10) == 0
    log = renderer.stderr_path.read_text()
    assert "handed back" in log and "nobody fetched" not in log, log[-2000:]
    stop_renderer(renderer)
    assert renderer.proc.pid not in LIVE


# --- the rolling restart -------------------------------------------------------------------


class Load:
    """Keeps `IN_FLIGHT` screenshots submitted and unfinished until stopped; `slow()` adds one
    that outlasts a drain."""

    def __init__(self, server: Server, headers: dict[str, str]) -> None:
        self.client = httpx.Client(base_url=server.url, headers=headers, timeout=30)
        self.ids: list[int] = []
        self.slow_ids: list[int] = []
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._n = 0

    def submit(self, delay_ms: int = 0) -> int:
        self._n += 1
        body = {"html": html(f"load {self._n}"), "width": 200, "height": 100}
        answer = self.client.post("/v1/screenshots", json={**body, "wait": {"delay_ms": delay_ms}})
        assert answer.status_code == 202, answer.text
        render_id: int = answer.json()["id"]
        self.ids.append(render_id)
        return render_id

    def slow(self) -> int:
        render_id = self.submit(SLOW_MS)
        self.slow_ids.append(render_id)
        return render_id

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        open_ids: list[int] = []
        try:
            while not self._stop.is_set():
                while len(open_ids) < IN_FLIGHT:
                    open_ids.append(self.submit())
                for render_id in list(open_ids):
                    status = self.client.get(f"/v1/renders/{render_id}").json()["status"]
                    if status in ("failed", "cancelled"):
                        self.problems.append(f"render {render_id} {status}")
                    if status in ("succeeded", "failed", "cancelled"):
                        open_ids.remove(render_id)
                self._stop.wait(0.05)
        except Exception as exc:  # reported by the test, not lost in a thread
            self.problems.append(repr(exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.close()


def running_on(url: str, render_id: int) -> int | None:
    """The renderer row holding the active attempt of a render request, if any."""
    a = render_attempts.c
    rows = query(
        url,
        sql_select(a.renderer_id).where(
            a.request_id == render_id, a.active_occupancy == 1, a.status == "running"
        ),
    )
    return rows[0].renderer_id if rows else None


def slow_page_on(url: str, load: Load, renderer_row_id: int) -> int:
    """Submit slow screenshots until one of them runs on `renderer_row_id`."""
    for _ in range(4):
        render_id = load.slow()
        where = eventually_sync(
            lambda render_id=render_id: running_on(url, render_id),  # type: ignore[misc]
            timeout=30,
            every=0.05,
            what=f"slow render {render_id} running",
        )
        if where == renderer_row_id:
            return render_id
    raise AssertionError(f"no slow page landed on renderer {renderer_row_id}")


def renderer_pid(server: Server, name: str) -> int:
    """The pid of the supervised renderer called `name`."""
    for child in psutil.Process(server.proc.pid).children():
        cmd = child.cmdline()
        if (
            "deckyard.render.renderer" in cmd
            and child.environ().get("DECKYARD_RENDERER_ID") == name
        ):
            return child.pid
    raise AssertionError(f"no renderer process {name}")


def test_rolling_restart_under_load_every_screenshot_succeeds_once(
    pg_schema_url: str, tmp_path: Path, servers: list[Server]
) -> None:
    env = clean_env(
        tmp_path,
        DECKYARD_DATABASE_URL=pg_schema_url,
        DECKYARD_RENDERERS="2",
        DECKYARD_RENDERER_SLOTS="2",
        DECKYARD_RENDERER_DRAIN_TIMEOUT_SECONDS=str(DRAIN_TIMEOUT),
        DECKYARD_RENDER_WORKSPACE_SLOT_SHARE="1",
        DECKYARD_RENDER_RECEIPT_POLL_SECONDS="0.2",
    )
    headers = {"authorization": f"Bearer {create_token(env, tmp_path, 'rolling')}"}
    server = Server([], env, tmp_path)
    servers.append(server)
    server.wait_ready(90)
    api = httpx.Client(base_url=server.url, headers=headers, timeout=30)

    def listed() -> dict[str, dict[str, Any]]:
        return {r["name"]: r for r in api.get("/v1/renderers").json()}

    def both_up() -> dict[str, dict[str, Any]] | None:
        now = listed()
        return now if len(now) == 2 and all(r["state"] == "up" for r in now.values()) else None

    first = eventually_sync(both_up, timeout=90, every=0.2, what="two renderers up")
    load = Load(server, headers)
    load.start()
    family = set()
    slow_on: dict[str, int] = {}  # renderer epoch -> the slow render running there at its drain
    try:
        for i, name in enumerate(sorted(first)):
            row = first[name]
            slow_on[row["epoch"]] = slow_page_on(pg_schema_url, load, row["id"])
            if i == 0:
                answer = api.post(f"/v1/renderers/{row['id']}/drain")
                assert answer.status_code == 202, answer.text
                assert answer.json()["state"] == "draining"
            else:
                os.kill(renderer_pid(server, name), signal.SIGTERM)
                eventually_sync(
                    lambda name=name: listed()[name]["state"] == "draining",  # type: ignore[misc]
                    timeout=10,
                    every=0.05,
                    what=f"{name} listed as draining",
                )

            def replaced(name: str = name, old: str = row["epoch"]) -> bool:
                now = listed()[name]
                return now["state"] == "up" and now["epoch"] != old

            eventually_sync(replaced, timeout=45, every=0.1, what=f"{name} replaced")
        family = {c.pid for c in psutil.Process(server.proc.pid).children(recursive=True)}
    finally:
        load.stop()
    assert not load.problems, load.problems

    def all_done() -> bool:
        states = [api.get(f"/v1/renders/{i}").json()["status"] for i in load.ids]
        assert not {"failed", "cancelled"} & set(states), states
        return all(s == "succeeded" for s in states)

    eventually_sync(all_done, timeout=60, every=0.2, what="every screenshot done")
    for render_id in load.ids[-3:]:
        assert api.get(f"/v1/renders/{render_id}/artifact").content[:4] == b"\x89PNG"
    final = listed()
    assert all(r["state"] == "up" and r["draining_since"] is None for r in final.values())
    api.close()
    output = server.output()
    server.stop()
    left = settled_sync(lambda: {p for p in family if psutil.pid_exists(p)}, timeout=15)
    assert not left, f"processes outlived the server: {left}"

    # exactly once, counted in the database: one request each (no job), succeeded with an
    # artefact and one succeeded attempt
    assert len(set(load.ids)) == len(load.ids) >= 10
    attempts = assert_rendered_once_each(pg_schema_url, load.ids)
    r = render_requests.c
    requests = query(pg_schema_url, sql_select(r.id, r.attempts).where(r.id.in_(load.ids)))
    assert {x.attempts for x in requests} == {1}  # what the drains handed back cost no attempt
    others = {(x.status, x.error_code) for x in attempts if x.status != "succeeded"}
    assert others <= {("failed", "RENDER_WORKER_STOPPED"), ("failed", "RENDER_NO_FREE_SLOT")}
    handed = {
        (x.renderer_epoch, x.request_id)
        for x in attempts
        if x.error_code == "RENDER_WORKER_STOPPED"
    }
    for epoch, render_id in slow_on.items():  # each drain handed its slow page back
        assert (epoch, render_id) in handed, (epoch, render_id, attempts)
    rows = query(pg_schema_url, sql_select(renderers.c.name, renderers.c.epoch))
    assert {x.epoch for x in rows}.isdisjoint(slow_on)
    assert output.count("drained; starting its replacement") == 2, output[-3000:]
    assert "exited; restarting in" not in output, output[-3000:]
