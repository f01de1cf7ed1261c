"""Rendering and memory comparisons.

Screenshots/s of the example deck's compiled pages through the whole Deckyard pipeline (a Lite
`deckyard serve` with one supervised renderer: `POST /v1/screenshots` -> render request ->
control plane -> renderer -> artefact, downloaded with `GET /v1/renders/{id}/artifact`), a plain
warm Playwright
loop, and shot-scraper's `multi`. Memory: process-tree RSS of an idle Lite `deckyard serve`
with `DECKYARD_RENDERERS=0` and with one renderer. Every part that cannot run says why instead
of producing a number.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
DECKYARD = str(Path(sys.executable).with_name("deckyard"))


@dataclass
class Page:
    name: str
    html: str
    width: int
    height: int


def deck_pages() -> tuple[list[Page], str | None]:
    """The example deck compiled by `deckyard.decks`, or ([], reason)."""
    folder = ROOT / "examples" / "launch-deck"
    if not folder.is_dir():
        return [], f"{folder.relative_to(ROOT)} does not exist"
    try:
        from deckyard.config import Settings
        from deckyard.decks.compile.documents import compile_deck
        from deckyard.decks.source.folder import load_deck_folder
        from deckyard.decks.source.limits import DeckLimits
    except Exception as exc:  # the compiler is being built by others
        return [], f"deckyard.decks not importable ({exc})"
    try:
        limits = DeckLimits.from_settings(Settings.load())
        compiled = compile_deck(load_deck_folder(folder, limits), limits)
    except Exception as exc:
        return [], f"example deck does not compile ({type(exc).__name__}: {exc})"
    return [Page(p.name, p.document, p.width, p.height) for p in compiled], None


# ---- plain warm Playwright loop --------------------------------------------------------------


async def plain_loop(
    pages: list[Page],
    shots: int,
    tabs: int,
    around: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> float:
    """Screenshots/s of one warm browser with `tabs` tabs cycling through `pages`; `around`
    is entered for the timed shots only (`screenshot_cpu.py` reads CPU times in it)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, chromium_sandbox=os.geteuid() != 0
        )
        context = await browser.new_context()
        workers = [await context.new_page() for _ in range(tabs)]
        for tab in workers:  # warm-up: one shot per tab, not timed
            await tab.set_viewport_size({"width": pages[0].width, "height": pages[0].height})
            await tab.set_content(pages[0].html)
            await tab.screenshot(type="png")
        todo = list(range(shots))

        async def work(tab: Any) -> None:
            while todo:
                p = pages[todo.pop() % len(pages)]
                await tab.set_viewport_size({"width": p.width, "height": p.height})
                await tab.set_content(p.html)
                await tab.evaluate("document.fonts.ready.then(() => true)")
                await tab.screenshot(type="png")

        with around():
            t0 = time.monotonic()
            await asyncio.gather(*(work(t) for t in workers))
            elapsed = time.monotonic() - t0
        await browser.close()
    return shots / elapsed


# ---- shot-scraper multi ----------------------------------------------------------------------


def playwright_browsers_dir(tmp: str) -> str | None:
    """A PLAYWRIGHT_BROWSERS_PATH whose headless-shell entry is the system Chromium.

    shot-scraper has no executable-path option; Playwright looks its browser up in this folder,
    so a symlink lets shot-scraper use /usr/bin/chromium without downloading anything.
    """
    try:
        import playwright

        browsers = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
        import json

        rev = next(
            b["revision"]
            for b in json.loads(browsers.read_text())["browsers"]
            if b["name"] == "chromium-headless-shell"
        )
    except Exception:
        return None
    root = Path(tmp) / "pw-browsers"
    for sub in (
        "chrome-headless-shell-linux64/chrome-headless-shell",
        "chrome-linux/headless_shell",
    ):
        exe = root / f"chromium_headless_shell-{rev}" / sub
        exe.parent.mkdir(parents=True, exist_ok=True)
        if not exe.exists():
            exe.symlink_to(CHROMIUM)
    return str(root)


