"""The most 5 ms jobs/s that 10 slots can run on this machine, with no queue at all.

`bench/run_all`'s "5 ms work" throughput runs `await asyncio.sleep(0.005)` in 10 slots (huey:
`time.sleep(0.005)` on 10 threads). A sleep lasts a little longer than asked (the event loop's
millisecond timers, the wake-up), so 10 / (mean sleep) jobs/s is the ceiling any queue meets
there, and a ratio target between two systems cannot exceed ceiling / peer. This measures that
ceiling: 10 concurrent sleepers, each sleeping `--n` times, on uvloop (Deckyard's default event
loop), on asyncio's own loop, and on threads.

Run: .venv/bin/python bench/sleep_ceiling.py [--n 300] [--ms 5] [--slots 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections.abc import Callable

import uvloop


async def _sleepers(slots: int, n: int, seconds: float) -> list[float]:
    async def one() -> list[float]:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            await asyncio.sleep(seconds)
            out.append(time.perf_counter() - t)
        return out

    return [x for part in await asyncio.gather(*(one() for _ in range(slots))) for x in part]


def _threads(slots: int, n: int, seconds: float) -> list[float]:
    out: list[float] = []
    lock = threading.Lock()

    def one() -> None:
        mine = []
        for _ in range(n):
            t = time.perf_counter()
            time.sleep(seconds)
            mine.append(time.perf_counter() - t)
        with lock:
            out.extend(mine)

    threads = [threading.Thread(target=one) for _ in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--ms", type=float, default=5.0)
    ap.add_argument("--slots", type=int, default=10)
    args = ap.parse_args()
    seconds = args.ms / 1000
    runs: dict[str, Callable[[], list[float]]] = {
        "uvloop, asyncio.sleep": lambda: uvloop.run(_sleepers(args.slots, args.n, seconds)),
        "asyncio loop, asyncio.sleep": lambda: asyncio.run(_sleepers(args.slots, args.n, seconds)),
        "threads, time.sleep": lambda: _threads(args.slots, args.n, seconds),
    }
    print(f"| {args.slots} slots, {args.ms:g} ms sleeps | mean sleep, ms | ceiling, jobs/s |")
    print("|---|---|---|")
    for name, run in runs.items():
        lasted = run()
        mean = statistics.mean(lasted)
        print(f"| {name} | {mean * 1000:.3f} | {args.slots / mean:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
