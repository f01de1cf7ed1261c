"""Where the CPU of a screenshot goes: each process of `deckyard serve` against a plain loop.

`bench/screenshot_rate.py` gives the rate; this says which process pays for it. Both on the
example deck's compiled pages, `--shots` screenshots after a warm-up, CPU seconds (user +
system) per process kind, read with psutil before and after the timed shots:

- Deckyard: a Lite `deckyard serve` with one supervised renderer, the shots submitted at once
  through the HTTP API (`compare_render.pipeline`): the API process, the renderer's Python,
  the Playwright driver, and Chromium by process type (browser, renderer, gpu-process, ...);
  this script's own CPU is the client's.
- Plain: `compare_render.plain_loop` with two tabs (`set_content`, `document.fonts.ready`,
  screenshot), as `screenshot_rate.py` runs it; the Python process's own CPU is its client's.

Processes that start and end between the two readings are not counted (their CPU is lost to
psutil), so compare like with like.

    .venv/bin/python bench/screenshot_cpu.py --shots 48 [--reps 2]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_render import Page, Serve, deck_pages, pipeline, plain_loop


def kind_of(proc: psutil.Process, api_pid: int | None) -> str:
    """`api`, `driver`, `chromium:<type>`, `renderer-py` or `other:<name>` for one process."""
    if proc.pid == api_pid:
        return "api"
    name, argv = proc.name(), proc.cmdline()
    cmd = " ".join(argv)
    if name.startswith("node"):
        return "driver"
    if "chrom" in name or (argv and "chrom" in Path(argv[0]).name):
        found = re.search(r"--type=(\S+)", cmd)
        kind = found.group(1) if found else "browser"
        sub = re.search(r"--utility-sub-type=(\S+)", cmd)
        return f"chromium:{kind}" + (f":{sub.group(1).split('.')[-1]}" if sub else "")
    if "deckyard.render.renderer" in cmd:
        return "renderer-py"
    return f"other:{name}"


def cpu_by_pid(
    root: psutil.Process, api_pid: int | None, skip: psutil.Process | None = None
) -> dict[int, tuple[str, float]]:
    """CPU seconds of `root`'s descendants (and of `root` when it is the API), without the
    tree of `skip` (the idle `deckyard serve` while the plain loop runs)."""
    out: dict[int, tuple[str, float]] = {}
    skipped = set()
    if skip is not None:
        skipped = {skip.pid} | {p.pid for p in skip.children(recursive=True)}
    for proc in root.children(recursive=True) + ([root] if api_pid else []):
        if proc.pid in skipped:
            continue
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


def plain(serve: Serve, pages: list[Page], shots: int) -> tuple[float, dict[str, float]]:
    me, server = psutil.Process(), psutil.Process(serve.proc.pid)
    sums: dict[str, float] = {}

    @contextmanager
    def metered() -> Iterator[None]:
        before, mine = cpu_by_pid(me, None, server), time.process_time()
        yield
        sums.update(spent(before, cpu_by_pid(me, None, server)))
        sums["client"] = time.process_time() - mine

    rate = asyncio.run(plain_loop(pages, shots, 2, around=metered))
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
            show(f"rep {rep + 1} plain   ", args.shots, *plain(serve, pages, args.shots))
    finally:
        serve.stop()


if __name__ == "__main__":
    main()