def shot_scraper_multi(pages: list[Page], shots: int, tmp: str) -> dict[str, Any]:
    """Wall time of `shot-scraper multi` for `shots` and for 1 shot (the browser start)."""
    exe = Path(sys.executable).with_name("shot-scraper")
    if not exe.exists():
        return {"error": "shot-scraper is not installed in the bench environment"}
    browsers = playwright_browsers_dir(tmp)
    if browsers is None:
        return {"error": "could not locate Playwright's browsers.json to point it at Chromium"}
    folder = Path(tmp) / "pages"
    folder.mkdir(exist_ok=True)
    for i, p in enumerate(pages):
        (folder / f"{i}.html").write_text(p.html)
    out = Path(tmp) / "shots"
    out.mkdir(exist_ok=True)

    def run(n: int) -> float:
        lines = []
        for k in range(n):
            i = k % len(pages)
            p = pages[i]
            lines += [
                f"- url: {folder / f'{i}.html'}",
                f"  output: {out / f'{k}.png'}",
                f"  width: {p.width}",
                f"  height: {p.height}",
            ]
        yml = Path(tmp) / f"shots-{n}.yml"
        yml.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "PLAYWRIGHT_BROWSERS_PATH": browsers}
        t0 = time.monotonic()
        proc = subprocess.run(
            [str(exe), "multi", str(yml), "--silent"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        elapsed = time.monotonic() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip()[-400:] or f"exit {proc.returncode}")
        return elapsed

    try:
        t1 = run(1)
        tn = run(shots)
    except Exception as exc:
        return {"error": f"shot-scraper multi failed: {exc}"}
    return {"rate_cold": shots / tn, "rate_warm": (shots - 1) / max(tn - t1, 1e-9)}


# ---- the Deckyard pipeline: a Lite `deckyard serve` ------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """A Lite `deckyard serve` on a fresh data dir, with a token for workspace `bench`."""

    def __init__(self, renderers: int, command: list[str] | None = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="dycmp-serve-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DECKYARD_DATA_DIR": self.tmp,
            "DECKYARD_RENDERERS": str(renderers),
            "DECKYARD_CHROMIUM_PATH": CHROMIUM,
        }
        self.env.pop("DECKYARD_DATABASE_URL", None)
        tok = subprocess.run(
            [DECKYARD, "token", "create", "--workspace", "bench"],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
        )
        if tok.returncode != 0:
            raise RuntimeError(f"deckyard token create failed: {tok.stderr.strip()[-300:]}")
        self.token = tok.stdout.strip().split()[-1]
        self.proc = subprocess.Popen(
            [*(command or [DECKYARD]), "serve", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )

    def wait_healthy(self, timeout: float = 60) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"deckyard serve exited with {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("deckyard serve did not answer /healthz")

    def wait_renderer(self, timeout: float = 90) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                r = httpx.get(
                    f"{self.url}/v1/renderers",
                    headers={"Authorization": f"Bearer {self.token}"},
                    timeout=5,
                )
                last = r.text[:300]
                if r.status_code == 200 and any(
                    w.get("state") in ("ready", "idle", "up", "ok") for w in r.json()
                ):
                    return
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.3)
        raise RuntimeError(f"no ready renderer after {timeout:.0f} s (last: {last})")

    def tree_memory(self) -> dict[str, float]:
        import psutil

        root = psutil.Process(self.proc.pid)
        procs = [root, *root.children(recursive=True)]
        rss = pss = 0
        chromium = 0
        for p in procs:
            try:
                info = p.memory_full_info()
                rss += info.rss
                pss += getattr(info, "pss", 0)
                if "chrom" in p.name():
                    chromium += 1
            except psutil.Error:
                pass
        return {
            "rss_mib": rss / 2**20,
            "pss_mib": pss / 2**20,
            "processes": len(procs),
            "chromium_processes": chromium,
        }

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


async def pipeline(serve: Serve, pages: list[Page], shots: int) -> float:
    """Screenshots/s: `shots` screenshots submitted at once, until every artefact is
    downloaded (`dedupe=false`, so repeated pages are rendered again); each render followed
    through its SSE event stream."""
    import httpx

    headers = {"Authorization": f"Bearer {serve.token}"}
    async with httpx.AsyncClient(base_url=serve.url, headers=headers, timeout=120) as client:

        async def one(k: int) -> None:
            p = pages[k % len(pages)]
            body = {"html": p.html, "width": p.width, "height": p.height}
            r = await client.post("/v1/screenshots", params={"dedupe": "false"}, json=body)
            r.raise_for_status()
            render_id = r.json()["id"]
            # Follow the render's event stream (it ends when the render does), as a client
            # should: polling 24 renders every 20 ms would spend the server's CPU on polls.
            async with client.stream("GET", f"/v1/renders/{render_id}/events") as stream:
                async for _ in stream.aiter_lines():
                    pass
            render = (await client.get(f"/v1/renders/{render_id}")).json()
            if render["status"] != "succeeded":
                raise RuntimeError(
                    f"render {render_id} {render['status']}: {render.get('error_message')}"
                )
            art = await client.get(f"/v1/renders/{render_id}/artifact")
            art.raise_for_status()
            if not art.content.startswith(b"\x89PNG"):
                raise RuntimeError("artefact is not a PNG")

        await one(0)  # warm-up, not timed
        t0 = time.monotonic()
        await asyncio.gather(*(one(k) for k in range(shots)))
        return shots / (time.monotonic() - t0)


def interim_renderer(count: int) -> dict[str, float]:
    """bench/render.py's renderer-vs-plain comparison (1 slot, gradient+text slide)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import render as rb  # bench/render.py, owned by the renderer's engineer

    html = rb.SLIDES["gradient+text"]
    plain = asyncio.run(rb.plain_loop(html, 1, count))
    with tempfile.TemporaryDirectory(prefix="dyb-") as tmp:
        proc, url = rb.start_renderer(1, tmp)
        try:
            api = asyncio.run(rb.through_api(url, html, 1, count))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
    return {"plain": plain, "renderer": api}


def memory_idle(renderers: int, settle: float) -> dict[str, Any]:
    serve = Serve(renderers)
    try:
        serve.wait_healthy()
        if renderers:
            serve.wait_renderer()
        time.sleep(settle)
        return serve.tree_memory()
    finally:
        serve.stop()
