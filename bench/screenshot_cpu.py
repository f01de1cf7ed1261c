"""Where the CPU of a screenshot goes: each process of `deckyard serve` against a plain loop.

`bench/screenshot_rate.py` gives the rate; this says which process pays for it. Both on the
example deck's compiled pages, `--shots` screenshots after a warm-up, CPU seconds (user +
system) per process kind, read with psutil before and after the timed shots:

- Deckyard: a Lite `deckyard serve` with one supervised renderer, the shots submitted at once
  through the HTTP API (`compare_render.pipeline`): the API process, the renderer's Python,
  the Playwright driver, and Chromium by process type (browser, renderer, gpu-process, ...);
  this script's own CPU is the client's.
- Plain: one warm Chromium with two tabs, `set_content` + `document.fonts.ready` + screenshot.

Processes that start and end between the two readings are not counted (their CPU is lost to
psutil), so compare like with like.

    .venv/bin/python bench/screenshot_cpu.py --shots 48 [--reps 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_render import CHROMIUM, Page, Serve, deck_pages, pipeline


def kind_of(proc: psutil.Process, api_pid: int | None) -> str:
    """`api`, `renderer-py`, `driver` or `chromium:<type>` for one process."""
    if proc.pid == api_pid:
        return "api"
    name, cmd = proc.name(), " ".join(proc.cmdline())
    if "python" in name or "deckyard" in cmd:
        return "renderer-py"
    if "node" in name:
        return "driver"
    found = re.search(r"--type=(\S+)", cmd)
    kind = found.group(1) if found else "browser"
    sub = re.search(r"--utility-sub-type=(\S+)", cmd)
    return f"chromium:{kind}" + (f":{sub.group(1).split('.')[-1]}" if sub else "")


def cpu_by_pid(root: psutil.Process, api_pid: int | None) -> dict[int, tuple[str, float]]:
    out: dict[int, tuple[str, float]] = {}
    for proc in root.children(recursive=True) + ([root] if api_pid else []):
        try:
            times = proc.cpu_times()
            out[proc.pid] = (kind_of(proc, api_pid), times.user + times.system)
        except psutil.Error:
            continue
    return out


def spent(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> Any:
    sums: dict[str, float] = {}
    for pid, (kind, seconds) in after.items():
        sums[kind] = sums.get(kind, 0.0) + seconds - before.get(pid, (kind, 0.0))[1]
    return sums


def deckyard(serve: Serve, pages: list[Page], shots: int) -> tuple[float, dict[str, float]]:
    root = psutil.Process(serve.proc.pid)
    before, mine = cpu_by_pid(root, serve.proc.pid), time.process_time()
    rate = asyncio.run(pipeline(serve, pages, shots))
    sums = spent(before, cpu_by_pid(root, serve.proc.pid))
    sums["client"] = time.process_time() - mine
    return rate, sums


async def plain(pages: list[Page], shots: int) -> tuple[float, dict[str, float]]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=CHROMIUM, chromium_sandbox=os.geteuid() != 0
        )
        context = await browser.new_context()
        tabs = [await context.new_page() for _ in range(2)]
        for tab in tabs:
            await tab.set_viewport_size({"width": pages[0].width, "height": pages[0].height})
            await tab.set_content(pages[0].html)
            await tab.screenshot(type="png")
        todo = list(range(shots))

        async def work(tab: Any) -> None:
            while todo:
                page = pages[todo.pop() % len(pages)]
                await tab.set_content(page.html)
                await tab.evaluate("document.fonts.ready.then(() => true)")
                await tab.screenshot(type="png")

        me = psutil.Process()
        before, mine, t0 = cpu_by_pid(me, None), time.process_time(), time.monotonic()
        await asyncio.gather(*(work(t) for t in tabs))
        rate = shots / (time.monotonic() - t0)
        sums = spent(before, cpu_by_pid(me, None))
        sums["client"] = time.process_time() - mine
        await browser.close()
    return rate, sums


def show(label: str, shots: int, rate: float, sums: dict[str, float]) -> None:
    total = sum(sums.values())
    parts = ", ".join(f"{k} {v * 1000 / shots:.0f}" for k, v in sorted(sums.items()) if v > 0)
    print(f"{label}: {rate:.2f} shots/s, CPU ms per shot {total * 1000 / shots:.0f} ({parts})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=48)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    pages, why = deck_pages()
    if not pages:
        raise SystemExit(f"no pages: {why}")
    serve = Serve(renderers=1)
    try:
        serve.wait_healthy()
        serve.wait_renderer()
        asyncio.run(pipeline(serve, pages, 6))  # warm-up
        for rep in range(args.reps):
            show(f"rep {rep + 1} deckyard", args.shots, *deckyard(serve, pages, args.shots))
            show(f"rep {rep + 1} plain   ", args.shots, *asyncio.run(plain(pages, args.shots)))
    finally:
        serve.stop()


if __name__ == "__main__":
    main()
