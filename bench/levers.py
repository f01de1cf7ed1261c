"""One lever on and off, interleaved in one run: `bench/levers.py --off job_prefetch=0`.

Each repetition measures Deckyard with default settings, then with the `--off` settings (as
`DECKYARD_*` environment variables), so both arms see the same machine load; medians and the
on/off ratio are printed. Figures from `bench/job_queue.py`'s throughput and latency functions.

Measures: jobs/s and CPU microseconds per job (this process, all threads) for no-op and 5 ms
jobs on each database, and enqueue->start p50; `--only` picks them by substring.

Each measurement runs on a new event loop of the arm's `event_loop` setting (`deckyard.eventloop`),
so `--off event_loop=asyncio` compares uvloop with the standard loop.

Run: .venv/bin/python bench/levers.py --off job_prefetch=0 [--jobs 3000] [--reps 3] [--only cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from job_queue import drain, latency_cross_process, latency_in_process, pct

from deckyard.eventloop import run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--off", action="append", required=True, help="setting=value, repeatable")
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--only", default="", help="comma list of measure names to run")
    args = ap.parse_args()
    off = {f"DECKYARD_{k.upper()}": v for k, v in (s.split("=", 1) for s in args.off)}
    measures: dict[str, Callable[[], Awaitable[dict[str, float]]]] = {}
    for dialect in ("postgresql", "sqlite"):
        for work in (0.0, 5.0):

            async def rate(d: str = dialect, w: float = work) -> dict[str, float]:
                jobs_s, cpu = await drain(d, args.jobs, 10, w)
                return {"jobs/s": jobs_s, "cpu us/job": cpu}

            measures[f"{dialect} {work:g} ms jobs/s"] = rate

        async def p50(d: str = dialect) -> dict[str, float]:
            samples = await latency_in_process(d, args.samples)
            return {"p50 ms": pct(samples, 50) * 1000, "p99 ms": pct(samples, 99) * 1000}

        measures[f"{dialect} enqueue->start p50 ms"] = p50

    async def across() -> dict[str, float]:
        samples = await latency_cross_process(args.samples)
        return {"p50 ms": pct(samples, 50) * 1000, "p99 ms": pct(samples, 99) * 1000}

    measures["postgresql enqueue->start across processes p50 ms"] = across
    only = {s for s in args.only.split(",") if s}
    for name, fn in measures.items():
        if only and not any(o in name for o in only):
            continue
        arms: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
        for _ in range(args.reps):
            for arm in ("on", "off"):
                saved = {k: os.environ.get(k) for k in off}
                if arm == "off":
                    os.environ.update(off)
                try:
                    arms[arm].append(run(fn()))
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
        for key in arms["on"][0]:
            on_runs = [r[key] for r in arms["on"]]
            off_runs = [r[key] for r in arms["off"]]
            on, of = statistics.median(on_runs), statistics.median(off_runs)
            print(
                f"{name} [{key}]: on {on:,.2f} / off {of:,.2f} = {on / of:.2f}x  "
                f"(on {[round(x, 2) for x in on_runs]}, off {[round(x, 2) for x in off_runs]})",
                flush=True,
            )


if __name__ == "__main__":
    main()
