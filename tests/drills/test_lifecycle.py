"""Lifecycle drills: cancel, deadline, browser crash and hang, recycle, full slots, TTL sweep."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.drills.conftest import start_renderer, stop_renderer
from tests.drills.support import DrillSite, RendererProcess, processes
from tests.helpers.eventually import eventually_sync

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

PAGE = "<html><body style='background:#0a0'>ok</body></html>"


def hanging(site: DrillSite, attempt_id: str, **extra: object) -> dict[str, object]:
    return {
        "attempt_id": attempt_id,
        "url": f"{site.base}/hanging-page",
        "width": 200,
        "height": 100,
        **extra,
    }


def wait_status(renderer: RendererProcess, attempt_id: str, status: str) -> None:
    eventually_sync(
        lambda: renderer.client.get(f"/v1/attempts/{attempt_id}").json()["status"] == status,
        timeout=10,
        what=f"{attempt_id} {status}",
    )


def wait_hang_requested(site: DrillSite, count: int) -> None:
    eventually_sync(
        lambda: site.log.paths.count("/hang") >= count,
        timeout=10,
        what="the hanging resource requested",
    )


def browser_main(renderer: RendererProcess) -> int:
    """The pid of the renderer's Chromium browser process (not a helper)."""
    table = processes()
    for pid, (_comm, _state, _ppid, exe) in table.items():
        if not exe.startswith("/usr/lib/chromium/chromium"):
            continue
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"--type=" in cmdline:
            continue
        cursor = pid
        while cursor in table and cursor != renderer.proc.pid:
            cursor = table[cursor][2]
        if cursor == renderer.proc.pid:
            return pid
    raise AssertionError("no browser process found")


def test_cancel_during_hanging_navigation(renderer: RendererProcess, site: DrillSite) -> None:
    hangs = site.log.paths.count("/hang")
    assert renderer.submit_one(hanging(site, "cancel-1")).status_code == 202
    wait_hang_requested(site, hangs + 1)
    wait_status(renderer, "cancel-1", "running")
    started = time.monotonic()
    receipt = renderer.client.delete("/v1/attempts/cancel-1").json()
    assert receipt["status"] == "cancelled"
    assert time.monotonic() - started < 1.0
    assert receipt["error_code"] == "RENDER_CANCELLED"
    assert receipt["pages"] == []  # its page never finished
    assert renderer.page_artifact("cancel-1").status_code == 404
    assert renderer.client.get("/v1/capabilities").json()["free_slots"] == 2


def test_full_slots_answer_429_with_retry_after(renderer: RendererProcess, site: DrillSite) -> None:
    for attempt in ("full-1", "full-2"):
        assert renderer.submit_one(hanging(site, attempt)).status_code == 202
    response = renderer.submit_one(hanging(site, "full-3"))
    assert response.status_code == 429
    assert int(response.headers["retry-after"]) >= 1
    for attempt in ("full-1", "full-2"):
        assert renderer.client.delete(f"/v1/attempts/{attempt}").json()["status"] == "cancelled"
    assert renderer.client.get("/v1/attempts/full-3").json()["status"] == "unknown"


def test_deadline_inside_the_renderer(renderer: RendererProcess, site: DrillSite) -> None:
    body = hanging(site, "deadline-1", timeout_seconds=1.0)
    started = time.monotonic()
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page("deadline-1")
    assert time.monotonic() - started < 3.0
    for failed in (page, receipt):  # the page's infrastructure failure is the attempt's too
        assert failed["status"] == "failed"
        assert failed["error_code"] == "RENDER_DEADLINE_EXCEEDED"
        assert failed["error_kind"] == "infrastructure"


def test_browser_killed_mid_attempt_fails_as_infrastructure_then_recovers(
    renderer: RendererProcess, site: DrillSite
) -> None:
    generation = renderer.client.get("/v1/capabilities").json()["browser_generation"]
    hangs = site.log.paths.count("/hang")
    assert renderer.submit_one(hanging(site, "crash-1")).status_code == 202
    wait_hang_requested(site, hangs + 1)
    os.kill(browser_main(renderer), signal.SIGKILL)
    receipt, page = renderer.wait_page("crash-1")
    for failed in (page, receipt):
        assert failed["status"] == "failed"
        assert failed["error_code"] == "RENDER_BROWSER_CRASHED"
        assert failed["retryable"] is True
    render_ok(renderer, "crash-2")
    caps = renderer.client.get("/v1/capabilities").json()
    assert caps["browser_generation"] == generation + 1


@pytest.fixture(scope="module")
def brisk(site: DrillSite) -> Iterator[RendererProcess]:
    """A renderer with a short TTL, fast probe and recycling after two renders.

    The probe's timeout is 2 s, not less: on a cold or loaded machine a healthy browser's answer
    can take a second, and a probe that gives up sooner replaces it under a render (which fails).
    """
    process = start_renderer(
        site,
        slots=1,
        renderer_artifact_ttl_seconds="1",
        renderer_sweep_interval_seconds="0.2",
        renderer_recycle_after_renders="2",
        renderer_probe_interval_seconds="0.5",
        renderer_probe_timeout_seconds="2",
    )
    yield process
    stop_renderer(process)


def render_ok(renderer: RendererProcess, attempt_id: str) -> dict[str, object]:
    body = {"attempt_id": attempt_id, "document": PAGE, "width": 100, "height": 100}
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page(attempt_id)
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    return receipt


def test_browser_recycled_after_configured_renders(brisk: RendererProcess) -> None:
    start = brisk.client.get("/v1/capabilities").json()["browser_generation"]
    for i in range(4):
        render_ok(brisk, f"recycle-{i}")
    assert brisk.client.get("/v1/capabilities").json()["browser_generation"] >= start + 1


def test_hung_browser_is_detected_and_replaced(brisk: RendererProcess) -> None:
    render_ok(brisk, "hang-warm")
    generation = brisk.client.get("/v1/capabilities").json()["browser_generation"]
    pid = browser_main(brisk)
    os.kill(pid, signal.SIGSTOP)
    try:
        eventually_sync(
            lambda: not Path(f"/proc/{pid}").exists() or processes().get(pid, ("", "Z"))[1] == "Z",
            timeout=20,
            every=0.1,
            what="the hung browser killed",
        )
    finally:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGCONT)
    render_ok(brisk, "hang-after")
    assert brisk.client.get("/v1/capabilities").json()["browser_generation"] > generation


def test_artifacts_are_swept_after_ttl(brisk: RendererProcess) -> None:
    render_ok(brisk, "ttl-1")
    artifacts = brisk.root / "artifacts"
    eventually_sync(
        lambda: brisk.client.get("/v1/attempts/ttl-1").json()["status"] == "unknown",
        timeout=5,
        every=0.1,
        what="the receipt swept",
    )
    assert not list(artifacts.glob("ttl-1.*"))
    assert brisk.page_artifact("ttl-1").status_code == 404
